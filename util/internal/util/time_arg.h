// Times and durations as people type them on a command line. Internal to
// edge-outbox; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

namespace outbox::util {

// A duration: a non-negative integer followed by a unit, "ms", "s", "m",
// "h" or "d" ("30m", "7d"); a bare integer is milliseconds, as in the
// config. Throws std::invalid_argument saying what is wrong with `text`.
std::int64_t ParseDuration(std::string_view text);

// An RFC 3339 time ("2026-12-01T10:00:00Z", fractions and "+02:00"
// offsets allowed) to ms since the epoch. Throws std::invalid_argument.
std::int64_t ParseRfc3339(std::string_view text);

// A point in time: RFC 3339, ms since the epoch, or an offset from
// `now_ms` such as "-2h" or "+30m". Throws std::invalid_argument.
std::int64_t ParseTimeArg(std::string_view text, std::int64_t now_ms);

}  // namespace outbox::util
