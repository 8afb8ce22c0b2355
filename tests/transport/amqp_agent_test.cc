// An Agent delivering into rabbitmq-server through the AMQP sink: 10 000
// messages land in a durable queue as many times as confirmed; a 15 s broker
// outage with max_attempts 3 kills nothing; an unroutable message goes dead
// at once without holding up the rest; a disk alarm opens the breaker, loses
// nothing, and delivery resumes when it clears.
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../common/wait_for.h"
#include "amqp_broker.h"
#include "amqp_client.h"
#include "commit_orders.h"
#include "outbox/agent.h"
#include "outbox/store.h"
#include "outbox/transport.h"

namespace outbox::transport {
namespace {

using namespace std::chrono_literals;
using outbox::testing::WaitFor;

constexpr std::chrono::milliseconds kDeadline = 120s;
constexpr std::chrono::seconds kOutage = 15s;

class AgentIntoRabbit : public ::testing::Test {
 protected:
  AgentIntoRabbit() : db_path_((files_.path() / "app.db").string()) {
    store::Options init;
    init.path = db_path_;
    init.create = true;
    store::Store create(init);
    app_ = std::make_unique<SQLite::Database>(db_path_, SQLite::OPEN_READWRITE, 5000);
    producer_ = std::make_unique<store::Producer>(*app_);
  }

  // As a device would run, but max_attempts 3: an outage spending attempts
  // would kill messages within seconds.
  std::unique_ptr<agent::Agent> StartAgent(const transport::AmqpOptions& amqp) {
    agent::Options options;
    options.db_path = db_path_;
    options.sweep_interval_ms = 200;
    agent::TopicOptions topic;
    topic.workers = 8;
    topic.retry.first_interval_ms = 200;
    topic.retry.max_interval_ms = 1000;
    topic.retry.max_attempts = 3;
    topic.breaker.open_ms = 200;
    topic.breaker.max_open_ms = 1000;
    topic.endpoint.url = testing::Broker().Url();
    topic.endpoint.amqp = amqp;
    topic.endpoint.timeout_ms = 2000;
    topic.endpoint.connect_timeout_ms = 1000;
    options.topics["orders"] = topic;
    auto agent = std::make_unique<agent::Agent>(options);
    agent->Start();
    return agent;
  }

  static transport::AmqpOptions Queue(const std::string& name) {
    transport::AmqpOptions amqp;
    amqp.queue = name;
    return amqp;
  }

  std::set<std::string> Commit(agent::Agent& agent, int first, int count) {
    const std::vector<std::string> ids =
        testing::CommitOrders(agent, *producer_, first, count, 50);
    return {ids.begin(), ids.end()};
  }

  std::int64_t Count(store::Status status) {
    SQLite::Statement q(*app_, "SELECT count(*) FROM outbox WHERE status = ?");
    q.bind(1, static_cast<int>(status));
    q.executeStep();
    return q.getColumn(0).getInt64();
  }

  bool AllDelivered(std::int64_t total) {
    return WaitFor([&] { return Count(store::Status::kDelivered) == total; }, kDeadline);
  }

  static bool BreakerOpen(agent::Agent& agent) {
    for (const auto& breaker : agent.Snapshot().breakers) {
      if (breaker.state == "open") return true;
    }
    return false;
  }

  // What a consumer applying each message once by message_id sees: ids
  // with how often each arrived.
  static std::map<std::string, int> Arrivals(const std::vector<testing::ReceivedAmqp>& got) {
    std::map<std::string, int> arrivals;
    for (const auto& message : got) ++arrivals[message.message_id];
    return arrivals;
  }

