#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <set>
#include <thread>

#include "agent_fixture.h"

namespace outbox::agent::testing {
namespace {

using namespace std::chrono_literals;

// The receiver answers 200 and counts deliveries per Idempotency-Key.
class AgentDeliveryTest : public AgentTest {
 protected:
  void StartCountingServer() {
    server_.Post("/events", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mutex_);
      ++per_key_[req.get_header_value("Idempotency-Key")];
      res.status = 200;
    });
    server_.Start();
  }
  std::map<std::string, int> PerKey() {
    std::lock_guard lock(mutex_);
    return per_key_;
  }
  std::mutex mutex_;
  std::map<std::string, int> per_key_;  // guarded by mutex_
};

TEST_F(AgentDeliveryTest, DeliversEagerlyAfterCommitWithoutASweep) {
  StartCountingServer();
  Options options = BaseOptions();
  options.topics["order.created"] = HttpTopic();
  Agent agent(options);
  agent.Start();
  const auto id = Commit(&agent, "order.created", "order-1");
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == 1; }));
  EXPECT_EQ(server_.requests().size(), 1u);
  const auto request = server_.requests().front();
  EXPECT_EQ(request.Header("Idempotency-Key"),
            transport::MessageId(agent.database_id(), "order.created", "order-1"));
  EXPECT_EQ(request.body, R"({"order":1})");
  EXPECT_EQ(Row(id).attempts, 0);
  agent.Stop();
  const MetricsSnapshot snapshot = agent.Snapshot();
  EXPECT_EQ(snapshot.topics.at("order.created").delivered, 1);
  EXPECT_EQ(snapshot.topics.at("order.created").enqueued, 1);
  EXPECT_EQ(snapshot.topics.at("order.created").latency_count, 1);
}

TEST_F(AgentDeliveryTest, RollbackSendsNothing) {
  StartCountingServer();
  Options options = BaseOptions();
  options.topics["order.created"] = HttpTopic();
  Agent agent(options);
  agent.Start();
  {
    Transaction txn(&agent, *producer_);
    txn.Enqueue({"order.created", "rolled-back", "{}", "", {}});
    txn.Rollback();
  }
  {
    Transaction txn(&agent, *producer_);
    txn.Enqueue({"order.created", "abandoned", "{}", "", {}});
    // destroyed without Commit
  }
  Commit(&agent, "order.created", "kept");
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == 1; }));
  agent.Stop();
  ASSERT_EQ(server_.requests().size(), 1u);
  EXPECT_EQ(server_.requests().front().Header("Idempotency-Key"),
            transport::MessageId(agent.database_id(), "order.created", "kept"));
  SQLite::Statement count(*observer_, "SELECT count(*) FROM outbox");
  count.executeStep();
  EXPECT_EQ(count.getColumn(0).getInt(), 1);
}

TEST_F(AgentDeliveryTest, FullPoolRevertsAndTheSweeperDeliversLater) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> arrived{0};
  server_.Post("/events", [&](const httplib::Request&, httplib::Response& res) {
    if (arrived.fetch_add(1) == 0) released.wait();  // the first send blocks the only worker
    res.status = 200;
  });
  server_.Start();
  Options options = BaseOptions();
  TopicOptions topic = HttpTopic();
  topic.workers = 1;
  topic.queue_capacity = 1;
  options.topics["t"] = topic;
  options.sweep_interval_ms = 50;
  Agent agent(options);
  agent.Start();
  Commit(&agent, "t", "first");
  ASSERT_TRUE(WaitFor([&] { return arrived.load() == 1; }));
  for (int i = 0; i < 5; ++i) Commit(&agent, "t", "more-" + std::to_string(i));
  ASSERT_TRUE(WaitFor([&] { return agent.Snapshot().topics.at("t").pool_rejections > 0; }));
  release.set_value();
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == 6; }));
  agent.Stop();
  SQLite::Statement attempts(*observer_, "SELECT max(attempts) FROM outbox");
  attempts.executeStep();
  EXPECT_EQ(attempts.getColumn(0).getInt(), 0);  // a rejection is not an attempt
}

