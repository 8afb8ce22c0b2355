// outboxd's JSON configuration (docs/configuration.md)
// onto Options. Every error is one line that starts with the key path, e.g.
// `topics."order.created".retry.max_attempts: expected a positive integer`;
// the value of a secret never appears in an error or a warning.
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "option_limits.h"
#include "outbox/agent.h"
#include "util/http_token.h"
#include "util/listen_address.h"

namespace outbox::agent {
namespace {

using rapidjson::Value;

// An admin token shorter than this is refused: 128 bits of hex.
constexpr std::size_t kMinAdminTokenBytes = 32;

// --- key paths --------------------------------------------------------------

// Topic and header names are always quoted (they may hold dots); fixed keys
// only when they would be ambiguous bare.
std::string Quote(std::string_view key) {
  std::string out = "\"";
  for (char c : key) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + '"';
}

bool IsPlainKey(std::string_view key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

std::string Child(const std::string& parent, std::string_view key, bool quoted = false) {
  std::string segment = quoted || !IsPlainKey(key) ? Quote(key) : std::string(key);
  return parent.empty() ? segment : parent + "." + segment;
}

[[noreturn]] void Fail(const std::string& path, std::string_view why) {
  throw std::invalid_argument((path.empty() ? std::string("config") : path) + ": " +
                              std::string(why));
}

// One line of Config::adjustments: `path: VALUE (default DEFAULT WHY)`.
std::string Adjusted(const std::string& path, std::int64_t from, std::int64_t to,
                     std::string_view why) {
  return path + ": " + std::to_string(to) + " (default " + std::to_string(from) + " " +
         std::string(why) + ")";
}

// What the file holds instead, for "expected X, got Y". Strings are not
// quoted back: a secret in the wrong place must not end up in a log.
std::string Describe(const Value& value) {
  if (value.IsNull()) return "null";
  if (value.IsBool()) return value.GetBool() ? "true" : "false";
  if (value.IsObject()) return "an object";
  if (value.IsArray()) return "an array";
  if (value.IsString()) return "a string";
  if (value.IsInt64()) return std::to_string(value.GetInt64());
  if (value.IsUint64()) return std::to_string(value.GetUint64());
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, value.GetDouble());
  return std::string(text, result.ptr);
}

// --- typed reads ------------------------------------------------------------

constexpr std::int64_t kNoMax = INT64_MAX;

struct IntRange {
  std::int64_t min = 0;
  std::int64_t max = kNoMax;
};
constexpr IntRange kPositive{1, kNoMax};
constexpr IntRange kNonNegative{0, kNoMax};
constexpr IntRange kPositiveInt{1, INT_MAX};
constexpr IntRange Limit(limits::Range range) { return {range.min, range.max}; }
// Millisecond options: bounded so that no sum or product on them overflows.
constexpr IntRange kPositiveMs = Limit(limits::kPositiveMs);
constexpr IntRange kNonNegativeMs = Limit(limits::kNonNegativeMs);

std::string Expectation(const IntRange& range) {
  // A small upper bound is part of what the user must know; INT_MAX and
  // INT64_MAX are only mentioned when a value exceeds them.
  if (range.max < INT_MAX) {
    return "expected an integer from " + std::to_string(range.min) + " to " +
           std::to_string(range.max);
  }
  if (range.min == 1) return "expected a positive integer";
  if (range.min == 0) return "expected 0 or a positive integer";
  return "expected an integer of at least " + std::to_string(range.min);
}

// One JSON object of the config. Reads members by key and remembers which
// were asked for, so that WarnUnknown can report the rest.
class Section {
 public:
  // `user_keys`: the keys are the user's names (topics, headers) and are
  // always quoted in key paths.
  Section(const Value& value, std::string path, std::vector<std::string>& warnings,
          bool user_keys = false)
      : value_(value), path_(std::move(path)), warnings_(warnings), user_keys_(user_keys) {
    if (!value.IsObject()) Fail(path_, "expected an object, got " + Describe(value));
    // RapidJSON keeps duplicate keys; the second would silently lose.
    std::set<std::string_view> names;
    for (const auto& member : value.GetObject()) {
      const std::string_view name(member.name.GetString(), member.name.GetStringLength());
      if (!names.insert(name).second) Fail(PathOf(name), "key given twice");
    }
    seen_.assign(value.MemberCount(), false);
  }

  const std::string& path() const { return path_; }
  std::string PathOf(std::string_view key) const { return Child(path_, key, user_keys_); }

  // The member, or null if absent.
  const Value* Find(std::string_view key) {
    const auto it = value_.FindMember(
        Value(rapidjson::StringRef(key.data(), static_cast<rapidjson::SizeType>(key.size()))));
    if (it == value_.MemberEnd()) return nullptr;
    seen_[static_cast<std::size_t>(it - value_.MemberBegin())] = true;
    return &it->value;
  }

