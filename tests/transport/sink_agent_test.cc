// An Agent delivering committed messages into a real nats-server JetStream
// stream through the NATS sink: every message lands exactly once (count and
// ids), also across a server outage. Until the agent picks the sink from the
// topic's URL itself, the sink is plugged in as the topic's Handler.
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <gtest/gtest.h>
#include <nats/nats.h>

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "broker_servers.h"
#include "outbox/agent.h"
#include "outbox/store.h"
#include "outbox/transport.h"

namespace outbox::transport {
namespace {

using namespace std::chrono_literals;

// A transport::Sink as the agent's Handler.
class SinkHandler final : public agent::Handler {
 public:
  explicit SinkHandler(EndpointOptions options) : sink_(MakeSink(std::move(options))) {}
  agent::HandlerResult Handle(const agent::Delivery& delivery) override {
    Message message{.id = delivery.message_id, .topic = delivery.topic, .key = delivery.key,
                    .payload = delivery.payload, .created_at_ms = delivery.created_at_ms};
    if (delivery.headers != nullptr) message.headers = *delivery.headers;
    Result result = sink_->Push(message);
    agent::HandlerResult out;
    out.outcome = result.outcome;
    out.http_status = result.http_status;
    out.retry_after_ms = result.retry_after_ms;
    out.error = std::move(result.error);
    return out;
  }
  void Abort() override { sink_->AbortAll(); }

 private:
  std::unique_ptr<Sink> sink_;
};

bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds limit = 60s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(2ms);  // paces the polling only
  }
  return true;
}

// Reads the stream back: its message count and every Nats-Msg-Id.
class Stream {
 public:
  Stream(int port, const char* name, const char* subject) : name_(name) {
    const std::string url = "nats://127.0.0.1:" + std::to_string(port);
    EXPECT_EQ(natsConnection_ConnectTo(&connection_, url.c_str()), NATS_OK);
    EXPECT_EQ(natsConnection_JetStream(&js_, connection_, nullptr), NATS_OK);
    jsStreamConfig config;
    jsStreamConfig_Init(&config);
    config.Name = name;
    const char* subjects[] = {subject};
    config.Subjects = subjects;
    config.SubjectsLen = 1;
    config.Storage = js_FileStorage;  // survives the server's restart
    jsStreamInfo* info = nullptr;
    EXPECT_EQ(js_AddStream(&info, js_, &config, nullptr, nullptr), NATS_OK);
    jsStreamInfo_Destroy(info);
  }
  ~Stream() {
    jsCtx_Destroy(js_);
    natsConnection_Destroy(connection_);
  }
  std::uint64_t Count() {
    jsStreamInfo* info = nullptr;
    if (js_GetStreamInfo(&info, js_, name_.c_str(), nullptr, nullptr) != NATS_OK) return 0;
    const std::uint64_t count = info->State.Msgs;
    jsStreamInfo_Destroy(info);
    return count;
  }
  std::multiset<std::string> Ids() {
    std::multiset<std::string> ids;
    const std::uint64_t count = Count();
    for (std::uint64_t seq = 1; seq <= count; ++seq) {
      natsMsg* msg = nullptr;
      if (js_GetMsg(&msg, js_, name_.c_str(), seq, nullptr, nullptr) != NATS_OK) continue;
      const char* id = nullptr;
      if (natsMsgHeader_Get(msg, "Nats-Msg-Id", &id) == NATS_OK) ids.insert(id);
      natsMsg_Destroy(msg);
    }
    return ids;
  }

 private:
  std::string name_;
  natsConnection* connection_ = nullptr;
  jsCtx* js_ = nullptr;
};

class AgentIntoJetStream : public ::testing::Test {
 protected:
  AgentIntoJetStream() : db_path_((files_.path() / "app.db").string()) {
    store::Options init;
    init.path = db_path_;
    init.create = true;
    store::Store create(init);
    app_ = std::make_unique<SQLite::Database>(db_path_, SQLite::OPEN_READWRITE, 5000);
    producer_ = std::make_unique<store::Producer>(*app_);
  }

