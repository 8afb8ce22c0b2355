// The testing kit (outbox/testing.h) through its public API: the agent on a
// shared in-memory database, the scripted receiver, RunDue with an advanced
// clock, and what Recorder, Expect and History report. No test sleeps.
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <gtest/gtest.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>

#include <chrono>
#include <sstream>
#include <thread>

#include "outbox/testing.h"

namespace outbox::testing {
namespace {

using namespace std::chrono_literals;
constexpr char kSecret[] = "whsec_MDEyMzQ1Njc4OWFiY2RlZmdoaWprbG1u";

class KitTest : public ::testing::Test {
 protected:
  agent::Options Options(const std::string& topic = "order.created") {
    agent::Options options;
    options.db_path = db_.path();
    options.clock = clock_;
    options.logger = logger_;
    agent::TopicOptions route;
    route.endpoint.url = receiver_.Url();
    route.endpoint.timeout_ms = 200;  // the hang test waits this out
    options.topics[topic] = route;
    return options;
  }

  std::int64_t Commit(agent::Agent* agent, const std::string& key,
                      const std::string& topic = "order.created",
                      std::optional<std::string> ordering_key = std::nullopt) {
    agent::Transaction txn(agent, db_.producer());
    store::NewMessage message{topic, key, R"({"order":")" + key + R"("})", "", {}};
    message.ordering_key = std::move(ordering_key);
    const std::int64_t id = txn.Enqueue(message).id;
    txn.Commit();
    return id;
  }

