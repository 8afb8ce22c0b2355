// Sink kinds: which one a URL names, the checks each kind adds, the factory,
// and what the broker sinks share.
#include <chrono>
#include <stdexcept>
#include <string>

#include "internal.h"
#include "outbox/transport.h"
#include "util/utf8.h"

namespace outbox::transport {
namespace {

[[noreturn]] void Fail(std::string_view field, std::string_view why) {
  throw OptionError(std::string(field), std::string(why));
}

std::string_view SchemeOf(std::string_view url) {
  const std::size_t end = url.find("://");
  return end == std::string_view::npos ? std::string_view{} : url.substr(0, end);
}

using internal::HasControlCharacter;

// A NATS subject to publish to: dot-separated tokens, none empty, no
// whitespace, no wildcard (a wildcard is for subscribing).
void ValidateSubject(std::string_view subject) {
  if (subject.empty()) Fail("url", "names no subject (nats://host:port/subject)");
  if (HasControlCharacter(subject) || subject.find(' ') != std::string_view::npos) {
    Fail("url", "subject holds whitespace or a control character");
  }
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = subject.find('.', start);
    const std::string_view token = subject.substr(start, dot - start);
    if (token.empty()) Fail("url", "subject has an empty token (\"..\" or a dot at an end)");
    if (token == "*" || token == ">") Fail("url", "subject must not hold a wildcard");
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
}

// Only the known placeholders in a template of `field`.
void ValidatePlaceholders(std::string_view text, std::string_view field) {
  for (std::size_t open = text.find('{'); open != std::string_view::npos;
       open = text.find('{', open + 1)) {
    const std::size_t close = text.find('}', open);
    const std::string_view name =
        close == std::string_view::npos ? text.substr(open) : text.substr(open, close - open + 1);
    if (name != "{topic}" && name != "{key}" && name != "{id}") {
      Fail(field, "unknown placeholder " + std::string(name) + " (use {topic}, {key} or {id})");
    }
  }
}

// An MQTT topic template: no wildcard, and only the known placeholders.
void ValidateTopicTemplate(std::string_view topic) {
  if (topic.empty()) Fail("url", "names no topic (mqtt://host:port/topic)");
  if (topic.find_first_of("+#") != std::string_view::npos) {
    Fail("url", "topic must not hold a wildcard (+ or #)");
  }
  if (HasControlCharacter(topic)) Fail("url", "topic holds a control character");
  if (!util::IsValidUtf8(topic)) Fail("url", "topic is not valid UTF-8");
  ValidatePlaceholders(topic, "url");
}

bool IsUnresolved(std::string_view value) {
  return value.starts_with("env:") || value.starts_with("file:");
}

void ValidateCredential(std::string_view value, std::string_view field) {
  if (IsUnresolved(value)) {
    Fail(field, "is an unresolved secret reference (resolve it with ResolveSecret)");
  }
  if (HasControlCharacter(value) && !field.ends_with("credentials")) {
    Fail(field, "holds a control character");
  }
}

// An AMQP name (exchange, queue, routing key): a short string of AMQP 0-9-1,
// at most 255 bytes, UTF-8 without control characters.
void ValidateAmqpName(std::string_view name, std::string_view field) {
  if (name.size() > 255) Fail(field, "is longer than AMQP's 255 bytes");
  if (HasControlCharacter(name) || !util::IsValidUtf8(name)) {
    Fail(field, "must be UTF-8 without control characters");
  }
}

void ValidateAmqp(const AmqpOptions& amqp) {
  ValidateCredential(amqp.user, "amqp.user");
  ValidateCredential(amqp.password, "amqp.password");
  if (!amqp.password.empty() && amqp.user.empty()) Fail("amqp.password", "needs amqp.user");
  if (!amqp.user.empty() && amqp.password.empty()) Fail("amqp.user", "needs amqp.password");
  if (amqp.exchange.empty() && amqp.queue.empty()) {
    Fail("amqp", "give amqp.exchange (with amqp.routing_key) or amqp.queue (the default "
                 "exchange)");
  }
  if (!amqp.exchange.empty() && !amqp.queue.empty()) {
    Fail("amqp.queue", "is for the default exchange; with amqp.exchange give amqp.routing_key");
  }
  ValidateAmqpName(amqp.exchange, "amqp.exchange");
  ValidateAmqpName(amqp.queue, "amqp.queue");
  ValidateAmqpName(amqp.routing_key, "amqp.routing_key");
  ValidatePlaceholders(amqp.routing_key, "amqp.routing_key");
  if (!amqp.queue.empty() && amqp.routing_key != AmqpOptions{}.routing_key) {
    Fail("amqp.routing_key", "only with amqp.exchange (the default exchange routes by the "
                             "queue's name)");
  }
  if (amqp.exchange == "amq.default") {
    Fail("amqp.exchange", "for the default exchange give amqp.queue instead");
  }
  if (amqp.heartbeat_s < 0 || amqp.heartbeat_s > 65535) {
    Fail("amqp.heartbeat_s", "must be 0 (none) or 1..65535");
  }
}

void ValidateNats(const NatsOptions& nats) {
  ValidateCredential(nats.user, "nats.user");
  ValidateCredential(nats.password, "nats.password");
  ValidateCredential(nats.token, "nats.token");
  ValidateCredential(nats.nkey, "nats.nkey");
  ValidateCredential(nats.nkey_seed, "nats.nkey_seed");
  ValidateCredential(nats.credentials, "nats.credentials");
  int methods = 0;
  if (!nats.user.empty() || !nats.password.empty()) {
    ++methods;
    if (nats.user.empty()) Fail("nats.password", "needs nats.user");
    if (nats.password.empty()) Fail("nats.user", "needs nats.password");
  }
  if (!nats.token.empty()) ++methods;
  if (!nats.nkey.empty() || !nats.nkey_seed.empty()) {
    ++methods;
    if (!nats.nkey.starts_with('U')) Fail("nats.nkey", "must be a user public key (U...)");
    if (!nats.nkey_seed.starts_with("SU")) Fail("nats.nkey_seed", "must be a user seed (SU...)");
  }
  if (!nats.credentials.empty()) {
    ++methods;
    if (nats.credentials.find("BEGIN NATS USER JWT") == std::string::npos ||
        nats.credentials.find("BEGIN USER NKEY SEED") == std::string::npos) {
      Fail("nats.credentials", "is not a .creds file (user JWT and NKey seed)");
    }
  }
  if (methods > 1) {
    Fail("nats", "give one of user/password, token, nkey/nkey_seed or credentials");
  }
}

void ValidateMqtt(const MqttOptions& mqtt) {
  ValidateCredential(mqtt.username, "mqtt.username");
  ValidateCredential(mqtt.password, "mqtt.password");
  if (!mqtt.password.empty() && mqtt.username.empty()) {
    Fail("mqtt.password", "needs mqtt.username");
  }
  if (mqtt.client_id.size() > 65535 || HasControlCharacter(mqtt.client_id) ||
      !util::IsValidUtf8(mqtt.client_id)) {
    Fail("mqtt.client_id", "must be UTF-8 without control characters, at most 65535 bytes");
  }
  if (mqtt.protocol_version != 4 && mqtt.protocol_version != 5) {
    Fail("mqtt.protocol_version", "must be 5 (MQTT 5) or 4 (MQTT 3.1.1)");
  }
  // libmosquitto refuses keep-alives under 5 s; MQTT's field is 16 bits.
  if (mqtt.keepalive_s < 5 || mqtt.keepalive_s > 65535) {
    Fail("mqtt.keepalive_s", "must be 5..65535");
  }
}

bool IsEmpty(const NatsOptions& nats) {
  return nats.user.empty() && nats.password.empty() && nats.token.empty() && nats.nkey.empty() &&
         nats.nkey_seed.empty() && nats.credentials.empty();
}

bool IsDefault(const AmqpOptions& amqp) {
  const AmqpOptions defaults;
  return amqp.user.empty() && amqp.password.empty() && amqp.exchange.empty() &&
         amqp.queue.empty() && amqp.routing_key == defaults.routing_key &&
         amqp.heartbeat_s == defaults.heartbeat_s;
}

std::string_view TlsSchemeOf(SinkKind kind) {
  switch (kind) {
    case SinkKind::kNats:
      return "a tls://";
    case SinkKind::kMqtt:
      return "an mqtts://";
    default:
      return "an amqps://";
  }
}

bool IsDefault(const MqttOptions& mqtt) {
  const MqttOptions defaults;
  return mqtt.username.empty() && mqtt.password.empty() && mqtt.client_id.empty() &&
         mqtt.protocol_version == defaults.protocol_version &&
         mqtt.keepalive_s == defaults.keepalive_s;
}

void ValidateBroker(const EndpointOptions& options, const internal::BrokerUrl& url) {
  internal::ValidateCommon(options);
  for (std::size_t i = 0; i < options.headers.size(); ++i) {
    const std::string& name = options.headers[i].first;
    if (internal::EqualsIgnoreCase(name, "Authorization") ||
        internal::EqualsIgnoreCase(name, "Proxy-Authorization")) {
      Fail("headers[" + std::to_string(i) + "]",
           name + " is HTTP's; a broker's credentials go under nats, mqtt or amqp");
    }
  }
  // Brokers carry payloads in binary frames of their own: no Content-Encoding.
  if (options.compression != Compression::kNone) {
    Fail("compression", "only for http and https URLs");
  }
  const TlsOptions& tls = options.tls;
  if (!url.tls && (!tls.ca_file.empty() || !tls.client_cert_file.empty() ||
                   tls.insecure_skip_verify)) {
    Fail("tls", "needs " + std::string(TlsSchemeOf(url.kind)) + " URL");
  }
  if (url.kind != SinkKind::kNats && !IsEmpty(options.nats)) {
    Fail("nats", "only for nats:// and tls:// URLs");
  }
  if (url.kind != SinkKind::kMqtt && !IsDefault(options.mqtt)) {
    Fail("mqtt", "only for mqtt:// and mqtts:// URLs");
  }
  if (url.kind != SinkKind::kAmqp && !IsDefault(options.amqp)) {
    Fail("amqp", "only for amqp:// and amqps:// URLs");
  }
  if (url.kind == SinkKind::kNats) {
    ValidateSubject(url.path);
    ValidateNats(options.nats);
  } else if (url.kind == SinkKind::kMqtt) {
    ValidateTopicTemplate(url.path);
    ValidateMqtt(options.mqtt);
  } else {
    internal::AmqpVirtualHost(url.path);
    ValidateAmqp(options.amqp);
  }
}

}  // namespace

std::string_view SinkKindName(SinkKind kind) {
  switch (kind) {
    case SinkKind::kHttp:
      return "http";
    case SinkKind::kNats:
      return "nats";
    case SinkKind::kMqtt:
      return "mqtt";
    case SinkKind::kAmqp:
      return "amqp";
  }
  return "unknown";
}

SinkKind SinkKindOf(std::string_view url) {
  const std::string_view scheme = SchemeOf(url);
  if (scheme == "http" || scheme == "https") return SinkKind::kHttp;
  if (scheme == "nats" || scheme == "tls") return SinkKind::kNats;
  if (scheme == "mqtt" || scheme == "mqtts") return SinkKind::kMqtt;
  if (scheme == "amqp" || scheme == "amqps") return SinkKind::kAmqp;
  if (url.empty()) Fail("url", "is required");
  Fail("url", "scheme must be one of http, https, nats, tls, mqtt, mqtts, amqp, amqps");
}

void ValidateSink(const EndpointOptions& options) {
  const SinkKind kind = SinkKindOf(options.url);
  if (kind == SinkKind::kHttp) {
    Validate(options);
    if (!IsEmpty(options.nats)) Fail("nats", "only for nats:// and tls:// URLs");
    if (!IsDefault(options.mqtt)) Fail("mqtt", "only for mqtt:// and mqtts:// URLs");
    if (!IsDefault(options.amqp)) Fail("amqp", "only for amqp:// and amqps:// URLs");
    return;
  }
  ValidateBroker(options, internal::ParseBrokerUrl(options.url));
}

std::unique_ptr<Sink> MakeSink(EndpointOptions options) {
  ValidateSink(options);
  switch (SinkKindOf(options.url)) {
    case SinkKind::kHttp:
      return std::make_unique<Endpoint>(std::move(options));
    case SinkKind::kNats:
      return internal::MakeNatsSink(std::move(options));
    case SinkKind::kMqtt:
      return internal::MakeMqttSink(std::move(options));
    case SinkKind::kAmqp:
      return internal::MakeAmqpSink(std::move(options));
  }
  throw std::logic_error("MakeSink: unknown sink kind");
}

namespace internal {

bool HasControlCharacter(std::string_view text) {
  for (const char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) return true;
  }
  return false;
}

std::string ExpandPlaceholders(std::string_view pattern, const Message& message) {
  std::string text;
  while (!pattern.empty()) {
    const std::size_t open = pattern.find('{');
    text += pattern.substr(0, open);
    if (open == std::string_view::npos) break;
    pattern.remove_prefix(open);
    if (pattern.starts_with("{topic}")) {
      text += message.topic;
      pattern.remove_prefix(7);
    } else if (pattern.starts_with("{key}")) {
      text += message.key;
      pattern.remove_prefix(5);
    } else if (pattern.starts_with("{id}")) {
      text += message.message_id;
      pattern.remove_prefix(4);
    } else {
      text += '{';
      pattern.remove_prefix(1);
    }
  }
  return text;
}

Result PushInOrder(std::span<const Message> messages, std::size_t max_messages,
                   const std::function<Result(const Message&)>& push) {
  if (messages.empty()) throw std::invalid_argument("PushBatch: empty batch");
  if (messages.size() > max_messages) {
    throw std::invalid_argument("PushBatch: more than batch.max_messages messages");
  }
  Result total;
  total.outcome = Outcome::kDelivered;
  for (const Message& message : messages) {
    Result result = push(message);
    total.request_bytes += result.request_bytes;
    total.duration_us += result.duration_us;
    if (result.outcome != Outcome::kDelivered) {
      result.request_bytes = total.request_bytes;
      result.duration_us = total.duration_us;
      return result;
    }
  }
  return total;
}

Result BrokerSink::Push(const Message& message) {
  const auto start = std::chrono::steady_clock::now();
  Result result = Publish(message);
  result.duration_us = std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::steady_clock::now() - start)
                           .count();
  return result;
}

Result BrokerSink::PushBatch(std::span<const Message> messages) {
  return PushInOrder(messages, max_batch_messages_,
                     [this](const Message& message) { return Push(message); });
}

Result EndpointFailure(std::string error, bool configuration) {
  Result result;
  result.outcome = Outcome::kEndpointFailure;
  result.configuration_failure = configuration;
  result.error = std::move(error);
  return result;
}

Result MessageFailure(std::string error) {
  Result result;
  result.outcome = Outcome::kMessageFailure;
  result.error = std::move(error);
  return result;
}

}  // namespace internal

}  // namespace outbox::transport