  testing::TempDir files_;
  std::string db_path_;
  std::unique_ptr<SQLite::Database> app_;
  std::unique_ptr<store::Producer> producer_;
};

TEST_F(AgentIntoRabbit, TenThousandMessagesLandAsManyTimesAsConfirmed) {
  testing::AmqpClient client(testing::Broker().port());
  client.DeclareQueue("ten-thousand");
  std::unique_ptr<agent::Agent> agent = StartAgent(Queue("ten-thousand"));
  const std::set<std::string> committed = Commit(*agent, 0, 10'000);
  ASSERT_TRUE(AllDelivered(10'000)) << Count(store::Status::kDelivered) << " delivered";
  agent->Stop();
  const std::vector<testing::ReceivedAmqp> got = client.Drain("ten-thousand");
  // Each confirmed once with no failure in between: exactly once each.
  EXPECT_EQ(got.size(), 10'000u);
  const std::map<std::string, int> arrivals = Arrivals(got);
  std::set<std::string> ids;
  for (const auto& [id, times] : arrivals) ids.insert(id);
  EXPECT_EQ(ids, committed);
  EXPECT_EQ(Count(store::Status::kDead), 0);
}

TEST_F(AgentIntoRabbit, OutageOf15sWithThreeAttemptsKillsNothing) {
  testing::AmqpClient setup(testing::Broker().port());
  setup.DeclareQueue("outage");
  std::unique_ptr<agent::Agent> agent = StartAgent(Queue("outage"));
  std::set<std::string> committed = Commit(*agent, 0, 200);
  ASSERT_TRUE(AllDelivered(200));
  testing::Broker().Stop();
  const auto start = std::chrono::steady_clock::now();
  const std::set<std::string> during = Commit(*agent, 200, 300);
  committed.insert(during.begin(), during.end());
  ASSERT_TRUE(WaitFor([&] { return BreakerOpen(*agent); }, kDeadline));
  // The outage's length is the scenario, so it is waited out.
  std::this_thread::sleep_until(start + kOutage);
  testing::Broker().Start();
  ASSERT_TRUE(AllDelivered(500)) << Count(store::Status::kDead) << " dead";
  agent->Stop();
  EXPECT_EQ(Count(store::Status::kDead), 0);
  // The durable queue kept the persistent messages over the restart.
  testing::AmqpClient client(testing::Broker().port());
  const std::map<std::string, int> arrivals = Arrivals(client.Drain("outage"));
  std::set<std::string> ids;
  for (const auto& [id, times] : arrivals) ids.insert(id);
  EXPECT_EQ(ids, committed);
}

TEST_F(AgentIntoRabbit, UnroutableGoesDeadAtOnceAndHoldsUpNothing) {
  testing::AmqpClient client(testing::Broker().port());
  client.DeclareExchange("by-key", "direct");
  client.DeclareQueue("by-key-routed");
  for (int i = 0; i < 100; ++i) {
    if (i != 7) client.Bind("by-key-routed", "by-key", "order-" + std::to_string(i));
  }
  transport::AmqpOptions amqp;
  amqp.exchange = "by-key";
  amqp.routing_key = "{key}";
  std::unique_ptr<agent::Agent> agent = StartAgent(amqp);
  Commit(*agent, 0, 100);
  ASSERT_TRUE(AllDelivered(99)) << Count(store::Status::kDead) << " dead";
  ASSERT_TRUE(WaitFor([&] { return Count(store::Status::kDead) == 1; }, kDeadline));
  agent->Stop();
  SQLite::Statement q(*app_, "SELECT msg_key, attempts, last_error FROM outbox WHERE status = ?");
  q.bind(1, static_cast<int>(store::Status::kDead));
  ASSERT_TRUE(q.executeStep());
  EXPECT_EQ(q.getColumn(0).getString(), "order-7");
  EXPECT_EQ(q.getColumn(1).getInt(), 1);
  EXPECT_TRUE(q.getColumn(2).getString().starts_with(
      "unroutable: exchange by-key, routing key order-7"))
      << q.getColumn(2).getString();
  EXPECT_EQ(client.Count("by-key-routed"), 99u);
}

TEST_F(AgentIntoRabbit, DiskAlarmOpensTheBreakerLosesNothingAndDeliveryResumes) {
  testing::AmqpClient client(testing::Broker().port());
  client.DeclareQueue("disk-alarm");
  std::unique_ptr<agent::Agent> agent = StartAgent(Queue("disk-alarm"));
  std::set<std::string> committed = Commit(*agent, 0, 100);
  ASSERT_TRUE(AllDelivered(100));
  testing::Broker().Ctl({"set_disk_free_limit", "1000000000000000"});
  const std::set<std::string> during = Commit(*agent, 100, 400);
  committed.insert(during.begin(), during.end());
  ASSERT_TRUE(WaitFor([&] { return BreakerOpen(*agent); }, kDeadline));
  EXPECT_LT(Count(store::Status::kDelivered), 500);
  testing::Broker().Ctl({"set_disk_free_limit", "1000000"});
  ASSERT_TRUE(AllDelivered(500)) << Count(store::Status::kDead) << " dead";
  agent->Stop();
  EXPECT_EQ(Count(store::Status::kDead), 0);
  const std::map<std::string, int> arrivals = Arrivals(client.Drain("disk-alarm"));
  std::set<std::string> ids;
  for (const auto& [id, times] : arrivals) ids.insert(id);
  EXPECT_EQ(ids, committed);
}

}  // namespace
}  // namespace outbox::transport