  // Each Read leaves `out` unchanged when the key is absent.
  bool Read(std::string_view key, std::int64_t& out, const IntRange& range) {
    const Value* value = Find(key);
    if (value == nullptr) return false;
    if (!value->IsInt64()) Fail(PathOf(key), Expectation(range) + ", got " + Describe(*value));
    const std::int64_t number = value->GetInt64();
    if (number < range.min || (range.max < INT_MAX && number > range.max)) {
      Fail(PathOf(key), Expectation(range) + ", got " + Describe(*value));
    }
    if (number > range.max) Fail(PathOf(key), "expected at most " + std::to_string(range.max));
    out = number;
    return true;
  }

  template <typename Int>
  bool ReadInt(std::string_view key, Int& out, IntRange range) {
    if (std::cmp_less(std::numeric_limits<Int>::max(), range.max)) {
      range.max = static_cast<std::int64_t>(std::numeric_limits<Int>::max());
    }
    std::int64_t number = 0;
    if (!Read(key, number, range)) return false;
    out = static_cast<Int>(number);
    return true;
  }

  bool Read(std::string_view key, std::string& out) {
    const Value* value = Find(key);
    if (value == nullptr) return false;
    if (!value->IsString()) Fail(PathOf(key), "expected a string, got " + Describe(*value));
    out.assign(value->GetString(), value->GetStringLength());
    return true;
  }

  bool Read(std::string_view key, bool& out) {
    const Value* value = Find(key);
    if (value == nullptr) return false;
    if (!value->IsBool()) Fail(PathOf(key), "expected true or false, got " + Describe(*value));
    out = value->GetBool();
    return true;
  }

  bool ReadFraction(std::string_view key, double& out) {
    const Value* value = Find(key);
    if (value == nullptr) return false;
    if (!value->IsNumber() || value->GetDouble() < 0.0 || value->GetDouble() > 1.0) {
      Fail(PathOf(key), "expected a number from 0 to 1, got " + Describe(*value));
    }
    out = value->GetDouble();
    return true;
  }

  // A string from a fixed set of names, each mapped to its value.
  template <typename T>
  bool ReadChoice(std::string_view key, std::initializer_list<std::pair<const char*, T>> choices,
                  T& out) {
    std::string name;
    if (!Read(key, name)) return false;
    std::string expected;
    for (const auto& [choice, choice_value] : choices) {
      if (name == choice) {
        out = choice_value;
        return true;
      }
      if (!expected.empty()) expected += ", ";
      expected += Quote(choice);
    }
    // These names are never secrets, so the bad one is shown.
    Fail(PathOf(key), "expected one of " + expected + ", got " + Quote(name));
  }

  // A nested object with fixed keys, if present.
  std::optional<Section> Object(std::string_view key, bool user_keys = false) {
    const Value* value = Find(key);
    if (value == nullptr) return std::nullopt;
    return Section(*value, PathOf(key), warnings_, user_keys);
  }

  // Every member, as (name, value): for objects keyed by the user's names.
  template <typename Visit>
  void ForEach(Visit visit) {
    std::fill(seen_.begin(), seen_.end(), true);
    for (const auto& member : value_.GetObject()) {
      visit(std::string_view(member.name.GetString(), member.name.GetStringLength()), member.value);
    }
  }

  void WarnUnknown() const {
    std::size_t index = 0;
    for (const auto& member : value_.GetObject()) {
      if (!seen_[index++]) {
        warnings_.push_back(
            PathOf(std::string_view(member.name.GetString(), member.name.GetStringLength())) +
            ": unknown key, ignored");
      }
    }
  }

  std::vector<std::string>& warnings() { return warnings_; }

