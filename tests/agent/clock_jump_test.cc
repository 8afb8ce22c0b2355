// Wall-clock jumps during delivery (docs/design.md, "Clocks"): leases run on
// the boot clock, so a jump of a year either way neither recycles a lease
// early nor causes a second send; retries are not delayed; rows created
// before the clock was set are not killed by their age budget.
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <mutex>

#include "agent_fixture.h"

namespace outbox::agent::testing {
namespace {

using namespace std::chrono_literals;

constexpr std::chrono::milliseconds kYear = 365 * 24h;

// Waits until the sweeper has run `passes` more full passes: each one is at
// least one writer transaction (the recycling of expired leases).
bool SweeperRan(const Agent& agent, int passes) {
  const std::int64_t from = agent.WriterTransactions();
  return WaitFor([&] { return agent.WriterTransactions() >= from + passes; });
}

TEST_F(AgentTest, WallClockJumpsOfAYearDuringASendRecycleNothingAndSendOnce) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> sends{0};
  server_.Post("/events", [&](const httplib::Request&, httplib::Response& res) {
    if (sends.fetch_add(1) == 0) released.wait();  // the send is in flight meanwhile
    res.status = 200;
  });
  server_.Start();
  Options options = BaseOptions();
  options.topics["t"] = HttpTopic();
  options.sweep_interval_ms = 5;      // the sweeper looks at the lease all the time
  options.lease_timeout_ms = 60'000;  // far longer than this test
  Agent agent(options);
  agent.Start();
  Commit(&agent, "t", "in-flight");
  ASSERT_TRUE(WaitFor([&] { return sends.load() == 1; }));

  clock_->JumpWall(kYear);  // the wall lease would be a year over
  ASSERT_TRUE(SweeperRan(agent, 10));
  EXPECT_EQ(CountStatus(store::Status::kInFlight), 1);
  clock_->JumpWall(-2 * kYear);  // a year behind: the wall lease would be absurd
  ASSERT_TRUE(SweeperRan(agent, 10));
  EXPECT_EQ(CountStatus(store::Status::kInFlight), 1);
  EXPECT_EQ(agent.Snapshot().topics.at("t").recycled, 0);

  release.set_value();
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == 1; }));
  ASSERT_TRUE(SweeperRan(agent, 5));
  agent.Stop();
  EXPECT_EQ(sends.load(), 1);  // no duplicate
}

TEST_F(AgentTest, ALeaseStillEndsWhenTheBootClockPassesIt) {
  // The jump-proof lease is still a lease: an agent that vanished is
  // replaced once the boot clock, not the wall clock, passes its end.
  std::atomic<int> sends{0};
  server_.Post("/events", [&](const httplib::Request&, httplib::Response& res) {
    sends.fetch_add(1);
    res.status = 200;
  });
  server_.Start();
  InsertPlain("t", "abandoned");
  {
    store::Options raw;
    raw.path = db_path_;
    raw.boot_clock = [this] { return clock_->Boot(); };
    store::Store ghost(raw);
    const std::int64_t now = clock_->WallMs();
    ASSERT_EQ(ghost.ClaimDue("t", "other-host/42/1/0", now + 60'000, now, 10).size(), 1u);
  }
  Options options = BaseOptions();
  options.topics["t"] = HttpTopic();
  options.sweep_interval_ms = 5;
  Agent agent(options);
  agent.Start();
  clock_->JumpWall(kYear);
  ASSERT_TRUE(SweeperRan(agent, 10));
  EXPECT_EQ(sends.load(), 0);  // the wall clock alone ends no lease
  clock_->Advance(61s);
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == 1; }));
  agent.Stop();
  EXPECT_EQ(sends.load(), 1);
}

// A row waits in its route's queue behind a send that hangs; meanwhile the
// wall clock jumps. Lapses are judged on the lease's own (boot) clock: set
// forward, the wall clock reverts nothing; set back, it does not let a row
// whose lease lapsed (and which the sweeper recycled and claimed again) go
// out a second time.
class QueuedRowTest : public AgentTest {
 protected:
  // Starts an agent with one worker whose first send hangs until Release(),
  // and a second row queued behind it, claimed by the eager path.
  void StartWithAQueuedRow(std::int64_t sweep_interval_ms) {
    server_.Post("/events", [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard lock(mutex_);
        ++sends_[req.body];
      }
      if (first_.exchange(false)) released_.wait();
      res.status = 200;
    });
    server_.Start();
    Options options = BaseOptions();
    TopicOptions topic = HttpTopic();
    topic.workers = 1;
    topic.endpoint.timeout_ms = 120'000;
    options.topics["t"] = topic;
    options.sweep_interval_ms = sweep_interval_ms;
    options.lease_timeout_ms = 60'000;
    agent_ = std::make_unique<Agent>(options);
    agent_->Start();
    Commit(agent_.get(), "t", "first", R"({"n":1})");
    ASSERT_TRUE(WaitFor([&] { return Sends(R"({"n":1})") == 1; }));
    second_ = Commit(agent_.get(), "t", "second", R"({"n":2})");
    ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kInFlight) == 2; }));
  }
  void Release() { release_.set_value(); }
  int Sends(const std::string& body) {
    std::lock_guard lock(mutex_);
    return sends_[body];
  }
  void TearDown() override {
    if (!released_called_) release_.set_value();
    if (agent_) agent_->Stop();
  }

  std::promise<void> release_;
  std::shared_future<void> released_ = release_.get_future().share();
  bool released_called_ = false;
  std::atomic<bool> first_{true};
  std::mutex mutex_;
  std::map<std::string, int> sends_;  // by body; guarded by mutex_
  std::unique_ptr<Agent> agent_;
  std::int64_t second_ = 0;
};

