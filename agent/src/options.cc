// Validation of agent::Options: done once, at construction.
#include "outbox/agent.h"

namespace outbox::agent {

void Validate(const Options& options) {
  if (options.db_path.empty()) throw std::invalid_argument("db: a database path is required");
  if (options.sweep_interval_ms < 1) {
    throw std::invalid_argument("sweep_interval_ms: expected a positive integer");
  }
  if (options.lease_timeout_ms < 1) {
    throw std::invalid_argument("lease_timeout_ms: expected a positive integer");
  }
  if (options.claim_batch < 1) throw std::invalid_argument("claim_batch: expected a positive integer");
  if (options.crash_budget < 1) {
    throw std::invalid_argument("crash_budget: expected a positive integer");
  }
  if (options.retention.delivered_ms < 0) {
    throw std::invalid_argument("retention.delivered_ms: expected 0 (keep) or more");
  }
  for (const auto& [name, topic] : options.topics) {
    const std::string where = "topics.\"" + name + "\".";
    if (topic.workers < 1) throw std::invalid_argument(where + "workers: expected a positive integer");
    if (topic.queue_capacity < 1) {
      throw std::invalid_argument(where + "queue_capacity: expected a positive integer");
    }
    try {
      store::Validate(topic.retry);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(where + e.what());
    }
    if (topic.breaker.failure_threshold < 1) {
      throw std::invalid_argument(where + "breaker.failure_threshold: expected a positive integer");
    }
    if (topic.breaker.open_ms < 1 || topic.breaker.max_open_ms < topic.breaker.open_ms) {
      throw std::invalid_argument(where + "breaker.open_ms: expected 1 ≤ open_ms ≤ max_open_ms");
    }
  }
}

}  // namespace outbox::agent
