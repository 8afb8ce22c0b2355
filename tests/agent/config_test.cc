#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <ostream>
#include <stdexcept>
#include <string>

#include "common/temp_dir.h"
#include "outbox/agent.h"

namespace outbox::agent {
namespace {

// A valid Standard Webhooks secret: whsec_ + base64 of 24 bytes.
constexpr char kSecret[] = "whsec_MDEyMzQ1Njc4OWFiY2RlZmdoaWprbG1u";

// The message ParseConfig throws for `json`, or "" if it accepts it.
std::string ErrorOf(const std::string& json) {
  try {
    ParseConfig(json);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// A config with one topic "a" whose object gets `topic_members` added.
std::string WithTopic(const std::string& topic_members) {
  return R"({"topics": {"a": {"url": "http://127.0.0.1:8080/a")" +
         (topic_members.empty() ? "" : ", " + topic_members) + "}}}";
}

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

TEST(ParseConfig, DesignExampleMapsEveryKey) {
  ScopedEnv token("OUTBOX_TEST_ORDERS_TOKEN", "Bearer t0ken");
  ScopedEnv secret("OUTBOX_TEST_ORDERS_SECRET", kSecret);
  const Config config = ParseConfig(R"({
    "sweep_interval_ms": 1500,
    "lease_timeout_ms": 170000,
    "claim_batch": 40,
    "retention": { "delivered_ms": 604800001, "archive_path": "" },
    "limits": { "max_payload_bytes": 1048577, "max_pending": 1000001, "max_db_bytes": 7 },
    "metrics": { "listen": "127.0.0.1:9465" },
    "log": { "level": "debug", "format": "json" },
    "topics": {
      "order.created": {
        "url": "https://collector.example/orders",
        "workers": 4,
        "queue_capacity": 999,
        "queue_bytes": 65536,
        "timeout_ms": 4000,
        "retry": { "strategy": "fixed", "first_interval_ms": 900,
                   "max_interval_ms": 86400001, "max_attempts": 9, "jitter": 0.25 },
        "breaker": { "failure_threshold": 6, "open_ms": 5001, "max_open_ms": 300001 },
        "headers": { "Authorization": "env:OUTBOX_TEST_ORDERS_TOKEN", "X-Tenant": "kiosk-7" },
        "cloudevents": "binary",
        "signing_secret": "env:OUTBOX_TEST_ORDERS_SECRET",
        "batch": { "max_messages": 10, "max_bytes": 65536, "format": "cloudevents" }
      },
      "*": { "url": "http://127.0.0.1:8080/events" }
    }
  })");
  EXPECT_TRUE(config.warnings.empty());
  const Options& options = config.options;
  EXPECT_EQ(options.sweep_interval_ms, 1500);
  EXPECT_EQ(options.lease_timeout_ms, 170000);
  EXPECT_EQ(options.claim_batch, 40);
  EXPECT_EQ(options.retention.delivered_ms, 604800001);
  EXPECT_EQ(options.retention.archive_path, "");
  ASSERT_TRUE(options.limits.has_value());
  EXPECT_EQ(options.limits->max_payload_bytes, 1048577);
  EXPECT_EQ(options.limits->max_pending, 1000001);
  EXPECT_EQ(options.limits->max_db_bytes, 7);
  EXPECT_EQ(config.metrics_listen, "127.0.0.1:9465");
  EXPECT_EQ(config.log_level, "debug");
  EXPECT_EQ(config.log_format, "json");

  ASSERT_EQ(options.topics.size(), 2u);
  const TopicOptions& orders = options.topics.at("order.created");
  EXPECT_EQ(orders.endpoint.url, "https://collector.example/orders");
  EXPECT_EQ(orders.workers, 4);
  EXPECT_EQ(orders.queue_capacity, 999);
  EXPECT_EQ(orders.queue_bytes, 65536);
  EXPECT_EQ(orders.endpoint.timeout_ms, 4000);
  EXPECT_EQ(orders.retry.backoff, store::Backoff::kFixed);
  EXPECT_EQ(orders.retry.first_interval_ms, 900);
  EXPECT_EQ(orders.retry.max_interval_ms, 86400001);
  EXPECT_EQ(orders.retry.max_attempts, 9);
  EXPECT_DOUBLE_EQ(orders.retry.jitter, 0.25);
  EXPECT_EQ(orders.breaker.failure_threshold, 6);
  EXPECT_EQ(orders.breaker.open_ms, 5001);
  EXPECT_EQ(orders.breaker.max_open_ms, 300001);
  const transport::Headers expected_headers = {{"Authorization", "Bearer t0ken"},
                                               {"X-Tenant", "kiosk-7"}};
  EXPECT_EQ(orders.endpoint.headers, expected_headers);
  EXPECT_EQ(orders.endpoint.cloudevents, transport::CloudEventsMode::kBinary);
  EXPECT_EQ(orders.endpoint.signing_secrets, std::vector<std::string>{kSecret});
  EXPECT_EQ(orders.endpoint.batch.max_messages, 10u);
  EXPECT_EQ(orders.endpoint.batch.max_bytes, 65536u);
  EXPECT_EQ(orders.endpoint.batch.format, transport::BatchFormat::kCloudEvents);
  EXPECT_EQ(options.topics.at("*").endpoint.url, "http://127.0.0.1:8080/events");
}

TEST(ParseConfig, OnlyUrlIsRequiredAndEverythingElseKeepsItsDefault) {
  const Config config = ParseConfig(R"({"topics": {"*": {"url": "http://127.0.0.1:1/"}}})");
  const Options defaults;
  const TopicOptions topic_defaults;
  const Options& options = config.options;
  EXPECT_TRUE(config.warnings.empty());
  EXPECT_EQ(config.metrics_listen, "127.0.0.1:9464");
  EXPECT_EQ(config.log_level, "info");
  EXPECT_EQ(config.log_format, "text");
  EXPECT_EQ(options.sweep_interval_ms, defaults.sweep_interval_ms);
  EXPECT_EQ(options.lease_timeout_ms, defaults.lease_timeout_ms);
  EXPECT_EQ(options.claim_batch, defaults.claim_batch);
  EXPECT_EQ(options.crash_budget, defaults.crash_budget);
  EXPECT_EQ(options.retention.delivered_ms, defaults.retention.delivered_ms);
  // No "limits" section: the limits stored in the database stay.
  EXPECT_FALSE(options.limits.has_value());
  const TopicOptions& topic = options.topics.at("*");
  EXPECT_EQ(topic.workers, topic_defaults.workers);
  EXPECT_EQ(topic.queue_capacity, topic_defaults.queue_capacity);
  EXPECT_EQ(topic.retry.max_attempts, topic_defaults.retry.max_attempts);
  EXPECT_EQ(topic.retry.backoff, topic_defaults.retry.backoff);
  EXPECT_EQ(topic.endpoint.timeout_ms, topic_defaults.endpoint.timeout_ms);
  EXPECT_EQ(topic.endpoint.cloudevents, transport::CloudEventsMode::kNone);
  EXPECT_TRUE(topic.endpoint.signing_secrets.empty());
}

TEST(ParseConfig, ExtraKeysMapOntoOptions) {
  testing::TempDir dir;
  const std::string ca = dir.File("ca.pem");
  std::ofstream(ca) << "not really a certificate\n";
  const Config config = ParseConfig(R"({
    "crash_budget": 5, "watch_poll_ms": 5, "synchronous": "full",
    "retention": {"delivered_ms": 0, "interval_ms": 1000, "archive_max_bytes": 4096,
                  "archive_path": ")" +
                                    dir.File("archive.jsonl") + R"("},
    "limits": {"max_pending": 10},
    "metrics": {"listen": ""},
    "topics": {"a": {"url": "https://h.example/", "connect_timeout_ms": 700,
                     "content_type": "application/x-protobuf", "ce_source": "urn:test",
                     "cloudevents": "structured", "max_retry_after_ms": 60000,
                     "retry": {"max_age_ms": 3600000},
                     "tls": {"ca_file": ")" +
                                    ca + R"(", "insecure_skip_verify": false}}}})");
  EXPECT_TRUE(config.warnings.empty());
  const Options& options = config.options;
  EXPECT_EQ(options.crash_budget, 5);
  EXPECT_EQ(options.watch_poll_ms, 5);
  EXPECT_EQ(options.synchronous, store::Synchronous::kFull);
  EXPECT_EQ(options.retention.delivered_ms, 0);
  EXPECT_EQ(options.retention.interval_ms, 1000);
  EXPECT_EQ(options.retention.archive_max_bytes, 4096);
  EXPECT_EQ(options.retention.archive_path, dir.File("archive.jsonl"));
  ASSERT_TRUE(options.limits.has_value());
  EXPECT_EQ(options.limits->max_pending, 10);
  EXPECT_EQ(options.limits->max_payload_bytes, store::Limits{}.max_payload_bytes);
  EXPECT_EQ(config.metrics_listen, "");
  const transport::EndpointOptions& endpoint = options.topics.at("a").endpoint;
  EXPECT_EQ(endpoint.connect_timeout_ms, 700);
  EXPECT_EQ(endpoint.content_type, "application/x-protobuf");
  EXPECT_EQ(endpoint.ce_source, "urn:test");
  EXPECT_EQ(endpoint.cloudevents, transport::CloudEventsMode::kStructured);
  EXPECT_EQ(endpoint.max_retry_after_ms, 60000);
  EXPECT_EQ(endpoint.tls.ca_file, ca);
  EXPECT_EQ(options.topics.at("a").retry.max_age_ms, 3600000);
}

struct BadConfig {
  const char* name;
  std::string json;
  std::string error;
};

// Names the case in test listings instead of dumping its bytes.
void PrintTo(const BadConfig& config, std::ostream* out) { *out << config.name; }

class ParseConfigRejects : public ::testing::TestWithParam<BadConfig> {};

TEST_P(ParseConfigRejects, WithOneLineNamingTheKey) {
  const std::string error = ErrorOf(GetParam().json);
  EXPECT_EQ(error, GetParam().error);
  EXPECT_EQ(error.find('\n'), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    Table, ParseConfigRejects,
    ::testing::Values(
        BadConfig{"SyntaxError", "{\n  \"topics\": {\n    \"a\" {}\n}}",
                  "config: JSON syntax error at line 3, column 9: Missing a colon after a name "
                  "of object member."},
        BadConfig{"TrailingGarbage", R"({"topics": {}} x)",
                  "config: JSON syntax error at line 1, column 16: The document root must not "
                  "be followed by other values."},
        BadConfig{"RootNotAnObject", "[]", "config: expected an object, got an array"},
        BadConfig{"MissingTopics", "{}",
                  "topics: required key is missing (give at least one topic with a url)"},
        BadConfig{"EmptyTopics", R"({"topics": {}})", "topics: expected at least one topic"},
        BadConfig{"TopicNotAnObject", R"({"topics": {"a": "http://x/"}})",
                  R"(topics."a": expected an object, got a string)"},
        BadConfig{"MissingUrl", R"({"topics": {"order.created": {"workers": 2}}})",
                  R"(topics."order.created".url: required key is missing)"},
        BadConfig{"UrlScheme", R"({"topics": {"a": {"url": "ftp://h/"}}})",
                  R"(topics."a".url: scheme must be one of http, https, nats, tls, mqtt, mqtts, amqp, amqps)"},
        BadConfig{"NatsWildcard", R"({"topics": {"a": {"url": "nats://h/a.*"}}})",
                  R"(topics."a".url: subject must not hold a wildcard)"},
        BadConfig{"MqttProtocol",
                  R"({"topics": {"a": {"url": "mqtt://h/t", "mqtt": {"protocol_version": 3}}}})",
                  R"(topics."a".mqtt.protocol_version: expected an integer from 4 to 5, got 3)"},
        BadConfig{"NatsOptionsOnMqtt",
                  R"({"topics": {"a": {"url": "mqtt://h/t", "nats": {"token": "env:HOME"}}}})",
                  R"(topics."a".nats: only for nats:// and tls:// URLs)"},
        BadConfig{
            "ZeroMaxAttempts",
            R"({"topics": {"order.created": {"url": "http://h/", "retry": {"max_attempts": 0}}}})",
            R"(topics."order.created".retry.max_attempts: expected a positive integer, got 0)"},
        BadConfig{"FractionalInteger", WithTopic(R"("retry": {"max_attempts": 1.5})"),
                  R"(topics."a".retry.max_attempts: expected a positive integer, got 1.5)"},
        BadConfig{"IntegerAsString", R"({"sweep_interval_ms": "1000", "topics": {}})",
                  "sweep_interval_ms: expected a positive integer, got a string"},
        BadConfig{"NegativeDuration", WithTopic(R"("retry": {"max_age_ms": -1})"),
                  R"(topics."a".retry.max_age_ms: expected 0 or a positive integer, got -1)"},
        BadConfig{"ZeroSweepInterval", R"({"sweep_interval_ms": 0, "topics": {}})",
                  "sweep_interval_ms: expected a positive integer, got 0"},
        BadConfig{"JitterAboveOne", WithTopic(R"("retry": {"jitter": 1.5})"),
                  R"(topics."a".retry.jitter: expected a number from 0 to 1, got 1.5)"},
        BadConfig{"JitterNegative", WithTopic(R"("retry": {"jitter": -0.1})"),
                  R"(topics."a".retry.jitter: expected a number from 0 to 1, got -0.1)"},
        BadConfig{
            "UnknownStrategy", WithTopic(R"("retry": {"strategy": "linear"})"),
            R"(topics."a".retry.strategy: expected one of "fixed", "exponential", got "linear")"},
        BadConfig{"MaxIntervalBelowFirst",
                  WithTopic(R"("retry": {"first_interval_ms": 5000, "max_interval_ms": 1000})"),
                  R"(topics."a".retry.max_interval_ms: must be at least first_interval_ms (5000))"},
        BadConfig{
            "UnknownCloudEventsMode", WithTopic(R"("cloudevents": "xml")"),
            R"(topics."a".cloudevents: expected one of "none", "binary", "structured", got "xml")"},
        BadConfig{"UnknownBatchFormat", WithTopic(R"("batch": {"format": "csv"})"),
                  R"(topics."a".batch.format: expected one of "ndjson", "cloudevents", got "csv")"},
        BadConfig{"ZeroWorkers", WithTopic(R"("workers": 0)"),
                  R"(topics."a".workers: expected an integer from 1 to 256, got 0)"},
        BadConfig{"HugeWorkers", WithTopic(R"("workers": 10000000000)"),
                  R"(topics."a".workers: expected an integer from 1 to 256, got 10000000000)"},
        BadConfig{"MaxAttemptsOverInt", WithTopic(R"("retry": {"max_attempts": 3000000000})"),
                  R"(topics."a".retry.max_attempts: expected at most 2147483647)"},
        BadConfig{"ZeroQueueCapacity", WithTopic(R"("queue_capacity": 0)"),
                  R"(topics."a".queue_capacity: expected an integer from 1 to 10000000, got 0)"},
        BadConfig{"ZeroQueueBytes", WithTopic(R"("queue_bytes": 0)"),
                  R"(topics."a".queue_bytes: expected a positive integer, got 0)"},
        BadConfig{"ZeroClaimBatch", R"({"claim_batch": 0, "topics": {}})",
                  "claim_batch: expected an integer from 1 to 10000, got 0"},
        BadConfig{
            "BadLogLevel", R"({"log": {"level": "verbose"}, "topics": {}})",
            R"(log.level: expected one of "trace", "debug", "info", "warn", "error", got "verbose")"},
        BadConfig{"BadLogFormat", R"({"log": {"format": "xml"}, "topics": {}})",
                  R"(log.format: expected one of "text", "json", got "xml")"},
        BadConfig{
            "ListenWithoutPort", R"({"metrics": {"listen": "localhost"}, "topics": {}})",
            R"(metrics.listen: expected "host:port" such as "127.0.0.1:9464" or "[::1]:9464", or "" to disable)"},
        BadConfig{
            "ListenPortTooLarge", R"({"metrics": {"listen": "127.0.0.1:65536"}, "topics": {}})",
            R"(metrics.listen: expected "host:port" such as "127.0.0.1:9464" or "[::1]:9464", or "" to disable)"},
        BadConfig{"SectionNotAnObject", R"({"retention": 5, "topics": {}})",
                  "retention: expected an object, got 5"},
        BadConfig{"BooleanExpected", WithTopic(R"("tls": {"insecure_skip_verify": "yes"})"),
                  R"(topics."a".tls.insecure_skip_verify: expected true or false, got a string)"},
        BadConfig{"DuplicateKey", R"({"claim_batch": 5, "claim_batch": 6, "topics": {}})",
                  "claim_batch: key given twice"},
        BadConfig{"DuplicateTopic",
                  R"({"topics": {"a": {"url": "http://h/"}, "a": {"url": "http://h/"}}})",
                  R"(topics."a": key given twice)"},
        BadConfig{"EmptyTopicName", R"({"topics": {"": {"url": "http://h/"}}})",
                  R"(topics."": a topic name must not be empty)"},
        BadConfig{
            "TimeoutNotBelowLease",
            R"({"lease_timeout_ms": 5000, "topics": {"a": {"url": "http://h/", "timeout_ms": 5000}}})",
            R"(topics."a".timeout_ms: must be less than lease_timeout_ms (5000))"},
        BadConfig{"BreakerMaxBelowOpen",
                  WithTopic(R"("breaker": {"open_ms": 10000, "max_open_ms": 5000})"),
                  R"(topics."a".breaker.max_open_ms: must be at least open_ms (10000))"},
        BadConfig{"HeaderNotAString", WithTopic(R"("headers": {"X-Count": 5})"),
                  R"(topics."a".headers."X-Count": expected a string, got 5)"},
        BadConfig{
            "ReservedHeader", WithTopic(R"("headers": {"X-A": "1", "Idempotency-Key": "x"})"),
            R"(topics."a".headers."Idempotency-Key": Idempotency-Key is set by the transport itself)"},
        BadConfig{
            "MissingEnvSecret",
            WithTopic(R"("headers": {"Authorization": "env:OUTBOX_TEST_UNSET_VAR"})"),
            R"(topics."a".headers."Authorization": environment variable OUTBOX_TEST_UNSET_VAR is not set)"},
        BadConfig{"MissingFileSecret",
                  WithTopic(R"("signing_secret": "file:/nonexistent/outbox-secret")"),
                  R"(topics."a".signing_secret: cannot read file /nonexistent/outbox-secret)"},
        BadConfig{"MalformedInlineSecret", WithTopic(R"("signing_secret": "hunter2")"),
                  R"(topics."a".signing_secret: must have the form whsec_<base64>)"},
        BadConfig{"MalformedSecretInRotation",
                  WithTopic(std::string(R"("signing_secret": [")") + kSecret + R"(", "whsec_!!"])"),
                  R"(topics."a".signing_secret[1]: the part after whsec_ is not valid base64)"},
        BadConfig{"EmptySecretArray", WithTopic(R"("signing_secret": [])"),
                  R"(topics."a".signing_secret: expected at least one secret)"},
        BadConfig{
            "SecretNotAString", WithTopic(R"("signing_secret": 5)"),
            R"(topics."a".signing_secret: expected a secret such as "env:NAME" or "file:PATH", got 5)"},
        BadConfig{"ClientKeyWithoutCert", WithTopic(R"("tls": {"client_key": "/dev/null"})"),
                  R"(topics."a".tls.client_key: needs tls.client_cert)"},
        BadConfig{"UnreadableCaFile", WithTopic(R"("tls": {"ca_file": "/nonexistent/ca.pem"})"),
                  R"(topics."a".tls.ca_file: cannot read /nonexistent/ca.pem)"},
        BadConfig{
            "ArchiveDirectoryMissing",
            R"({"retention": {"archive_path": "/nonexistent/dir/archive.jsonl"}, "topics": {}})",
            "retention.archive_path: directory /nonexistent/dir does not exist"},
        BadConfig{"NegativeLimit", R"({"limits": {"max_db_bytes": -1}, "topics": {}})",
                  "limits.max_db_bytes: expected 0 or a positive integer, got -1"},
        BadConfig{"VersionUrlWithoutScheme",
                  WithTopic(R"("url_by_schema_version": {"3": "127.0.0.1/v3"})"),
                  R"(topics."a".url_by_schema_version."3": scheme must be one of http, https, nats, tls, mqtt, mqtts, amqp, amqps)"},
        BadConfig{"VersionUrlOfAnotherSinkKind",
                  WithTopic(R"("url_by_schema_version": {"3": "nats://127.0.0.1/orders"})"),
                  R"(topics."a".url_by_schema_version."3": must use the same kind of sink (scheme family) as url)"},
        BadConfig{"VersionUrlNotAString", WithTopic(R"("url_by_schema_version": {"3": 3})"),
                  R"(topics."a".url_by_schema_version."3": expected a URL string, got 3)"},
        BadConfig{"VersionNotAToken",
                  WithTopic(R"("url_by_schema_version": {"v 3": "http://127.0.0.1/v3"})"),
                  R"(topics."a".url_by_schema_version."v 3": a schema version is 1 to 64 token characters (letters, digits, !#$%&'*+-.^_`|~))"},
        BadConfig{"QuotedTopicNameIsEscaped",
                  R"({"topics": {"a\"b": {"url": "http://h/", "workers": -1}}})",
                  R"(topics."a\"b".workers: expected an integer from 1 to 256, got -1)"}),
    [](const ::testing::TestParamInfo<BadConfig>& test) { return std::string(test.param.name); });

TEST(ParseConfig, BrokerSinksTakeTheirCredentialsFromSecretReferences) {
  testing::TempDir dir;
  const std::string seed = dir.File("seed");
  std::ofstream(seed) << "SUACSSL3UAHUDXKFSNVUZRF5UHPMWZ6BFDTJ7M6USDXIEDNPPQYYYCU3VY\n";
  const Config config = ParseConfig(R"({"topics": {
      "n": {"url": "tls://nats.example:4222/orders", "nats": {"nkey": "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4", "nkey_seed": "file:)" +
                                    seed + R"("}},
      "m": {"url": "mqtt://broker/{topic}/{key}",
            "mqtt": {"username": "dev", "password": "file:)" + seed + R"(", "protocol_version": 4,
                     "keepalive_s": 60, "client_id": "dev-7"}}}})");
  const transport::EndpointOptions& nats = config.options.topics.at("n").endpoint;
  EXPECT_EQ(nats.nats.nkey_seed, "SUACSSL3UAHUDXKFSNVUZRF5UHPMWZ6BFDTJ7M6USDXIEDNPPQYYYCU3VY");
  EXPECT_EQ(transport::SinkKindOf(nats.url), transport::SinkKind::kNats);
  const transport::EndpointOptions& mqtt = config.options.topics.at("m").endpoint;
  EXPECT_EQ(mqtt.mqtt.username, "dev");
  EXPECT_EQ(mqtt.mqtt.protocol_version, 4);
  EXPECT_EQ(mqtt.mqtt.keepalive_s, 60);
  EXPECT_EQ(mqtt.mqtt.client_id, "dev-7");
  // No inline secret; the password over plaintext mqtt:// is the one warning.
  EXPECT_EQ(config.warnings,
            std::vector<std::string>{R"(topics."m".url: credentials or a signing secret go over )"
                                     "mqtt://, unencrypted; use mqtts://"});
}

TEST(ParseConfig, ReadsUrlsBySchemaVersion) {
  const Options options = ParseConfig(WithTopic(
      R"("url_by_schema_version": {"3": "http://127.0.0.1:8080/v3", "4": "http://127.0.0.1:8080/v4"})"))
      .options;
  const auto& urls = options.topics.at("a").url_by_schema_version;
  ASSERT_EQ(urls.size(), 2u);
  EXPECT_EQ(urls.at("3"), "http://127.0.0.1:8080/v3");
  EXPECT_EQ(urls.at("4"), "http://127.0.0.1:8080/v4");
}

TEST(ParseConfig, WarnsOnceForEachUnknownKeyWithItsPath) {
  const Config config = ParseConfig(R"({
    "sweep_intervall_ms": 5,
    "log": {"levle": "info"},
    "topics": {"order.created": {"url": "http://h/", "retyr": {}, "retry": {"max_attempt": 3}},
               "*": {"url": "http://h/", "tls": {"verify": true}}},
    "odd.key": 1
  })");
  std::vector<std::string> warnings = config.warnings;
  std::sort(warnings.begin(), warnings.end());
  const std::vector<std::string> expected = {
      R"("odd.key": unknown key, ignored)",
      "log.levle: unknown key, ignored",
      "sweep_intervall_ms: unknown key, ignored",
      R"(topics."*".tls.verify: unknown key, ignored)",
      R"(topics."order.created".retry.max_attempt: unknown key, ignored)",
      R"(topics."order.created".retyr: unknown key, ignored)",
  };
  EXPECT_EQ(warnings, expected);
}

TEST(ParseConfig, ResolvesFileSecretsWithoutTheTrailingNewline) {
  testing::TempDir dir;
  std::ofstream(dir.File("token")) << "Bearer from-file\n";
  std::ofstream(dir.File("secret")) << kSecret << "\n";
  const Config config =
      ParseConfig(WithTopic(R"("headers": {"Authorization": "file:)" + dir.File("token") +
                            R"("}, "signing_secret": ["file:)" + dir.File("secret") + R"("])"));
  const transport::EndpointOptions& endpoint = config.options.topics.at("a").endpoint;
  EXPECT_EQ(endpoint.headers, (transport::Headers{{"Authorization", "Bearer from-file"}}));
  EXPECT_EQ(endpoint.signing_secrets, std::vector<std::string>{kSecret});
  EXPECT_TRUE(config.warnings.empty());
}

TEST(ParseConfig, AcceptsInlineCredentialsWithAWarningThatHoldsNoSecret) {
  const Config config = ParseConfig(WithTopic(R"("headers": {"authorization": "Bearer inline-123"},
      "signing_secret": ")" + std::string(kSecret) +
                                              R"(", "tls": {"insecure_skip_verify": true})"));
  const std::vector<std::string> expected = {
      R"(topics."a".headers."authorization": secret written inline; put it in "env:NAME" or "file:PATH" instead)",
      R"(topics."a".signing_secret: secret written inline; put it in "env:NAME" or "file:PATH" instead)",
      R"(topics."a".tls.insecure_skip_verify: server certificates are not checked; for tests only)",
  };
  EXPECT_EQ(config.warnings, expected);
  EXPECT_TRUE(config.options.topics.at("a").endpoint.tls.insecure_skip_verify);
}

TEST(ParseConfig, ErrorsNeverShowASecretValue) {
  // A resolved value with a line break is refused; the error must not echo it.
  ScopedEnv token("OUTBOX_TEST_BAD_TOKEN", "Bearer s3cr3t\r\nX-Evil: 1");
  const std::string error =
      ErrorOf(WithTopic(R"("headers": {"Authorization": "env:OUTBOX_TEST_BAD_TOKEN"})"));
  EXPECT_NE(error.find(R"(topics."a".headers."Authorization")"), std::string::npos) << error;
  EXPECT_EQ(error.find("s3cr3t"), std::string::npos) << error;

  // A secret typed into a numeric key is not echoed either.
  const std::string misplaced = ErrorOf(WithTopic(R"("timeout_ms": "whsec_c2VjcmV0")"));
  EXPECT_EQ(misplaced, R"(topics."a".timeout_ms: expected a positive integer, got a string)");
}

}  // namespace
}  // namespace outbox::agent