TEST_F(QueuedRowTest, AWallClockSetForwardRevertsNoQueuedRow) {
  StartWithAQueuedRow(3'600'000);  // the eager path alone: a reverted row would stay pending
  clock_->JumpWall(kYear);  // by wall time, every lease is a year over
  released_called_ = true;
  Release();
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == 2; }));
  agent_->Stop();
  EXPECT_EQ(Sends(R"({"n":2})"), 1);
  EXPECT_EQ(Row(second_).lease_token, 1);  // claimed once: never handed back
}

TEST_F(QueuedRowTest, AWallClockSetBackSendsNoRowWhoseLeaseLapsedTwice) {
  StartWithAQueuedRow(5);
  // The leases end on the boot clock while the wall clock goes back a year:
  // by wall time they would still run for a year.
  clock_->JumpWall(-kYear - 61s);
  clock_->Advance(61s);
  // The sweeper recycles both rows and claims them again.
  ASSERT_TRUE(WaitFor([&] { return Row(second_).lease_token >= 2; }));
  released_called_ = true;
  Release();
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == 2; }));
  agent_->Stop();
  EXPECT_EQ(Sends(R"({"n":2})"), 1);  // the stale queued copy was not sent
}

TEST_F(AgentTest, ARetryIsNotDelayedByAWallClockJumpEitherWay) {
  for (const std::chrono::milliseconds jump : {kYear, -kYear}) {
    std::atomic<int> calls{0};
    auto handler = std::make_shared<ScriptedHandler>([&](const Delivery&) {
      return calls.fetch_add(1) == 0 ? Failure(500) : Delivered();
    });
    Options options = BaseOptions();
    TopicOptions topic;
    topic.retry.first_interval_ms = 50;
    topic.retry.jitter = 0;
    options.topics["t"] = topic;
    options.sweep_interval_ms = 5;
    Agent agent(options);
    agent.RegisterHandler("t", handler);
    agent.Start();
    const std::string key = "retry-" + std::to_string(jump.count());
    Commit(&agent, "t", key);
    ASSERT_TRUE(WaitFor([&] { return calls.load() == 1; }));
    clock_->JumpWall(jump);  // after the row was rescheduled 50 ms ahead
    // Due on the next passes, not in a year: WaitFor's limit is 10 s.
    ASSERT_TRUE(WaitFor([&] { return calls.load() == 2; })) << jump.count();
    agent.Stop();
    EXPECT_EQ(handler->Calls(key), 2);
    clock_->JumpWall(-jump);
  }
}

TEST_F(AgentTest, RowsCreatedBeforeTheClockWasSetKeepTheirAgeBudget) {
  std::mutex mutex;
  std::map<std::string, int> calls;  // guarded by mutex
  auto handler = std::make_shared<ScriptedHandler>([&](const Delivery& d) {
    std::lock_guard lock(mutex);
    const bool first = ++calls[std::string(d.key)] == 1;
    return first && d.key != "today" ? Failure(500) : Delivered();  // 1970 rows fail once
  });
  Options options = BaseOptions();
  TopicOptions topic;
  topic.retry.first_interval_ms = 10;
  topic.retry.jitter = 0;
  topic.retry.max_age_ms = 3'600'000;  // an hour: by wall time exhausted 56 years ago
  options.topics["t"] = topic;
  options.sweep_interval_ms = 5;
  Agent agent(options);
  agent.RegisterHandler("t", handler);
  agent.Start();
  // An acknowledgement first, so that the failures below cost an attempt
  // (and so reach the age check).
  Commit(&agent, "t", "today");
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == 1; }));
  // Inserted while the device believed it was 1970, before NTP set the clock.
  for (int i = 0; i < 3; ++i) {
    SQLite::Statement q(*app_,
                        "INSERT INTO outbox(topic, msg_key, payload, created_at, next_attempt_at)"
                        " VALUES('t', ?, '{}', 120000, 120000)");
    q.bind(1, "from-1970-" + std::to_string(i));
    q.exec();
  }
  ASSERT_TRUE(WaitFor([&] {
    return CountStatus(store::Status::kDelivered) + CountStatus(store::Status::kDead) == 4;
  }));
  agent.Stop();
  EXPECT_EQ(CountStatus(store::Status::kDead), 0);
  SQLite::Statement attempts(*observer_,
                             "SELECT count(*) FROM outbox WHERE msg_key LIKE 'from-1970-%'"
                             " AND attempts = 1");
  attempts.executeStep();
  EXPECT_EQ(attempts.getColumn(0).getInt(), 3);  // each failure was counted, and survived
}

}  // namespace
}  // namespace outbox::agent::testing
