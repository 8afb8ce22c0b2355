// Message attributes on the wire: Schema-Version, CloudEvents dataschema and
// the W3C trace context, through a real agent and a real receiver.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace outbox::agent::testing
