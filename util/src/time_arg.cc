#include "util/time_arg.h"

#include <charconv>
#include <chrono>
#include <limits>
#include <stdexcept>
#include <string>

namespace outbox::util {
namespace {

[[noreturn]] void Refuse(std::string_view text, std::string_view expected) {
  throw std::invalid_argument("'" + std::string(text) + "': expected " + std::string(expected));
}

// Exactly `digits` digits at the start of `text` (1 or more when `digits`
// is 0), consumed; -1 if they are not there.
std::int64_t TakeNumber(std::string_view& text, std::size_t digits) {
  std::size_t n = 0;
  while (n < text.size() && (digits == 0 || n < digits) && text[n] >= '0' && text[n] <= '9') ++n;
  if (n == 0 || (digits != 0 && n != digits) || n > 18) return -1;
  std::int64_t value = 0;
  std::from_chars(text.data(), text.data() + n, value);
  text.remove_prefix(n);
  return value;
}

bool Take(std::string_view& text, char c) {
  if (text.empty() || text.front() != c) return false;
  text.remove_prefix(1);
  return true;
}

bool TakeOneOf(std::string_view& text, std::string_view chars) {
  if (text.empty() || chars.find(text.front()) == std::string_view::npos) return false;
  text.remove_prefix(1);
  return true;
}

}  // namespace

std::int64_t ParseDuration(std::string_view text) {
  constexpr std::string_view kExpected = "a duration such as 500ms, 30s, 30m, 2h or 7d";
  std::string_view rest = text;
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
  if (ec != std::errc() || value < 0 || rest.empty() || rest.front() == '-' ||
      rest.front() == '+') {
    Refuse(text, kExpected);
  }
  const std::string_view unit(end, static_cast<std::size_t>(rest.data() + rest.size() - end));
  std::int64_t scale = 0;
  if (unit.empty() || unit == "ms") {
    scale = 1;
  } else if (unit == "s") {
    scale = 1000;
  } else if (unit == "m") {
    scale = 60'000;
  } else if (unit == "h") {
    scale = 3'600'000;
  } else if (unit == "d") {
    scale = 86'400'000;
  } else {
    Refuse(text, kExpected);
  }
  if (value > std::numeric_limits<std::int64_t>::max() / scale) Refuse(text, "a shorter duration");
  return value * scale;
}

std::int64_t ParseRfc3339(std::string_view text) {
  constexpr std::string_view kExpected = "an RFC 3339 time such as 2026-12-01T10:00:00Z";
  using namespace std::chrono;
  std::string_view rest = text;
  const std::int64_t y = TakeNumber(rest, 4);
  if (y < 0 || !Take(rest, '-')) Refuse(text, kExpected);
  const std::int64_t mo = TakeNumber(rest, 2);
  if (mo < 0 || !Take(rest, '-')) Refuse(text, kExpected);
  const std::int64_t d = TakeNumber(rest, 2);
  if (d < 0 || !TakeOneOf(rest, "Tt ")) Refuse(text, kExpected);
  const std::int64_t h = TakeNumber(rest, 2);
  if (h < 0 || !Take(rest, ':')) Refuse(text, kExpected);
  const std::int64_t mi = TakeNumber(rest, 2);
  if (mi < 0 || !Take(rest, ':')) Refuse(text, kExpected);
  const std::int64_t s = TakeNumber(rest, 2);
  if (s < 0) Refuse(text, kExpected);
  std::int64_t ms = 0;
  if (Take(rest, '.')) {
    std::string_view fraction = rest;
    if (TakeNumber(rest, 0) < 0) Refuse(text, kExpected);
    fraction = fraction.substr(0, fraction.size() - rest.size());
    for (std::size_t i = 0; i < 3; ++i) ms = ms * 10 + (i < fraction.size() ? fraction[i] - '0' : 0);
  }
  std::int64_t offset_min = 0;
  if (!TakeOneOf(rest, "Zz")) {
    const bool minus = rest.size() > 0 && rest.front() == '-';
    if (!TakeOneOf(rest, "+-")) Refuse(text, kExpected);
    const std::int64_t oh = TakeNumber(rest, 2);
    if (oh < 0 || !Take(rest, ':')) Refuse(text, kExpected);
    const std::int64_t om = TakeNumber(rest, 2);
    if (om < 0 || oh > 23 || om > 59) Refuse(text, kExpected);
    offset_min = (minus ? -1 : 1) * (oh * 60 + om);
  }
  const year_month_day date{year{static_cast<int>(y)}, month{static_cast<unsigned>(mo)},
                            day{static_cast<unsigned>(d)}};
  // 60 seconds: a leap second, which RFC 3339 allows.
  if (!rest.empty() || !date.ok() || h > 23 || mi > 59 || s > 60) Refuse(text, kExpected);
  const std::int64_t days_since_epoch = sys_days{date}.time_since_epoch().count();
  return ((days_since_epoch * 24 + h) * 60 + mi - offset_min) * 60'000 + s * 1000 + ms;
}

std::int64_t ParseTimeArg(std::string_view text, std::int64_t now_ms) {
  if (!text.empty() && (text.front() == '+' || text.front() == '-')) {
    const std::int64_t offset = ParseDuration(text.substr(1));
    return text.front() == '+' ? now_ms + offset : now_ms - offset;
  }
  if (text.find_first_not_of("0123456789") == std::string_view::npos && !text.empty()) {
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) {
      Refuse(text, "a time: RFC 3339, ms since the epoch, or an offset such as -2h");
    }
    return value;
  }
  try {
    return ParseRfc3339(text);
  } catch (const std::invalid_argument&) {
    Refuse(text, "a time: RFC 3339, ms since the epoch, or an offset such as -2h or +30m");
  }
}

}  // namespace outbox::util
