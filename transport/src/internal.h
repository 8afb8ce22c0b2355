// Helpers shared by the transport's sources; not part of the public API.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "outbox/transport.h"

namespace outbox::transport::internal {

// libcurl's global initialisation, done once per process. It is never undone:
// curl_global_cleanup at exit would race with other static destructors.
void EnsureCurlInitialized();

// The HMAC key of a "whsec_<base64>" secret. Throws std::invalid_argument
// naming `field` when the form or the decoded length (24..64) is wrong.
std::string DecodeWebhookSecret(std::string_view secret, std::string_view field);

// The payload re-written as compact JSON (no newline, numbers kept
// verbatim), or nullopt when it is not one valid UTF-8 JSON document.
std::optional<std::string> MinifyJson(std::string_view payload);
// True when `payload` is one valid UTF-8 JSON document that MinifyJson
// would give back byte for byte (compact, no escape written another way,
// nesting under 64), so that it can be used as it is; one pass, no
// allocation. False says nothing: MinifyJson decides then.
bool IsMinimalJson(std::string_view payload);

bool EqualsIgnoreCase(std::string_view a, std::string_view b);
bool StartsWithIgnoreCase(std::string_view text, std::string_view prefix);

// Names the endpoint's configured headers may not use (the row's reserved
// names less the credentials). Content-Type has its own option.
bool IsReservedForEndpoint(std::string_view name);

// Any byte under 0x20, or DEL.
bool HasControlCharacter(std::string_view text);

// No control characters except horizontal tab.
bool IsValidHeaderValue(std::string_view value);

// Content-Type of a message: its row's, else the endpoint's.
std::string_view ContentTypeOf(const EndpointOptions& options, const Message& message);
// The message's CloudEvents dataschema; "" = none.
std::string DataSchemaOf(const EndpointOptions& options, const Message& message);
// The value of the row header `name` (any case); "" if absent. For the W3C
// trace context (traceparent, tracestate), which CloudEvents carries as
// extension attributes too.
std::string_view RowHeader(const Message& message, std::string_view name);
// application/json, text/json or any "+json" media type.
bool IsJsonContentType(std::string_view content_type);

// Every check of Validate() but the URL's (shared by all kinds of sink).
void ValidateCommon(const EndpointOptions& options);

// A broker URL: scheme://host[:port]/path. No user info, query or fragment
// (broker_url.cc, read with libcurl's URL API).
struct BrokerUrl {
  SinkKind kind = SinkKind::kNats;
  bool tls = false;      // tls://, mqtts:// or amqps://
  std::string host;      // without IPv6 brackets
  int port = 0;          // the scheme's default when the URL has none
  std::string path;      // after the first '/': the subject, topic or vhost
};

// Throws std::invalid_argument naming "url" for anything malformed, saying
// what is wrong.
BrokerUrl ParseBrokerUrl(std::string_view url);

// An amqp:// URL's path as the virtual host: percent-decoded, "" = "/".
// Throws std::invalid_argument naming "url" when it is malformed.
std::string AmqpVirtualHost(std::string_view path);

// A result for what went wrong before or outside a response.
Result EndpointFailure(std::string error, bool configuration = false);
Result MessageFailure(std::string error);

// A broker sink's PushBatch: `push` each message in order, stopping at the
// first failure (that result is the batch's). Throws std::invalid_argument
// for an empty batch or one above `max_messages`.
Result PushInOrder(std::span<const Message> messages, std::size_t max_messages,
                   const std::function<Result(const Message&)>& push);

// `data` gzip-compressed (RFC 1952, zlib's default level). Throws
// std::bad_alloc when zlib runs out of memory.
std::string Gzip(std::string_view data);

// What the broker sinks share: Push times one Publish; PushBatch publishes
// in order and stops at the first failure (PushInOrder). Thread-safety and
// ownership as Sink's.
class BrokerSink : public Sink {
 public:
  explicit BrokerSink(std::size_t max_batch_messages) : max_batch_messages_(max_batch_messages) {}
  Result Push(const Message& message) final;
  Result PushBatch(std::span<const Message> messages) final;

 protected:
  // One message to the broker and what came of it, without duration_us;
  // never throws for what the network or the server does.
  virtual Result Publish(const Message& message) = 0;

 private:
  const std::size_t max_batch_messages_;
};

// The sinks for brokers (nats_sink.cc, mqtt_sink.cc, amqp_sink.cc); options
// validated.
std::unique_ptr<Sink> MakeNatsSink(EndpointOptions options);
std::unique_ptr<Sink> MakeMqttSink(EndpointOptions options);
std::unique_ptr<Sink> MakeAmqpSink(EndpointOptions options);

// A template's {topic}, {key} and {id} placeholders filled in from `message`
// (MQTT topics, AMQP routing keys); other text is kept as it is.
std::string ExpandPlaceholders(std::string_view pattern, const Message& message);

}  // namespace outbox::transport::internal
