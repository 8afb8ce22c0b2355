// Per-topic rate limits (TopicOptions::rate_limit): token buckets, one per
// topic and limit in the whole process, so that every worker and every Agent
// of the process shares it. Not installed.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "outbox/agent.h"

namespace outbox::agent {

// A token bucket per dimension (messages, bytes), each holding at most one
// second of its rate (the burst). Thread-safe.
class TokenBucket {
 public:
  // Throws std::invalid_argument for a negative rate; 0 = that dimension
  // is not limited.
  explicit TokenBucket(RateLimit limit);

  // Takes `messages` and `bytes` from the buckets at `now` and returns how
  // long to wait before sending them (zero: at once). The tokens are taken
  // even when there is a wait (the bucket goes into debt), so that callers
  // that wait concurrently are spaced out, first come first served. A send
  // larger than the burst is allowed after the wait that pays for it.
  std::chrono::microseconds Reserve(std::int64_t messages, std::int64_t bytes,
                                    std::chrono::steady_clock::time_point now);

  // Gives back what Reserve took, when the send did not happen after all.
  void Refund(std::int64_t messages, std::int64_t bytes);

 private:
  struct Dimension {
    double rate = 0;    // tokens per second; 0 = unlimited
    double tokens = 0;  // may go below zero (debt)
  };
  static double Take(Dimension& dimension, double amount, double elapsed_s);

  std::mutex mutex_;
  Dimension messages_;  // guarded by mutex_
  Dimension bytes_;     // guarded by mutex_
  std::chrono::steady_clock::time_point last_{};  // guarded by mutex_
  bool started_ = false;                           // guarded by mutex_
};

// The process's bucket for `topic` with `limit` (made on first use; the
// same topic with another limit gets its own), or null when `limit` limits
// nothing.
std::shared_ptr<TokenBucket> SharedBucket(const std::string& topic, const RateLimit& limit);

}  // namespace outbox::agent