TEST_F(AgentDeliveryTest, LeasesOfAnAbandonedAgentAreDeliveredAfterTheLeaseTimeout) {
  StartCountingServer();
  InsertPlain("t", "a");
  InsertPlain("t", "b");
  {
    // An agent on another host claimed them and vanished.
    store::Options raw;
    raw.path = db_path_;
    store::Store ghost(raw);
    const std::int64_t now = clock_->WallMs();
    ghost.ClaimDue("t", "other-host/42/1/0", now + 300, now, 10);
  }
  Options options = BaseOptions();
  options.topics["t"] = HttpTopic();
  options.sweep_interval_ms = 20;
  options.lease_timeout_ms = 300;
  Agent agent(options);
  agent.Start();
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == 2; }));
  agent.Stop();
  EXPECT_GE(agent.Snapshot().topics.at("t").recycled, 2);
}

TEST_F(AgentDeliveryTest, TwoAgentsOnOneFileNeverSendAMessageTwice) {
  StartCountingServer();
  constexpr int kMessages = 200;
  Options options = BaseOptions();
  options.topics["t"] = HttpTopic();
  options.sweep_interval_ms = 10;
  options.claim_batch = 7;
  Agent first(options);
  Agent second(options);
  first.Start();
  second.Start();
  for (int i = 0; i < kMessages; ++i) {
    InsertPlain("t", "k" + std::to_string(i));
    if (i % 20 == 0) {
      first.NotifyExternalCommit();
      second.NotifyExternalCommit();
    }
  }
  first.NotifyExternalCommit();
  second.NotifyExternalCommit();
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == kMessages; }));
  first.Stop();
  second.Stop();
  const auto per_key = PerKey();
  EXPECT_EQ(per_key.size(), static_cast<std::size_t>(kMessages));
  for (const auto& [key, count] : per_key) EXPECT_EQ(count, 1) << key;
}

TEST_F(AgentDeliveryTest, GroupCommitUsesFarFewerTransactionsThanMessages) {
  StartCountingServer();
  constexpr int kMessages = 400;
  for (int i = 0; i < kMessages; ++i) InsertPlain("t", "k" + std::to_string(i));
  Options options = BaseOptions();
  TopicOptions topic = HttpTopic();
  topic.workers = 8;
  options.topics["t"] = topic;
  options.claim_batch = 100;
  Agent agent(options);
  const std::int64_t before = agent.WriterTransactions();
  agent.Start();
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == kMessages; }));
  agent.Stop();
  const std::int64_t transactions = agent.WriterTransactions() - before;
  // One claim per 100 rows plus completions grouped while others commit.
  EXPECT_LT(transactions, kMessages / 2) << transactions << " transactions";
}

TEST_F(AgentDeliveryTest, UnroutedTopicStaysPendingAndDoesNotBlockOthers) {
  StartCountingServer();
  Options options = BaseOptions();
  options.topics["routed"] = HttpTopic();
  options.sweep_interval_ms = 20;
  Agent agent(options);
  agent.Start();
  InsertPlain("nowhere", "a");
  Commit(&agent, "routed", "b");
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == 1; }));
  ASSERT_TRUE(WaitFor([&] { return agent.Snapshot().unrouted_pending == 1; }));
  agent.Stop();
  EXPECT_EQ(CountStatus(store::Status::kPending), 1);
}

TEST_F(AgentDeliveryTest, WildcardRoutesTopicsWithoutTheirOwnEntryEachUnderItsOwnLabel) {
  StartCountingServer();
  Options options = BaseOptions();
  options.topics["*"] = HttpTopic();
  options.sweep_interval_ms = 20;
  Agent agent(options);
  agent.Start();
  InsertPlain("anything", "a");
  Commit(&agent, "else", "b");
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == 2; }));
  agent.Stop();
  // metrics.max_topics (100) is far away: each topic has its own numbers.
  const MetricsSnapshot snapshot = agent.Snapshot();
  EXPECT_EQ(snapshot.topics.at("anything").delivered, 1);
  EXPECT_EQ(snapshot.topics.at("else").delivered, 1);
  EXPECT_FALSE(snapshot.topics.contains("other"));
}

