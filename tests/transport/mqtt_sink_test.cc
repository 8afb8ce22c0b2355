// The MQTT sink against a real mosquitto, started and stopped by each test on
// a 127.0.0.1 port picked at run time.
#include <gtest/gtest.h>
#include <mosquitto.h>
#include <mqtt_protocol.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "broker_servers.h"
#include "mqtt_subscriber.h"
#include "outbox/transport.h"
#include "test_pki.h"

namespace outbox::transport {
namespace {

using testing::MosquittoServer;

using testing::Subscriber;

EndpointOptions OptionsFor(const std::string& url) {
  EndpointOptions options;
  options.url = url;
  options.connect_timeout_ms = 5000;
  options.timeout_ms = 5000;
  return options;
}

std::string IdOf(int i) { return MessageId("db", "orders", "key-" + std::to_string(i)); }

TEST(MqttSink, PubackIsDeliveredWithIdHeadersAndContentTypeAsProperties) {
  MosquittoServer server;
  Subscriber subscriber(server, "devices/#");
  const std::unique_ptr<Sink> sink = MakeSink(OptionsFor(server.Url("devices/{topic}/{key}")));
  EXPECT_EQ(sink->kind(), SinkKind::kMqtt);
  const Headers row_headers = {{"X-Tenant", "acme"}, {"Content-Type", "application/json"}};
  const std::string id = IdOf(1);
  const Result result = sink->Push({.message_id = id, .topic = "orders", .key = "k1",
                                    .payload = R"({"n":1})", .headers = row_headers});
  ASSERT_EQ(result.outcome, Outcome::kDelivered) << result.error;

  const auto received = subscriber.WaitFor(1);
  ASSERT_EQ(received.size(), 1U);
  EXPECT_EQ(received[0].topic, "devices/orders/k1");
  EXPECT_EQ(received[0].payload, R"({"n":1})");
  EXPECT_EQ(received[0].content_type, "application/json");
  const auto& properties = received[0].user_properties;
  ASSERT_EQ(properties.count("idempotency-key"), 1U);
  EXPECT_EQ(properties.find("idempotency-key")->second, id);
  ASSERT_EQ(properties.count("X-Tenant"), 1U);
  EXPECT_EQ(properties.find("X-Tenant")->second, "acme");
}

TEST(MqttSink, IdPlaceholderAndBatchInOrder) {
  MosquittoServer server;
  Subscriber subscriber(server, "out/#");
  EndpointOptions options = OptionsFor(server.Url("out/{id}"));
  options.batch.max_messages = 5;
  const std::unique_ptr<Sink> sink = MakeSink(options);
  std::vector<std::string> ids;
  std::vector<std::string> payloads;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(IdOf(i));
    payloads.push_back(std::to_string(i));
  }
  std::vector<Message> messages;
  for (std::size_t i = 0; i < 5; ++i) {
    messages.push_back({.message_id = ids[i], .topic = "orders", .payload = payloads[i]});
  }
  ASSERT_EQ(sink->PushBatch(messages).outcome, Outcome::kDelivered);
  const auto received = subscriber.WaitFor(5);
  ASSERT_EQ(received.size(), 5U);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(received[i].topic, "out/" + ids[i]);
    EXPECT_EQ(received[i].payload, std::to_string(i));
  }
}

TEST(MqttSink, KeyThatMakesTheTopicInvalidIsAMessageFailure) {
  MosquittoServer server;
  const std::unique_ptr<Sink> sink = MakeSink(OptionsFor(server.Url("devices/{key}")));
  const std::string id = IdOf(1);
  const Result result = sink->Push({.message_id = id, .topic = "orders", .key = "a/+/b", .payload = "{}"});
  EXPECT_EQ(result.outcome, Outcome::kMessageFailure);
  EXPECT_NE(result.error.find("topic"), std::string::npos) << result.error;
}

