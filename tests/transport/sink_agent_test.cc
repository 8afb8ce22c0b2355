// An Agent delivering committed messages into a real nats-server JetStream
// stream through the NATS sink: every message lands exactly once (count and
// ids), also across a server outage. The agent picks the sink from the
// topic's nats:// URL, as outboxd's config does.
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

#include "../common/wait_for.h"
#include "broker_servers.h"
#include "commit_orders.h"
#include "jetstream_stream.h"
#include "outbox/agent.h"
#include "outbox/store.h"
#include "outbox/transport.h"

namespace outbox::transport {
namespace {

using namespace std::chrono_literals;

using outbox::testing::WaitFor;

// Long enough for a loaded CI machine; the waits end as soon as they can.
constexpr std::chrono::milliseconds kDeadline = 60s;

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
    topic.endpoint.url = server_.Url("orders");
    topic.endpoint.timeout_ms = 1000;
    topic.endpoint.connect_timeout_ms = 1000;
    options.topics["orders"] = topic;
    return options;
  }

  // Orders `first`.. through `agent`, 10 per transaction; their message ids.
  std::multiset<std::string> Commit(agent::Agent& agent, int first, int count) {
    const std::vector<std::string> ids =
        testing::CommitOrders(agent, *producer_, first, count, 10);
    return {ids.begin(), ids.end()};
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
  testing::JetStreamStream stream(server_.port(), "ORDERS", "orders");
  agent::Agent agent(AgentOptions());
  agent.Start();
  const std::multiset<std::string> committed = Commit(agent, 0, 1000);
  ASSERT_TRUE(WaitFor([&] { return Count("delivered") == 1000; }, kDeadline))
      << Count("delivered") << " delivered";
  agent.Stop();
  EXPECT_EQ(stream.Count(), 1000U);
  EXPECT_EQ(stream.Ids(), committed);
  EXPECT_EQ(Count("dead"), 0);
}

TEST_F(AgentIntoJetStream, ServerOutageCostsNoMessageAndLandsEachOnce) {
  {
    testing::JetStreamStream stream(server_.port(), "ORDERS", "orders");
  }
  agent::Agent agent(AgentOptions());
  agent.Start();
  std::multiset<std::string> committed = Commit(agent, 0, 200);
  ASSERT_TRUE(WaitFor([&] { return Count("delivered") == 200; }, kDeadline));
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
  }, kDeadline));
  server_.Start();
  ASSERT_TRUE(WaitFor([&] { return Count("delivered") == 500; }, kDeadline))
      << Count("delivered") << " delivered, " << Count("dead") << " dead";
  agent.Stop();
  EXPECT_EQ(Count("dead"), 0);
  testing::JetStreamStream stream(server_.port(), "ORDERS", "orders");
  EXPECT_EQ(stream.Count(), 500U);
  EXPECT_EQ(stream.Ids(), committed);
}

}  // namespace
}  // namespace outbox::transport