TEST_F(AgentTest, BatchModeSendsManyMessagesPerRequestAndIsolatesARefusedOne) {
  std::atomic<int> lines{0};
  server_.Post("/events", [&](const httplib::Request& req, httplib::Response& res) {
    // Refuse any batch that carries the poisoned message.
    if (req.body.find("\"poison\"") != std::string::npos) {
      res.status = 422;
      return;
    }
    // One NDJSON line per member, each with its own id.
    for (std::size_t at = req.body.find("\"id\":"); at != std::string::npos;
         at = req.body.find("\"id\":", at + 1)) {
      ++lines;
    }
    res.status = 200;
  });
  server_.Start();
  constexpr int kMessages = 60;
  for (int i = 0; i < kMessages; ++i) InsertPlain("t", "k" + std::to_string(i));
  app_->exec(
      "INSERT INTO outbox(topic, msg_key, payload) VALUES('t', 'bad', '{\"poison\": 1}')");
  Options options = BaseOptions();
  TopicOptions topic = HttpTopic();
  topic.endpoint.batch.max_messages = 20;
  topic.workers = 1;
  options.topics["t"] = topic;
  options.claim_batch = 100;
  Agent agent(options);
  agent.Start();
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == kMessages; }));
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDead) == 1; }));
  agent.Stop();
  EXPECT_EQ(lines.load(), kMessages);
  // Far fewer requests than messages, even with the halving around "bad".
  EXPECT_LT(server_.requests().size(), static_cast<std::size_t>(kMessages / 2));
  SQLite::Statement dead(*observer_, "SELECT msg_key FROM outbox WHERE status = 2");
  ASSERT_TRUE(dead.executeStep());
  EXPECT_EQ(dead.getColumn(0).getString(), "bad");
}

TEST_F(AgentTest, SlowTopicDoesNotDelayAnotherTopic) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  Options options = BaseOptions();
  auto slow = std::make_shared<ScriptedHandler>([&](const Delivery&) {
    released.wait();
    return Delivered();
  });
  auto fast = std::make_shared<ScriptedHandler>([](const Delivery&) { return Delivered(); });
  Agent agent(options);
  agent.RegisterHandler("slow", slow);
  agent.RegisterHandler("fast", fast);
  agent.Start();
  for (int i = 0; i < 5; ++i) Commit(&agent, "slow", "s" + std::to_string(i));
  for (int i = 0; i < 5; ++i) Commit(&agent, "fast", "f" + std::to_string(i));
  EXPECT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == 5; }));
  release.set_value();
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == 10; }));
  agent.Stop();
}

TEST_F(AgentTest, RetryableFailureIsRescheduledByThePolicy) {
  Options options = BaseOptions();
  auto handler = std::make_shared<ScriptedHandler>(
      [](const Delivery& d) { return d.key == "bad" ? Failure(500) : Delivered(); });
  options.topics["t"].retry.first_interval_ms = 60'000;
  options.topics["t"].retry.jitter = 0;
  Agent agent(options);
  agent.RegisterHandler("t", handler);
  agent.Start();
  // The endpoint acknowledges another message after "bad" was created, so
  // its failure is its own.
  const auto bad = Commit(&agent, "t", "bad");
  ASSERT_TRUE(WaitFor([&] { return handler->Calls("bad") == 1; }));
  ASSERT_TRUE(WaitFor([&] { return Row(bad).status == store::Status::kPending; }));
  EXPECT_EQ(Row(bad).attempts, 0);  // nothing acknowledged since it was created
  Commit(&agent, "t", "good");
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == 1; }));
  clock_->Advance(61s);
  agent.NotifyExternalCommit();
  ASSERT_TRUE(WaitFor([&] { return Row(bad).attempts == 1; }));
  const store::Row row = Row(bad);
  EXPECT_EQ(row.status, store::Status::kPending);
  EXPECT_EQ(row.last_error, "HTTP 500");
  ASSERT_TRUE(row.last_attempt_at);
  EXPECT_EQ(row.next_attempt_at - *row.last_attempt_at, 60'000);
  agent.Stop();
}

