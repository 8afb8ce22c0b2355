// docs/design.md "Outcomes": the one place that decides what a response means.
#include <curl/curl.h>

#include <algorithm>
#include <limits>
#include <string>

#include "outbox/transport.h"
#include "util/http_date.h"
#include "util/http_status.h"

namespace outbox::transport {
namespace {

bool IsEndpointFailureStatus4xx(long status) {
  switch (status) {
    case 401:  // Unauthorized: our credentials, not the message
    case 403:  // Forbidden: likewise
    case 404:  // Not Found: the route is missing (a deploy in progress)
    case 407:  // Proxy Authentication Required
    case 408:  // Request Timeout
    case 425:  // Too Early
    case 429:  // Too Many Requests
      return true;
    default:
      return false;
  }
}

std::string_view TrimWhitespace(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

}  // namespace

std::string_view OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kDelivered:
      return "delivered";
    case Outcome::kEndpointFailure:
      return "endpoint_failure";
    case Outcome::kMessageFailure:
      return "message_failure";
  }
  return "unknown";
}

std::optional<std::int64_t> ParseRetryAfter(std::string_view value, std::int64_t now_ms) {
  value = TrimWhitespace(value);
  if (value.empty()) return std::nullopt;
  constexpr std::int64_t kMaxMs = std::numeric_limits<std::int64_t>::max();
  if (std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    // delta-seconds; absurdly long values saturate instead of overflowing.
    std::int64_t seconds = 0;
    for (const char c : value) {
      if (seconds > (kMaxMs / 1000 - 9) / 10) return kMaxMs;
      seconds = seconds * 10 + (c - '0');
    }
    return seconds * 1000;
  }
  // An HTTP-date (RFC 9110 section 5.6.7), in 64 bits: not curl_getdate,
  // whose time_t is 32 bits on armhf and fails for dates after 2038.
  const std::optional<std::int64_t> date = util::ParseHttpDate(value, now_ms / 1000);
  if (!date) return std::nullopt;
  // The date is the receiver's to choose: saturate instead of overflowing.
  constexpr std::int64_t kMinMs = std::numeric_limits<std::int64_t>::min();
  const std::int64_t date_s = *date;
  if (date_s > kMaxMs / 1000) return kMaxMs;
  if (date_s < kMinMs / 1000) return 0;
  const std::int64_t date_ms = date_s * 1000;
  if (now_ms < 0 && date_ms > kMaxMs + now_ms) return kMaxMs;
  if (now_ms > 0 && date_ms < kMinMs + now_ms) return 0;
  return std::max<std::int64_t>(0, date_ms - now_ms);
}

Result Classify(int curl_code, long http_status, std::string_view retry_after, std::int64_t now_ms,
                std::int64_t max_retry_after_ms) {
  Result result;
  result.http_status = static_cast<int>(http_status);
  if (curl_code != CURLE_OK) {
    // Connection, DNS, TLS and timeout errors alike: the exchange did not
    // complete, which says nothing against the message.
    result.outcome = Outcome::kEndpointFailure;
    result.error = curl_easy_strerror(static_cast<CURLcode>(curl_code));
    return result;
  }
  if (http_status >= 200 && http_status <= 299) {
    result.outcome = Outcome::kDelivered;
    return result;
  }
  result.error = "HTTP " + std::to_string(http_status);
  if (http_status == 410) {
    result.outcome = Outcome::kMessageFailure;
    result.endpoint_gone = true;
  } else if (http_status >= 400 && http_status <= 499 && !IsEndpointFailureStatus4xx(http_status)) {
    result.outcome = Outcome::kMessageFailure;
  } else {
    result.configuration_failure = util::IsConfigurationFailureStatus(http_status);
    // 5xx, the listed 4xx, and 3xx (redirects are never followed: a captive
    // portal is an outage), and anything that is no final status at all.
    result.outcome = Outcome::kEndpointFailure;
    if (std::optional<std::int64_t> delay = ParseRetryAfter(retry_after, now_ms)) {
      result.retry_after_ms = std::min(*delay, std::max<std::int64_t>(0, max_retry_after_ms));
    }
  }
  return result;
}

}  // namespace outbox::transport