 private:
  const Value& value_;
  std::string path_;
  std::vector<std::string>& warnings_;
  bool user_keys_;
  std::vector<bool> seen_;
};

// --- secrets ----------------------------------------------------------------

bool IsSecretReference(std::string_view value) {
  return value.starts_with("env:") || value.starts_with("file:");
}

bool IsCredentialHeader(std::string_view name) {
  const auto equals = [&](std::string_view other) {
    return std::equal(name.begin(), name.end(), other.begin(), other.end(), [](char a, char b) {
      return std::tolower(static_cast<unsigned char>(a)) ==
             std::tolower(static_cast<unsigned char>(b));
    });
  };
  return equals("Authorization") || equals("Proxy-Authorization");
}

std::string InlineSecretWarning(const std::string& path) {
  return path + R"(: secret written inline; put it in "env:NAME" or "file:PATH" instead)";
}

// --- sections ---------------------------------------------------------------

// A pair of values that must keep an order (floor <= ceiling): only values
// the user wrote can be refused; a default on either side moves to fit the
// other, and the move is reported.
void Reconcile(Section& section, std::string_view floor_key, std::int64_t& floor,
               bool floor_written, std::string_view ceiling_key, std::int64_t& ceiling,
               bool ceiling_written, std::vector<std::string>& adjustments) {
  if (ceiling >= floor) return;
  if (floor_written && ceiling_written) {
    Fail(section.PathOf(ceiling_key),
         "must be at least " + std::string(floor_key) + " (" + std::to_string(floor) + ")");
  }
  if (floor_written) {
    adjustments.push_back(Adjusted(section.PathOf(ceiling_key), ceiling, floor,
                                   "raised to " + std::string(floor_key)));
    ceiling = floor;
  } else {
    adjustments.push_back(Adjusted(section.PathOf(floor_key), floor, ceiling,
                                   "lowered to " + std::string(ceiling_key)));
    floor = ceiling;
  }
}

void ReadRetry(Section& retry, store::RetryPolicy& policy, std::vector<std::string>& adjustments) {
  retry.ReadChoice<store::Backoff>(
      "strategy",
      {{"fixed", store::Backoff::kFixed}, {"exponential", store::Backoff::kExponential}},
      policy.backoff);
  const bool first = retry.Read("first_interval_ms", policy.first_interval_ms, kPositiveMs);
  const bool max = retry.Read("max_interval_ms", policy.max_interval_ms, kPositiveMs);
  retry.ReadInt("max_attempts", policy.max_attempts, kPositiveInt);
  retry.ReadFraction("jitter", policy.jitter);
  retry.Read("max_age_ms", policy.max_age_ms, kNonNegativeMs);
  retry.WarnUnknown();
  Reconcile(retry, "first_interval_ms", policy.first_interval_ms, first, "max_interval_ms",
            policy.max_interval_ms, max, adjustments);
}

// "ordering": {"by": "key", "dead_head": "block" | "skip"}; "by" is required,
// so that a later mode ("by": "topic") cannot be mistaken for this one.
void ReadOrdering(Section& section, store::TopicOrdering& ordering) {
  bool by_key = false;
  if (!section.ReadChoice<bool>("by", {{"key", true}}, by_key)) {
    Fail(section.PathOf("by"), R"(required key is missing (the only mode is "key"))");
  }
  ordering.by_key = by_key;
  section.ReadChoice<store::DeadHead>(
      "dead_head", {{"block", store::DeadHead::kBlock}, {"skip", store::DeadHead::kSkip}},
      ordering.dead_head);
  section.WarnUnknown();
}

void ReadBreaker(Section& section, BreakerOptions& breaker,
                 std::vector<std::string>& adjustments) {
  section.ReadInt("failure_threshold", breaker.failure_threshold, Limit(limits::kFailureThreshold));
  const bool open = section.Read("open_ms", breaker.open_ms, kPositiveMs);
  const bool max_open = section.Read("max_open_ms", breaker.max_open_ms, kPositiveMs);
  section.WarnUnknown();
  Reconcile(section, "open_ms", breaker.open_ms, open, "max_open_ms", breaker.max_open_ms,
            max_open, adjustments);
}

void ReadBatch(Section& section, transport::BatchOptions& batch) {
  section.ReadInt("max_messages", batch.max_messages, IntRange{1, 10'000});
  section.ReadInt("max_bytes", batch.max_bytes, kPositive);
  section.ReadChoice<transport::BatchFormat>(
      "format",
      {{"ndjson", transport::BatchFormat::kNdjson},
       {"cloudevents", transport::BatchFormat::kCloudEvents}},
      batch.format);
  section.WarnUnknown();
}

void ReadTls(Section& section, transport::TlsOptions& tls) {
  section.Read("ca_file", tls.ca_file);
  section.Read("client_cert", tls.client_cert_file);
  section.Read("client_key", tls.client_key_file);
  if (section.Read("insecure_skip_verify", tls.insecure_skip_verify) && tls.insecure_skip_verify) {
    section.warnings().push_back(section.PathOf("insecure_skip_verify") +
                                 ": server certificates are not checked; for tests only");
  }
  section.WarnUnknown();
}

void ReadRateLimit(Section& section, RateLimit& limit) {
  std::int64_t messages = 0;
  std::int64_t bytes = 0;
  if (section.Read("messages_per_s", messages, kNonNegative)) {
    limit.messages_per_s = static_cast<double>(messages);
  }
  if (section.Read("bytes_per_s", bytes, kNonNegative)) {
    limit.bytes_per_s = static_cast<double>(bytes);
  }
  section.WarnUnknown();
}

// A broker credential: a secret reference resolved here, or (with a warning)
// the value itself.
void ReadSecret(Section& section, std::string_view key, std::string& out) {
  if (!section.Read(key, out)) return;
  const std::string path = section.PathOf(key);
  if (IsSecretReference(out)) {
    out = transport::ResolveSecret(out, path);
  } else {
    section.warnings().push_back(InlineSecretWarning(path));
  }
}

// A broker identity (a user name, a public nkey): not a secret, so written
// inline without a warning, but a secret reference is resolved like one.
void ReadIdentity(Section& section, std::string_view key, std::string& out) {
  if (section.Read(key, out) && IsSecretReference(out)) {
    out = transport::ResolveSecret(out, section.PathOf(key));
  }
}

void ReadNats(Section& section, transport::NatsOptions& nats) {
  ReadIdentity(section, "user", nats.user);
  ReadSecret(section, "password", nats.password);
  ReadSecret(section, "token", nats.token);
  ReadIdentity(section, "nkey", nats.nkey);
  ReadSecret(section, "nkey_seed", nats.nkey_seed);
  ReadSecret(section, "credentials", nats.credentials);
  section.WarnUnknown();
}

void ReadMqtt(Section& section, transport::MqttOptions& mqtt) {
  ReadIdentity(section, "username", mqtt.username);
  ReadSecret(section, "password", mqtt.password);
  section.Read("client_id", mqtt.client_id);
  section.ReadInt("protocol_version", mqtt.protocol_version, IntRange{4, 5});
  section.ReadInt("keepalive_s", mqtt.keepalive_s, IntRange{5, 65535});
  section.WarnUnknown();
}

void ReadAmqp(Section& section, transport::AmqpOptions& amqp) {
  ReadIdentity(section, "user", amqp.user);
  ReadSecret(section, "password", amqp.password);
  section.Read("exchange", amqp.exchange);
  section.Read("routing_key", amqp.routing_key);
  section.Read("queue", amqp.queue);
  section.ReadInt("heartbeat_s", amqp.heartbeat_s, IntRange{0, 65535});
  section.WarnUnknown();
}

// Every "file:PATH" string of the document (only secret references start
// so), for the daemon to judge who may read those files. Iterative: the
// document's depth is the user's.
std::vector<std::string> SecretFiles(const Value& document) {
  std::vector<std::string> files;
  std::vector<const Value*> stack{&document};
  while (!stack.empty()) {
    const Value& value = *stack.back();
    stack.pop_back();
    if (value.IsString()) {
      const std::string_view text(value.GetString(), value.GetStringLength());
      if (text.starts_with("file:")) files.emplace_back(text.substr(5));
    } else if (value.IsObject()) {
      for (const auto& member : value.GetObject()) stack.push_back(&member.value);
    } else if (value.IsArray()) {
      for (const auto& item : value.GetArray()) stack.push_back(&item);
    }
  }
  return files;
}

// Header values may be secret references, resolved here. Returns the header
// names in order, for naming transport::Validate's errors.
std::vector<std::string> ReadHeaders(Section& section, transport::Headers& headers) {
  std::vector<std::string> names;
  section.ForEach([&](std::string_view name, const Value& value) {
    const std::string path = section.PathOf(name);
    if (!value.IsString()) Fail(path, "expected a string, got " + Describe(value));
    const std::string_view text(value.GetString(), value.GetStringLength());
    if (IsSecretReference(text)) {
      headers.emplace_back(name, transport::ResolveSecret(text, path));
    } else {
      if (IsCredentialHeader(name)) section.warnings().push_back(InlineSecretWarning(path));
      headers.emplace_back(name, text);
    }
    names.emplace_back(name);
  });
  return names;
}

// Signing secrets: one string or an array of them (rotation: the receiver
// accepts any one signature). Secrets belong outside the file, but an
// inline "whsec_..." still works (with a warning) so that a quick test does
// not need an environment variable.
void ReadSigningSecrets(Section& topic, std::vector<std::string>& secrets) {
  const Value* value = topic.Find("signing_secret");
  if (value == nullptr) return;
  const std::string path = topic.PathOf("signing_secret");
  const auto add = [&](const Value& item, const std::string& item_path) {
    if (!item.IsString() || item.GetStringLength() == 0) {
      Fail(item_path,
           R"(expected a secret such as "env:NAME" or "file:PATH", got )" + Describe(item));
    }
    const std::string_view text(item.GetString(), item.GetStringLength());
    if (IsSecretReference(text)) {
      secrets.push_back(transport::ResolveSecret(text, item_path));
    } else {
      topic.warnings().push_back(InlineSecretWarning(item_path));
      secrets.emplace_back(text);
    }
  };
  if (value->IsArray()) {
    if (value->Empty()) Fail(path, "expected at least one secret");
    for (rapidjson::SizeType i = 0; i < value->Size(); ++i) {
      add((*value)[i], path + "[" + std::to_string(i) + "]");
    }
  } else {
    add(*value, path);
  }
}

// transport's validation names EndpointOptions fields; errors must name the
// config's keys instead.
[[noreturn]] void FailEndpoint(const transport::OptionError& error, const std::string& topic_path,
                               const std::vector<std::string>& header_names,
                               bool secrets_as_array) {
  std::string field = error.field();
  std::string why = error.reason();
  std::size_t index = 0;
  const auto indexed = [&](std::string_view prefix) {
    if (!field.starts_with(prefix) || !field.ends_with("]")) return false;
    const char* first = field.data() + prefix.size();
    return std::from_chars(first, field.data() + field.size() - 1, index).ec == std::errc();
  };
  const std::pair<std::string_view, std::string_view> renames[] = {
      {"tls.client_cert_file", "tls.client_cert"}, {"tls.client_key_file", "tls.client_key"}};
  for (const auto& [from, to] : renames) {
    for (std::string* part : {&field, &why}) {
      if (const std::size_t at = part->find(from); at != std::string::npos) {
        part->replace(at, from.size(), to);
      }
    }
  }
  if (indexed("headers[") && index < header_names.size()) {
    field = Child(Child(topic_path, "headers"), header_names[index], /*quoted=*/true);
  } else if (indexed("signing_secrets[")) {
    field = Child(topic_path, "signing_secret");
    if (secrets_as_array) field += "[" + std::to_string(index) + "]";
  } else {
    field = topic_path + "." + field;
  }
  Fail(field, why);
}

// The same characters the insert trigger accepts in a row's schema_version.
bool IsSchemaVersion(std::string_view version) {
  return version.size() <= store::kMaxSchemaVersionBytes && util::IsHttpToken(version);
}

// The URLs themselves are checked with the endpoint (ValidateTopic).
void ReadUrlsByVersion(Section& section, std::map<std::string, std::string, std::less<>>& urls) {
  section.ForEach([&](std::string_view version, const Value& value) {
    const std::string path = section.PathOf(version);
    if (!IsSchemaVersion(version)) {
      Fail(path, "a schema version is 1 to 64 token characters (letters, digits, "
                 "!#$%&'*+-.^_`|~)");
    }
    if (!value.IsString()) Fail(path, "expected a URL string, got " + Describe(value));
    urls.emplace(version, std::string(value.GetString(), value.GetStringLength()));
  });
}

// A credential or signing secret for a URL without TLS crosses the network
// readable (and a signed body replayable): one warning per topic. Loopback
// hosts are exempt: the traffic never leaves the machine.
void WarnPlaintextCredentials(Section& topic, const transport::EndpointOptions& e) {
  const std::string& url = e.url;
  const std::size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return;
  const std::string scheme = url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "nats" && scheme != "mqtt") return;
  const std::size_t host_end = url.find_first_of("/?#", scheme_end + 3);
  std::string authority = url.substr(scheme_end + 3, host_end - scheme_end - 3);
  for (const char* loopback : {"127.0.0.1", "localhost", "[::1]"}) {
    if (authority == loopback || authority.starts_with(std::string(loopback) + ":")) return;
  }
  bool credential = !e.signing_secrets.empty() || !e.nats.password.empty() ||
                    !e.nats.token.empty() || !e.nats.nkey_seed.empty() ||
                    !e.nats.credentials.empty() || !e.mqtt.password.empty();
  for (const auto& [name, value] : e.headers) credential = credential || IsCredentialHeader(name);
  if (!credential) return;
  topic.warnings().push_back(topic.PathOf("url") + ": credentials or a signing secret go over " +
                             scheme + "://, unencrypted; use " +
                             (scheme == "http" ? "https://" : scheme == "nats" ? "tls://" : "mqtts://"));
}

// A topic as read, before its timeout is fitted to the lease.
struct ReadTopicResult {
  TopicOptions options;
  bool timeout_written = false;
  std::vector<std::string> header_names;
  bool secrets_as_array = false;
};

ReadTopicResult ReadTopic(Section& topic, std::vector<std::string>& adjustments) {
  ReadTopicResult read;
  TopicOptions& result = read.options;
  transport::EndpointOptions& endpoint = result.endpoint;
  if (!topic.Read("url", endpoint.url)) Fail(topic.PathOf("url"), "required key is missing");
  if (IsSecretReference(endpoint.url)) {
    // A webhook whose path is its credential: shown as scheme://host:port.
    endpoint.url = transport::ResolveSecret(endpoint.url, topic.PathOf("url"));
    result.url_is_secret = true;
  }
  topic.ReadInt("workers", result.workers, Limit(limits::kWorkers));
  topic.ReadInt("queue_capacity", result.queue_capacity, Limit(limits::kQueueCapacity));
  topic.ReadInt("queue_bytes", result.queue_bytes, Limit(limits::kQueueBytes));
  topic.ReadInt("priority", result.priority, Limit(limits::kPriority));
  read.timeout_written = topic.Read("timeout_ms", endpoint.timeout_ms, kPositiveMs);
  topic.Read("connect_timeout_ms", endpoint.connect_timeout_ms, kPositiveMs);
  topic.Read("content_type", endpoint.content_type);
  topic.ReadChoice<transport::CloudEventsMode>(
      "cloudevents",
      {{"none", transport::CloudEventsMode::kNone},
       {"binary", transport::CloudEventsMode::kBinary},
       {"structured", transport::CloudEventsMode::kStructured}},
      endpoint.cloudevents);
  topic.Read("ce_source", endpoint.ce_source);
  topic.Read("dataschema", endpoint.dataschema);
  topic.Read("max_retry_after_ms", endpoint.max_retry_after_ms, kNonNegativeMs);
  topic.ReadChoice<transport::Compression>(
      "compression",
      {{"none", transport::Compression::kNone}, {"gzip", transport::Compression::kGzip}},
      endpoint.compression);
  topic.ReadInt("compress_min_bytes", endpoint.compress_min_bytes,
                Limit(limits::kCompressMinBytes));
  if (auto headers = topic.Object("headers", /*user_keys=*/true)) {
    read.header_names = ReadHeaders(*headers, endpoint.headers);
  }
  if (auto urls = topic.Object("url_by_schema_version", /*user_keys=*/true)) {
    ReadUrlsByVersion(*urls, result.url_by_schema_version);
  }
  ReadSigningSecrets(topic, endpoint.signing_secrets);
  if (auto batch = topic.Object("batch")) ReadBatch(*batch, endpoint.batch);
  if (auto tls = topic.Object("tls")) ReadTls(*tls, endpoint.tls);
  if (auto nats = topic.Object("nats")) ReadNats(*nats, endpoint.nats);
  if (auto mqtt = topic.Object("mqtt")) ReadMqtt(*mqtt, endpoint.mqtt);
  if (auto amqp = topic.Object("amqp")) ReadAmqp(*amqp, endpoint.amqp);
  if (auto retry = topic.Object("retry")) ReadRetry(*retry, result.retry, adjustments);
  if (auto breaker = topic.Object("breaker")) ReadBreaker(*breaker, result.breaker, adjustments);
  topic.Read("ttl_ms", result.ttl_ms, kNonNegativeMs);
  // Checked against the database at start-up and by --check-config.
  for (const auto& [key, sql] : {std::pair{"on_delivered", &result.hooks.on_delivered_sql},
                                 std::pair{"on_dead", &result.hooks.on_dead_sql}}) {
    if (topic.Read(key, *sql) && sql->find_first_not_of(" \t\r\n;") == std::string::npos) {
      Fail(topic.PathOf(key), "expected one SQL statement, got an empty string");
    }
  }
  if (auto ordering = topic.Object("ordering")) ReadOrdering(*ordering, result.ordering);
  if (auto rate = topic.Object("rate_limit")) ReadRateLimit(*rate, result.rate_limit);
  topic.WarnUnknown();
  WarnPlaintextCredentials(topic, endpoint);
  const Value* secrets = topic.Find("signing_secret");
  read.secrets_as_array = secrets != nullptr && secrets->IsArray();
  return read;
}

// A request outliving its lease could be sent again by another agent while
// still in flight, so every timeout_ms stays below lease_timeout_ms. Only
// values the user wrote are refused: an unwritten lease grows to twice the
// longest written timeout, an unwritten timeout shrinks to half the lease.
void FitTimeoutsToLease(std::map<std::string, ReadTopicResult>& topics,
                        const std::string& topics_path, Options& options, bool lease_written,
                        std::vector<std::string>& adjustments) {
  if (!lease_written) {
    std::int64_t longest = 0;
    for (const auto& [name, topic] : topics) {
      if (topic.timeout_written) longest = std::max(longest, topic.options.endpoint.timeout_ms);
    }
    if (longest >= options.lease_timeout_ms && longest <= INT64_MAX / 2) {
      adjustments.push_back(Adjusted("lease_timeout_ms", options.lease_timeout_ms, longest * 2,
                                     "raised to twice the longest timeout_ms"));
      options.lease_timeout_ms = longest * 2;
    }
  }
  for (auto& [name, topic] : topics) {
    std::int64_t& timeout = topic.options.endpoint.timeout_ms;
    if (timeout < options.lease_timeout_ms) continue;
    const std::string path = Child(Child(topics_path, name, /*quoted=*/true), "timeout_ms");
    if (topic.timeout_written) {
      Fail(path, "must be less than lease_timeout_ms (" +
                     std::to_string(options.lease_timeout_ms) + ")");
    }
    const std::int64_t fitted = std::max<std::int64_t>(1, options.lease_timeout_ms / 2);
    adjustments.push_back(Adjusted(path, timeout, fitted, "lowered to half of lease_timeout_ms"));
    timeout = fitted;
  }
}

void ValidateTopic(const ReadTopicResult& topic, const std::string& path) {
  try {
    transport::ValidateSink(topic.options.endpoint);
  } catch (const transport::OptionError& error) {
    FailEndpoint(error, path, topic.header_names, topic.secrets_as_array);
  } catch (const std::invalid_argument& error) {
    Fail(path, error.what());  // not an option's field: said as it is
  }
  // Each version's URL is checked like `url`, with the topic's other options.
  const std::string map_path = Child(path, "url_by_schema_version");
  for (const auto& [version, url] : topic.options.url_by_schema_version) {
    const std::string key = Child(map_path, version, /*quoted=*/true);
    transport::EndpointOptions endpoint = topic.options.endpoint;
    endpoint.url = url;
    try {
      transport::ValidateSink(endpoint);
    } catch (const transport::OptionError& error) {
      Fail(error.field() == "url" ? key : Child(path, error.field()), error.reason());
    } catch (const std::invalid_argument& error) {
      std::string_view why = error.what();
      if (why.starts_with("url: ")) why.remove_prefix(5);
      Fail(key, std::string(why));
    }
    // Valid now, so SinkKindOf does not throw.
    if (transport::SinkKindOf(url) != transport::SinkKindOf(topic.options.endpoint.url)) {
      Fail(key, "must use the same kind of sink (scheme family) as url");
    }
  }
}

void ReadTopics(Section& root, Options& options, bool lease_written,
                std::vector<std::string>& adjustments) {
  const Value* value = root.Find("topics");
  if (value == nullptr) {
    Fail("topics", "required key is missing (give at least one topic with a url)");
  }
  Section topics(*value, "topics", root.warnings(), /*user_keys=*/true);
  if (value->MemberCount() == 0) Fail("topics", "expected at least one topic");
  std::map<std::string, ReadTopicResult> read_topics;
  topics.ForEach([&](std::string_view name, const Value& topic_value) {
    const std::string path = topics.PathOf(name);
    if (name.empty()) Fail(path, "a topic name must not be empty");
    Section topic(topic_value, path, root.warnings());
    ReadTopicResult read = ReadTopic(topic, adjustments);
    if (name == "*" && read.options.ordering.by_key) {
      Fail(Child(path, "ordering"), R"(not available on "*"; give the ordered topic its own entry)");
    }
    ValidateTopic(read, path);
    read_topics.emplace(std::string(name), std::move(read));
  });
  FitTimeoutsToLease(read_topics, topics.path(), options, lease_written, adjustments);
  for (auto& [name, topic] : read_topics) options.topics.emplace(name, std::move(topic.options));
}

void ReadRetention(Section& section, RetentionOptions& retention) {
  section.Read("delivered_ms", retention.delivered_ms, kNonNegativeMs);
  section.Read("interval_ms", retention.interval_ms, kPositiveMs);
  section.Read("archive_max_bytes", retention.archive_max_bytes, kPositive);
  section.ReadInt("archive_keep", retention.archive_keep, Limit(limits::kArchiveKeep));
  if (section.Read("archive_path", retention.archive_path) && !retention.archive_path.empty()) {
    // Checked now rather than at the first purge, hours after start.
    const std::filesystem::path directory =
        std::filesystem::absolute(retention.archive_path).parent_path();
    std::error_code error;
    if (!std::filesystem::is_directory(directory, error)) {
      Fail(section.PathOf("archive_path"), "directory " + directory.string() + " does not exist");
    }
  }
  section.WarnUnknown();
}

void ReadLimits(Section& section, store::Limits& limits) {
  section.Read("max_payload_bytes", limits.max_payload_bytes, kNonNegative);
  section.Read("max_pending", limits.max_pending, kNonNegative);
  section.Read("max_db_bytes", limits.max_db_bytes, kNonNegative);
  section.WarnUnknown();
}

// An admin token's secret: env: or file: only (never inline), a file that
// others cannot read or write, and long enough not to be guessed.
std::string ReadAdminSecret(Section& token) {
  std::string reference;
  const std::string path = token.PathOf("token");
  if (!token.Read("token", reference)) Fail(path, "required key is missing");
  if (!IsSecretReference(reference)) {
    Fail(path, R"(expected a secret reference "env:NAME" or "file:PATH"; tokens are never inline)");
  }
  if (reference.rfind("file:", 0) == 0) {
    struct stat info {};
    const std::string file = reference.substr(5);
    if (::stat(file.c_str(), &info) == 0 && (info.st_mode & (S_IROTH | S_IWOTH)) != 0) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
      Fail(path, file + " is mode " + mode + ": others may read or write it (chmod o-rw)");
    }
  }
  std::string secret = transport::ResolveSecret(reference, path);
  if (secret.size() < kMinAdminTokenBytes) {
    Fail(path, "the token is shorter than " + std::to_string(kMinAdminTokenBytes) +
                   " bytes (e.g. `openssl rand -hex 32`)");
  }
  return secret;
}

void ReadAdmin(Section& admin, AdminConfig& out) {
  out.listen = "127.0.0.1:9465";
  admin.Read("listen", out.listen);
  if (out.listen.empty() || (out.listen[0] != '/' && !util::ParseListenAddress(out.listen))) {
    Fail(admin.PathOf("listen"),
         R"(expected "host:port" such as "127.0.0.1:9465" or an absolute Unix socket path)");
  }
  const Value* tokens = admin.Find("tokens");
  const std::string tokens_path = admin.PathOf("tokens");
  if (tokens == nullptr || !tokens->IsArray() || tokens->Empty()) {
    Fail(tokens_path, "expected a list of at least one {name, token, role}");
  }
  std::set<std::string> names;
  for (rapidjson::SizeType i = 0; i < tokens->Size(); ++i) {
    Section token((*tokens)[i], tokens_path + "[" + std::to_string(i) + "]", admin.warnings());
    AdminToken read;
    if (!token.Read("name", read.name) || read.name.empty() || read.name.size() > 64 ||
        !std::all_of(read.name.begin(), read.name.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' ||
                 c == '.' || c == '@';
        })) {
      Fail(token.PathOf("name"), "expected 1 to 64 letters, digits or - _ . @");
    }
    if (!names.insert(read.name).second) Fail(token.PathOf("name"), "name given twice");
    read.secret = ReadAdminSecret(token);
    if (!token.ReadChoice<AdminToken::Role>(
            "role", {{"read", AdminToken::Role::kRead}, {"operate", AdminToken::Role::kOperate}},
            read.role)) {
      Fail(token.PathOf("role"), R"(required key is missing ("read" or "operate"))");
    }
    token.WarnUnknown();
    out.tokens.push_back(std::move(read));
  }
  admin.WarnUnknown();
}

std::string SyntaxError(std::string_view json, std::size_t offset, rapidjson::ParseErrorCode code) {
  offset = std::min(offset, json.size());
  const std::string_view before = json.substr(0, offset);
  const std::size_t line =
      1 + static_cast<std::size_t>(std::count(before.begin(), before.end(), '\n'));
  const std::size_t line_start = before.rfind('\n');
  const std::size_t column =
      offset - (line_start == std::string_view::npos ? 0 : line_start + 1) + 1;
  return "config: JSON syntax error at line " + std::to_string(line) + ", column " +
         std::to_string(column) + ": " + rapidjson::GetParseError_En(code);
}

}  // namespace

