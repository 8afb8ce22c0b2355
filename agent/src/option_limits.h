// The accepted range of every agent option that has one beyond "positive":
// one table, read by Validate(Options) and by the config file parser, so the
// library and outboxd accept the same values.
#pragma once

#include <cstdint>
#include <string>

namespace outbox::agent::limits {

struct Range {
  std::int64_t min;
  std::int64_t max;
  bool Contains(std::int64_t value) const { return value >= min && value <= max; }
  // "expected an integer from MIN to MAX", as both readers word it.
  std::string Expected() const {
    return "expected an integer from " + std::to_string(min) + " to " + std::to_string(max);
  }
};

inline constexpr Range kWorkers{1, 256};
inline constexpr Range kQueueCapacity{1, 10'000'000};
inline constexpr Range kQueueBytes{1, 4'294'967'296};
inline constexpr Range kClaimBatch{1, 10'000};
inline constexpr Range kCrashBudget{1, 1000};
inline constexpr Range kFailureThreshold{1, 1'000'000};
inline constexpr Range kWatchPollMs{1, 1000};
inline constexpr Range kMetricsMaxTopics{0, 10'000};
inline constexpr Range kArchiveKeep{0, 1000};

}  // namespace outbox::agent::limits
