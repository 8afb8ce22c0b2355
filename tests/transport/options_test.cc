#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>

#include "outbox/transport.h"

namespace outbox::transport {
namespace {

EndpointOptions Valid() {
  EndpointOptions options;
  options.url = "https://collector.example/orders";
  return options;
}

// The message Validate throws after `change` is applied to valid options.
std::string ErrorAfter(const std::function<void(EndpointOptions&)>& change) {
  EndpointOptions options = Valid();
  change(options);
  try {
    Validate(options);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "";
}

TEST(EndpointOptions, DefaultsAreValidOnceAUrlIsGiven) {
  EXPECT_NO_THROW(Validate(Valid()));
  const EndpointOptions defaults;
  EXPECT_EQ(defaults.timeout_ms, 5000);
  EXPECT_EQ(defaults.content_type, "application/json");
  EXPECT_FALSE(defaults.tls.insecure_skip_verify);
  EXPECT_EQ(defaults.batch.max_messages, 1u);
  EXPECT_TRUE(defaults.ce_source.starts_with("urn:edge-outbox:"));
  EXPECT_EQ(defaults.ce_source, DefaultCloudEventsSource());
}

TEST(EndpointOptions, AcceptsPlainHttpWithPortAndQuery) {
  EXPECT_EQ(ErrorAfter([](auto& o) { o.url = "http://127.0.0.1:8080/events?x=1"; }), "");
}

TEST(EndpointOptions, RejectsBadUrls) {
  EXPECT_EQ(ErrorAfter([](auto& o) { o.url = ""; }), "url: is required");
  EXPECT_EQ(ErrorAfter([](auto& o) { o.url = "ftp://host/x"; }),
            "url: scheme must be http or https");
  EXPECT_EQ(ErrorAfter([](auto& o) { o.url = "collector.example/orders"; }).substr(0, 30),
            "url: not a valid absolute URL ");
  EXPECT_EQ(ErrorAfter([](auto& o) { o.url = "https://exa mple/"; }).substr(0, 30),
            "url: not a valid absolute URL ");
  EXPECT_EQ(ErrorAfter([](auto& o) { o.url = "https://user:pw@collector.example/"; }),
            "url: must not carry credentials; send them as a header (e.g. Authorization "
            "from \"env:NAME\")");
}

TEST(EndpointOptions, RejectsBadTimeouts) {
  EXPECT_EQ(ErrorAfter([](auto& o) { o.connect_timeout_ms = 0; }),
            "connect_timeout_ms: must be positive");
  EXPECT_EQ(ErrorAfter([](auto& o) { o.timeout_ms = -1; }), "timeout_ms: must be positive");
}

TEST(EndpointOptions, RejectsBadHeaders) {
  EXPECT_EQ(ErrorAfter([](auto& o) {
              o.headers = {{"Bad Name", "x"}};
            }),
            "headers[0]: name is not an HTTP header name");
  EXPECT_EQ(ErrorAfter([](auto& o) {
              o.headers = {{"X-A", "1"}, {"X-B", "a\r\nX-C: 1"}};
            }),
            "headers[1]: value of X-B holds a control character");
  EXPECT_EQ(ErrorAfter([](auto& o) {
              o.headers = {{"Idempotency-Key", "x"}};
            }),
            "headers[0]: Idempotency-Key is set by the transport itself");
  EXPECT_EQ(ErrorAfter([](auto& o) {
              o.headers = {{"ce-source", "x"}};
            }),
            "headers[0]: ce-source is set by the transport itself");
  EXPECT_EQ(ErrorAfter([](auto& o) {
              o.headers = {{"Content-Length", "1"}};
            }),
            "headers[0]: Content-Length is set by the transport itself");
  EXPECT_EQ(ErrorAfter([](auto& o) {
              o.headers = {{"content-type", "text/plain"}};
            }),
            "headers[0]: set Content-Type with content_type");
  EXPECT_EQ(ErrorAfter([](auto& o) {
              o.headers = {{"Authorization", "env:TOKEN"}};
            }),
            "headers[0]: value of Authorization is an unresolved secret reference (resolve "
            "it with ResolveSecret)");
  EXPECT_EQ(ErrorAfter([](auto& o) {
              o.headers = {{"X-A", "1"}, {"x-a", "2"}};
            }),
            "headers[1]: x-a is given twice");
  EXPECT_EQ(ErrorAfter([](auto& o) { o.headers = {{"Authorization", "Bearer t"}}; }), "");
}

TEST(EndpointOptions, RejectsBadContentTypeAndSource) {
  EXPECT_EQ(ErrorAfter([](auto& o) { o.content_type = "json"; }),
            "content_type: must be a media type such as application/json");
  EXPECT_EQ(ErrorAfter([](auto& o) { o.content_type = "a/b\nX: y"; }),
            "content_type: must be a media type such as application/json");
  EXPECT_EQ(ErrorAfter([](auto& o) { o.ce_source = ""; }),
            "ce_source: must be a non-empty URI reference");
  EXPECT_EQ(ErrorAfter([](auto& o) { o.ce_source = "a b"; }),
            "ce_source: must be a non-empty URI reference");
}

TEST(EndpointOptions, RejectsBadSigningSecrets) {
  EXPECT_EQ(ErrorAfter([](auto& o) {
              o.signing_secrets = {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "secret"};
            }),
            "signing_secrets[1]: must have the form whsec_<base64>");
}

TEST(EndpointOptions, RejectsEmptyBatchesAndNegativeCaps) {
  EXPECT_EQ(ErrorAfter([](auto& o) { o.batch.max_messages = 0; }),
            "batch.max_messages: must be at least 1");
  EXPECT_EQ(ErrorAfter([](auto& o) { o.batch.max_bytes = 0; }),
            "batch.max_bytes: must be at least 1");
  EXPECT_EQ(ErrorAfter([](auto& o) { o.max_retry_after_ms = -1; }),
            "max_retry_after_ms: must not be negative");
  EXPECT_EQ(ErrorAfter([](auto& o) { o.max_error_body_bytes = 1 << 20; }),
            "max_error_body_bytes: must be at most 65536");
}

TEST(EndpointOptions, RejectsUnreadableTlsFiles) {
  EXPECT_EQ(ErrorAfter([](auto& o) { o.tls.ca_file = "/nonexistent/ca.pem"; }),
            "tls.ca_file: cannot read /nonexistent/ca.pem");
  EXPECT_EQ(ErrorAfter([](auto& o) { o.tls.client_key_file = "/dev/null"; }),
            "tls.client_key_file: needs tls.client_cert_file");
}

TEST(EndpointOptions, EndpointValidatesOnConstruction) {
  EndpointOptions options = Valid();
  options.url = "gopher://x/";
  EXPECT_THROW(Endpoint endpoint(options), std::invalid_argument);
}

}  // namespace
}  // namespace outbox::transport