TEST(MqttSink, PacketAboveTheBrokersMaximumIsAMessageFailure) {
  MosquittoServer server("allow_anonymous true\nmax_packet_size 1024\n");
  const std::unique_ptr<Sink> sink = MakeSink(OptionsFor(server.Url("big")));
  const std::string id = IdOf(1);
  const Result result = sink->Push({.message_id = id, .topic = "orders", .payload = std::string(4096, 'x')});
  EXPECT_EQ(result.outcome, Outcome::kMessageFailure) << result.error;
  // The connection survives for the next message.
  EXPECT_EQ(sink->Push({.message_id = IdOf(2), .topic = "orders", .payload = "small"}).outcome,
            Outcome::kDelivered);
}

// Users "device" (may publish to devices/#) and "other" (may not).
class MqttAuth : public ::testing::Test {
 protected:
  MqttAuth() : server_(Config()) {}

  static std::string Config() {
    const testing::TempDir& files = Files();
    const std::string passwords = files.Write("passwords", "");
    const std::string command = "mosquitto_passwd -b " + passwords + " device device-secret && " +
                                "mosquitto_passwd -b " + passwords + " other other-secret";
    if (std::system(command.c_str()) != 0) throw std::runtime_error("mosquitto_passwd failed");
    const std::string acl = files.Write("acl", "user device\ntopic readwrite devices/#\n"
                                               "user other\ntopic read devices/#\n");
    return "allow_anonymous false\npassword_file " + passwords + "\nacl_file " + acl + "\n";
  }
  static const testing::TempDir& Files() {
    static const testing::TempDir files;
    return files;
  }

  EndpointOptions Options(const std::string& user, const std::string& password,
                          int protocol_version = 5) const {
    EndpointOptions options = OptionsFor(server_.Url("devices/{topic}"));
    options.mqtt.username = user;
    options.mqtt.password = password;
    options.mqtt.protocol_version = protocol_version;
    return options;
  }

  MosquittoServer server_;
};

TEST_F(MqttAuth, UsernameAndPasswordAuthenticate) {
  Subscriber subscriber(server_, "devices/#", "device", "device-secret");
  const std::string id = IdOf(1);
  const Result result =
      MakeSink(Options("device", "device-secret"))->Push({.message_id = id, .topic = "t", .payload = "1"});
  EXPECT_EQ(result.outcome, Outcome::kDelivered) << result.error;
  EXPECT_EQ(subscriber.WaitFor(1).size(), 1U);
}

TEST_F(MqttAuth, WrongPasswordIsAConfigurationFailure) {
  const std::string id = IdOf(1);
  const Result result =
      MakeSink(Options("device", "wrong"))->Push({.message_id = id, .topic = "t", .payload = "1"});
  EXPECT_EQ(result.outcome, Outcome::kEndpointFailure);
  EXPECT_TRUE(result.configuration_failure) << result.error;
  EXPECT_EQ(result.error.find("wrong"), std::string::npos);
}

TEST_F(MqttAuth, PublishTheAclDeniesIsNotAuthorizedWithMqtt5) {
  const std::string id = IdOf(1);
  const Result result =
      MakeSink(Options("other", "other-secret"))->Push({.message_id = id, .topic = "t", .payload = "1"});
  EXPECT_EQ(result.outcome, Outcome::kEndpointFailure);
  EXPECT_TRUE(result.configuration_failure) << result.error;
}

TEST_F(MqttAuth, PublishTheAclDeniesLooksDeliveredWithMqtt311) {
  // MQTT 3.1.1 has no reason codes: the broker acknowledges and drops it.
  // This is the documented limit of 3.1.1, pinned down here.
  const std::string id = IdOf(1);
  const Result result = MakeSink(Options("other", "other-secret", 4))
                            ->Push({.message_id = id, .topic = "t", .payload = "1"});
  EXPECT_EQ(result.outcome, Outcome::kDelivered) << result.error;
}

TEST(MqttSink, Mqtt311DeliversWithQos1) {
  MosquittoServer server;
  Subscriber subscriber(server, "v3/#");
  EndpointOptions options = OptionsFor(server.Url("v3/{key}"));
  options.mqtt.protocol_version = 4;
  const Headers row_headers = {{"X-Tenant", "acme"}};
  const std::string id = IdOf(1);
  const Result result = MakeSink(options)->Push(
      {.message_id = id, .topic = "orders", .key = "k", .payload = "1", .headers = row_headers});
  EXPECT_EQ(result.outcome, Outcome::kDelivered) << result.error;
  const auto received = subscriber.WaitFor(1);
  ASSERT_EQ(received.size(), 1U);
  EXPECT_EQ(received[0].topic, "v3/k");
  EXPECT_TRUE(received[0].user_properties.empty());
}

