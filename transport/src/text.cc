// Small text rules shared by headers, bodies and validation.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "internal.h"

namespace outbox::transport::internal {
namespace {

char ToLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (ToLower(a[i]) != ToLower(b[i])) return false;
  }
  return true;
}

bool StartsWithIgnoreCase(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && EqualsIgnoreCase(text.substr(0, prefix.size()), prefix);
}

bool IsValidUtf8(std::string_view text) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  for (std::size_t at = 0; at < text.size();) {
    const unsigned char lead = byte(at);
    std::size_t length = 1;
    unsigned char low = 0x80;
    unsigned char high = 0xBF;
    if (lead < 0x80) {
      ++at;
      continue;
    } else if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    } else {
      return false;
    }
    if (at + length > text.size() || byte(at + 1) < low || byte(at + 1) > high) return false;
    for (std::size_t i = 2; i < length; ++i) {
      if ((byte(at + i) & 0xC0) != 0x80) return false;
    }
    at += length;
  }
  return true;
}

bool IsToken(std::string_view text) {
  if (text.empty()) return false;
  for (const char c : text) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

bool IsValidHeaderValue(std::string_view value) {
  for (const char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\t') || byte == 0x7F) return false;
  }
  return true;
}

std::string FormatRfc3339(std::int64_t ms_since_epoch) {
  using namespace std::chrono;
  // RFC 3339 has four-digit years. created_at comes from a row that another
  // application may have filled with anything (INT64_MIN would overflow the
  // day arithmetic below), so clamp to 0000-01-01 .. 9999-12-31.
  constexpr std::int64_t kFirstMs = -62'167'219'200'000;
  constexpr std::int64_t kLastMs = 253'402'300'799'999;
  ms_since_epoch = std::clamp(ms_since_epoch, kFirstMs, kLastMs);
  const sys_time<milliseconds> time{milliseconds{ms_since_epoch}};
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

std::string_view ContentTypeOf(const EndpointOptions& options, const Message& message) {
  for (const Header& header : message.headers) {
    if (EqualsIgnoreCase(header.first, "Content-Type")) return header.second;
  }
  return options.content_type;
}

bool IsJsonContentType(std::string_view content_type) {
  std::string_view media_type = content_type.substr(0, content_type.find(';'));
  while (!media_type.empty() && (media_type.back() == ' ' || media_type.back() == '\t')) {
    media_type.remove_suffix(1);
  }
  const auto ends_with_json = [&] {
    constexpr std::string_view kSuffix = "+json";
    return media_type.size() > kSuffix.size() &&
           EqualsIgnoreCase(media_type.substr(media_type.size() - kSuffix.size()), kSuffix);
  };
  return EqualsIgnoreCase(media_type, "application/json") ||
         EqualsIgnoreCase(media_type, "text/json") || ends_with_json();
}

}  // namespace outbox::transport::internal
