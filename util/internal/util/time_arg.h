// Times and durations as operators type them on a command line. Internal to
// edge-outbox; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

namespace outbox::util {

// A duration: a positive integer with a unit, ms, s, m, h or d ("500ms",
// "30m", "7d"). Returns milliseconds. Throws std::invalid_argument naming
// `field` for anything else (no unit, a negative number, an overflow).
std::int64_t ParseDuration(std::string_view text, std::string_view field);

// A point in time, in ms since the epoch: RFC 3339 ("2026-12-01T15:00:00Z",
// fractional seconds and a ±HH:MM offset allowed), an integer of ms since the
// epoch, or an offset from `now_ms` ("-2h", "+30m"). Throws
// std::invalid_argument naming `field` otherwise.
std::int64_t ParseTimeArg(std::string_view text, std::int64_t now_ms, std::string_view field);

}  // namespace outbox::util
