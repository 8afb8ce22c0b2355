// The AMQP sink against Debian's rabbitmq-server: what a publish carries,
// confirms, unroutable messages, refusals, in-flight publishes and a disk
// alarm. One broker serves the whole binary (it takes seconds to start; see
// amqp_broker_main.cc); each test uses queues of its own.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../common/wait_for.h"
#include "amqp_broker.h"
#include "amqp_client.h"
#include "outbox/transport.h"

namespace outbox::transport {
namespace {

using namespace std::chrono_literals;
using outbox::testing::WaitFor;

EndpointOptions ToQueue(const std::string& queue) {
  EndpointOptions options;
  options.url = testing::Broker().Url();
  options.amqp.queue = queue;
  options.timeout_ms = 5000;
  options.connect_timeout_ms = 2000;
  return options;
}

EndpointOptions ToExchange(const std::string& exchange, const std::string& routing_key) {
  EndpointOptions options = ToQueue("");
  options.amqp.exchange = exchange;
  options.amqp.routing_key = routing_key;
  return options;
}

struct Row {
  std::string id;
  std::string key;
  Headers headers;
  Message AsMessage(const std::string& topic = "orders.created") const {
    Message message;
    message.message_id = id;
    message.topic = topic;
    message.key = key;
    message.payload = R"({"order":1})";
    message.headers = headers;
    message.created_at_ms = 1'767'225'600'123;
    return message;
  }
};

Row MakeRow(const std::string& key) { return Row{MessageId("db", "orders.created", key), key, {}}; }

TEST(AmqpSink, PublishesPersistentWithIdentityAndAttributesAsProperties) {
  testing::AmqpClient client(testing::Broker().port());
  client.DeclareQueue("props");
  std::unique_ptr<Sink> sink = MakeSink(ToQueue("props"));
  EXPECT_EQ(sink->kind(), SinkKind::kAmqp);
  Row row = MakeRow("k1");
  row.headers = {{"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
                 {"x-tenant", "t1"}};
  Message message = row.AsMessage();
  message.schema_version = "3";
  const Result result = sink->Push(message);
  ASSERT_EQ(result.outcome, Outcome::kDelivered) << result.error;
  EXPECT_EQ(result.request_bytes, message.payload.size());

  const std::vector<testing::ReceivedAmqp> got = client.Drain("props");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].body, R"({"order":1})");
  EXPECT_EQ(got[0].message_id, row.id);
  EXPECT_EQ(got[0].type, "orders.created");
  EXPECT_EQ(got[0].content_type, "application/json");
  EXPECT_EQ(got[0].delivery_mode, 2);  // persistent
  EXPECT_EQ(got[0].timestamp, 1'767'225'600u);
  EXPECT_EQ(got[0].headers.at("schema_version"), "3");
  EXPECT_EQ(got[0].headers.at("traceparent"), row.headers[0].second);
  EXPECT_EQ(got[0].headers.at("x-tenant"), "t1");
  EXPECT_EQ(got[0].headers.count("Idempotency-Key"), 0u);  // message_id carries it
}

TEST(AmqpSink, CloudEventsBinaryModeUsesTheAmqpBindingsAttributeNames) {
  testing::AmqpClient client(testing::Broker().port());
  client.DeclareQueue("cloudevents");
  EndpointOptions options = ToQueue("cloudevents");
  options.cloudevents = CloudEventsMode::kBinary;
  options.ce_source = "urn:test";
  std::unique_ptr<Sink> sink = MakeSink(options);
  const Row row = MakeRow("ce");
  ASSERT_EQ(sink->Push(row.AsMessage()).outcome, Outcome::kDelivered);
  const std::vector<testing::ReceivedAmqp> got = client.Drain("cloudevents");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].headers.at("cloudEvents:specversion"), "1.0");
  EXPECT_EQ(got[0].headers.at("cloudEvents:id"), row.id);
  EXPECT_EQ(got[0].headers.at("cloudEvents:type"), "orders.created");
  EXPECT_EQ(got[0].headers.at("cloudEvents:source"), "urn:test");
  EXPECT_EQ(got[0].headers.at("cloudEvents:time"), "2026-01-01T00:00:00.123Z");
}

