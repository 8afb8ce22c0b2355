// Fuzz target: Retry-After values and the one classification of a response
// (transport::ParseRetryAfter, transport::Classify). Input: now_ms (8
// bytes), libcurl code (1 byte), HTTP status (8 bytes), the Retry-After cap
// (8 bytes), then the header value.
#include <cstdint>
#include <string>

#include "fuzz_input.h"
#include "outbox/transport.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace outbox;
  fuzz::FuzzInput input(data, size);
  const std::int64_t now_ms = input.Integer();
  const int curl_code = input.Byte() % 100;
  const long status = static_cast<long>(input.Integer() % 1000);
  std::int64_t cap = input.Integer();
  if (cap < 0) cap = -(cap + 1);  // the cap is a validated option: never negative
  const std::string_view value = input.Rest();

  const auto parsed = transport::ParseRetryAfter(value, now_ms);
  if (parsed) FUZZ_CHECK(*parsed >= 0);
  // Digits only is delta-seconds: never an HTTP-date's "nullopt".
  if (!value.empty() && value.find_first_not_of("0123456789") == std::string_view::npos) {
    FUZZ_CHECK(parsed.has_value());
  }

  const transport::Result result = transport::Classify(curl_code, status, value, now_ms, cap);
  FUZZ_CHECK(result.http_status == static_cast<int>(status));
  if (curl_code != 0) {
    FUZZ_CHECK(result.outcome == transport::Outcome::kEndpointFailure);
    FUZZ_CHECK(!result.error.empty());
  } else if (status >= 200 && status <= 299) {
    FUZZ_CHECK(result.outcome == transport::Outcome::kDelivered);
  } else {
    FUZZ_CHECK(result.outcome != transport::Outcome::kDelivered);
    FUZZ_CHECK(!result.error.empty());
  }
  if (status == 410 && curl_code == 0) FUZZ_CHECK(result.endpoint_gone);
  if (result.retry_after_ms) {
    FUZZ_CHECK(result.outcome == transport::Outcome::kEndpointFailure);
    FUZZ_CHECK(*result.retry_after_ms >= 0);
    FUZZ_CHECK(*result.retry_after_ms <= cap);
  }
  return 0;
}
