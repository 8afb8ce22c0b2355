#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "outbox/transport.h"

namespace outbox::transport {
namespace {

constexpr std::int64_t kCreatedAtMs = 1'614'265'330'123;
constexpr std::int64_t kNowS = 1'614'265'330;

EndpointOptions Options() {
  EndpointOptions options;
  options.url = "http://127.0.0.1:9/events";
  options.ce_source = "urn:test";
  return options;
}

Message MessageWith(std::span<const Header> row_headers = {}) {
  return {.message_id = "id-1",
          .topic = "order.created",
          .payload = "{}",
          .headers = row_headers,
          .created_at_ms = kCreatedAtMs};
}

std::string ErrorOf(const Headers& row_headers) {
  try {
    BuildHeaders(Options(), MessageWith(row_headers), "{}", kNowS);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "";
}

TEST(BuildHeaders, SendsContentTypeAndIdempotencyKey) {
  EXPECT_EQ(BuildHeaders(Options(), MessageWith(), "{}", kNowS),
            (Headers{{"Content-Type", "application/json"}, {"Idempotency-Key", "id-1"}}));
}

TEST(BuildHeaders, ContentTypeComesFromTheRowElseTheEndpoint) {
  EndpointOptions options = Options();
  options.content_type = "application/vnd.orders+json";
  EXPECT_EQ(BuildHeaders(options, MessageWith(), "{}", kNowS).front().second,
            "application/vnd.orders+json");
  const Headers row = {{"content-type", "text/plain"}};
  EXPECT_EQ(BuildHeaders(options, MessageWith(row), "{}", kNowS),
            (Headers{{"Content-Type", "text/plain"}, {"Idempotency-Key", "id-1"}}));
}

TEST(BuildHeaders, RowHeadersNeverOverrideReservedOrConfiguredOnes) {
  EndpointOptions options = Options();
  options.headers = {{"Authorization", "Bearer configured"}, {"X-Api", "configured"}};
  const Headers row = {{"X-Tenant", "acme"},      {"Idempotency-Key", "evil"},
                       {"authorization", "evil"}, {"CE-ID", "evil"},
                       {"ce-type", "evil"},       {"Webhook-Signature", "evil"},
                       {"Content-Length", "1"},   {"Transfer-Encoding", "chunked"},
                       {"Host", "evil.example"},  {"Expect", "100-continue"},
                       {"X-Api", "row"},          {"x-tenant", "second spelling"}};
  EXPECT_EQ(BuildHeaders(options, MessageWith(row), "{}", kNowS),
            (Headers{{"Content-Type", "application/json"},
                     {"Idempotency-Key", "id-1"},
                     {"Authorization", "Bearer configured"},
                     {"X-Api", "configured"},
                     {"X-Tenant", "acme"}}));
}

TEST(BuildHeaders, RejectsRowHeadersThatAreNotHttpHeaders) {
  EXPECT_EQ(ErrorOf({{"Bad Name", "x"}}), "headers: name \"Bad Name\" is not an HTTP header name");
  EXPECT_EQ(ErrorOf({{"", "x"}}), "headers: name \"\" is not an HTTP header name");
  EXPECT_EQ(ErrorOf({{"X-Bad\r\nInjected", "x"}}),
            "headers: name \"X-Bad??Injected\" is not an HTTP header name");
  EXPECT_EQ(ErrorOf({{"X-Evil", "a\r\nInjected: 1"}}),
            "headers[X-Evil]: value holds a control character");
  EXPECT_EQ(ErrorOf({{"X-Evil", std::string("a\0b", 3)}}),
            "headers[X-Evil]: value holds a control character");
  // Even a reserved name that would be dropped must be well formed.
  EXPECT_EQ(ErrorOf({{"ce-id", "a\nb"}}), "headers[ce-id]: value holds a control character");
}

TEST(BuildHeaders, AllowsEmptyValuesAndTabs) {
  const Headers row = {{"X-Empty", ""}, {"X-Tab", "a\tb"}};
  const Headers headers = BuildHeaders(Options(), MessageWith(row), "{}", kNowS);
  EXPECT_EQ(headers.size(), 4u);
}

TEST(BuildHeaders, CloudEventsBinaryMode) {
  EndpointOptions options = Options();
  options.cloudevents = CloudEventsMode::kBinary;
  EXPECT_EQ(BuildHeaders(options, MessageWith(), "{}", kNowS),
            (Headers{{"Content-Type", "application/json"},
                     {"Idempotency-Key", "id-1"},
                     {"ce-specversion", "1.0"},
                     {"ce-id", "id-1"},
                     {"ce-source", "urn:test"},
                     {"ce-type", "order.created"},
                     {"ce-time", "2021-02-25T15:02:10.123Z"}}));
}

TEST(BuildHeaders, CloudEventsStructuredModeSendsTheEnvelopeType) {
  EndpointOptions options = Options();
  options.cloudevents = CloudEventsMode::kStructured;
  EXPECT_EQ(
      BuildHeaders(options, MessageWith(), "{}", kNowS),
      (Headers{{"Content-Type", "application/cloudevents+json"}, {"Idempotency-Key", "id-1"}}));
}

TEST(BuildHeaders, StandardWebhooksSignatureWhenASecretIsConfigured) {
  EndpointOptions options = Options();
  options.signing_secrets = {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"};
  Message message = MessageWith();
  message.message_id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
  EXPECT_EQ(BuildHeaders(options, message, R"({"test": 2432232314})", 1614265330),
            (Headers{{"Content-Type", "application/json"},
                     {"Idempotency-Key", "msg_p5jXN8AQM9LWM0D4loKWxJek"},
                     {"webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek"},
                     {"webhook-timestamp", "1614265330"},
                     {"webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}}));
}

TEST(BuildBatchHeaders, UsesTheBatchFormatAndId) {
  EndpointOptions options = Options();
  options.headers = {{"Authorization", "Bearer configured"}};
  EXPECT_EQ(BuildBatchHeaders(options, "batch-1", "", kNowS),
            (Headers{{"Content-Type", "application/x-ndjson"},
                     {"Idempotency-Key", "batch-1"},
                     {"Authorization", "Bearer configured"}}));
  options.batch.format = BatchFormat::kCloudEvents;
  EXPECT_EQ(BuildBatchHeaders(options, "batch-1", "", kNowS).front().second,
            "application/cloudevents-batch+json");
}

}  // namespace
}  // namespace outbox::transport
