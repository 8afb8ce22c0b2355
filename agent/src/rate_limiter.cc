#include "rate_limiter.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <tuple>

namespace outbox::agent {

TokenBucket::TokenBucket(RateLimit limit) {
  if (limit.messages_per_s < 0 || limit.bytes_per_s < 0) {
    throw std::invalid_argument("rate_limit: rates must not be negative");
  }
  messages_ = {limit.messages_per_s, limit.messages_per_s};
  bytes_ = {limit.bytes_per_s, limit.bytes_per_s};
}

// Refills for `elapsed_s` (up to one second's worth), takes `amount` and
// returns the seconds until the debt is paid.
double TokenBucket::Take(Dimension& dimension, double amount, double elapsed_s) {
  if (dimension.rate <= 0) return 0;
  dimension.tokens = std::min(dimension.rate, dimension.tokens + elapsed_s * dimension.rate);
  dimension.tokens -= amount;
  return dimension.tokens >= 0 ? 0 : -dimension.tokens / dimension.rate;
}

std::chrono::microseconds TokenBucket::Reserve(std::int64_t messages, std::int64_t bytes,
                                               std::chrono::steady_clock::time_point now) {
  std::lock_guard lock(mutex_);
  double elapsed_s = 0;
  if (started_ && now > last_) elapsed_s = std::chrono::duration<double>(now - last_).count();
  if (!started_ || now > last_) last_ = now;
  started_ = true;
  const double wait_s = std::max(Take(messages_, static_cast<double>(messages), elapsed_s),
                                 Take(bytes_, static_cast<double>(bytes), elapsed_s));
  return std::chrono::microseconds(static_cast<std::int64_t>(std::ceil(wait_s * 1e6)));
}

void TokenBucket::Refund(std::int64_t messages, std::int64_t bytes) {
  std::lock_guard lock(mutex_);
  if (messages_.rate > 0) {
    messages_.tokens = std::min(messages_.rate, messages_.tokens + static_cast<double>(messages));
  }
  if (bytes_.rate > 0) {
    bytes_.tokens = std::min(bytes_.rate, bytes_.tokens + static_cast<double>(bytes));
  }
}

std::shared_ptr<TokenBucket> SharedBucket(const std::string& topic, const RateLimit& limit) {
  if (limit.messages_per_s <= 0 && limit.bytes_per_s <= 0) return nullptr;
  // Alive as long as some route uses it: a reload with the same limit keeps
  // the bucket (and its debt) if the old routes still hold it.
  static std::mutex mutex;
  static std::map<std::tuple<std::string, double, double>, std::weak_ptr<TokenBucket>> buckets;
  std::lock_guard lock(mutex);
  std::weak_ptr<TokenBucket>& slot = buckets[{topic, limit.messages_per_s, limit.bytes_per_s}];
  std::shared_ptr<TokenBucket> bucket = slot.lock();
  if (!bucket) {
    bucket = std::make_shared<TokenBucket>(limit);
    slot = bucket;
  }
  return bucket;
}

}  // namespace outbox::agent
