#include "util/time_arg.h"

#include <cctype>
#include <charconv>
#include <chrono>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

namespace outbox::util {
namespace {

[[noreturn]] void Fail(std::string_view field, std::string_view text, std::string_view expected) {
  throw std::invalid_argument(std::string(field) + ": expected " + std::string(expected) +
                              ", not '" + std::string(text) + "'");
}

constexpr std::string_view kDurationForm = "a duration such as 500ms, 30s, 30m, 2h or 7d";
constexpr std::string_view kTimeForm =
    "RFC 3339 (2026-12-01T15:00:00Z), ms since the epoch, or an offset such as -2h or +30m";

// Reads exactly `digits` digits at `at`; -1 if they are not there.
int Digits(std::string_view text, std::size_t& at, std::size_t digits) {
  if (at + digits > text.size()) return -1;
  int value = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    const char c = text[at + i];
    if (c < '0' || c > '9') return -1;
    value = value * 10 + (c - '0');
  }
  at += digits;
  return value;
}

bool Expect(std::string_view text, std::size_t& at, char c) {
  if (at >= text.size() || std::toupper(static_cast<unsigned char>(text[at])) != c) return false;
  ++at;
  return true;
}

std::optional<std::int64_t> ParseRfc3339(std::string_view text) {
  std::size_t at = 0;
  const int year = Digits(text, at, 4);
  if (year < 0 || !Expect(text, at, '-')) return std::nullopt;
  const int month = Digits(text, at, 2);
  if (month < 0 || !Expect(text, at, '-')) return std::nullopt;
  const int day = Digits(text, at, 2);
  if (day < 0 || !(Expect(text, at, 'T') || Expect(text, at, ' '))) return std::nullopt;
  const int hour = Digits(text, at, 2);
  if (hour < 0 || !Expect(text, at, ':')) return std::nullopt;
  const int minute = Digits(text, at, 2);
  if (minute < 0 || !Expect(text, at, ':')) return std::nullopt;
  const int second = Digits(text, at, 2);
  if (second < 0) return std::nullopt;
  std::int64_t ms = 0;
  if (Expect(text, at, '.')) {
    int scale = 100;
    const std::size_t first = at;
    while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at]))) {
      ms += (text[at] - '0') * scale;
      scale /= 10;
      ++at;
    }
    if (at == first) return std::nullopt;
  }
  std::int64_t offset_minutes = 0;
  if (!Expect(text, at, 'Z')) {
    if (at >= text.size() || (text[at] != '+' && text[at] != '-')) return std::nullopt;
    const int sign = text[at++] == '-' ? -1 : 1;
    const int hours = Digits(text, at, 2);
    if (hours < 0 || !Expect(text, at, ':')) return std::nullopt;
    const int minutes = Digits(text, at, 2);
    if (minutes < 0 || hours > 23 || minutes > 59) return std::nullopt;
    offset_minutes = sign * (hours * 60 + minutes);
  }
  if (at != text.size()) return std::nullopt;
  using namespace std::chrono;
  const year_month_day date{std::chrono::year{year}, std::chrono::month{static_cast<unsigned>(month)},
                            std::chrono::day{static_cast<unsigned>(day)}};
  if (!date.ok() || hour > 23 || minute > 59 || second > 60) return std::nullopt;
  const std::int64_t days_ms =
      duration_cast<milliseconds>(sys_days{date}.time_since_epoch()).count();
  return days_ms + ((hour * 60 + minute - offset_minutes) * 60 + second) * 1000 + ms;
}

}  // namespace

std::int64_t ParseDuration(std::string_view text, std::string_view field) {
  std::int64_t number = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (error != std::errc() || end == text.data() || number < 0) Fail(field, text, kDurationForm);
  const std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
  std::int64_t scale = 0;
  if (unit == "ms") scale = 1;
  if (unit == "s") scale = 1000;
  if (unit == "m") scale = 60'000;
  if (unit == "h") scale = 3'600'000;
  if (unit == "d") scale = 86'400'000;
  if (scale == 0 || number > std::numeric_limits<std::int64_t>::max() / scale) {
    Fail(field, text, kDurationForm);
  }
  return number * scale;
}

std::int64_t ParseTimeArg(std::string_view text, std::int64_t now_ms, std::string_view field) {
  if (text.empty()) Fail(field, text, kTimeForm);
  if (text[0] == '+' || text[0] == '-') {
    std::int64_t offset = 0;
    try {
      offset = ParseDuration(text.substr(1), field);
    } catch (const std::invalid_argument&) {
      Fail(field, text, kTimeForm);
    }
    return text[0] == '+' ? now_ms + offset : now_ms - offset;
  }
  std::int64_t ms = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), ms);
  if (error == std::errc() && end == text.data() + text.size()) return ms;
  if (const std::optional<std::int64_t> time = ParseRfc3339(text)) return *time;
  Fail(field, text, kTimeForm);
}

}  // namespace outbox::util
