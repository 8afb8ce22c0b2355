#include "util/rfc3339.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace outbox::util {

std::string FormatRfc3339(std::int64_t ms_since_epoch) {
  using namespace std::chrono;
  // Times come from rows that another application may have filled with
  // anything (INT64_MIN would overflow the day arithmetic below), so clamp
  // to 0000-01-01 .. 9999-12-31.
  constexpr std::int64_t kFirstMs = -62'167'219'200'000;
  constexpr std::int64_t kLastMs = 253'402'300'799'999;
  ms_since_epoch = std::clamp(ms_since_epoch, kFirstMs, kLastMs);
  const sys_time<milliseconds> time{milliseconds{ms_since_epoch}};
  // floor, not a division: a negative time belongs to the day before.
  const sys_days day = floor<days>(time);
  const year_month_day date{day};
  const hh_mm_ss<milliseconds> clock{time - day};
  char text[40];
  std::snprintf(
      text, sizeof text, "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ", static_cast<int>(date.year()),
      static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
      static_cast<int>(clock.hours().count()), static_cast<int>(clock.minutes().count()),
      static_cast<int>(clock.seconds().count()), static_cast<int>(clock.subseconds().count()));
  return text;
}

}  // namespace outbox::util
