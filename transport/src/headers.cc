// Request headers: docs/design.md "HTTP contract".
#include <array>
#include <stdexcept>
#include <string>

#include "internal.h"
#include "outbox/transport.h"
#include "util/http_token.h"
#include "util/rfc3339.h"

namespace outbox::transport {
namespace {

// Headers a row may never set: the ones carrying the message's identity and
// authenticity, credentials, and the ones that frame the request (a row
// setting Content-Length or Transfer-Encoding could smuggle a second request;
// Content-Encoding says how the transport coded the body, which only it knows).
constexpr std::array<std::string_view, 12> kReservedNames = {"Idempotency-Key",
                                                             "Authorization",
                                                             "Proxy-Authorization",
                                                             "Content-Length",
                                                             "Content-Encoding",
                                                             "Transfer-Encoding",
                                                             "Host",
                                                             "Connection",
                                                             "Expect",
                                                             "TE",
                                                             "Upgrade",
                                                             "Keep-Alive"};
constexpr std::array<std::string_view, 2> kReservedPrefixes = {"ce-", "webhook-"};

bool IsReservedForRows(std::string_view name) {
  for (std::string_view reserved : kReservedNames) {
    if (internal::EqualsIgnoreCase(name, reserved)) return true;
  }
  for (std::string_view prefix : kReservedPrefixes) {
    if (internal::StartsWithIgnoreCase(name, prefix)) return true;
  }
  return false;
}

bool Contains(const Headers& headers, std::string_view name) {
  for (const Header& header : headers) {
    if (internal::EqualsIgnoreCase(header.first, name)) return true;
  }
  return false;
}

// A row header as it may appear in an error: bounded and printable, since it
// comes from whatever another application inserted.
std::string Printable(std::string_view text) {
  constexpr std::size_t kMaxChars = 64;
  std::string shown;
  for (const char c : text.substr(0, kMaxChars)) {
    const auto byte = static_cast<unsigned char>(c);
    shown += (byte < 0x20 || byte >= 0x7F) ? '?' : c;
  }
  if (text.size() > kMaxChars) shown += "...";
  return shown;
}

void CheckRowHeader(const Header& header) {
  if (!util::IsHttpToken(header.first)) {
    throw std::invalid_argument("headers: name \"" + Printable(header.first) +
                                "\" is not an HTTP header name");
  }
  if (!internal::IsValidHeaderValue(header.second)) {
    // The value itself stays out of the message: it may be a credential.
    throw std::invalid_argument("headers[" + header.first + "]: value holds a control character");
  }
}

void CheckHeaderValue(std::string_view value, std::string_view field) {
  if (!internal::IsValidHeaderValue(value)) {
    throw std::invalid_argument(std::string(field) + ": holds a control character");
  }
}

// Idempotency-Key and, with secrets configured, the Standard Webhooks trio.
void AddIdentity(const EndpointOptions& options, std::string_view id, std::string_view body,
                 std::int64_t now_s, Headers& headers) {
  headers.emplace_back("Idempotency-Key", std::string(id));
  if (options.signing_secrets.empty()) return;
  headers.emplace_back("webhook-id", std::string(id));
  headers.emplace_back("webhook-timestamp", std::to_string(now_s));
  headers.emplace_back("webhook-signature",
                       WebhookSignature(options.signing_secrets, id, now_s, body));
}

void AddEndpointHeaders(const EndpointOptions& options, Headers& headers) {
  headers.insert(headers.end(), options.headers.begin(), options.headers.end());
}

}  // namespace

Headers BuildHeaders(const EndpointOptions& options, const Message& message, std::string_view body,
                     std::int64_t now_s) {
  for (const Header& header : message.headers) CheckRowHeader(header);
  CheckHeaderValue(message.message_id, "id");

  Headers headers;
  headers.reserve(2 + options.headers.size() + message.headers.size());
  const std::string_view content_type = internal::ContentTypeOf(options, message);
  headers.emplace_back("Content-Type", options.cloudevents == CloudEventsMode::kStructured
                                           ? "application/cloudevents+json"
                                           : std::string(content_type));
  AddIdentity(options, message.message_id, body, now_s, headers);
  if (options.cloudevents == CloudEventsMode::kBinary) {
    CheckHeaderValue(message.topic, "topic");
    headers.emplace_back("ce-specversion", "1.0");
    headers.emplace_back("ce-id", std::string(message.message_id));
    headers.emplace_back("ce-source", options.ce_source);
    headers.emplace_back("ce-type", std::string(message.topic));
    headers.emplace_back("ce-time", util::FormatRfc3339(message.created_at_ms));
    if (const std::string schema = internal::DataSchemaOf(options, message); !schema.empty()) {
      CheckHeaderValue(schema, "dataschema");
      headers.emplace_back("ce-dataschema", schema);
    }
    // Distributed-tracing extension: the row's W3C trace context, also as
    // ce- attributes (the plain headers follow with the row's headers).
    for (const char* name : {"traceparent", "tracestate"}) {
      const std::string_view value = internal::RowHeader(message, name);
      if (!value.empty()) headers.emplace_back(std::string("ce-") + name, std::string(value));
    }
  }
  if (!message.schema_version.empty()) {
    CheckHeaderValue(message.schema_version, "schema_version");
    headers.emplace_back("Schema-Version", std::string(message.schema_version));
  }
  AddEndpointHeaders(options, headers);
  // Row headers come last and only fill gaps: whatever the transport or the
  // endpoint already set wins, and so does a row's first spelling of a name.
  for (const Header& header : message.headers) {
    if (IsReservedForRows(header.first) || Contains(headers, header.first)) continue;
    headers.push_back(header);
  }
  return headers;
}

namespace internal {

std::string DataSchemaOf(const EndpointOptions& options, const Message& message) {
  static constexpr std::string_view kPlaceholder = "{schema_version}";
  std::string schema = options.dataschema;
  const std::size_t at = schema.find(kPlaceholder);
  if (at == std::string::npos) return schema;
  if (message.schema_version.empty()) return {};
  schema.replace(at, kPlaceholder.size(), message.schema_version);
  return schema;
}

std::string_view RowHeader(const Message& message, std::string_view name) {
  for (const Header& header : message.headers) {
    if (EqualsIgnoreCase(header.first, name)) return header.second;
  }
  return {};
}

}  // namespace internal

Headers BuildBatchHeaders(const EndpointOptions& options, std::string_view batch_id,
                          std::string_view body, std::int64_t now_s) {
  Headers headers;
  headers.emplace_back("Content-Type", options.batch.format == BatchFormat::kNdjson
                                           ? "application/x-ndjson"
                                           : "application/cloudevents-batch+json");
  AddIdentity(options, batch_id, body, now_s, headers);
  AddEndpointHeaders(options, headers);
  return headers;
}

namespace internal {

bool IsReservedForEndpoint(std::string_view name) {
  // The endpoint's configuration may carry credentials; everything else a
  // row may not set, the configuration may not either.
  return IsReservedForRows(name) && !EqualsIgnoreCase(name, "Authorization") &&
         !EqualsIgnoreCase(name, "Proxy-Authorization");
}

}  // namespace internal

}  // namespace outbox::transport
