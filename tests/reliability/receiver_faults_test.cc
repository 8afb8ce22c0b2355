// Issue #10, receiver faults: an in-process agent delivering over real HTTP to
// FaultServer, which answers with random 5xx, 429 + Retry-After, resets
// connections mid-response, hangs past the timeout and refuses connections
// for a while. Every committed message must end delivered, none dead, none
// rolled back ever sent; outages must cost no message its life.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "../agent/agent_fixture.h"
#include "fault_server.h"

namespace outbox::reliability::testing {
namespace {

using agent::Agent;
using agent::Options;
using agent::TopicOptions;
using agent::Transaction;
using agent::testing::WaitFor;
using namespace std::chrono_literals;

// Fixed so that a failure can be replayed; override with OUTBOX_FAULT_SEED.
std::uint32_t Seed() {
  const char* text = std::getenv("OUTBOX_FAULT_SEED");
  return text != nullptr ? static_cast<std::uint32_t>(std::stoul(text)) : 20240610u;
}

class ReceiverFaultsTest : public agent::testing::AgentTest {
 protected:
  Options FaultOptions(const FaultServer& server, int max_attempts) {
    Options options = BaseOptions();
    options.sweep_interval_ms = 20;
    TopicOptions topic;
    topic.endpoint.url = server.Url("/events");
    // A hanging receiver costs a worker this long per request.
    topic.endpoint.timeout_ms = 250;
    topic.endpoint.connect_timeout_ms = 250;
    topic.workers = 4;
    topic.retry.first_interval_ms = 5;
    topic.retry.max_interval_ms = 50;  // also caps Retry-After: 1
    topic.retry.jitter = 0.2;
    topic.retry.max_attempts = max_attempts;
    topic.breaker.failure_threshold = 5;
    topic.breaker.open_ms = 10;
    topic.breaker.max_open_ms = 50;
    options.topics["t"] = topic;
    return options;
  }

  // Commits `count` messages keyed prefix-<n>, `per_txn` per application
  // transaction, each beside an application row. Returns their ids.
  void CommitMany(Agent& agent, const std::string& prefix, int from, int count, int per_txn) {
    for (int done = 0; done < count;) {
      Transaction txn(&agent, *producer_);
      app_->exec("INSERT INTO orders(note) VALUES('x')");
      for (int i = 0; i < per_txn && done < count; ++i, ++done) {
        txn.Enqueue({"t", prefix + "-" + std::to_string(from + done), R"({"n":1})", "", {}});
      }
      txn.Commit();
    }
  }

  // Enqueues and rolls back: these keys must never reach the receiver.
  void RollBack(Agent& agent, const std::string& key) {
    Transaction txn(&agent, *producer_);
    app_->exec("INSERT INTO orders(note) VALUES('rolled back')");
    txn.Enqueue({"t", key, R"({"n":0})", "", {}});
    txn.Rollback();
  }

  std::int64_t Failures(Agent& agent) {
    const auto snapshot = agent.Snapshot();
    const auto found = snapshot.topics.find("t");
    return found == snapshot.topics.end() ? 0 : found->second.attempt_failures;
  }

  std::int64_t MaxAttempts() {
    SQLite::Statement q(*observer_, "SELECT coalesce(max(attempts), 0) FROM outbox");
    q.executeStep();
    return q.getColumn(0).getInt64();
  }