TEST_F(AgentTest, ExhaustedBudgetMakesTheRowDead) {
  Options options = BaseOptions();
  auto handler = std::make_shared<ScriptedHandler>(
      [](const Delivery& d) { return d.key == "bad" ? Failure(503) : Delivered(); });
  options.topics["t"].retry.max_attempts = 2;
  options.topics["t"].retry.first_interval_ms = 1000;
  options.topics["t"].breaker.failure_threshold = 100;
  Agent agent(options);
  agent.RegisterHandler("t", handler);
  agent.Start();
  const auto bad = Commit(&agent, "t", "bad");
  // Its eager attempt first: nothing was acknowledged since it was created.
  ASSERT_TRUE(WaitFor([&] {
    return handler->Calls("bad") == 1 && Row(bad).status == store::Status::kPending;
  }));
  EXPECT_EQ(Row(bad).attempts, 0);
  for (int round = 0; round < 5 && Row(bad).status != store::Status::kDead; ++round) {
    const int calls = handler->Calls("bad");
    Commit(&agent, "t", "good-" + std::to_string(round));  // the endpoint works for others
    // Delivered in the database means the agent has also recorded the ack.
    ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == round + 1; }));
    clock_->Advance(5s);
    agent.NotifyExternalCommit();
    ASSERT_TRUE(WaitFor([&] {
      return handler->Calls("bad") > calls && Row(bad).status != store::Status::kInFlight;
    }));
  }
  const store::Row row = Row(bad);
  EXPECT_EQ(row.status, store::Status::kDead);
  EXPECT_EQ(row.attempts, 2);
  ASSERT_TRUE(row.last_error);
  EXPECT_NE(row.last_error->find("after 2 attempts"), std::string::npos) << *row.last_error;
  agent.Stop();
  EXPECT_EQ(agent.Snapshot().topics.at("t").dead, 1);
}

TEST_F(AgentTest, PermanentFailureIsDeadAtOnce) {
  Options options = BaseOptions();
  auto handler = std::make_shared<ScriptedHandler>([](const Delivery&) { return Refused(422); });
  Agent agent(options);
  agent.RegisterHandler("t", handler);
  agent.Start();
  const auto id = Commit(&agent, "t", "k");
  ASSERT_TRUE(WaitFor([&] { return Row(id).status == store::Status::kDead; }));
  EXPECT_EQ(Row(id).attempts, 1);
  EXPECT_EQ(Row(id).last_error, "HTTP 422");
  EXPECT_EQ(handler->Calls("k"), 1);
  agent.Stop();
}

TEST_F(AgentTest, CleanStopWithAHangingReceiverReturnsByItsDeadline) {
  server_.Post("/events", [this](const httplib::Request&, httplib::Response& res) {
    server_.WaitForRelease(30s);
    res.status = 200;
  });
  server_.Start();
  Options options = BaseOptions();
  TopicOptions topic = HttpTopic();
  topic.endpoint.timeout_ms = 30'000;
  topic.workers = 2;
  options.topics["t"] = topic;
  Agent agent(options);
  agent.Start();
  for (int i = 0; i < 10; ++i) Commit(&agent, "t", "k" + std::to_string(i));
  ASSERT_TRUE(server_.WaitForRequests(2, 5s));
  const auto started = std::chrono::steady_clock::now();
  agent.Stop(200ms);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 3s);
  EXPECT_EQ(CountStatus(store::Status::kInFlight), 0);
  EXPECT_EQ(CountStatus(store::Status::kPending), 10);
  SQLite::Statement attempts(*observer_, "SELECT max(attempts) FROM outbox");
  attempts.executeStep();
  EXPECT_EQ(attempts.getColumn(0).getInt(), 0);
}

