// RFC 3339 time stamps. Internal to edge-outbox; thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace outbox::util {

// UTC with milliseconds, e.g. "2021-02-26T15:42:10.123Z". Times before 1970
// count back from the epoch (-1 is "1969-12-31T23:59:59.999Z"). Values
// outside years 0000..9999, which RFC 3339 cannot write, are clamped to them.
std::string FormatRfc3339(std::int64_t ms_since_epoch);

}  // namespace outbox::util