TEST(AmqpSink, RoutingKeyPlaceholdersAreFilledInPerMessage) {
  testing::AmqpClient client(testing::Broker().port());
  client.DeclareExchange("keyed", "direct");
  client.DeclareQueue("keyed-k7");
  client.Bind("keyed-k7", "keyed", "orders.created.k7");
  std::unique_ptr<Sink> sink = MakeSink(ToExchange("keyed", "{topic}.{key}"));
  const Result result = sink->Push(MakeRow("k7").AsMessage());
  ASSERT_EQ(result.outcome, Outcome::kDelivered) << result.error;
  EXPECT_EQ(client.Count("keyed-k7"), 1u);
}

TEST(AmqpSink, UnroutableIsAMessageFailureNamingExchangeAndKeyAndHoldsUpNothing) {
  testing::AmqpClient client(testing::Broker().port());
  client.DeclareExchange("sparse", "direct");
  client.DeclareQueue("sparse-bound");
  client.Bind("sparse-bound", "sparse", "orders.created.bound");
  std::unique_ptr<Sink> sink = MakeSink(ToExchange("sparse", "{topic}.{key}"));
  const Result lost = sink->Push(MakeRow("nowhere").AsMessage());
  EXPECT_EQ(lost.outcome, Outcome::kMessageFailure);
  EXPECT_TRUE(lost.error.starts_with(
      "unroutable: exchange sparse, routing key orders.created.nowhere (312 NO_ROUTE)"))
      << lost.error;
  // The same connection goes on delivering.
  const Result routed = sink->Push(MakeRow("bound").AsMessage());
  EXPECT_EQ(routed.outcome, Outcome::kDelivered) << routed.error;
  EXPECT_EQ(client.Count("sparse-bound"), 1u);
}

TEST(AmqpSink, MissingExchangeIsAConfigurationFailureAndTheSinkRecovers) {
  std::unique_ptr<Sink> sink = MakeSink(ToExchange("not-declared", "{topic}"));
  const Result result = sink->Push(MakeRow("a").AsMessage());
  EXPECT_EQ(result.outcome, Outcome::kEndpointFailure);
  EXPECT_TRUE(result.configuration_failure);
  EXPECT_NE(result.error.find("404 NOT_FOUND"), std::string::npos) << result.error;
  testing::AmqpClient client(testing::Broker().port());
  client.DeclareExchange("not-declared", "fanout");
  client.DeclareQueue("late");
  client.Bind("late", "not-declared", "");
  const Result again = sink->Push(MakeRow("b").AsMessage());
  EXPECT_EQ(again.outcome, Outcome::kDelivered) << again.error;
}

TEST(AmqpSink, WrongPasswordIsAConfigurationFailureWithoutTheSecret) {
  EndpointOptions options = ToQueue("any");
  options.amqp.user = "guest";
  options.amqp.password = "n0t-the-passw0rd";
  std::unique_ptr<Sink> sink = MakeSink(options);
  const Result result = sink->Push(MakeRow("a").AsMessage());
  EXPECT_EQ(result.outcome, Outcome::kEndpointFailure);
  EXPECT_TRUE(result.configuration_failure) << result.error;
  EXPECT_EQ(result.error.find("n0t-the-passw0rd"), std::string::npos);
}

TEST(AmqpSink, NoBrokerIsAnEndpointFailure) {
  EndpointOptions options = ToQueue("any");
  options.url = "amqp://127.0.0.1:" + std::to_string(testing::FreeLoopbackPort()) + "/";
  std::unique_ptr<Sink> sink = MakeSink(options);
  const Result result = sink->Push(MakeRow("a").AsMessage());
  EXPECT_EQ(result.outcome, Outcome::kEndpointFailure);
  EXPECT_FALSE(result.configuration_failure);
  EXPECT_TRUE(result.error.starts_with("cannot connect to the AMQP broker")) << result.error;
}

// Eight callers at once on one channel: their publishes are in flight
// together and each is answered by its own confirm.
TEST(AmqpSink, EightCallersInFlightAreEachConfirmed) {
  testing::AmqpClient client(testing::Broker().port());
  client.DeclareQueue("eight");
  std::unique_ptr<Sink> sink = MakeSink(ToQueue("eight"));
  constexpr std::size_t kCallers = 8;
  constexpr int kEach = 250;
  std::array<int, kCallers> delivered{};
  {
    std::vector<std::jthread> callers;
    for (std::size_t c = 0; c < kCallers; ++c) {
      callers.emplace_back([&, c] {
        for (int i = 0; i < kEach; ++i) {
          const Row row = MakeRow(std::to_string(c) + "-" + std::to_string(i));
          if (sink->Push(row.AsMessage()).outcome == Outcome::kDelivered) ++delivered[c];
        }
      });
    }
  }
  for (std::size_t c = 0; c < kCallers; ++c) EXPECT_EQ(delivered[c], kEach) << "caller " << c;
  EXPECT_EQ(client.Count("eight"), static_cast<std::uint32_t>(kCallers * kEach));
}

