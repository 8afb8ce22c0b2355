// ParseConfig: the sink options of a topic (compression, rate limits,
// priority), and their errors, each one line naming the key.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>

#include "outbox/agent.h"

namespace outbox::agent {
namespace {

std::string ErrorOf(const std::string& json) {
  try {
    ParseConfig(json);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

std::string Topic(const std::string& url, const std::string& members) {
  return R"({"topics": {"a": {"url": ")" + url + R"(", )" + members + "}}}";
}

TEST(ParseConfigSinks, CompressionDefaultsToNoneAndReadsGzip) {
  const Config plain = ParseConfig(R"({"topics": {"a": {"url": "http://h/"}}})");
  EXPECT_EQ(plain.options.topics.at("a").endpoint.compression, transport::Compression::kNone);
  EXPECT_EQ(plain.options.topics.at("a").endpoint.compress_min_bytes, 1024u);
  const Config gzip = ParseConfig(
      Topic("https://h/", R"("compression": "gzip", "compress_min_bytes": 0)"));
  EXPECT_TRUE(gzip.warnings.empty());
  EXPECT_EQ(gzip.options.topics.at("a").endpoint.compression, transport::Compression::kGzip);
  EXPECT_EQ(gzip.options.topics.at("a").endpoint.compress_min_bytes, 0u);
}

TEST(ParseConfigSinks, BadCompressionNamesTheKey) {
  EXPECT_EQ(ErrorOf(Topic("http://h/", R"("compression": "br")")),
            R"(topics."a".compression: expected one of "none", "gzip", got "br")");
  EXPECT_EQ(ErrorOf(Topic("http://h/", R"("compress_min_bytes": -1)")),
            R"(topics."a".compress_min_bytes: expected an integer from 0 to 67108864, got -1)");
  EXPECT_EQ(ErrorOf(Topic("nats://h/orders", R"("compression": "gzip")")),
            R"(topics."a".compression: only for http and https URLs)");
}

TEST(ParseConfigSinks, PriorityDefaultsToZeroAndIsBounded) {
  EXPECT_EQ(ParseConfig(Topic("http://h/", R"("workers": 1)")).options.topics.at("a").priority, 0);
  EXPECT_EQ(ParseConfig(Topic("http://h/", R"("priority": -7)")).options.topics.at("a").priority,
            -7);
  EXPECT_EQ(ErrorOf(Topic("http://h/", R"("priority": 1001)")),
            R"(topics."a".priority: expected an integer from -1000 to 1000, got 1001)");
}

TEST(ParseConfigSinks, RateLimitIsOffByDefaultAndReadsBothRates) {
  EXPECT_EQ(ParseConfig(Topic("http://h/", R"("workers": 1)"))
                .options.topics.at("a")
                .rate_limit.messages_per_s,
            0);
  const Config config = ParseConfig(
      Topic("mqtt://h/t", R"("rate_limit": {"messages_per_s": 20, "bytes_per_s": 4096})"));
  EXPECT_EQ(config.options.topics.at("a").rate_limit.messages_per_s, 20);
  EXPECT_EQ(config.options.topics.at("a").rate_limit.bytes_per_s, 4096);
  EXPECT_EQ(ErrorOf(Topic("http://h/", R"("rate_limit": {"bytes_per_s": -1})")),
            R"(topics."a".rate_limit.bytes_per_s: expected 0 or a positive integer, got -1)");
}

// What --check-config says about each kind of sink: one line naming the key.
TEST(ParseConfigSinks, EachSinksUrlAndOptionsAreCheckedByKey) {
  const std::pair<std::string, std::string> cases[] = {
      {Topic("http://user:pw@h/", R"("workers": 1)"),
       R"(topics."a".url: must not carry credentials; send them as a header (e.g. )"
       R"(Authorization from "env:NAME"))"},
      {Topic("nats://h:4222/orders.>", R"("workers": 1)"),
       R"(topics."a".url: subject must not hold a wildcard)"},
      {Topic("nats://h:4222/orders", R"("tls": {"insecure_skip_verify": true})"),
       R"(topics."a".tls: needs a tls:// URL)"},
      {Topic("nats://h:4222/orders", R"("mqtt": {"client_id": "x"})"),
       R"(topics."a".mqtt: only for mqtt:// and mqtts:// URLs)"},
      {Topic("mqtt://h:1883/orders/#", R"("workers": 1)"),
       R"(topics."a".url: )"},
      {Topic("mqtt://h:99999/orders", R"("workers": 1)"), R"(topics."a".url: )"},
      {Topic("mqtt://h/orders", R"("mqtt": {"keepalive_s": 1})"),
       R"(topics."a".mqtt.keepalive_s: expected an integer from 5 to 65535, got 1)"},
      {Topic("mqtts://h/orders", R"("headers": {"Authorization": "env:HOME"})"),
       R"(topics."a".headers."Authorization": Authorization is HTTP's; a broker's credentials )"
       R"(go under nats, mqtt or amqp)"},
      {Topic("amqp://h/", R"("workers": 1)"),
       R"(topics."a".amqp: give amqp.exchange (with amqp.routing_key) or amqp.queue)"},
      {Topic("amqp://h/", R"("amqp": {"exchange": "e", "queue": "q"})"),
       R"(topics."a".amqp.queue: is for the default exchange)"},
      {Topic("amqp://h/", R"("amqp": {"queue": "q", "routing_key": "{key}"})"),
       R"(topics."a".amqp.routing_key: only with amqp.exchange)"},
      {Topic("amqp://h/", R"("amqp": {"exchange": "e", "routing_key": "{name}"})"),
       R"(topics."a".amqp.routing_key: unknown placeholder {name})"},
      {Topic("amqp://h/a/b", R"("amqp": {"queue": "q"})"),
       R"(topics."a".url: virtual host holds a '/': write it as %2F)"},
      {Topic("amqp://h/%zz", R"("amqp": {"queue": "q"})"),
       R"(topics."a".url: virtual host has a % not followed by two hex digits)"},
      {Topic("amqp://u:p@h/", R"("amqp": {"queue": "q"})"),
       R"(topics."a".url: must not carry credentials)"},
      {Topic("amqp://h/", R"("amqp": {"queue": "q"}, "tls": {"ca_file": "/etc/hostname"})"),
       R"(topics."a".tls: needs an amqps:// URL)"},
      {Topic("amqp://h/", R"("amqp": {"queue": "q", "password": "env:HOME"})"),
       R"(topics."a".amqp.password: needs amqp.user)"},
      {Topic("amqp://h/", R"("amqp": {"queue": "q", "heartbeat_s": -1})"),
       R"(topics."a".amqp.heartbeat_s: expected an integer from 0 to 65535, got -1)"},
      {Topic("mqtt://h/t", R"("amqp": {"queue": "q"})"),
       R"(topics."a".amqp: only for amqp:// and amqps:// URLs)"},
  };
  for (const auto& [json, error] : cases) {
    const std::string got = ErrorOf(json);
    EXPECT_TRUE(got.starts_with(error)) << json << "\n  got: " << got;
    EXPECT_EQ(got.find('\n'), std::string::npos) << got;
  }
}

TEST(ParseConfigSinks, AmqpReadsTheTargetAndResolvesThePassword) {
  ::setenv("OUTBOX_TEST_AMQP_PASSWORD", "rabb1t-pw", 1);
  const Config config = ParseConfig(Topic(
      "amqps://broker:5671/prod",
      R"("amqp": {"user": "outbox", "password": "env:OUTBOX_TEST_AMQP_PASSWORD",)"
      R"( "exchange": "orders", "routing_key": "{topic}.{key}", "heartbeat_s": 10})"));
  ::unsetenv("OUTBOX_TEST_AMQP_PASSWORD");
  EXPECT_TRUE(config.warnings.empty());
  const transport::AmqpOptions& amqp = config.options.topics.at("a").endpoint.amqp;
  EXPECT_EQ(amqp.user, "outbox");
  EXPECT_EQ(amqp.password, "rabb1t-pw");
  EXPECT_EQ(amqp.exchange, "orders");
  EXPECT_EQ(amqp.routing_key, "{topic}.{key}");
  EXPECT_EQ(amqp.heartbeat_s, 10);
  const std::string json = EffectiveConfigJson(config);
  EXPECT_EQ(json.find("rabb1t-pw"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("password": "<redacted>")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("routing_key": "{topic}.{key}")"), std::string::npos) << json;
}

// Broker identities may come from the environment or a file like the
// secrets beside them (docs/sinks-nats.md, docs/sinks-mqtt.md); written
// inline they are taken as they are, without the inline-secret warning.
TEST(ParseConfigSinks, BrokerIdentitiesMayBeSecretReferences) {
  ::setenv("OUTBOX_TEST_BROKER_USER", "svc-orders", 1);
  const Config nats = ParseConfig(Topic(
      "nats://h:4222/orders",
      R"("nats": {"user": "env:OUTBOX_TEST_BROKER_USER", "password": "env:OUTBOX_TEST_BROKER_USER"})"));
  EXPECT_EQ(nats.options.topics.at("a").endpoint.nats.user, "svc-orders");
  const Config mqtt = ParseConfig(Topic(
      "mqtt://h/orders",
      R"("mqtt": {"username": "env:OUTBOX_TEST_BROKER_USER", "password": "env:OUTBOX_TEST_BROKER_USER"})"));
  EXPECT_EQ(mqtt.options.topics.at("a").endpoint.mqtt.username, "svc-orders");
  const Config amqp = ParseConfig(Topic(
      "amqp://h/",
      R"("amqp": {"queue": "q", "user": "env:OUTBOX_TEST_BROKER_USER",)"
      R"( "password": "env:OUTBOX_TEST_BROKER_USER"})"));
  EXPECT_EQ(amqp.options.topics.at("a").endpoint.amqp.user, "svc-orders");
  const Config inline_user = ParseConfig(Topic(
      "nats://h:4222/orders", R"("nats": {"user": "svc", "password": "env:OUTBOX_TEST_BROKER_USER"})"));
  EXPECT_EQ(inline_user.options.topics.at("a").endpoint.nats.user, "svc");
  // The user inline is no secret; the password over plaintext nats:// warns once.
  ASSERT_EQ(inline_user.warnings.size(), 1u);
  EXPECT_NE(inline_user.warnings[0].find("go over nats://, unencrypted"), std::string::npos);
  EXPECT_EQ(ErrorOf(Topic("nats://h:4222/orders", R"("nats": {"nkey": "env:OUTBOX_TEST_UNSET_NKEY"})")),
            R"(topics."a".nats.nkey: environment variable OUTBOX_TEST_UNSET_NKEY is not set)");
}

// Sizes past 2^32 where the API holds them: std::size_t fields are 32 bits
// on armhf, and a value that does not fit is refused naming the key, never
// truncated; the 64-bit fields keep it whole everywhere.
TEST(ParseConfigSinks, SizesPast4GiBAreKeptOrRefusedNeverTruncated) {
  const std::string batch = R"("batch": {"max_messages": 10, "max_bytes": 5000000000})";
  if constexpr (sizeof(std::size_t) == 4) {
    EXPECT_EQ(ErrorOf(Topic("http://h/", batch)),
              R"(topics."a".batch.max_bytes: expected at most 4294967295)");
  } else {
    EXPECT_EQ(ParseConfig(Topic("http://h/", batch)).options.topics.at("a").endpoint.batch.max_bytes,
              5'000'000'000u);
  }
  EXPECT_EQ(ParseConfig(Topic("http://h/", R"("queue_bytes": 4294967296)"))
                .options.topics.at("a")
                .queue_bytes,
            4'294'967'296);
}

}  // namespace
}  // namespace outbox::agent
