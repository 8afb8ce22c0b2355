#include "util/http_date.h"

#include <algorithm>
#include <array>
#include <chrono>

namespace outbox::util {
namespace {

using std::chrono::day;
using std::chrono::month;
using std::chrono::sys_days;
using std::chrono::year;
using std::chrono::year_month_day;

constexpr std::array<std::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
constexpr std::array<std::string_view, 7> kDays = {"Mon", "Tue", "Wed", "Thu",
                                                   "Fri", "Sat", "Sun"};
constexpr std::array<std::string_view, 7> kLongDays = {
    "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"};

// A cursor over the text: each Take consumes what it matched, or fails.
class Cursor {
 public:
  explicit Cursor(std::string_view text) : rest_(text) {}
  bool Done() const { return rest_.empty(); }

  bool Take(std::string_view literal) {
    if (!rest_.starts_with(literal)) return false;
    rest_.remove_prefix(literal.size());
    return true;
  }
  // Exactly `digits` decimal digits.
  bool Number(int digits, int& out) {
    if (rest_.size() < static_cast<std::size_t>(digits)) return false;
    out = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = rest_[static_cast<std::size_t>(i)];
      if (c < '0' || c > '9') return false;
      out = out * 10 + (c - '0');
    }
    rest_.remove_prefix(static_cast<std::size_t>(digits));
    return true;
  }
  template <std::size_t N>
  bool OneOf(const std::array<std::string_view, N>& names, int& index) {
    for (std::size_t i = 0; i < N; ++i) {
      if (Take(names[i])) {
        index = static_cast<int>(i);
        return true;
      }
    }
    return false;
  }
  // "HH:MM:SS"
  bool Time(int& h, int& m, int& s) {
    return Number(2, h) && Take(":") && Number(2, m) && Take(":") && Number(2, s);
  }

 private:
  std::string_view rest_;
};

std::optional<std::int64_t> ToSeconds(int y, int mon, int d, int h, int mi, int s) {
  const year_month_day date{year{y}, month{static_cast<unsigned>(mon + 1)},
                            day{static_cast<unsigned>(d)}};
  // 60: a leap second.
  if (!date.ok() || h > 23 || mi > 59 || s > 60) return std::nullopt;
  const std::int64_t days = sys_days{date}.time_since_epoch().count();
  return ((days * 24 + h) * 60 + mi) * 60 + s;
}

std::optional<std::int64_t> ImfFixdate(std::string_view text) {
  Cursor c(text);
  int name = 0, d = 0, mon = 0, y = 0, h = 0, mi = 0, s = 0;
  if (!(c.OneOf(kDays, name) && c.Take(", ") && c.Number(2, d) && c.Take(" ") &&
        c.OneOf(kMonths, mon) && c.Take(" ") && c.Number(4, y) && c.Take(" ") &&
        c.Time(h, mi, s) && c.Take(" GMT") && c.Done())) {
    return std::nullopt;
  }
  return ToSeconds(y, mon, d, h, mi, s);
}

std::optional<std::int64_t> Rfc850(std::string_view text, std::int64_t now_s) {
  Cursor c(text);
  int name = 0, d = 0, mon = 0, yy = 0, h = 0, mi = 0, s = 0;
  if (!(c.OneOf(kLongDays, name) && c.Take(", ") && c.Number(2, d) && c.Take("-") &&
        c.OneOf(kMonths, mon) && c.Take("-") && c.Number(2, yy) && c.Take(" ") &&
        c.Time(h, mi, s) && c.Take(" GMT") && c.Done())) {
    return std::nullopt;
  }
  // RFC 9110: a two-digit year that looks more than 50 years in the future
  // is the most recent past year with those digits.
  // The clock is the caller's: keep it within years 1970..9999 so that the
  // calendar's arithmetic stays in range.
  const std::int64_t clamped = std::clamp<std::int64_t>(now_s, 0, 253'402'300'799);
  const int this_year = static_cast<int>(
      year_month_day{std::chrono::floor<std::chrono::days>(sys_days{} +
                                                           std::chrono::seconds{clamped})}
          .year());
  int y = this_year - this_year % 100 + yy;
  if (y > this_year + 50) y -= 100;
  return ToSeconds(y, mon, d, h, mi, s);
}

std::optional<std::int64_t> Asctime(std::string_view text) {
  Cursor c(text);
  int name = 0, d = 0, mon = 0, y = 0, h = 0, mi = 0, s = 0;
  if (!(c.OneOf(kDays, name) && c.Take(" ") && c.OneOf(kMonths, mon) && c.Take(" "))) {
    return std::nullopt;
  }
  // The day of the month: two digits, or a space and one digit.
  if (!(c.Take(" ") ? c.Number(1, d) : c.Number(2, d))) return std::nullopt;
  if (!(c.Take(" ") && c.Time(h, mi, s) && c.Take(" ") && c.Number(4, y) && c.Done())) {
    return std::nullopt;
  }
  return ToSeconds(y, mon, d, h, mi, s);
}

}  // namespace

std::optional<std::int64_t> ParseHttpDate(std::string_view text, std::int64_t now_s) {
  if (auto s = ImfFixdate(text)) return s;
  if (auto s = Rfc850(text, now_s)) return s;
  return Asctime(text);
}

}  // namespace outbox::util