  InMemoryDatabase db_;
  std::shared_ptr<TestClock> clock_ = std::make_shared<TestClock>();
  TestReceiver receiver_;
  std::ostringstream log_text_;
  std::shared_ptr<spdlog::logger> logger_ = std::make_shared<spdlog::logger>(
      "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log_text_));
};

TEST(InMemoryDatabase, EachOneIsAFreshDatabaseSharedByItsConnections) {
  InMemoryDatabase a;
  InMemoryDatabase b;
  EXPECT_NE(a.path(), b.path());
  store::Producer(*a.Connect()).Enqueue({"t", "k", "{}", "", {}}, {.standalone = true});
  EXPECT_EQ(Recorder(a.path()).Enqueued().size(), 1u);
  EXPECT_TRUE(Recorder(b.path()).Enqueued().empty());
}

TEST(InMemoryDatabase, ABadNameIsRefusedNamingIt) {
  EXPECT_THROW(InMemoryDatabase("a/b"), std::invalid_argument);
  try {
    InMemoryDatabase bad("x?y");
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("name:", 0), 0u) << e.what();
  }
}

// Measured in docs/testing.md: a shared-cache database fails a read during a
// write at once, so it is refused with the way out in the message.
TEST(InMemoryDatabase, SharedCacheUrisAreRefusedWithTheWayOut) {
  agent::Options options;
  options.db_path = "file:orders?mode=memory&cache=shared";
  try {
    agent::Agent agent(options);
    ADD_FAILURE() << "opened a shared-cache database";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("vfs=memdb"), std::string::npos) << e.what();
  }
}

TEST_F(KitTest, TheAgentDeliversFromTheInMemoryDatabaseAndSaysWhatIsOff) {
  agent::Options options = Options();
  options.watch_external_commits = true;
  options.retention.archive_path = "/nonexistent/archive.jsonl";
  agent::Agent agent(options);
  agent.Start();
  const std::int64_t id = Commit(&agent, "42");
  ASSERT_TRUE(agent.RunDue());
  ASSERT_EQ(receiver_.RequestCount(), 1u);
  EXPECT_EQ(receiver_.Requests()[0].body, R"({"order":"42"})");
  EXPECT_EQ(Recorder(db_.path()).Get(id)->status, store::Status::kDelivered);
  agent.Stop();
  const std::string log = log_text_.str();
  EXPECT_NE(log.find("in-memory database " + db_.path()), std::string::npos) << log;
  EXPECT_NE(log.find("commit watcher, retention archive"), std::string::npos) << log;
}

TEST_F(KitTest, RecorderReadsCommittedMessagesInCommitOrderAndNoRolledBackOne) {
  Commit(nullptr, "1");
  {
    agent::Transaction txn(nullptr, db_.producer());
    txn.Enqueue({"order.created", "rolled-back", "{}", "", {}});
    txn.Rollback();
  }
  Commit(nullptr, "2", "order.paid");
  Commit(nullptr, "3");
  Recorder recorder(db_.path());
  const std::vector<Message> created = recorder.Enqueued("order.created");
  ASSERT_EQ(created.size(), 2u);
  EXPECT_EQ(created[0].key, "1");
  EXPECT_EQ(created[1].key, "3");
  EXPECT_EQ(recorder.Enqueued().size(), 3u);
  EXPECT_EQ(recorder.Enqueued("order.paid", "2").at(0).payload, R"({"order":"2"})");
  EXPECT_EQ(receiver_.RequestCount(), 0u);  // reading sends nothing
}

TEST_F(KitTest, ExpectSaysWhatTheOutboxHoldsWhenAMatchFails) {
  store::NewMessage message{"order.created", "42", R"({"total":5})", R"({"X-Tenant":"acme"})", {}};
  db_.producer().Enqueue(message, {.standalone = true});
  Expect expect(db_.path());
  EXPECT_EQ(expect.Enqueued({.topic = "order.created", .key = "42", .payload = R"({"total":5})",
                             .headers = {{"X-Tenant", "acme"}}}),
            std::nullopt);
  EXPECT_EQ(expect.Enqueued({.topic = "order.created"}, 1), std::nullopt);
  const std::optional<std::string> miss = expect.Enqueued({.topic = "order.created", .key = "43"});
  ASSERT_TRUE(miss.has_value());
  EXPECT_NE(miss->find("key=42"), std::string::npos) << *miss;
  EXPECT_EQ(expect.NothingEnqueued("order.paid"), std::nullopt);
  EXPECT_NE(expect.NothingEnqueued(), std::nullopt);
}

TEST_F(KitTest, ScriptedFailuresAreRetriedWhenTheClockIsAdvanced) {
  receiver_.Then(503).Then(429, 2s).Then(200);
  agent::Agent agent(Options());
  agent.Start();
  const std::int64_t id = Commit(&agent, "42");
  ASSERT_TRUE(agent.RunDue());
  EXPECT_EQ(receiver_.RequestCount(), 1u);  // the retry is not due yet
  clock_->Advance(1h);
  ASSERT_TRUE(agent.RunDue());
  EXPECT_EQ(receiver_.RequestCount(), 2u);
  clock_->Advance(1h);
  ASSERT_TRUE(agent.RunDue());
  const MessageHistory history = History(db_.path(), receiver_, id);
  EXPECT_EQ(history.requests.size(), 3u);
  EXPECT_EQ(history.message->status, store::Status::kDelivered);
  EXPECT_NE(history.Describe().find("503, 429, 200 -> delivered"), std::string::npos)
      << history.Describe();
}

TEST_F(KitTest, RetryAfterIsHonouredByTheNextRunDue) {
  receiver_.Then(429, 120s);
  agent::Agent agent(Options());
  agent.Start();
  Commit(&agent, "42");
  ASSERT_TRUE(agent.RunDue());
  clock_->Advance(60s);  // past the policy's delay, not past Retry-After
  ASSERT_TRUE(agent.RunDue());
  EXPECT_EQ(receiver_.RequestCount(), 1u);
  clock_->Advance(61s);
  ASSERT_TRUE(agent.RunDue());
  EXPECT_EQ(receiver_.RequestCount(), 2u);
}

TEST_F(KitTest, AHangLongerThanTheTimeoutIsRetried) {
  receiver_.ThenHang();
  agent::Agent agent(Options());
  agent.Start();
  const std::int64_t id = Commit(&agent, "42");
  ASSERT_TRUE(agent.RunDue());
  clock_->Advance(1h);
  ASSERT_TRUE(agent.RunDue());
  const MessageHistory history = History(db_.path(), receiver_, id);
  EXPECT_NE(history.Describe().find("hang, 200 -> delivered"), std::string::npos)
      << history.Describe();
}

TEST_F(KitTest, ALostAnswerIsSentAgainWithTheSameIdempotencyKey) {
  receiver_.ThenLoseAnswer();
  agent::Agent agent(Options());
  agent.Start();
  const std::int64_t id = Commit(&agent, "42");
  ASSERT_TRUE(agent.RunDue());
  clock_->Advance(1h);
  ASSERT_TRUE(agent.RunDue());
  const MessageHistory history = History(db_.path(), receiver_, id);
  ASSERT_EQ(history.requests.size(), 2u) << history.Describe();
  EXPECT_EQ(history.requests[0].idempotency_key, history.requests[1].idempotency_key);
  EXPECT_FALSE(history.idempotency_key.empty());
  EXPECT_NE(history.Describe().find("lost, 200 -> delivered"), std::string::npos)
      << history.Describe();
}

TEST_F(KitTest, SignaturesAreVerifiedOnTheReceiversSide) {
  TestReceiver signed_receiver({.signing_secrets = {kSecret}});
  agent::Options options = Options();
  options.topics["order.created"].endpoint.url = signed_receiver.Url();
  options.topics["order.created"].endpoint.signing_secrets = {kSecret};
  options.topics["order.paid"] = options.topics["order.created"];
  options.topics["order.paid"].endpoint.signing_secrets = {
      "whsec_" + std::string("QUJDREVGR0hJSktMTU5PUFFSU1RVVldY")};
  clock_->Advance(2h);  // signer and checker both use the system clock
  agent::Agent agent(options);
  agent.Start();
  Commit(&agent, "1");
  Commit(&agent, "2", "order.paid");
  ASSERT_TRUE(agent.RunDue());
  const std::vector<ReceivedRequest> requests = signed_receiver.Requests();
  ASSERT_EQ(requests.size(), 2u);
  for (const ReceivedRequest& r : requests) {
    const bool paid = r.body.find(R"("2")") != std::string::npos;
    ASSERT_TRUE(r.signature.has_value());
    EXPECT_EQ(*r.signature, paid ? transport::SignatureCheck::kMismatch
                                 : transport::SignatureCheck::kValid);
  }
}

TEST_F(KitTest, AMessageTheReceiverKeepsRefusingDiesAfterMaxAttemptsAndRunsOnDead) {
  // 503s cost an attempt only while the endpoint acknowledges other
  // messages (an outage costs none): so the receiver refuses order 13 only.
  receiver_.Always([](const ReceivedRequest& r) { return r.body.find("13") != std::string::npos; },
                   {.status = 503});
  agent::Options options = Options();
  options.topics["order.created"].retry.max_attempts = 2;
  std::vector<std::string> dead;
  options.topics["order.created"].hooks.on_dead = [&dead](sqlite3*, const agent::Completion& c) {
    dead.emplace_back(c.key);
  };
  agent::Agent agent(options);
  agent.Start();
  const std::int64_t id = Commit(&agent, "13");
  ASSERT_TRUE(agent.RunDue());
  for (int round = 0; round < 3; ++round) {
    Commit(&agent, "ok-" + std::to_string(round));
    ASSERT_TRUE(agent.RunDue());  // acknowledged before the next retry
    clock_->Advance(1h);
    ASSERT_TRUE(agent.RunDue());
  }
  agent.Stop();
  const MessageHistory history = History(db_.path(), receiver_, id);
  EXPECT_EQ(history.message->status, store::Status::kDead) << history.Describe();
  EXPECT_EQ(history.message->dead_reason, "attempts");
  EXPECT_EQ(dead, std::vector<std::string>{"13"});
}

TEST_F(KitTest, OrderingByKeyHoldsAcrossAScriptedFailure) {
  receiver_.Then(503);
  agent::Options options = Options();
  options.topics["order.created"].ordering.by_key = true;
  agent::Agent agent(options);
  agent.Start();
  for (const char* key : {"a1", "a2", "a3"}) Commit(&agent, key, "order.created", "customer-7");
  ASSERT_TRUE(agent.RunDue());
  clock_->Advance(1h);
  ASSERT_TRUE(agent.RunDue());
  std::vector<std::string> bodies;
  for (const ReceivedRequest& r : receiver_.Requests()) bodies.push_back(r.body);
  EXPECT_EQ(bodies, (std::vector<std::string>{R"({"order":"a1"})", R"({"order":"a1"})",
                                              R"({"order":"a2"})", R"({"order":"a3"})"}));
}

// Rollback journal, not WAL: the application's open write transaction keeps
// the agent's readers and writer out. They wait (busy timeout) instead of
// failing, and deliver once it commits.
TEST_F(KitTest, TheAgentWaitsOutTheApplicationsWriteTransaction) {
  agent::Agent agent(Options());
  agent.Start();
  Commit(&agent, "1");
  std::unique_ptr<SQLite::Database> other = db_.Connect();
  other->exec("BEGIN IMMEDIATE");
  other->exec(
      "INSERT INTO outbox(topic, msg_key, payload) VALUES('order.created', 'plain', '{}')");
  agent.NotifyExternalCommit();  // the sweeper now meets the lock
  std::jthread committer([&other] { other->exec("COMMIT"); });
  committer.join();
  ASSERT_TRUE(agent.RunDue());
  EXPECT_EQ(receiver_.RequestCount(), 2u);
  EXPECT_EQ(agent.Snapshot().sweeper_errors, 0);
}

// Application threads on connections of their own commit while the agent
// delivers: every lock conflict is waited out, nothing fails or is lost.
TEST_F(KitTest, ConcurrentCommitsAndDeliveriesAllGoThrough) {
  agent::Agent agent(Options());
  agent.Start();
  constexpr int kThreads = 3;
  constexpr int kEach = 40;
  {
    std::vector<std::jthread> producers;
    for (int t = 0; t < kThreads; ++t) {
      producers.emplace_back([&, t] {
        std::unique_ptr<SQLite::Database> connection = db_.Connect();
        store::Producer producer(*connection);
        for (int i = 0; i < kEach; ++i) {
          agent::Transaction txn(&agent, producer);
          txn.Enqueue({"order.created", std::to_string(t) + "-" + std::to_string(i), "{}", "", {}});
          txn.Commit();
        }
      });
    }
  }
  ASSERT_TRUE(agent.RunDue());
  EXPECT_EQ(receiver_.RequestCount(), static_cast<std::size_t>(kThreads * kEach));
  EXPECT_EQ(Expect(db_.path()).Enqueued({.topic = "order.created",
                                         .status = store::Status::kDelivered},
                                        kThreads * kEach),
            std::nullopt);
  EXPECT_EQ(agent.Snapshot().sweeper_errors, 0);
}

TEST(TestReceiver, RefusesAScriptedStatusThatIsNoHttpStatus) {
  TestReceiver receiver;
  EXPECT_THROW(receiver.Then(42), std::invalid_argument);
  EXPECT_THROW(TestReceiver({.signing_secrets = {"not-a-secret"}}), std::invalid_argument);
}

TEST(AgentRunDue, RefusesAnAgentThatDoesNotRun) {
  InMemoryDatabase db;
  agent::Options options;
  options.db_path = db.path();
  agent::Agent agent(options);
  EXPECT_THROW(agent.RunDue(), std::logic_error);
}

}  // namespace
}  // namespace outbox::testing
