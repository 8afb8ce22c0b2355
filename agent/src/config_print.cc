// `outboxd --check-config --print`: the effective configuration, defaults
// filled in, in the config file's own keys, with every secret redacted.
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "outbox/agent.h"
#include "route_table.h"

namespace outbox::agent {
namespace {

constexpr std::string_view kRedacted = "<redacted>";

using Writer = rapidjson::PrettyWriter<rapidjson::StringBuffer>;

void Key(Writer& w, std::string_view key) {
  w.Key(key.data(), static_cast<rapidjson::SizeType>(key.size()));
}
void String(Writer& w, std::string_view key, std::string_view value) {
  Key(w, key);
  w.String(value.data(), static_cast<rapidjson::SizeType>(value.size()));
}
void Int(Writer& w, std::string_view key, std::int64_t value) {
  Key(w, key);
  w.Int64(value);
}
void Bool(Writer& w, std::string_view key, bool value) {
  Key(w, key);
  w.Bool(value);
}
// A secret is shown only as present or absent.
void Secret(Writer& w, std::string_view key, const std::string& value) {
  if (!value.empty()) String(w, key, kRedacted);
}

// "scheme://user:password@host/..." loses the password; the query string may
// carry a token (?access_token=...), so it goes too.
std::string RedactUrl(std::string url) {
  if (const std::size_t query = url.find('?'); query != std::string::npos) {
    url.replace(query + 1, std::string::npos, kRedacted);
  }
  const std::size_t scheme = url.find("://");
  const std::size_t authority = scheme == std::string::npos ? 0 : scheme + 3;
  const std::size_t end = url.find_first_of("/?#", authority);
  const std::size_t at = url.rfind('@', end == std::string::npos ? url.size() : end);
  if (at != std::string::npos && at >= authority) {
    const std::size_t colon = url.find(':', authority);
    if (colon != std::string::npos && colon < at) url.replace(colon + 1, at - colon - 1, kRedacted);
  }
  return url;
}

std::string_view SynchronousName(store::Synchronous synchronous) {
  switch (synchronous) {
    case store::Synchronous::kOff:
      return "off";
    case store::Synchronous::kFull:
      return "full";
    case store::Synchronous::kNormal:
      break;
  }
  return "normal";
}

std::string_view CloudEventsName(transport::CloudEventsMode mode) {
  switch (mode) {
    case transport::CloudEventsMode::kBinary:
      return "binary";
    case transport::CloudEventsMode::kStructured:
      return "structured";
    case transport::CloudEventsMode::kNone:
      break;
  }
  return "none";
}

// `url` as it may be shown (TopicOptions::url_is_secret: scheme://host:port).
void WriteEndpoint(Writer& w, const transport::EndpointOptions& e, const std::string& url) {
  String(w, "url", url);
  Int(w, "timeout_ms", e.timeout_ms);
  Int(w, "connect_timeout_ms", e.connect_timeout_ms);
  String(w, "content_type", e.content_type);
  String(w, "cloudevents", CloudEventsName(e.cloudevents));
  String(w, "ce_source", e.ce_source);
  String(w, "dataschema", e.dataschema);
  Int(w, "max_retry_after_ms", e.max_retry_after_ms);
  String(w, "compression", e.compression == transport::Compression::kGzip ? "gzip" : "none");
  Int(w, "compress_min_bytes", static_cast<std::int64_t>(e.compress_min_bytes));
  // Any header may carry a credential resolved from env: or file:.
  Key(w, "headers");
  w.StartObject();
  for (const auto& [name, value] : e.headers) String(w, name, kRedacted);
  w.EndObject();
  if (!e.signing_secrets.empty()) {
    Key(w, "signing_secret");
    w.StartArray();
    for (std::size_t i = 0; i < e.signing_secrets.size(); ++i) w.String(kRedacted.data());
    w.EndArray();
  }
  Key(w, "batch");
  w.StartObject();
  Int(w, "max_messages", static_cast<std::int64_t>(e.batch.max_messages));
  Int(w, "max_bytes", static_cast<std::int64_t>(e.batch.max_bytes));
  String(w, "format", e.batch.format == transport::BatchFormat::kNdjson ? "ndjson" : "cloudevents");
  w.EndObject();
  Key(w, "tls");
  w.StartObject();
  String(w, "ca_file", e.tls.ca_file);
  String(w, "client_cert", e.tls.client_cert_file);
  String(w, "client_key", e.tls.client_key_file);
  Bool(w, "insecure_skip_verify", e.tls.insecure_skip_verify);
  w.EndObject();
  const transport::SinkKind kind = transport::SinkKindOf(e.url);
  if (kind == transport::SinkKind::kNats) {
    Key(w, "nats");
    w.StartObject();
    String(w, "user", e.nats.user);
    Secret(w, "password", e.nats.password);
    Secret(w, "token", e.nats.token);
    String(w, "nkey", e.nats.nkey);
    Secret(w, "nkey_seed", e.nats.nkey_seed);
    Secret(w, "credentials", e.nats.credentials);
    w.EndObject();
  } else if (kind == transport::SinkKind::kMqtt) {
    Key(w, "mqtt");
    w.StartObject();
    String(w, "username", e.mqtt.username);
    Secret(w, "password", e.mqtt.password);
    String(w, "client_id", e.mqtt.client_id);
    Int(w, "protocol_version", e.mqtt.protocol_version);
    Int(w, "keepalive_s", e.mqtt.keepalive_s);
    w.EndObject();
  } else if (kind == transport::SinkKind::kAmqp) {
    Key(w, "amqp");
    w.StartObject();
    String(w, "user", e.amqp.user);
    Secret(w, "password", e.amqp.password);
    String(w, "exchange", e.amqp.exchange);
    if (!e.amqp.exchange.empty()) String(w, "routing_key", e.amqp.routing_key);
    String(w, "queue", e.amqp.queue);
    Int(w, "heartbeat_s", e.amqp.heartbeat_s);
    w.EndObject();
  }
}

// The topic keys that are not the endpoint's: routing by schema version,
// scheduling, hooks, ordering and pacing. Absent keys stay absent.
void WriteTopicExtras(Writer& w, const TopicOptions& topic) {
  if (!topic.url_by_schema_version.empty()) {
    Key(w, "url_by_schema_version");
    w.StartObject();
    for (const auto& [version, url] : topic.url_by_schema_version) {
      String(w, version, RedactUrl(url));
    }
    w.EndObject();
  }
  Int(w, "priority", topic.priority);
  Int(w, "ttl_ms", topic.ttl_ms);
  // Hook SQL is code, not a secret; a credential in it would be a bug.
  if (!topic.hooks.on_delivered_sql.empty()) {
    String(w, "on_delivered", topic.hooks.on_delivered_sql);
  }
  if (!topic.hooks.on_dead_sql.empty()) String(w, "on_dead", topic.hooks.on_dead_sql);
  if (topic.ordering.by_key) {
    Key(w, "ordering");
    w.StartObject();
    String(w, "by", "key");
    String(w, "dead_head", topic.ordering.dead_head == store::DeadHead::kSkip ? "skip" : "block");
    w.EndObject();
  }
  if (topic.rate_limit.messages_per_s > 0 || topic.rate_limit.bytes_per_s > 0) {
    Key(w, "rate_limit");
    w.StartObject();
    // Read as whole numbers, so printed as such.
    Int(w, "messages_per_s", static_cast<std::int64_t>(topic.rate_limit.messages_per_s));
    Int(w, "bytes_per_s", static_cast<std::int64_t>(topic.rate_limit.bytes_per_s));
    w.EndObject();
  }
}

void WriteTopic(Writer& w, const TopicOptions& topic) {
  w.StartObject();
  WriteEndpoint(w, topic.endpoint,
                topic.url_is_secret ? EndpointLabel(topic) + "/" + std::string(kRedacted)
                                    : RedactUrl(topic.endpoint.url));
  Int(w, "workers", topic.workers);
  Int(w, "queue_capacity", topic.queue_capacity);
  Int(w, "queue_bytes", topic.queue_bytes);
  WriteTopicExtras(w, topic);
  Key(w, "retry");
  w.StartObject();
  String(w, "strategy", store::BackoffName(topic.retry.backoff));
  Int(w, "first_interval_ms", topic.retry.first_interval_ms);
  Int(w, "max_interval_ms", topic.retry.max_interval_ms);
  Int(w, "max_attempts", topic.retry.max_attempts);
  Key(w, "jitter");
  w.Double(topic.retry.jitter);
  Int(w, "max_age_ms", topic.retry.max_age_ms);
  w.EndObject();
  Key(w, "breaker");
  w.StartObject();
  Int(w, "failure_threshold", topic.breaker.failure_threshold);
  Int(w, "open_ms", topic.breaker.open_ms);
  Int(w, "max_open_ms", topic.breaker.max_open_ms);
  w.EndObject();
  w.EndObject();
}

}  // namespace

std::string EffectiveConfigJson(const Config& config) {
  const Options& o = config.options;
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.SetIndent(' ', 2);
  w.StartObject();
  Int(w, "sweep_interval_ms", o.sweep_interval_ms);
  Int(w, "lease_timeout_ms", o.lease_timeout_ms);
  Int(w, "claim_batch", o.claim_batch);
  Int(w, "crash_budget", o.crash_budget);
  Int(w, "watch_poll_ms", o.watch_poll_ms);
  String(w, "synchronous", SynchronousName(o.synchronous));
  Key(w, "retention");
  w.StartObject();
  Int(w, "delivered_ms", o.retention.delivered_ms);
  Int(w, "interval_ms", o.retention.interval_ms);
  String(w, "archive_path", o.retention.archive_path);
  Int(w, "archive_max_bytes", o.retention.archive_max_bytes);
  Int(w, "archive_keep", o.retention.archive_keep);
  w.EndObject();
  if (o.limits) {
    Key(w, "limits");
    w.StartObject();
    Int(w, "max_payload_bytes", o.limits->max_payload_bytes);
    Int(w, "max_pending", o.limits->max_pending);
    Int(w, "max_db_bytes", o.limits->max_db_bytes);
    w.EndObject();
  }
  Key(w, "metrics");
  w.StartObject();
  String(w, "listen", config.metrics_listen);
  Int(w, "max_topics", o.metrics_max_topics);
  w.EndObject();
  if (!config.admin.listen.empty()) {
    Key(w, "admin");
    w.StartObject();
    String(w, "listen", config.admin.listen);
    Key(w, "tokens");
    w.StartArray();
    for (const AdminToken& token : config.admin.tokens) {
      w.StartObject();
      String(w, "name", token.name);
      String(w, "token", "<redacted>");
      String(w, "role", token.role == AdminToken::Role::kOperate ? "operate" : "read");
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  Key(w, "log");
  w.StartObject();
  String(w, "level", config.log_level);
  String(w, "format", config.log_format);
  w.EndObject();
  Key(w, "topics");
  w.StartObject();
  for (const auto& [name, topic] : o.topics) {
    Key(w, name);
    WriteTopic(w, topic);
  }
  w.EndObject();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize()) + "\n";
}

}  // namespace outbox::agent
