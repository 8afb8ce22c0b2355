// Which sink a URL names, and the checks of each kind's options (no network).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "outbox/transport.h"

namespace outbox::transport {
namespace {

std::string ErrorOf(const EndpointOptions& options) {
  try {
    ValidateSink(options);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "";
}

EndpointOptions WithUrl(const std::string& url) {
  EndpointOptions options;
  options.url = url;
  return options;
}

EndpointOptions WithAmqpQueue(const std::string& url) {
  EndpointOptions options = WithUrl(url);
  options.amqp.queue = "orders";
  return options;
}

TEST(SinkKind, SchemePicksTheKind) {
  EXPECT_EQ(SinkKindOf("http://h/p"), SinkKind::kHttp);
  EXPECT_EQ(SinkKindOf("https://h/p"), SinkKind::kHttp);
  EXPECT_EQ(SinkKindOf("nats://h:4222/s"), SinkKind::kNats);
  EXPECT_EQ(SinkKindOf("tls://h:4222/s"), SinkKind::kNats);
  EXPECT_EQ(SinkKindOf("mqtt://h/t"), SinkKind::kMqtt);
  EXPECT_EQ(SinkKindOf("mqtts://h/t"), SinkKind::kMqtt);
  EXPECT_EQ(SinkKindOf("amqp://h/"), SinkKind::kAmqp);
  EXPECT_EQ(SinkKindOf("amqps://h:5671/prod"), SinkKind::kAmqp);
  EXPECT_EQ(SinkKindName(SinkKind::kNats), "nats");
  EXPECT_EQ(SinkKindName(SinkKind::kAmqp), "amqp");
  try {
    SinkKindOf("ftp://h/x");
    FAIL() << "ftp accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_STREQ(error.what(), "url: scheme must be one of http, https, nats, tls, mqtt, mqtts, amqp, amqps");
  }
}

TEST(ValidateSink, AcceptsWellFormedBrokerUrls) {
  EXPECT_EQ(ErrorOf(WithUrl("nats://127.0.0.1:4222/orders.created")), "");
  EXPECT_EQ(ErrorOf(WithUrl("nats://nats.example/orders")), "");
  EXPECT_EQ(ErrorOf(WithUrl("tls://[::1]:4443/orders")), "");
  EXPECT_EQ(ErrorOf(WithUrl("mqtt://broker:1883/devices/{topic}/{key}/{id}")), "");
  EXPECT_EQ(ErrorOf(WithUrl("https://example.com/hook")), "");
  EXPECT_EQ(ErrorOf(WithAmqpQueue("amqp://127.0.0.1:5672/")), "");
  EXPECT_EQ(ErrorOf(WithAmqpQueue("amqp://rabbit")), "");
  EXPECT_EQ(ErrorOf(WithAmqpQueue("amqps://[::1]:5671/%2Fprod")), "");
}

TEST(ValidateSink, AmqpVirtualHostIsThePercentDecodedPath) {
  EXPECT_EQ(ErrorOf(WithAmqpQueue("amqp://h/prod%2Feu")), "");
  EXPECT_EQ(ErrorOf(WithAmqpQueue("amqp://h/prod/eu")),
            "url: virtual host holds a '/': write it as %2F");
  EXPECT_EQ(ErrorOf(WithAmqpQueue("amqp://h/%0a")),
            "url: virtual host must be UTF-8 without control characters, at most 255 bytes");
  EXPECT_EQ(ErrorOf(WithAmqpQueue("amqp://h/%4")),
            "url: virtual host has a % not followed by two hex digits");
}

TEST(ValidateSink, AmqpNeedsOneTargetAndShortNames) {
  EndpointOptions options = WithUrl("amqp://h/");
  options.amqp.exchange = std::string(256, 'e');
  EXPECT_EQ(ErrorOf(options), "amqp.exchange: is longer than AMQP's 255 bytes");
  options.amqp.exchange = "orders";
  options.amqp.routing_key = "a\nb";
  EXPECT_EQ(ErrorOf(options), "amqp.routing_key: must be UTF-8 without control characters");
  options.amqp.routing_key = "{topic}.{key}.{id}";
  EXPECT_EQ(ErrorOf(options), "");
  options.amqp.user = "u";
  EXPECT_EQ(ErrorOf(options), "amqp.user: needs amqp.password");
  options.amqp.password = "env:X";
  EXPECT_EQ(ErrorOf(options),
            "amqp.password: is an unresolved secret reference (resolve it with ResolveSecret)");
}

TEST(ValidateSink, NamesWhatIsWrongWithABrokerUrl) {
  EXPECT_EQ(ErrorOf(WithUrl("nats://h:4222")), "url: names no subject (nats://host:port/subject)");
  EXPECT_EQ(ErrorOf(WithUrl("nats://h:4222/a.*")), "url: subject must not hold a wildcard");
  EXPECT_EQ(ErrorOf(WithUrl("nats://h:4222/a..b")),
            "url: subject has an empty token (\"..\" or a dot at an end)");
  EXPECT_EQ(ErrorOf(WithUrl("nats://h:99999/a")), "url: port must be a number 1..65535");
  EXPECT_EQ(ErrorOf(WithUrl("nats://u:p@h/a")),
            "url: must not carry credentials; give them under nats, mqtt or amqp");
  EXPECT_EQ(ErrorOf(WithUrl("nats:///a")), "url: has no host");
  EXPECT_EQ(ErrorOf(WithUrl("mqtt://h/a/#")), "url: topic must not hold a wildcard (+ or #)");
  EXPECT_EQ(ErrorOf(WithUrl("mqtt://h/a/{user}")),
            "url: unknown placeholder {user} (use {topic}, {key} or {id})");
  EXPECT_EQ(ErrorOf(WithUrl("mqtt://h")), "url: names no topic (mqtt://host:port/topic)");
}

TEST(ValidateSink, RejectsAnotherKindsOptions) {
  EndpointOptions options = WithUrl("mqtt://h/t");
  options.nats.token = "x";
  EXPECT_EQ(ErrorOf(options), "nats: only for nats:// and tls:// URLs");
  options = WithUrl("https://h/p");
  options.mqtt.username = "u";
  EXPECT_EQ(ErrorOf(options), "mqtt: only for mqtt:// and mqtts:// URLs");
  options = WithUrl("nats://h/s");
  options.headers = {{"Authorization", "Bearer x"}};
  EXPECT_EQ(ErrorOf(options),
            "headers[0]: Authorization is HTTP's; a broker's credentials go under nats, mqtt or amqp");
  options = WithUrl("nats://h/s");
  options.tls.insecure_skip_verify = true;
  EXPECT_EQ(ErrorOf(options), "tls: needs a tls:// URL");
}

TEST(ValidateSink, NamesWhatIsWrongWithBrokerCredentials) {
  EndpointOptions options = WithUrl("nats://h/s");
  options.nats.user = "u";
  EXPECT_EQ(ErrorOf(options), "nats.user: needs nats.password");
  options.nats.password = "p";
  options.nats.token = "t";
  EXPECT_EQ(ErrorOf(options), "nats: give one of user/password, token, nkey/nkey_seed or credentials");
  options = WithUrl("nats://h/s");
  options.nats.token = "env:NATS_TOKEN";
  EXPECT_EQ(ErrorOf(options),
            "nats.token: is an unresolved secret reference (resolve it with ResolveSecret)");
  options = WithUrl("nats://h/s");
  options.nats.credentials = "not a creds file";
  EXPECT_EQ(ErrorOf(options), "nats.credentials: is not a .creds file (user JWT and NKey seed)");
  options = WithUrl("mqtt://h/t");
  options.mqtt.protocol_version = 3;
  EXPECT_EQ(ErrorOf(options), "mqtt.protocol_version: must be 5 (MQTT 5) or 4 (MQTT 3.1.1)");
  options.mqtt.protocol_version = 5;
  options.mqtt.keepalive_s = 1;
  EXPECT_EQ(ErrorOf(options), "mqtt.keepalive_s: must be 5..65535");
  options.mqtt.keepalive_s = 30;
  options.mqtt.password = "p";
  EXPECT_EQ(ErrorOf(options), "mqtt.password: needs mqtt.username");
}

TEST(MakeSink, HttpUrlGivesAnEndpointWithUnchangedValidation) {
  const std::unique_ptr<Sink> sink = MakeSink(WithUrl("http://127.0.0.1:1/hook"));
  EXPECT_EQ(sink->kind(), SinkKind::kHttp);
  EXPECT_NE(dynamic_cast<Endpoint*>(sink.get()), nullptr);
  // Validate() itself still speaks for HTTP alone.
  EXPECT_THROW(Validate(WithUrl("nats://h/s")), std::invalid_argument);
  EXPECT_THROW(MakeSink(WithUrl("gopher://h/x")), std::invalid_argument);
}

TEST(MakeSink, BrokerSinksConstructWithoutTouchingTheNetwork) {
  // Port 1 on loopback has no server; construction must still succeed.
  EXPECT_EQ(MakeSink(WithUrl("nats://127.0.0.1:1/s"))->kind(), SinkKind::kNats);
  EXPECT_EQ(MakeSink(WithUrl("mqtt://127.0.0.1:1/t"))->kind(), SinkKind::kMqtt);
}

TEST(Classify, AuthenticationStatusesAreConfigurationFailures) {
  for (const long status : {401L, 403L, 404L, 407L}) {
    EXPECT_TRUE(Classify(0, status, "", 0, 1000).configuration_failure) << status;
  }
  for (const long status : {408L, 429L, 500L, 503L}) {
    EXPECT_FALSE(Classify(0, status, "", 0, 1000).configuration_failure) << status;
  }
}

TEST(ClassifyMqttReasonCode, FollowsTheOutcomeRules) {
  for (const int delivered : {0x00, 0x10}) {  // success, no matching subscribers
    EXPECT_EQ(ClassifyMqttReasonCode(delivered).outcome, Outcome::kDelivered);
  }
  for (const int endpoint : {0x80, 0x83, 0x97}) {  // unspecified, implementation, quota
    const Result result = ClassifyMqttReasonCode(endpoint);
    EXPECT_EQ(result.outcome, Outcome::kEndpointFailure) << endpoint;
    EXPECT_FALSE(result.configuration_failure) << endpoint;
  }
  const Result denied = ClassifyMqttReasonCode(0x87);
  EXPECT_EQ(denied.outcome, Outcome::kEndpointFailure);
  EXPECT_TRUE(denied.configuration_failure);
  EXPECT_NE(denied.error.find("135"), std::string::npos) << denied.error;
  for (const int message : {0x90, 0x95, 0x99}) {  // topic name, packet size, payload format
    EXPECT_EQ(ClassifyMqttReasonCode(message).outcome, Outcome::kMessageFailure) << message;
  }
}

TEST(ClassifyJetStreamError, ResourcesAreEndpointFailuresAndTheRestMessageFailures) {
  const Result too_large = ClassifyJetStreamError(10054, "message size exceeds maximum allowed");
  EXPECT_EQ(too_large.outcome, Outcome::kMessageFailure);
  EXPECT_EQ(too_large.error,
            "JetStream error 10054: message size exceeds maximum allowed");
  EXPECT_EQ(ClassifyJetStreamError(10071, "wrong last sequence").outcome,
            Outcome::kMessageFailure);
  for (const int code : {10002, 10005, 10008, 10009, 10023, 10028, 10047, 10053, 10077}) {
    const Result result = ClassifyJetStreamError(code, "");
    EXPECT_EQ(result.outcome, Outcome::kEndpointFailure) << code;
    EXPECT_FALSE(result.configuration_failure) << code;
  }
  for (const int code : {10039, 10059, 10076}) {
    EXPECT_TRUE(ClassifyJetStreamError(code, "").configuration_failure) << code;
  }
}

}  // namespace
}  // namespace outbox::transport
