// Scheduled (deliver_at) and expiring (expires_at, ttl_ms) messages through a
// real agent, a real receiver and real SQLite; time moves by the fake clock.
#include <gtest/gtest.h>

#include "agent_fixture.h"

namespace outbox::agent::testing {
namespace {

using namespace std::chrono_literals;

class ScheduleTest : public AgentTest {
 protected:
  void StartReceiver(int status) {
    status_ = status;
    server_.Post("/events", [this](const httplib::Request&, httplib::Response& res) {
      res.status = status_.load();
    });
    server_.Start();
  }

  Options Sweeping() {
    Options options = BaseOptions();
    options.sweep_interval_ms = 20;
    options.topics["t"] = HttpTopic();
    return options;
  }

  std::int64_t Enqueue(Agent* agent, const std::string& key, std::optional<std::int64_t> deliver_at,
                       std::optional<std::int64_t> expires_at) {
    Transaction txn(agent, *producer_);
    store::NewMessage message{"t", key, "{}", "", {}};
    message.deliver_at = deliver_at;
    message.expires_at = expires_at;
    const auto id = txn.Enqueue(message).id;
    txn.Commit();
    return id;
  }

  int Requests() { return static_cast<int>(server_.requests().size()); }

  std::atomic<int> status_{200};
};

// outbox_oldest_pending_age_seconds counts due rows only: a message
// written three hours ago for delivery in two hours is not late, and does
// not fire OutboxOldestPendingTooOld (packaging/prometheus).
TEST_F(ScheduleTest, AScheduledMessageDoesNotAgeTheOldestPendingGauge) {
  StartReceiver(200);
  Agent agent(Sweeping());
  agent.Start();
  const std::int64_t now = clock_->WallMs();
  SQLite::Statement q(*app_,
                      "INSERT INTO outbox(topic, msg_key, payload, created_at, deliver_at)"
                      " VALUES('t', 'later', '{}', ?, ?)");
  q.bind(1, now - 3 * 3'600'000);
  q.bind(2, now + 2 * 3'600'000);
  q.exec();
  const std::string text = RenderPrometheus(agent.Snapshot());
  agent.Stop();
  EXPECT_NE(text.find("outbox_pending{topic=\"t\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("outbox_oldest_pending_age_seconds{topic=\"t\"} 0\n"), std::string::npos)
      << text;
}

TEST_F(ScheduleTest, AScheduledMessageWaitsForItsTimeAndIsThenSentOnce) {
  StartReceiver(200);
  Agent agent(Sweeping());
  agent.Start();
  const std::int64_t at = clock_->WallMs() + 3'600'000;
  const auto id = Enqueue(&agent, "later", at, std::nullopt);
  const auto now_id = Enqueue(&agent, "now", std::nullopt, std::nullopt);
  ASSERT_TRUE(WaitFor([&] { return Row(now_id).status == store::Status::kDelivered; }));
  // Several sweeps later it still waits (the eager path skipped it too).
  const std::int64_t passes = agent.WriterTransactions();
  ASSERT_TRUE(WaitFor([&] { return agent.WriterTransactions() > passes + 5; }));
  EXPECT_EQ(Row(id).status, store::Status::kPending);
  EXPECT_EQ(Row(id).next_attempt_at, at);
  EXPECT_EQ(Requests(), 1);
  clock_->Advance(3601s);
  ASSERT_TRUE(WaitFor([&] { return Row(id).status == store::Status::kDelivered; }));
  EXPECT_EQ(Requests(), 2);
  agent.Stop();
}

TEST_F(ScheduleTest, TheClockJumpRuleDoesNotFireForAScheduledMessage) {
  StartReceiver(200);
  Options options = Sweeping();
  options.topics["t"].retry.max_interval_ms = 60'000;  // the schedule lies far beyond the cap
  Agent agent(options);
  agent.Start();
  const auto id = Enqueue(&agent, "later", clock_->WallMs() + 3'600'000, std::nullopt);
  const std::int64_t passes = agent.WriterTransactions();
  ASSERT_TRUE(WaitFor([&] { return agent.WriterTransactions() > passes + 5; }));
  EXPECT_EQ(Row(id).status, store::Status::kPending);
  EXPECT_EQ(Requests(), 0);
  agent.Stop();
}

TEST_F(ScheduleTest, SchedulingMoreThanAYearAheadIsRefused) {
  Agent agent(Sweeping());
  EXPECT_THROW(Enqueue(&agent, "too-late", clock_->WallMs() + 400LL * 86'400'000, std::nullopt),
               std::invalid_argument);
}

TEST_F(ScheduleTest, AnExpiringMessageDiesDuringAnOutageWithNoAttemptSpent) {
  StartReceiver(503);
  Options options = Sweeping();
  options.topics["t"].retry.first_interval_ms = 1000;
  Agent agent(options);
  agent.Start();
  const auto id = Enqueue(&agent, "soon", std::nullopt, clock_->WallMs() + 5'000);
  ASSERT_TRUE(WaitFor([&] { return Requests() >= 1; }));
  clock_->Advance(6s);
  ASSERT_TRUE(WaitFor([&] { return Row(id).status == store::Status::kDead; }));
  const store::Row row = Row(id);
  EXPECT_EQ(row.dead_reason, "expired");
  EXPECT_EQ(row.last_error, "expired");
  EXPECT_EQ(row.attempts, 0);
  agent.Stop();
  const TopicCounters counters = agent.Snapshot().topics.at("t");
  EXPECT_EQ(counters.expired, 1);
  EXPECT_EQ(counters.dead, 1);
  EXPECT_NE(RenderPrometheus(agent.Snapshot()).find("outbox_expired_total{topic=\"t\"} 1"),
            std::string::npos);
}

TEST_F(ScheduleTest, TheTopicsTtlExpiresMessagesWithoutTheirOwnDeadline) {
  StartReceiver(503);
  Options options = Sweeping();
  options.topics["t"].ttl_ms = 10'000;
  Agent agent(options);
  agent.Start();
  const auto id = Enqueue(&agent, "ttl", std::nullopt, std::nullopt);
  ASSERT_TRUE(WaitFor([&] { return Requests() >= 1; }));
  EXPECT_NE(Row(id).status, store::Status::kDead);
  clock_->Advance(11s);
  ASSERT_TRUE(WaitFor([&] { return Row(id).status == store::Status::kDead; }));
  EXPECT_EQ(Row(id).dead_reason, "expired");
  agent.Stop();
}

TEST_F(ScheduleTest, AnAlreadyPastDeadlineExpiresAtOnceWithoutASend) {
  StartReceiver(200);
  Agent agent(Sweeping());
  agent.Start();
  const auto id = Enqueue(&agent, "late", std::nullopt, clock_->WallMs() - 1000);
  ASSERT_TRUE(WaitFor([&] { return Row(id).status == store::Status::kDead; }));
  EXPECT_EQ(Row(id).dead_reason, "expired");
  EXPECT_EQ(Requests(), 0);
  agent.Stop();
}

TEST_F(ScheduleTest, ADeadlineBeforeTheClockFloorIsUnknownAndTheMessageIsSent) {
  StartReceiver(200);
  Agent agent(Sweeping());
  agent.Start();
  // Written by a device whose clock was not set yet (1970).
  const auto id = Enqueue(&agent, "unsynced", std::nullopt, 60'000);
  ASSERT_TRUE(WaitFor([&] { return Row(id).status == store::Status::kDelivered; }));
  EXPECT_EQ(Requests(), 1);
  agent.Stop();
}

TEST_F(ScheduleTest, OnDeadRunsForAnExpiredMessage) {
  StartReceiver(503);
  app_->exec("CREATE TABLE expired_orders(msg_key TEXT, reason TEXT)");
  Options options = Sweeping();
  options.topics["t"].hooks.on_dead_sql = "INSERT INTO expired_orders VALUES(:key, :dead_reason)";
  Agent agent(options);
  agent.Start();
  const auto id = Enqueue(&agent, "soon", std::nullopt, clock_->WallMs() + 5'000);
  ASSERT_TRUE(WaitFor([&] { return Requests() >= 1; }));
  clock_->Advance(6s);
  ASSERT_TRUE(WaitFor([&] { return Row(id).status == store::Status::kDead; }));
  SQLite::Statement q(*observer_, "SELECT count(*) FROM expired_orders WHERE msg_key = 'soon'"
                                  " AND reason = 'expired'");
  q.executeStep();
  EXPECT_EQ(q.getColumn(0).getInt(), 1);
  agent.Stop();
}

// Time and row ids past 32 bits through the agent, for Debian's armhf, whose
// time_t is 32 bits (run there under qemu-arm by packaging/dev.sh cross
// armhf): the agent's clocks set 14 years ahead (the wall clock to 2040, boot
// time past 2^32 ms, which leases count in) while the application writes
// rows in its own time; a scheduled message and a row whose id is past 2^32
// are claimed, leased and delivered, and marked delivered in 2040. (The times a
// row is written with are checked past 2038 by the Year2038 tests and the
// cross smoke run's expires_at of 2040.)
TEST_F(ScheduleTest, TimesPast2038AndIdsPast4GAreKeptWhole) {
  constexpr std::int64_t k2040Ms = 2'208'988'800'000;  // 2040-01-01T00:00:00Z
  constexpr std::int64_t kIdPast32Bits = (std::int64_t{1} << 32) + 5;
  const std::int64_t written = clock_->WallMs();
  clock_->Advance(std::chrono::milliseconds(k2040Ms - written));
  ASSERT_GT(clock_->Boot().ms, std::int64_t{1} << 32);
  StartReceiver(200);
  Agent agent(Sweeping());
  agent.Start();
  const std::int64_t id = Enqueue(&agent, "k2040", written + 50, std::nullopt);
  SQLite::Statement insert(*app_,
                           "INSERT INTO outbox(id, topic, msg_key, payload) VALUES(?, 't', 'big', '{}')");
  insert.bind(1, kIdPast32Bits);
  insert.exec();
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == 2; }));
  agent.Stop();
  const store::Row scheduled = Row(id);
  EXPECT_EQ(scheduled.deliver_at, written + 50);
  EXPECT_GE(scheduled.updated_at, k2040Ms);
  const store::Row big = Row(kIdPast32Bits);
  EXPECT_EQ(big.id, kIdPast32Bits);
  EXPECT_GE(big.updated_at, k2040Ms);
  EXPECT_EQ(Requests(), 2);
}

}  // namespace
}  // namespace outbox::agent::testing