TEST(MqttSink, MutualTlsWithTheConfiguredCa) {
  const testing::TestPki pki;
  MosquittoServer server("allow_anonymous true\ncafile " + pki.ca().cert_file + "\ncertfile " +
                         pki.server().cert_file + "\nkeyfile " + pki.server().key_file +
                         "\nrequire_certificate true\n");
  const std::string url = "mqtts://127.0.0.1:" + std::to_string(server.port()) + "/t";
  EndpointOptions options = OptionsFor(url);
  options.timeout_ms = 2000;
  options.connect_timeout_ms = 2000;
  options.tls.ca_file = pki.ca().cert_file;
  options.tls.client_cert_file = pki.client().cert_file;
  options.tls.client_key_file = pki.client().key_file;
  const std::string id = IdOf(1);
  const Result result = MakeSink(options)->Push({.message_id = id, .topic = "t", .payload = "1"});
  EXPECT_EQ(result.outcome, Outcome::kDelivered) << result.error;

  // Without a client certificate the broker refuses the handshake.
  options.tls.client_cert_file.clear();
  options.tls.client_key_file.clear();
  const Result refused = MakeSink(options)->Push({.message_id = id, .topic = "t", .payload = "1"});
  EXPECT_EQ(refused.outcome, Outcome::kEndpointFailure);
}

TEST(MqttSink, BrokerOutageIsAnEndpointFailureAndTheConnectionComesBack) {
  MosquittoServer server;
  EndpointOptions options = OptionsFor(server.Url("t"));
  options.timeout_ms = 2000;
  const std::unique_ptr<Sink> sink = MakeSink(options);
  ASSERT_EQ(sink->Push({.message_id = IdOf(1), .topic = "t", .payload = "1"}).outcome,
            Outcome::kDelivered);
  server.Stop();
  const Result down = sink->Push({.message_id = IdOf(2), .topic = "t", .payload = "2"});
  EXPECT_EQ(down.outcome, Outcome::kEndpointFailure);
  EXPECT_FALSE(down.configuration_failure);
  server.Start();
  Subscriber subscriber(server, "t");
  // libmosquitto reconnects by itself (back-off from 1 s): retry like the
  // agent, until a deadline.
  Result result;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  do {
    result = sink->Push({.message_id = IdOf(2), .topic = "t", .payload = "2"});
  } while (result.outcome != Outcome::kDelivered && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(result.outcome, Outcome::kDelivered) << result.error;
  EXPECT_GE(subscriber.WaitFor(1).size(), 1U);
}

TEST(MqttSink, NoBrokerIsAnEndpointFailure) {
  const int port = testing::FreeLoopbackPort();
  const std::unique_ptr<Sink> sink =
      MakeSink(OptionsFor("mqtt://127.0.0.1:" + std::to_string(port) + "/t"));
  const Result result = sink->Push({.message_id = IdOf(1), .topic = "t", .payload = "1"});
  EXPECT_EQ(result.outcome, Outcome::kEndpointFailure);
  EXPECT_FALSE(result.configuration_failure);
}

TEST(MqttSink, AbortFailsLaterCallsUntilReset) {
  MosquittoServer server;
  const std::unique_ptr<Sink> sink = MakeSink(OptionsFor(server.Url("t")));
  sink->AbortAll();
  const Result aborted = sink->Push({.message_id = IdOf(1), .topic = "t", .payload = "1"});
  EXPECT_EQ(aborted.error, "aborted");
  sink->ResetAbort();
  EXPECT_EQ(sink->Push({.message_id = IdOf(1), .topic = "t", .payload = "1"}).outcome,
            Outcome::kDelivered);
}

}  // namespace
}  // namespace outbox::transport
