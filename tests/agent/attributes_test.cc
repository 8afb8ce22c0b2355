// Message attributes on the wire: Schema-Version, CloudEvents dataschema and
// the W3C trace context, through a real agent and a real receiver.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

#include "agent_fixture.h"

namespace outbox::agent::testing {
namespace {

using transport::testing::RecordedRequest;

constexpr char kTraceparent[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

class AttributesTest : public AgentTest {
 protected:
  void SetUp() override {
    server_.Post("/events", [](const httplib::Request&, httplib::Response& res) {
      res.status = 200;
    });
    server_.Start();
  }

  RecordedRequest SendOne(TopicOptions topic, std::optional<std::string> schema_version) {
    Options options = BaseOptions();
    options.topics["t"] = std::move(topic);
    Agent agent(options);
    agent.Start();
    Transaction txn(&agent, *producer_);
    store::NewMessage message{"t", "k", R"({"a":1})",
                              std::string(R"({"traceparent":")") + kTraceparent +
                                  R"(","tracestate":"vendor=1"})",
                              {}};
    message.schema_version = std::move(schema_version);
    txn.Enqueue(message);
    txn.Commit();
    EXPECT_TRUE(server_.WaitForRequests(1, std::chrono::seconds(10)));
    agent.Stop();
    return server_.requests().front();
  }
};

TEST_F(AttributesTest, SchemaVersionAndTraceContextTravelAsHeaders) {
  const auto request = SendOne(HttpTopic(), "2");
  EXPECT_EQ(request.Header("Schema-Version"), "2");
  EXPECT_EQ(request.Header("traceparent"), kTraceparent);
  EXPECT_EQ(request.Header("tracestate"), "vendor=1");
}

TEST_F(AttributesTest, BinaryCloudEventsCarryDataschemaAndTheTracingExtension) {
  TopicOptions topic = HttpTopic();
  topic.endpoint.cloudevents = transport::CloudEventsMode::kBinary;
  topic.endpoint.dataschema = "https://schemas.example/order/{schema_version}.json";
  const auto request = SendOne(topic, "3");
  EXPECT_EQ(request.Header("ce-dataschema"), "https://schemas.example/order/3.json");
  EXPECT_EQ(request.Header("ce-traceparent"), kTraceparent);
  EXPECT_EQ(request.Header("ce-tracestate"), "vendor=1");
  EXPECT_EQ(request.Header("Schema-Version"), "3");
}

TEST_F(AttributesTest, StructuredCloudEventsCarryDataschemaAndTheTracingExtension) {
  TopicOptions topic = HttpTopic();
  topic.endpoint.cloudevents = transport::CloudEventsMode::kStructured;
  topic.endpoint.dataschema = "https://schemas.example/order/{schema_version}.json";
  const auto request = SendOne(topic, "3");
  EXPECT_NE(request.body.find(R"("dataschema":"https://schemas.example/order/3.json")"),
            std::string::npos)
      << request.body;
  EXPECT_NE(request.body.find(std::string(R"("traceparent":")") + kTraceparent + "\""),
            std::string::npos)
      << request.body;
}

TEST_F(AttributesTest, ATemplateWithThePlaceholderIsLeftOutWithoutAVersion) {
  TopicOptions topic = HttpTopic();
  topic.endpoint.cloudevents = transport::CloudEventsMode::kBinary;
  topic.endpoint.dataschema = "https://schemas.example/order/{schema_version}.json";
  const auto request = SendOne(topic, std::nullopt);
  EXPECT_FALSE(request.Has("ce-dataschema"));
  EXPECT_FALSE(request.Has("Schema-Version"));
}

TEST_F(AttributesTest, AVersionWithItsOwnUrlGoesThereAndOthersToTheTopicUrl) {
  server_.Post("/v3", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  Options options = BaseOptions();
  TopicOptions topic = HttpTopic();
  topic.url_by_schema_version["3"] = server_.Url("/v3");
  options.topics["t"] = topic;
  Agent agent(options);
  agent.Start();
  for (std::optional<std::string> version : {std::optional<std::string>("3"),
                                             std::optional<std::string>("2"),
                                             std::optional<std::string>()}) {
    Transaction txn(&agent, *producer_);
    store::NewMessage message{"t", "k" + version.value_or("none"), R"({"a":1})", "", {}};
    message.schema_version = version;
    txn.Enqueue(message);
    txn.Commit();
  }
  ASSERT_TRUE(server_.WaitForRequests(3, std::chrono::seconds(10)));
  agent.Stop();
  std::map<std::string, std::string> path_by_version;
  for (const auto& request : server_.requests()) {
    path_by_version[request.Header("Schema-Version")] = request.path;
  }
  EXPECT_EQ(path_by_version["3"], "/v3");
  EXPECT_EQ(path_by_version["2"], "/events");
  EXPECT_EQ(path_by_version[""], "/events");
}

TEST_F(AttributesTest, ABatchGoesAsOneRequestPerTargetUrl) {
  server_.Post("/v3", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  Options options = BaseOptions();
  TopicOptions topic = HttpTopic();
  topic.url_by_schema_version["3"] = server_.Url("/v3");
  topic.endpoint.batch.max_messages = 10;
  topic.workers = 1;
  options.topics["t"] = topic;
  // Committed before the agent starts, so the sweeper claims them together.
  int key = 0;
  app_->exec("BEGIN");
  for (const char* version : {"3", "2", "3", "2"}) {
    store::NewMessage message{"t", "k" + std::to_string(++key), R"({"a":1})", "", {}};
    message.schema_version = version;
    producer_->Enqueue(message);
  }
  app_->exec("COMMIT");
  Agent agent(options);
  agent.Start();
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == 4; }));
  agent.Stop();
  std::map<std::string, int> by_path;
  for (const auto& request : server_.requests()) {
    EXPECT_EQ(request.Header("Content-Type"), "application/x-ndjson");
    for (std::size_t at = request.body.find(R"("topic":"t")"); at != std::string::npos;
         at = request.body.find(R"("topic":"t")", at + 1)) {
      ++by_path[request.path];
    }
  }
  EXPECT_EQ(by_path["/v3"], 2);
  EXPECT_EQ(by_path["/events"], 2);
  EXPECT_EQ(by_path.size(), 2u);
}

TEST_F(AttributesTest, TraceContextFieldsOfTheProducerReachTheReceiver) {
  Options options = BaseOptions();
  options.topics["t"] = HttpTopic();
  Agent agent(options);
  agent.Start();
  Transaction txn(&agent, *producer_);
  store::NewMessage message{"t", "k", R"({"a":1})", R"({"X-Tenant":"7"})", {}};
  message.traceparent = kTraceparent;
  message.tracestate = "vendor=2";
  txn.Enqueue(message);
  txn.Commit();
  ASSERT_TRUE(server_.WaitForRequests(1, std::chrono::seconds(10)));
  agent.Stop();
  const RecordedRequest request = server_.requests().front();
  EXPECT_EQ(request.Header("traceparent"), kTraceparent);
  EXPECT_EQ(request.Header("tracestate"), "vendor=2");
  EXPECT_EQ(request.Header("X-Tenant"), "7");
}

TEST_F(AttributesTest, ATraceparentDifferentFromTheHeadersOneIsRefusedByName) {
  app_->exec("BEGIN");
  store::NewMessage message{"t", "k", "{}", R"({"Traceparent":"00-aa"})", {}};
  message.traceparent = kTraceparent;
  try {
    producer_->Enqueue(message);
    ADD_FAILURE() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "traceparent: headers_json already has a different traceparent");
  }
  // The same value twice is no conflict, and no second header.
  message.headers_json = std::string(R"({"traceparent":")") + kTraceparent + R"("})";
  const std::int64_t id = producer_->Enqueue(message).id;
  app_->exec("COMMIT");
  EXPECT_EQ(Row(id).headers_json.value_or(""), message.headers_json);
}

}  // namespace
}  // namespace outbox::agent::testing