  agent::Options AgentOptions() {
    agent::Options options;
    options.db_path = db_path_;
    options.sweep_interval_ms = 200;  // picks up what the outage sent back
    agent::TopicOptions topic;
    topic.workers = 8;
    topic.retry.first_interval_ms = 100;
    topic.retry.max_interval_ms = 500;
    topic.retry.max_attempts = 3;
    topic.retry.jitter = 0;
    topic.breaker.open_ms = 200;
    topic.breaker.max_open_ms = 500;
    options.topics["orders"] = topic;
    return options;
  }

  std::shared_ptr<SinkHandler> Handler() {
    EndpointOptions endpoint;
    endpoint.url = server_.Url("orders");
    endpoint.timeout_ms = 1000;
    endpoint.connect_timeout_ms = 1000;
    return std::make_shared<SinkHandler>(endpoint);
  }

  // Commits `count` messages, ten per application transaction; returns
  // their message ids.
  std::multiset<std::string> Commit(agent::Agent& agent, int first, int count) {
    std::multiset<std::string> ids;
    for (int i = first; i < first + count; i += 10) {
      agent::Transaction txn(&agent, *producer_);
      for (int j = i; j < std::min(i + 10, first + count); ++j) {
        const std::string key = "order-" + std::to_string(j);
        txn.Enqueue({"orders", key, R"({"order":)" + std::to_string(j) + "}", "", {}});
        ids.insert(MessageId(agent.database_id(), "orders", key));
      }
      txn.Commit();
    }
    return ids;
  }

  std::int64_t Count(std::string_view status) {
    SQLite::Database db(db_path_, SQLite::OPEN_READONLY, 5000);
    SQLite::Statement q(db, "SELECT count(*) FROM outbox WHERE status = ?");
    q.bind(1, static_cast<int>(status == "delivered" ? store::Status::kDelivered
                                                     : store::Status::kDead));
    q.executeStep();
    return q.getColumn(0).getInt64();
  }

  testing::TempDir files_;
  std::string db_path_;
  std::unique_ptr<SQLite::Database> app_;
  std::unique_ptr<store::Producer> producer_;
  testing::NatsServer server_;
};

TEST_F(AgentIntoJetStream, ThousandCommittedMessagesLandExactlyOnce) {
  Stream stream(server_.port(), "ORDERS", "orders");
  agent::Agent agent(AgentOptions());
  agent.RegisterHandler("orders", Handler());
  agent.Start();
  const std::multiset<std::string> committed = Commit(agent, 0, 1000);
  ASSERT_TRUE(WaitFor([&] { return Count("delivered") == 1000; }))
      << Count("delivered") << " delivered";
  agent.Stop();
  EXPECT_EQ(stream.Count(), 1000U);
  EXPECT_EQ(stream.Ids(), committed);
  EXPECT_EQ(Count("dead"), 0);
}

TEST_F(AgentIntoJetStream, ServerOutageCostsNoMessageAndLandsEachOnce) {
  {
    Stream stream(server_.port(), "ORDERS", "orders");
  }
  agent::Agent agent(AgentOptions());
  agent.RegisterHandler("orders", Handler());
  agent.Start();
  std::multiset<std::string> committed = Commit(agent, 0, 200);
  ASSERT_TRUE(WaitFor([&] { return Count("delivered") == 200; }));
  server_.Stop();
  const std::multiset<std::string> during = Commit(agent, 200, 300);
  committed.insert(during.begin(), during.end());
  // The outage lasts until the agent has seen it fail (and its breaker
  // opened), polled, not slept for.
  ASSERT_TRUE(WaitFor([&] {
    const agent::MetricsSnapshot snapshot = agent.Snapshot();
    for (const auto& breaker : snapshot.breakers) {
      if (breaker.state == "open") return true;
    }
    return false;
  }));
  server_.Start();
  ASSERT_TRUE(WaitFor([&] { return Count("delivered") == 500; }))
      << Count("delivered") << " delivered, " << Count("dead") << " dead";
  agent.Stop();
  EXPECT_EQ(Count("dead"), 0);
  Stream stream(server_.port(), "ORDERS", "orders");
  EXPECT_EQ(stream.Count(), 500U);
  EXPECT_EQ(stream.Ids(), committed);
}

}  // namespace
}  // namespace outbox::transport
