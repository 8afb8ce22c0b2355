// Outages, misconfigured endpoints, Retry-After and clocks (issue: resilience).
#include <gtest/gtest.h>

#include <atomic>

#include "agent_fixture.h"

namespace outbox::agent::testing {
namespace {

using namespace std::chrono_literals;

// A receiver whose answer the test switches: a status for everyone, or for
// one key only.
class ResilienceTest : public AgentTest {
 protected:
  void StartSwitchableServer() {
    server_.Post("/events", [this](const httplib::Request& req, httplib::Response& res) {
      const std::string key = req.get_header_value("X-Key");
      std::lock_guard lock(mutex_);
      ++requests_[key];
      if (!failing_key_.empty() && key == failing_key_) {
        res.status = 500;
        return;
      }
      res.status = status_;
      if (!retry_after_.empty()) res.set_header("Retry-After", retry_after_);
    });
    server_.Start();
  }
  void Answer(int status, std::string retry_after = "") {
    std::lock_guard lock(mutex_);
    status_ = status;
    retry_after_ = std::move(retry_after);
  }
  void FailOnly(std::string key) {
    std::lock_guard lock(mutex_);
    failing_key_ = std::move(key);
  }
  int Requests(const std::string& key) {
    std::lock_guard lock(mutex_);
    return requests_[key];
  }
  int TotalRequests() {
    std::lock_guard lock(mutex_);
    int total = 0;
    for (const auto& [key, n] : requests_) total += n;
    return total;
  }

  // The row's key travels in a header of its own so the server can script by key.
  std::int64_t CommitKeyed(Agent* agent, const std::string& key) {
    Transaction txn(agent, *producer_);
    const auto id = txn.Enqueue({"t", key, "{}", "{\"X-Key\": \"" + key + "\"}", {}}).id;
    txn.Commit();
    return id;
  }

  Options FastOptions() {
    Options options = BaseOptions();
    TopicOptions topic = HttpTopic();
    topic.retry.max_attempts = 2;
    topic.retry.first_interval_ms = 10;
    topic.retry.max_interval_ms = 50;
    topic.breaker.failure_threshold = 3;
    topic.breaker.open_ms = 20;
    topic.breaker.max_open_ms = 80;
    options.topics["t"] = topic;
    options.sweep_interval_ms = 10;
    return options;
  }

  std::int64_t MaxAttempts() {
    SQLite::Statement q(*observer_, "SELECT coalesce(max(attempts), 0) FROM outbox");
    q.executeStep();
    return q.getColumn(0).getInt64();
  }

  std::mutex mutex_;
  int status_ = 200;                  // guarded by mutex_
  std::string retry_after_;           // guarded by mutex_
  std::string failing_key_;           // guarded by mutex_
  std::map<std::string, int> requests_;  // guarded by mutex_
};

TEST_F(ResilienceTest, EndpointDownForEveryoneSpendsNoAttempts) {
  StartSwitchableServer();
  Answer(503);
  Agent agent(FastOptions());
  agent.Start();
  for (int i = 0; i < 50; ++i) CommitKeyed(&agent, "k" + std::to_string(i));
  // Probes keep going out while the breaker cycles; none may cost anything.
  ASSERT_TRUE(WaitFor([&] { return TotalRequests() >= 30; }));
  EXPECT_EQ(CountStatus(store::Status::kDead), 0);
  EXPECT_EQ(MaxAttempts(), 0);
  Answer(200);
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == 50; }));
  agent.Stop();
  // A 503 already on its way back when others were acknowledged again may
  // rightly cost its message one attempt; never more, and nobody died.
  EXPECT_LE(MaxAttempts(), 1);
  const MetricsSnapshot snapshot = agent.Snapshot();
  EXPECT_GT(snapshot.topics.at("t").attempts_saved, 0);
  EXPECT_EQ(snapshot.topics.at("t").dead, 0);
}

TEST_F(ResilienceTest, AMessageTheReceiverKeepsRefusingUsesUpItsOwnBudget) {
  StartSwitchableServer();
  FailOnly("bad");
  Options options = FastOptions();
  options.topics["t"].breaker.failure_threshold = 1000;
  Agent agent(options);
  agent.Start();
  const auto bad = CommitKeyed(&agent, "bad");
  // Others keep being acknowledged, so each of its failures is its own.
  for (int i = 0; i < 200 && Row(bad).status != store::Status::kDead; ++i) {
    const auto good = CommitKeyed(&agent, "good-" + std::to_string(i));
    ASSERT_TRUE(WaitFor([&] { return Row(good).status == store::Status::kDelivered; }));
  }
  const store::Row row = Row(bad);
  EXPECT_EQ(row.status, store::Status::kDead);
  EXPECT_EQ(row.attempts, 2);
  EXPECT_EQ(CountStatus(store::Status::kDead), 1);
  agent.Stop();
}

