// outbox/transport.h: delivering outbox messages to a sink.
//
// A Sink sends one message (or one batch) and says exactly what happened as
// a Result; the agent turns that into state transitions, breaker decisions
// and metrics, the same way for every kind of sink. The URL's scheme picks
// the kind (MakeSink): an HTTP endpoint (docs/design.md "HTTP contract"), a NATS
// JetStream subject, an MQTT broker topic or an AMQP 0-9-1 exchange (RabbitMQ).
//
// Everything around the transfer is a pure function here (message id,
// headers, signatures, bodies, classification) so that tests and fuzzers can
// call it without a network.
//
// Errors: bad configuration or a misused call throws std::invalid_argument
// naming the field before any I/O. What the network or the receiver does is a
// value (Result). Only a broken environment (out of memory, libcurl failing
// to initialise) throws anything else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace outbox::transport {

// What option validation throws: what() is "FIELD: REASON", and the two
// parts are kept apart so that a config file parser can name its own key
// without reading the text.
class OptionError : public std::invalid_argument {
 public:
  OptionError(std::string field, std::string reason);
  const std::string& field() const { return field_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string field_;
  std::string reason_;
};

// One HTTP header: name and value. Names compare case-insensitively.
using Header = std::pair<std::string, std::string>;
using Headers = std::vector<Header>;

// Resolves a secret reference: "env:NAME" is the environment variable NAME,
// "file:PATH" the file's contents without its trailing newline; any other
// string is returned as it is. Throws std::invalid_argument naming `field`
// (never the secret) if the variable is unset or the file unreadable.
std::string ResolveSecret(std::string_view value, std::string_view field);

// The message id of docs/design.md: lowercase hex SHA-256 over a length-prefixed
// encoding of (database_id, topic, key). Identical on every retry, unique
// across devices (each database has its own identity). It is the
// Idempotency-Key, ce-id and webhook-id of the message.
std::string MessageId(std::string_view database_id, std::string_view topic, std::string_view key);

// "urn:edge-outbox:<hostname>", the default CloudEvents source.
std::string DefaultCloudEventsSource();

enum class CloudEventsMode {
  kNone,        // plain POST of the payload
  kBinary,      // payload as body, attributes in ce-* headers
  kStructured,  // application/cloudevents+json envelope around the payload
};

enum class BatchFormat {
  kNdjson,       // application/x-ndjson, one JSON object per message
  kCloudEvents,  // application/cloudevents-batch+json, one event per message
};

// How an HTTP request body travels.
enum class Compression {
  kNone,  // as it is
  kGzip,  // Content-Encoding: gzip (RFC 9110 section 8.4.1)
};

struct TlsOptions {
  // PEM file of the CA certificates to trust; "" = the system's store.
  std::string ca_file;
  // PEM client certificate for mutual TLS; "" = none. May also hold the key.
  std::string client_cert_file;
  // PEM private key of client_cert_file; "" = inside client_cert_file.
  std::string client_key_file;
  // Skips verification of the server's certificate and host name. Anyone on
  // the path can then read and change the traffic: for tests only.
  bool insecure_skip_verify = false;
};

// What a NATS JetStream sink needs beyond the URL. Credential values are
// already resolved (see ResolveSecret); at most one way of authenticating.
struct NatsOptions {
  std::string user;       // with password: user/password authentication
  std::string password;
  std::string token;      // token authentication
  // NKey authentication: the public key ("U...") and its seed ("SU...").
  std::string nkey;
  std::string nkey_seed;
  // Decentralised authentication: the contents of a .creds file (user JWT
  // and NKey seed).
  std::string credentials;
};

// What an MQTT sink needs beyond the URL. The password is already resolved.
struct MqttOptions {
  std::string username;
  std::string password;
  // MQTT client identifier; "" = one generated per sink. Two connections
  // with the same identifier make the broker drop the older one.
  std::string client_id;
  // 5 (recommended) or 4 (MQTT 3.1.1: no reason codes, no user properties).
  int protocol_version = 5;
  // Keep-alive interval, s (PINGREQ when the link is idle).
  int keepalive_s = 30;
};

// What an AMQP 0-9-1 (RabbitMQ) sink needs beyond the URL. The password is
// already resolved. The target is either an exchange with a routing key or
// the default exchange with a queue name: exactly one of `exchange` and
// `queue` is set.
struct AmqpOptions {
  // SASL PLAIN credentials; "" = RabbitMQ's "guest"/"guest", which the
  // broker accepts from loopback only.
  std::string user;
  std::string password;
  // The exchange to publish to (it must exist; the sink declares nothing).
  std::string exchange;
  // With `exchange`: the routing key, with {topic}, {key} and {id}
  // placeholders filled in per message (at most 255 bytes after that).
  std::string routing_key = "{topic}";
  // Instead of `exchange`: the default exchange, which routes to the queue
  // of this name.
  std::string queue;
  // AMQP heartbeat interval, s; 0 = none. A broker silent for two intervals
  // counts as gone and the connection is made again.
  int heartbeat_s = 30;
};

struct BatchOptions {
  // Messages per request; 1 = no batching (one POST per message).
  std::size_t max_messages = 1;
  // Sum of the members' payload bytes per request (encoding overhead such as
  // ids and base64 comes on top). A single larger message still goes alone.
  std::size_t max_bytes = 1 << 20;
  BatchFormat format = BatchFormat::kNdjson;
};

// Everything about one endpoint (one topic's route). Checked by Validate()
// (HTTP) or ValidateSink() (any kind).
struct EndpointOptions {
  // Where messages go; the scheme picks the sink (SinkKindOf):
  //   http://host[:port]/path, https://...   POST to an HTTP endpoint
  //   nats://host[:port]/subject, tls://...  publish into NATS JetStream
  //   mqtt://host[:port]/topic, mqtts://...  publish to an MQTT broker; the
  //                                          topic may hold {topic}, {key}
  //                                          and {id} placeholders
  //   amqp://host[:port]/vhost, amqps://...  publish to an AMQP 0-9-1 broker
  //                                          (RabbitMQ); the target is in
  //                                          `amqp`; no path = vhost "/",
  //                                          %2F in it is a '/'
  // Credentials do not belong in it: put them in `headers` (HTTP, e.g.
  // Authorization from "env:NAME"), `nats`, `mqtt` or `amqp`.
  std::string url;
  // Limit for connecting (TCP and TLS handshake), ms.
  std::int64_t connect_timeout_ms = 5000;
  // Limit for a whole request, connecting included, ms.
  std::int64_t timeout_ms = 5000;
  // Extra headers sent with every request, values already resolved (see
  // ResolveSecret). Authorization is allowed; names the transport sets itself
  // (Idempotency-Key, Content-Type, Content-Length, Content-Encoding, ce-*,
  // webhook-*, framing headers) are not.
  Headers headers;
  // Content-Type when the row's headers do not give one.
  std::string content_type = "application/json";
  CloudEventsMode cloudevents = CloudEventsMode::kNone;
  // CloudEvents "source" attribute (a URI reference).
  std::string ce_source = DefaultCloudEventsSource();
  // Standard Webhooks secrets, resolved, each "whsec_<base64 of 24..64
  // bytes>". Empty = no signature; several = one signature each (rotation).
  std::vector<std::string> signing_secrets;
  BatchOptions batch;
  // HTTP only. kGzip sends request bodies (single messages and batches) of
  // at least compress_min_bytes gzip-compressed, with Content-Encoding: gzip.
  // Webhook signatures stay over the uncompressed body. A 415 answer to a
  // compressed body is an endpoint failure with configuration_failure (the
  // receiver refused the encoding, not the message).
  Compression compression = Compression::kNone;
  // Smallest body compressed, bytes; below it gzip's header and a cold
  // dictionary cost more than they save.
  std::size_t compress_min_bytes = 1024;
  NatsOptions nats;  // nats:// and tls:// only
  MqttOptions mqtt;  // mqtt:// and mqtts:// only
  AmqpOptions amqp;  // amqp:// and amqps:// only
  // Longest Retry-After honoured, ms; longer requests are cut to this.
  std::int64_t max_retry_after_ms = 3'600'000;
  // Bytes of a failed response's body kept in Result::error.
  std::size_t max_error_body_bytes = 1024;
  // CloudEvents dataschema, a URI template: "{schema_version}" is replaced
  // by the message's schema version; a template with the placeholder is left
  // out for a message without one. "" = no dataschema.
  std::string dataschema;
  // Bytes of a 2xx response's body handed back in Result::response_body (for
  // completion hooks that store a receiver-assigned id). 0 = none kept.
  std::size_t response_body_bytes = 0;
  TlsOptions tls;
};

// Throws std::invalid_argument naming the first bad field (e.g.
// "url: scheme must be http or https", "signing_secrets[1]: ...").
void Validate(const EndpointOptions& options);

// One outbox row as the transport needs it. Views only: the caller keeps the
// data alive during the call.
struct Message {
  std::string_view message_id = {};  // MessageId() of the row
  std::string_view topic = {};    // also the CloudEvents type
  std::string_view key = {};      // the row's key (MQTT {key} placeholder)
  std::string_view payload = {};  // the body (bytes)
  // The row's own headers (see ParseRowHeaders); may be empty.
  std::span<const Header> headers = {};
  std::int64_t created_at_ms = 0;  // ms since the Unix epoch; ce-time
  // The payload's schema version ("" = none): the Schema-Version header and
  // CloudEvents dataschema.
  std::string_view schema_version = {};
};

// Parses a row's `headers` column (a JSON object of string values; "" means
// none). Throws std::invalid_argument naming "headers" otherwise.
Headers ParseRowHeaders(std::string_view headers_json);

// The request headers for one message, in sending order. `body` is what will
// be sent, before any compression (for the signature); `now_s` is the
// attempt's time in seconds since the epoch (webhook-timestamp). The row's
// Content-Type wins over the endpoint's; other row headers are added unless
// they name a reserved header (Idempotency-Key, Authorization,
// Content-Length, Content-Encoding, ce-*, webhook-*, framing headers) or one
// the endpoint sets: those are dropped, so a row can never override them.
// Throws std::invalid_argument naming a row header whose name is not an HTTP
// token or whose value holds a control character.
Headers BuildHeaders(const EndpointOptions& options, const Message& message, std::string_view body,
                     std::int64_t now_s);

// The request headers for a batch request with id `batch_id` (BatchId()).
// Row headers do not apply to a batch.
Headers BuildBatchHeaders(const EndpointOptions& options, std::string_view batch_id,
                          std::string_view body, std::int64_t now_s);

// The JSON builders below write compact, valid JSON: a payload that is JSON
// is re-written without whitespace (numbers digit for digit), anything else
// goes base64. They throw std::invalid_argument naming the field when an id,
// topic or content type is not valid UTF-8.

// The request body for one message: the payload, or the CloudEvents JSON
// envelope in structured mode.
std::string BuildBody(const EndpointOptions& options, const Message& message);

// One CloudEvents JSON event (structured mode and batch members). The payload
// is embedded as "data" when it is JSON with a JSON content type, otherwise
// as "data_base64".
std::string BuildCloudEvent(const EndpointOptions& options, const Message& message);

// NDJSON batch body: per message one line {"id","topic","time", and
// "payload" (the JSON value) or "payload_base64" (when it is not JSON)}.
std::string BuildNdjsonBatch(std::span<const Message> messages);

// CloudEvents batch body: a JSON array of BuildCloudEvent() events.
std::string BuildCloudEventsBatch(const EndpointOptions& options,
                                  std::span<const Message> messages);

// Idempotency key of a batch: hex SHA-256 over its members' ids in order, so
// the same batch retried carries the same key.
std::string BatchId(std::span<const Message> messages);

// The Standard Webhooks signature header value: "v1,<base64 HMAC-SHA256>"
// of "id.timestamp.body" per secret, space-separated. Throws
// std::invalid_argument naming "signing_secrets[i]" for a malformed secret.
std::string WebhookSignature(std::span<const std::string> secrets, std::string_view id,
                             std::int64_t timestamp_s, std::string_view body);

// The receiving side of Standard Webhooks: what checking a request's
// webhook-id, webhook-timestamp and webhook-signature headers found.
enum class SignatureCheck {
  kValid,          // a v1 signature matches one of the secrets, in time
  kMissing,        // a header is absent or empty
  kBadTimestamp,   // webhook-timestamp is not an integer number of seconds
  kTooOld,         // timestamp more than the tolerance before now (replay)
  kTooNew,         // timestamp more than the tolerance after now
  kMismatch,       // no signature in the header matches any secret
};

// "valid", "missing", "bad_timestamp", "too_old", "too_new", "mismatch".
std::string_view SignatureCheckName(SignatureCheck check);

// Verifies a received request: `signature_header` is the space-separated list
// of "v1,<base64>" of webhook-signature (other versions are ignored), `body`
// the raw request body, `now_s` the receiver's time in seconds since the
// epoch. The timestamp must lie within `tolerance_s` of now either way
// (Standard Webhooks suggests 5 minutes; it bounds replays). Signatures are
// compared in constant time. Several secrets accept a request signed with
// any of them (rotation). Throws std::invalid_argument naming
// "signing_secrets" (none given) or "signing_secrets[i]" (malformed) or
// "tolerance_s" (negative); what the request holds is never an exception.
SignatureCheck VerifyWebhookSignature(std::span<const std::string> secrets,
                                      std::string_view id, std::string_view timestamp,
                                      std::string_view body, std::string_view signature_header,
                                      std::int64_t now_s, std::int64_t tolerance_s = 300);

enum class Outcome {
  kDelivered,        // 2xx
  kEndpointFailure,  // not the message's fault: retry, count for the breaker
  kMessageFailure,   // the receiver refused this message: permanent
};

// "delivered", "endpoint_failure", "message_failure" (for logs and metrics).
std::string_view OutcomeName(Outcome outcome);

struct Result {
  Outcome outcome = Outcome::kEndpointFailure;
  // Final HTTP status; 0 when no response arrived.
  int http_status = 0;
  // 410 Gone: the endpoint is retired (outcome is kMessageFailure).
  bool endpoint_gone = false;
  // An endpoint failure that only a change of configuration fixes (HTTP 401,
  // 403, 404, 407; a NATS authorization violation; MQTT "not authorized"):
  // the breaker opens at once instead of after a run of failures.
  bool configuration_failure = false;
  // Delay the endpoint asked for (Retry-After), ms, capped; endpoint failures
  // only.
  std::optional<std::int64_t> retry_after_ms;
  // Why it failed, for last_error: libcurl's text, "aborted", or "HTTP 503:
  // <body excerpt>". Never holds configured header values or secrets.
  std::string error;
  // The start of a 2xx response's body, at most response_body_bytes (HTTP
  // only; other sinks leave it empty).
  std::string response_body;
  // Body bytes sent on the wire (after compression; the request size for
  // metrics).
  std::size_t request_bytes = 0;
  // Wall time of the attempt, microseconds.
  std::int64_t duration_us = 0;
};

// The one classification of docs/design.md "Outcomes". `curl_code` is libcurl's
// result (0 = a response arrived), `http_status` its status, `retry_after`
// the Retry-After header ("" if none), `now_ms` the current time (for an
// HTTP-date). Sets outcome, http_status, endpoint_gone, retry_after_ms
// (capped at max_retry_after_ms) and error (without a body excerpt).
Result Classify(int curl_code, long http_status, std::string_view retry_after, std::int64_t now_ms,
                std::int64_t max_retry_after_ms);

// The brokers' answers, classified like HTTP statuses (pure, for tests).
//
// An MQTT 5 PUBACK reason code: below 0x80 delivered; 0x87 not authorized an
// endpoint failure with configuration_failure; 0x90 topic name invalid, 0x95
// packet too large, 0x99 payload format invalid message failures; anything
// else (0x97 quota exceeded, 0x83 implementation specific, 0x80 unspecified)
// an endpoint failure.
Result ClassifyMqttReasonCode(int reason_code);

// A JetStream API error answering a publish (`code` as in its "err_code",
// e.g. 10054 message too large): the server's resources or availability
// (10002, 10005, 10008, 10009, 10023, 10028, 10047, 10053, 10077) are endpoint
// failures, JetStream missing for the account or the stream gone (10039,
// 10076, 10059) endpoint failures with configuration_failure; everything else
// is about this one message: a message failure. `text` goes into the error.
Result ClassifyJetStreamError(int code, std::string_view text);

// Retry-After as ms from `now_ms`: delta-seconds or an HTTP-date (a past
// date gives 0). nullopt if the value is neither.
std::optional<std::int64_t> ParseRetryAfter(std::string_view value, std::int64_t now_ms);

// The kinds of sink, picked by the URL's scheme.
enum class SinkKind {
  kHttp,  // http, https
  kNats,  // nats, tls (NATS JetStream)
  kMqtt,  // mqtt, mqtts
  kAmqp,  // amqp, amqps (AMQP 0-9-1, RabbitMQ)
};

// "http", "nats", "mqtt", "amqp" (for logs and metric labels).
std::string_view SinkKindName(SinkKind kind);

// The kind the URL's scheme names. Throws std::invalid_argument
// "url: scheme must be one of http, https, nats, tls, mqtt, mqtts, amqp,
// amqps" otherwise.
SinkKind SinkKindOf(std::string_view url);

// Validate() for any kind of sink: the URL as its kind reads it, the options
// that kind uses, and none of another kind's credentials. Throws
// std::invalid_argument naming the first bad field.
void ValidateSink(const EndpointOptions& options);

// Where one topic's messages go.
//
// Thread-safe: the topic's workers call Push/PushBatch at once; AbortAll and
// ResetAbort may be called from any thread. The destructor must not run while
// a call is in flight. No call throws for what the network or the server does.
class Sink {
 public:
  virtual ~Sink() = default;

