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
// A topic's claim priority (higher first).
inline constexpr Range kPriority{-1000, 1000};
// Smallest HTTP body gzip-compressed, bytes (0 = every body).
inline constexpr Range kCompressMinBytes{0, 64 * 1024 * 1024};

// Every millisecond option of the config file: at most ten years (365.25
// days each), so that now + value, twice a value and the retry schedule's
// steps stay far inside int64 (9.2e18) whatever the file says.
inline constexpr std::int64_t kMaxMs = 315'576'000'000;
inline constexpr Range kPositiveMs{1, kMaxMs};
inline constexpr Range kNonNegativeMs{0, kMaxMs};

}  // namespace outbox::agent::limits