TEST_F(ResilienceTest, RetryAfterDefersWithoutSpendingAnAttempt) {
  StartSwitchableServer();
  Answer(429, "1");
  Options options = FastOptions();
  options.topics["t"].retry.max_interval_ms = 5000;
  Agent agent(options);
  agent.Start();
  const auto first = CommitKeyed(&agent, "first");
  ASSERT_TRUE(WaitFor([&] { return Row(first).last_attempt_at.has_value(); }));
  Answer(200);
  const store::Row deferred = Row(first);
  EXPECT_EQ(deferred.attempts, 0);
  EXPECT_GE(deferred.next_attempt_at - *deferred.last_attempt_at, 1000);
  ASSERT_TRUE(WaitFor([&] { return Row(first).status == store::Status::kDelivered; }));
  const store::Row delivered = Row(first);
  EXPECT_GE(delivered.updated_at - *deferred.last_attempt_at, 1000);
  EXPECT_EQ(delivered.attempts, 0);
  agent.Stop();
}

TEST_F(ResilienceTest, UnauthorizedOpensTheBreakerAndDeadLettersNothing) {
  StartSwitchableServer();
  Answer(401);
  Options options = FastOptions();
  options.topics["t"].breaker.open_ms = 60'000;
  options.topics["t"].breaker.max_open_ms = 60'000;
  Agent agent(options);
  agent.Start();
  for (int i = 0; i < 10; ++i) CommitKeyed(&agent, "k" + std::to_string(i));
  ASSERT_TRUE(WaitFor([&] {
    const auto snapshot = agent.Snapshot();
    return !snapshot.breakers.empty() && snapshot.breakers[0].state == "open";
  }));
  // Whatever was already on its way may fail too, but nothing dies and the
  // backlog waits.
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kInFlight) == 0; }));
  EXPECT_EQ(CountStatus(store::Status::kDead), 0);
  EXPECT_EQ(CountStatus(store::Status::kPending), 10);
  EXPECT_EQ(MaxAttempts(), 0);
  EXPECT_LE(TotalRequests(), 10);
  agent.Stop();
}

TEST_F(ResilienceTest, GoneEndpointGetsNothingMore) {
  StartSwitchableServer();
  Answer(410);
  Agent agent(FastOptions());
  agent.Start();
  const auto first = CommitKeyed(&agent, "first");
  ASSERT_TRUE(WaitFor([&] {
    const auto snapshot = agent.Snapshot();
    return !snapshot.breakers.empty() && snapshot.breakers[0].state == "gone";
  }));
  ASSERT_TRUE(WaitFor([&] { return Row(first).status == store::Status::kPending; }));
  const int before = TotalRequests();
  for (int i = 0; i < 5; ++i) CommitKeyed(&agent, "later-" + std::to_string(i));
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kInFlight) == 0; }));
  EXPECT_EQ(TotalRequests(), before);
  EXPECT_EQ(CountStatus(store::Status::kDead), 0);
  agent.Stop();
}

TEST_F(ResilienceTest, AWeekOfflineDeadLettersNothingAndThenDrains) {
  StartSwitchableServer();
  Answer(503);
  Options options = FastOptions();
  options.sweep_interval_ms = 3'600'000;  // passes only when the test asks
  options.topics["t"].retry.max_attempts = 3;
  options.topics["t"].retry.max_age_ms = 86'400'000;  // a day: the outage must pause it
  options.topics["t"].retry.max_interval_ms = 3'600'000;
  options.topics["t"].breaker.max_open_ms = 300'000;
  Agent agent(options);
  agent.Start();
  for (int i = 0; i < 20; ++i) CommitKeyed(&agent, "k" + std::to_string(i));
  for (int hour = 0; hour < 7 * 24; ++hour) {
    const int before = TotalRequests();
    clock_->Advance(1h);
    agent.NotifyExternalCommit();
    // The probe went out and its failure is recorded (the breaker reopened).
    ASSERT_TRUE(WaitFor([&] {
      return TotalRequests() > before && CountStatus(store::Status::kInFlight) == 0;
    })) << "hour " << hour;
  }
  EXPECT_EQ(CountStatus(store::Status::kDead), 0);
  EXPECT_EQ(MaxAttempts(), 0);
  Answer(200);
  clock_->Advance(1h);
  agent.NotifyExternalCommit();
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == 20; }));
  agent.Stop();
}

TEST_F(ResilienceTest, RowsScheduledBeforeTheClockJumpedBackAreDueAtOnce) {
  StartSwitchableServer();
  // Scheduled a year ahead by a clock that has since been corrected.
  app_->exec(
      "INSERT INTO outbox(topic, msg_key, payload, next_attempt_at) VALUES('t', 'stuck', '{}',"
      " CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) + 31536000000)");
  Options options = FastOptions();
  options.sweep_interval_ms = 20;
  Agent agent(options);
  agent.Start();
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == 1; }));
  agent.Stop();
}

}  // namespace
}  // namespace outbox::agent::testing
