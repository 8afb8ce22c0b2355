// Validation of agent::Options: done once, at construction.
#include "outbox/agent.h"

#include <string>

#include "option_limits.h"

namespace outbox::agent {
namespace {

void CheckRange(const std::string& field, std::int64_t value, limits::Range range) {
  if (!range.Contains(value)) {
    throw std::invalid_argument(field + ": " + range.Expected() + ", got " + std::to_string(value));
  }
}

}  // namespace

void Validate(const Options& options) {
  if (options.db_path.empty()) throw std::invalid_argument("db: a database path is required");
  if (options.sweep_interval_ms < 1) {
    throw std::invalid_argument("sweep_interval_ms: expected a positive integer");
  }
  if (options.lease_timeout_ms < 1) {
    throw std::invalid_argument("lease_timeout_ms: expected a positive integer");
  }
  CheckRange("claim_batch", options.claim_batch, limits::kClaimBatch);
  CheckRange("crash_budget", options.crash_budget, limits::kCrashBudget);
  CheckRange("watch_poll_ms", options.watch_poll_ms, limits::kWatchPollMs);
  CheckRange("metrics.max_topics", options.metrics_max_topics, limits::kMetricsMaxTopics);
  CheckRange("retention.archive_keep", options.retention.archive_keep, limits::kArchiveKeep);
  if (options.retention.delivered_ms < 0) {
    throw std::invalid_argument("retention.delivered_ms: expected 0 (keep) or more");
  }
  for (const auto& [name, topic] : options.topics) {
    const std::string where = "topics.\"" + name + "\".";
    CheckRange(where + "workers", topic.workers, limits::kWorkers);
    CheckRange(where + "queue_capacity", topic.queue_capacity, limits::kQueueCapacity);
    CheckRange(where + "queue_bytes", topic.queue_bytes, limits::kQueueBytes);
    try {
      store::Validate(topic.retry);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(where + e.what());
    }
    CheckRange(where + "breaker.failure_threshold", topic.breaker.failure_threshold,
               limits::kFailureThreshold);
    if (topic.breaker.open_ms < 1 || topic.breaker.max_open_ms < topic.breaker.open_ms) {
      throw std::invalid_argument(where + "breaker.open_ms: expected 1 ≤ open_ms ≤ max_open_ms");
    }
  }
}

}  // namespace outbox::agent