  // Message ids of keys, as the receiver sees them.
  std::string IdOf(Agent& agent, const std::string& key) {
    return transport::MessageId(agent.database_id(), "t", key);
  }
};

TEST_F(ReceiverFaultsTest, RandomFaultsEndWithEveryMessageDeliveredAndNoneDead) {
  constexpr int kMessages = 1000;
  constexpr int kRolledBack = 20;
  constexpr int kMaxHangs = 12;  // each costs a worker the 250 ms timeout
  std::mutex random_mutex;
  std::mt19937 random(Seed());
  int hangs = 0;  // guarded by random_mutex
  FaultServer server([&](const FaultRequest&) {
    std::lock_guard lock(random_mutex);
    const int roll = static_cast<int>(random() % 100);
    if (roll < 58) return Fault::kOk;
    if (roll < 70) return Fault::kServerError;
    if (roll < 78) return Fault::kUnavailable;
    if (roll < 86) return Fault::kTooMany;
    if (roll < 95) return Fault::kReset;
    return hangs++ < kMaxHangs ? Fault::kHang : Fault::kOk;
  });
  server.Start();
  Agent agent(FaultOptions(server, /*max_attempts=*/1000));
  agent.Start();

  CommitMany(agent, "m", 0, kMessages / 2, 10);
  for (int i = 0; i < kRolledBack / 2; ++i) RollBack(agent, "rb-" + std::to_string(i));
  // The receiver goes away for a while: messages keep being committed, and
  // the agent must see some of its sends refused before it comes back.
  const std::int64_t failures_before_down = Failures(agent);
  server.SetDown(true);
  CommitMany(agent, "m", kMessages / 2, kMessages / 4, 10);
  ASSERT_TRUE(WaitFor([&] { return Failures(agent) >= failures_before_down + 10; }, 30s));
  server.SetDown(false);
  for (int i = kRolledBack / 2; i < kRolledBack; ++i) RollBack(agent, "rb-" + std::to_string(i));
  CommitMany(agent, "m", kMessages * 3 / 4, kMessages / 4, 10);

  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == kMessages; }, 120s))
      << "delivered " << CountStatus(store::Status::kDelivered) << " of " << kMessages;
  agent.Stop();
  server.Stop();

  EXPECT_EQ(CountStatus(store::Status::kDead), 0);
  EXPECT_EQ(CountStatus(store::Status::kPending), 0);
  EXPECT_EQ(CountStatus(store::Status::kInFlight), 0);
  const auto counts = server.Counts();
  int accepted = 0;
  for (int i = 0; i < kMessages; ++i) {
    const auto found = counts.find(IdOf(agent, "m-" + std::to_string(i)));
    ASSERT_NE(found, counts.end()) << "m-" << i << " never arrived";
    EXPECT_GE(found->second.acknowledged, 1) << "m-" << i << " never acknowledged";
    accepted += found->second.accepted;
  }
  for (int i = 0; i < kRolledBack; ++i) {
    EXPECT_EQ(counts.count(IdOf(agent, "rb-" + std::to_string(i))), 0u)
        << "rolled-back rb-" << i << " was sent";
  }
  EXPECT_EQ(counts.size(), static_cast<std::size_t>(kMessages)) << "unknown keys arrived";
  const auto faults = server.FaultCounts();
  const auto count_of = [&](Fault f) { return faults.count(f) != 0 ? faults.at(f) : 0; };
  // Only a request the receiver accepted without the agent hearing of it
  // (a reset mid-response, or an answer that came after the timeout) repeats.
  const int duplicates = accepted - kMessages;
  EXPECT_GE(duplicates, 0);
  std::printf(
      "receiver faults: %d messages, %d rolled back (never sent), seed %u; requests: ok %d, "
      "500 %d, 503 %d, 429 %d, reset %d, hang %d, plus a refused-connection window; "
      "duplicates at the receiver %d; dead 0\n",
      kMessages, kRolledBack, Seed(), count_of(Fault::kOk), count_of(Fault::kServerError),
      count_of(Fault::kUnavailable), count_of(Fault::kTooMany), count_of(Fault::kReset),
      count_of(Fault::kHang), duplicates);
  RecordProperty("duplicates", duplicates);
  EXPECT_GT(count_of(Fault::kReset), 0);
  EXPECT_GT(count_of(Fault::kHang), 0);
  EXPECT_GT(count_of(Fault::kTooMany), 0);
}

// An endpoint failure costs a message an attempt only if the endpoint
// acknowledged something since the message's previous attempt: with a
// budget of two attempts, no outage of any kind may kill anything.
TEST_F(ReceiverFaultsTest, OutagesOfEveryKindDeadLetterNothing) {
  std::atomic<Fault> mode{Fault::kOk};
  FaultServer server([&](const FaultRequest&) { return mode.load(); });
  server.Start();
  Agent agent(FaultOptions(server, /*max_attempts=*/2));
  agent.Start();

  struct Outage {
    const char* name;
    Fault fault;  // kOk here means: connections refused
  };
  const Outage outages[] = {{"connections refused", Fault::kOk},
                            {"503 for everything", Fault::kUnavailable},
                            {"500 for everything", Fault::kServerError},
                            {"resets mid-response", Fault::kReset},
                            {"hangs past the timeout", Fault::kHang}};
  int committed = 0;
  CommitMany(agent, "before", 0, 20, 5);
  committed += 20;
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == committed; }, 30s));
  for (const Outage& outage : outages) {
    SCOPED_TRACE(outage.name);
    const std::int64_t failures = Failures(agent);
    if (outage.fault == Fault::kOk) {
      server.SetDown(true);
    } else {
      mode.store(outage.fault);
    }
    CommitMany(agent, outage.name, 0, 30, 3);
    committed += 30;
    // The outage lasts until the agent has felt it many times over, breaker
    // probes included.
    ASSERT_TRUE(WaitFor([&] { return Failures(agent) >= failures + 15; }, 60s));
    EXPECT_EQ(CountStatus(store::Status::kDead), 0);
    if (outage.fault == Fault::kOk) {
      server.SetDown(false);
    } else {
      mode.store(Fault::kOk);
    }
    ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == committed; }, 60s))
        << CountStatus(store::Status::kDelivered) << " of " << committed << " delivered";
  }
  agent.Stop();
  EXPECT_EQ(CountStatus(store::Status::kDead), 0);
  // At most the first failure after an acknowledgement counts.
  EXPECT_LE(MaxAttempts(), 1);
  std::printf("outages: %d messages through 5 outage kinds with max_attempts=2: dead 0, "
              "max attempts %lld\n",
              committed, static_cast<long long>(MaxAttempts()));
}

}  // namespace
}  // namespace outbox::reliability::testing
