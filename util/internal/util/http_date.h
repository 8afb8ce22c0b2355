// HTTP-date (RFC 9110 section 5.6.7), as Retry-After carries it. Internal to
// edge-outbox; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace outbox::util {

// Seconds since the epoch of an HTTP-date in any of its three forms:
//   IMF-fixdate  "Sun, 06 Nov 1994 08:49:37 GMT"
//   RFC 850      "Sunday, 06-Nov-94 08:49:37 GMT" (a two-digit year more
//                than 50 years after `now_s` means the century before)
//   asctime      "Sun Nov  6 08:49:37 1994"
// The day name is checked for its form, not against the date. nullopt for
// anything else. Computed in 64 bits with std::chrono's calendar, never
// through time_t: on a 32-bit time_t (Debian's armhf) libcurl's
// curl_getdate fails for every date after 2038-01-19.
std::optional<std::int64_t> ParseHttpDate(std::string_view text, std::int64_t now_s);

}  // namespace outbox::util