TEST(AmqpSink, BatchIsConfirmedTogether) {
  testing::AmqpClient client(testing::Broker().port());
  client.DeclareQueue("batch");
  EndpointOptions options = ToQueue("batch");
  options.batch.max_messages = 50;
  std::unique_ptr<Sink> sink = MakeSink(options);
  std::vector<Row> rows;
  for (int i = 0; i < 50; ++i) rows.push_back(MakeRow("b" + std::to_string(i)));
  std::vector<Message> messages;
  for (const Row& row : rows) messages.push_back(row.AsMessage());
  const Result result = sink->PushBatch(messages);
  EXPECT_EQ(result.outcome, Outcome::kDelivered) << result.error;
  EXPECT_EQ(client.Count("batch"), 50u);
}

// A disk alarm: the broker blocks publishing connections and says so
// (connection.blocked). The publish fails as an endpoint failure naming the
// block, well before timeout_ms, and the sink delivers again once the alarm
// clears.
TEST(AmqpSink, DiskAlarmBlocksWithAnEndpointFailureAndDeliveryResumes) {
  testing::AmqpClient client(testing::Broker().port());
  client.DeclareQueue("alarm");
  EndpointOptions options = ToQueue("alarm");
  options.timeout_ms = 60'000;  // a block must not wait for this
  std::unique_ptr<Sink> sink = MakeSink(options);
  ASSERT_EQ(sink->Push(MakeRow("before").AsMessage()).outcome, Outcome::kDelivered);
  testing::Broker().Ctl({"set_disk_free_limit", "1000000000000000"});
  const Result blocked = sink->Push(MakeRow("during").AsMessage());
  EXPECT_EQ(blocked.outcome, Outcome::kEndpointFailure);
  EXPECT_TRUE(blocked.error.starts_with("connection blocked by the broker")) << blocked.error;
  testing::Broker().Ctl({"set_disk_free_limit", "1000000"});
  ASSERT_TRUE(WaitFor(
      [&] { return sink->Push(MakeRow("after").AsMessage()).outcome == Outcome::kDelivered; },
      30s));
  EXPECT_GE(client.Count("alarm"), 2u);
}

// amqps:// with the CA and a client certificate (the broker requires one).
TEST(AmqpSink, TlsWithAClientCertificateIsConfirmedAndWithoutOneRefused) {
  testing::AmqpClient client(testing::Broker().port());
  client.DeclareQueue("tls");
  const testing::TestPki& pki = testing::Broker().pki();
  EndpointOptions options = ToQueue("tls");
  options.url = "amqps://localhost:" + std::to_string(testing::Broker().tls_port()) + "/";
  options.tls.ca_file = pki.ca().cert_file;
  options.tls.client_cert_file = pki.client().cert_file;
  options.tls.client_key_file = pki.client().key_file;
  const Result result = MakeSink(options)->Push(MakeRow("tls").AsMessage());
  EXPECT_EQ(result.outcome, Outcome::kDelivered) << result.error;
  EXPECT_EQ(client.Count("tls"), 1u);

  options.tls.client_cert_file.clear();
  options.tls.client_key_file.clear();
  const Result refused = MakeSink(options)->Push(MakeRow("tls").AsMessage());
  EXPECT_EQ(refused.outcome, Outcome::kEndpointFailure);
  EXPECT_EQ(client.Count("tls"), 1u);
}

TEST(AmqpSink, AbortAllEndsAWaitAtOnce) {
  testing::AmqpClient client(testing::Broker().port());
  client.DeclareQueue("abort");
  EndpointOptions options = ToQueue("abort");
  std::unique_ptr<Sink> sink = MakeSink(options);
  sink->AbortAll();
  EXPECT_EQ(sink->Push(MakeRow("a").AsMessage()).error, "aborted");
  sink->ResetAbort();
  EXPECT_EQ(sink->Push(MakeRow("a").AsMessage()).outcome, Outcome::kDelivered);
}

}  // namespace
}  // namespace outbox::transport