TEST_F(AgentTest, AlreadyDoneMarksDeliveredWithoutSending) {
  class Done final : public Handler {
   public:
    bool AlreadyDone(const Delivery&) override { return true; }
    HandlerResult Handle(const Delivery&) override {
      ++sent;
      return Delivered();
    }
    std::atomic<int> sent{0};
  };
  auto handler = std::make_shared<Done>();
  Agent agent(BaseOptions());
  agent.RegisterHandler("t", handler);
  agent.Start();
  const auto id = Commit(&agent, "t", "k");
  ASSERT_TRUE(WaitFor([&] { return Row(id).status == store::Status::kDelivered; }));
  EXPECT_EQ(handler->sent.load(), 0);
  agent.Stop();
}

TEST_F(AgentTest, ThrowingHandlerIsAnEndpointFailureNotACrash) {
  auto handler = std::make_shared<ScriptedHandler>(
      [](const Delivery&) -> HandlerResult { throw std::runtime_error("boom"); });
  Agent agent(BaseOptions());
  agent.RegisterHandler("t", handler);
  agent.Start();
  const auto id = Commit(&agent, "t", "k");
  ASSERT_TRUE(WaitFor([&] { return Row(id).last_error.has_value(); }));
  EXPECT_EQ(Row(id).status, store::Status::kPending);
  EXPECT_NE(Row(id).last_error->find("boom"), std::string::npos);
  agent.Stop();
}

TEST_F(AgentTest, MissingUrlIsRejectedNamingTheTopic) {
  Options options = BaseOptions();
  options.topics["orders"] = TopicOptions{};
  Agent agent(options);
  try {
    agent.Start();
    FAIL() << "expected invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("topics.\"orders\".url"), std::string::npos) << e.what();
  }
}

// The library refuses what the config file refuses, in the same words: one
// table of ranges serves both.
TEST_F(AgentTest, OptionsOutOfTheConfigFilesRangeAreRefusedInItsWords) {
  Options options = BaseOptions();
  options.topics["orders"] = HttpTopic();
  options.topics["orders"].workers = 257;
  try {
    Agent agent(options);
    agent.Start();
    FAIL() << "expected invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "topics.\"orders\".workers: expected an integer from 1 to 256, got 257");
  }
}

TEST_F(AgentDeliveryTest, ACommittedRowWithoutARouteIsNotClaimedAtAll) {
  StartCountingServer();
  Options options = BaseOptions();
  options.topics["order.created"] = HttpTopic();
  Agent agent(options);
  agent.Start();
  const auto unrouted = Commit(&agent, "no.route", "k1");
  Commit(&agent, "order.created", "k2");
  // The writer applies in order: once the second row is delivered, the
  // first one's eager path has run.
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == 1; }));
  const store::Row row = Row(unrouted);
  EXPECT_EQ(row.status, store::Status::kPending);
  EXPECT_EQ(row.lease_token, 0);  // never claimed, never reverted
  agent.Stop();
}

// Agent::Snapshot is thread-safe (agent.h), also against Start and Stop: a
// library user scraping metrics while the agent stops must not read routes
// being torn down. Run under TSan (the `unit` label of the TSan stage).
TEST_F(AgentTest, SnapshotIsSafeWhileStartAndStopRunOnAnotherThread) {
  InsertPlain("nobody-routes-this", "k");  // Snapshot looks its route up
  Options options = BaseOptions();
  Agent agent(options);
  agent.RegisterHandler("t", std::make_shared<ScriptedHandler>([](const Delivery&) {
    return Delivered();
  }));
  std::atomic<int> snapshots{0};
  std::atomic<std::int64_t> unrouted_seen{0};
  {
    std::jthread scraper([&](std::stop_token stop) {
      while (!stop.stop_requested()) {
        unrouted_seen = std::max(unrouted_seen.load(), agent.Snapshot().unrouted_pending);
        ++snapshots;
      }
    });
    for (int i = 0; i < 20; ++i) {
      agent.Start();
      const int seen = snapshots.load();
      ASSERT_TRUE(WaitFor([&] { return snapshots.load() > seen + 1; }));
      agent.Stop();
    }
  }
  EXPECT_EQ(unrouted_seen.load(), 1);
}

}  // namespace
}  // namespace outbox::agent::testing