Config ParseConfig(std::string_view json) {
  rapidjson::Document document;
  document.Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseIterativeFlag>(
      json.data(), json.size());
  if (document.HasParseError()) {
    throw std::invalid_argument(
        SyntaxError(json, document.GetErrorOffset(), document.GetParseError()));
  }

  Config config;
  Options& options = config.options;
  Section root(document, "", config.warnings);
  root.Read("sweep_interval_ms", options.sweep_interval_ms, kPositiveMs);
  // Read before the topics: their timeouts are checked against it.
  const bool lease_written = root.Read("lease_timeout_ms", options.lease_timeout_ms, kPositiveMs);
  root.ReadInt("claim_batch", options.claim_batch, Limit(limits::kClaimBatch));
  root.ReadInt("crash_budget", options.crash_budget, Limit(limits::kCrashBudget));
  root.Read("watch_poll_ms", options.watch_poll_ms, Limit(limits::kWatchPollMs));
  root.ReadChoice<store::Synchronous>("synchronous",
                                      {{"off", store::Synchronous::kOff},
                                       {"normal", store::Synchronous::kNormal},
                                       {"full", store::Synchronous::kFull}},
                                      options.synchronous);
  if (auto retention = root.Object("retention")) ReadRetention(*retention, options.retention);
  // Without a "limits" section the limits stored in the database stay as
  // they are (another tool may have set them).
  if (auto limits = root.Object("limits")) ReadLimits(*limits, options.limits.emplace());
  if (auto metrics = root.Object("metrics")) {
    if (metrics->Read("listen", config.metrics_listen) && !config.metrics_listen.empty() &&
        !util::ParseListenAddress(config.metrics_listen)) {
      Fail(metrics->PathOf("listen"),
           R"(expected "host:port" such as "127.0.0.1:9464" or "[::1]:9464", or "" to disable)");
    }
    metrics->ReadInt("max_topics", options.metrics_max_topics, Limit(limits::kMetricsMaxTopics));
    metrics->WarnUnknown();
  }
  if (auto log = root.Object("log")) {
    log->ReadChoice<std::string>("level",
                                 {{"trace", "trace"},
                                  {"debug", "debug"},
                                  {"info", "info"},
                                  {"warn", "warn"},
                                  {"error", "error"}},
                                 config.log_level);
    log->ReadChoice<std::string>("format", {{"text", "text"}, {"json", "json"}}, config.log_format);
    log->WarnUnknown();
  }
  if (auto admin = root.Object("admin")) ReadAdmin(*admin, config.admin);
  ReadTopics(root, options, lease_written, config.adjustments);
  root.WarnUnknown();
  config.secret_files = SecretFiles(document);
  return config;
}

}  // namespace outbox::agent
