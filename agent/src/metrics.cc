// In-process counters. One mutex: updates are a few additions per message.
#include <algorithm>
#include <chrono>
#include <mutex>
#include <set>

#include "outbox/agent.h"
#include "util/utf8.h"

namespace outbox::agent {
namespace {

// Commit → acknowledgement, seconds: from sub-millisecond eager sends to
// deliveries after a day offline.
const std::vector<double> kLatencyBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                            0.05,   0.1,   0.25,   0.5,   1,    2.5,
                                            5,      10,    30,     60,    300,  3600,
                                            86400};

}  // namespace

struct Metrics::Impl {
  mutable std::mutex mutex;
  std::set<std::string, std::less<>> labels;        // guarded by mutex
  // With a "*" route: topics that earned a label of their own when first
  // seen, at most max_dynamic of them.
  bool wildcard = false;                            // guarded by mutex
  std::size_t max_dynamic = 0;                      // guarded by mutex
  std::set<std::string, std::less<>> dynamic;       // guarded by mutex
  std::map<std::string, TopicCounters> counters;    // guarded by mutex
  std::int64_t taken_back = 0;                      // guarded by mutex
  std::int64_t sweeper_errors = 0;                  // guarded by mutex
  int sweeper_consecutive_failures = 0;             // guarded by mutex
  std::string sweeper_last_error;                   // guarded by mutex
  std::int64_t admin_unauthorized = 0;              // guarded by mutex
  std::int64_t admin_forbidden = 0;                 // guarded by mutex

  TopicCounters& For(std::string_view topic) {
    const std::string label = LabelLocked(topic);
    auto [it, inserted] = counters.try_emplace(label);
    if (inserted) it->second.latency_buckets.assign(kLatencyBounds.size(), 0);
    return it->second;
  }
  std::string LabelLocked(std::string_view topic) {
    if (labels.count(topic) != 0 || dynamic.count(topic) != 0) return std::string(topic);
    // Prometheus label values must be UTF-8; a hostile topic stays "other".
    if (wildcard && dynamic.size() < max_dynamic && topic != "other" &&
        util::IsValidUtf8(topic)) {
      dynamic.emplace(topic);
      return std::string(topic);
    }
    return "other";
  }
};

Metrics::Metrics() : impl_(std::make_unique<Impl>()) {}
Metrics::~Metrics() = default;

void Metrics::SetLabels(std::vector<std::string> topics, int max_dynamic) {
  std::lock_guard lock(impl_->mutex);
  impl_->max_dynamic = static_cast<std::size_t>(std::max(0, max_dynamic));
  for (auto& topic : topics) {
    if (topic == "*") {
      impl_->wildcard = true;
    } else {
      impl_->labels.insert(std::move(topic));
    }
  }
}

void Metrics::Enqueued(std::string_view topic, std::int64_t n) {
  std::lock_guard lock(impl_->mutex);
  impl_->For(topic).enqueued += n;
}

void Metrics::Delivered(std::string_view topic, double latency_seconds) {
  std::lock_guard lock(impl_->mutex);
  TopicCounters& c = impl_->For(topic);
  ++c.delivered;
  latency_seconds = std::max(0.0, latency_seconds);
  c.latency_sum_seconds += latency_seconds;
  ++c.latency_count;
  // Stored per bucket; RenderPrometheus makes them cumulative.
  const auto it = std::lower_bound(kLatencyBounds.begin(), kLatencyBounds.end(), latency_seconds);
  if (it != kLatencyBounds.end()) {
    ++c.latency_buckets[static_cast<std::size_t>(it - kLatencyBounds.begin())];
  }
}

void Metrics::AttemptFailed(std::string_view topic, bool cost_attempt, std::string_view sink) {
  std::lock_guard lock(impl_->mutex);
  TopicCounters& c = impl_->For(topic);
  ++c.attempt_failures;
  if (!sink.empty()) ++c.attempt_failures_by_sink[std::string(sink)];
  if (!cost_attempt) ++c.attempts_saved;
}

void Metrics::Dead(std::string_view topic, bool by_crash_budget) {
  std::lock_guard lock(impl_->mutex);
  TopicCounters& c = impl_->For(topic);
  ++c.dead;
  if (by_crash_budget) ++c.crash_budget_deaths;
}

void Metrics::Expired(std::string_view topic) {
  std::lock_guard lock(impl_->mutex);
  TopicCounters& c = impl_->For(topic);
  ++c.dead;
  ++c.expired;
}

void Metrics::Recycled(std::string_view topic, std::int64_t n) {
  std::lock_guard lock(impl_->mutex);
  impl_->For(topic).recycled += n;
}

void Metrics::PoolRejected(std::string_view topic) {
  std::lock_guard lock(impl_->mutex);
  ++impl_->For(topic).pool_rejections;
}

void Metrics::TakenBack(std::int64_t n) {
  std::lock_guard lock(impl_->mutex);
  impl_->taken_back += n;
}

void Metrics::SweeperFailed(std::string_view error) {
  std::lock_guard lock(impl_->mutex);
  ++impl_->sweeper_errors;
  ++impl_->sweeper_consecutive_failures;
  impl_->sweeper_last_error = error;
}

void Metrics::AdminRefused(int status) {
  std::lock_guard lock(impl_->mutex);
  ++(status == 403 ? impl_->admin_forbidden : impl_->admin_unauthorized);
}

void Metrics::SweeperSucceeded() {
  std::lock_guard lock(impl_->mutex);
  impl_->sweeper_consecutive_failures = 0;
}

std::optional<std::string> Metrics::Trouble() const {
  std::lock_guard lock(impl_->mutex);
  if (impl_->sweeper_consecutive_failures < kSweeperFailuresForTrouble) return std::nullopt;
  std::string reason = "sweeper failing: " +
                       std::to_string(impl_->sweeper_consecutive_failures) +
                       " consecutive passes failed, last: " + impl_->sweeper_last_error;
  // One line, whatever the error text held.
  std::replace(reason.begin(), reason.end(), '\n', ' ');
  std::replace(reason.begin(), reason.end(), '\r', ' ');
  return reason;
}

MetricsSnapshot Metrics::Snapshot() const {
  std::lock_guard lock(impl_->mutex);
  MetricsSnapshot snapshot;
  snapshot.latency_bounds_seconds = kLatencyBounds;
  snapshot.topics = impl_->counters;
  // Configured topics appear even before their first message.
  for (const auto& label : impl_->labels) {
    auto [it, inserted] = snapshot.topics.try_emplace(label);
    if (inserted) it->second.latency_buckets.assign(kLatencyBounds.size(), 0);
  }
  snapshot.taken_back_leases = impl_->taken_back;
  snapshot.admin_unauthorized = impl_->admin_unauthorized;
  snapshot.admin_forbidden = impl_->admin_forbidden;
  snapshot.sweeper_errors = impl_->sweeper_errors;
  snapshot.sweeper_consecutive_failures = impl_->sweeper_consecutive_failures;
  snapshot.sweeper_last_error = impl_->sweeper_last_error;
  return snapshot;
}

}  // namespace outbox::agent