  virtual SinkKind kind() const = 0;

  // Sends one message. A message the sink cannot encode (a malformed row
  // header, an MQTT topic its key makes invalid) gives kMessageFailure
  // without any I/O.
  virtual Result Push(const Message& message) = 0;

  // Sends 1..batch.max_messages messages; the Result applies to all of them.
  // HTTP sends one request (see Endpoint::PushBatch); the brokers publish the
  // messages in order and stop at the first failure, whose Result it is (the
  // ones before it are then sent again later, and the broker's deduplication
  // or the consumer drops them). Throws std::invalid_argument if the batch is
  // empty or has too many messages.
  virtual Result PushBatch(std::span<const Message> messages) = 0;

  // Ends waits in flight as soon as the sink can (HTTP transfers, MQTT and
  // AMQP acknowledgements at once, a NATS publish within timeout_ms) with
  // kEndpointFailure "aborted", and fails later calls the same way without
  // I/O until ResetAbort(). For the agent's stop deadline.
  virtual void AbortAll() = 0;
  virtual void ResetAbort() = 0;
};

// The sink for options.url's scheme, validated (ValidateSink). Brokers are
// connected lazily: construction never waits on the network.
std::unique_ptr<Sink> MakeSink(EndpointOptions options);

// An HTTP endpoint with a pool of kept-alive connections.
//
// Thread-safe: several workers may call Push/PushBatch at once; each call
// takes a connection of its own from the pool (a worker calling again gets a
// kept-alive one back), so the pool grows to the number of concurrent
// callers. AbortAll/ResetAbort may be called from any thread. The destructor
// must not run while a call is in flight.
class Endpoint final : public Sink {
 public:
  // Validates `options` (throws std::invalid_argument naming the field).
  explicit Endpoint(EndpointOptions options);
  ~Endpoint() override;
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // POSTs one message. A row the builders above refuse (a malformed row
  // header, a topic that is not UTF-8 in a JSON body) gives kMessageFailure
  // with their error, without any I/O.
  Result Push(const Message& message) override;

  // POSTs 1..batch.max_messages messages as one request in the configured
  // batch format; the Result applies to all of them. A kMessageFailure (other
  // than endpoint_gone) means the receiver refused the batch: split it and
  // retry smaller batches before marking any message dead. Throws
  // std::invalid_argument if the batch is empty, has too many messages or
  // (with more than one) exceeds batch.max_bytes.
  Result PushBatch(std::span<const Message> messages) override;

  // Ends every transfer in flight at once (they return kEndpointFailure with
  // error "aborted") and makes later calls fail the same way without I/O
  // until ResetAbort(). For the agent's stop deadline.
  void AbortAll() override;
  void ResetAbort() override;

  SinkKind kind() const override { return SinkKind::kHttp; }
  const EndpointOptions& options() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace outbox::transport
