// outboxd delivering into a durable RabbitMQ queue, SIGKILLed ten times while
// it delivers, the application committing (and rolling back) between kills:
// every committed message is in the queue at least once, no rolled-back one
// is, and a consumer deduplicating by message_id applies each exactly once.
// (RabbitMQ does not deduplicate: a message confirmed to a killed daemon that
// had not yet marked it delivered is published again.)
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <memory>
#include <set>
#include <string>

#include "../common/wait_for.h"
#include "amqp_broker.h"
#include "amqp_client.h"
#include "outbox/agent.h"
#include "outbox/store.h"
#include "outbox/transport.h"

namespace outbox::transport {
namespace {

using namespace std::chrono_literals;
using outbox::testing::WaitFor;

constexpr int kKills = 10;
constexpr std::chrono::milliseconds kDeadline = 60s;
constexpr char kQueue[] = "killed";

class OutboxdIntoRabbit : public ::testing::Test {
 protected:
  OutboxdIntoRabbit() : db_path_((files_.path() / "app.db").string()) {
    store::Options init;
    init.path = db_path_;
    init.create = true;
    store::Store create(init);
    database_id_ = create.database_id();
    app_ = std::make_unique<SQLite::Database>(db_path_, SQLite::OPEN_READWRITE, 5000);
    producer_ = std::make_unique<store::Producer>(*app_);
    config_path_ = files_.Write("outboxd.json", R"({
      "sweep_interval_ms": 100,
      "crash_budget": 1000,
      "metrics": {"listen": ""},
      "topics": {"orders": {
        "url": ")" + testing::Broker().Url() + R"(",
        "amqp": {"queue": ")" + kQueue + R"("},
        "workers": 8, "timeout_ms": 1000, "connect_timeout_ms": 1000,
        "retry": {"first_interval_ms": 100, "max_interval_ms": 500, "jitter": 0}}}})");
  }

  std::unique_ptr<testing::ChildProcess> StartOutboxd(int run) {
    return std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{OUTBOX_OUTBOXD, "--db", db_path_, "--config", config_path_},
        files_.path() / ("outboxd-" + std::to_string(run) + ".log"));
  }

  // `count` messages, ten per transaction, each commit followed by three
  // enqueued in a transaction that rolls back.
  void Commit(int count) {
    for (int i = 0; i < count; i += 10) {
      {
        agent::Transaction txn(nullptr, *producer_);
        for (int j = 0; j < 10; ++j) Enqueue(txn, "order-" + std::to_string(next_++), committed_);
        txn.Commit();
      }
      agent::Transaction doomed(nullptr, *producer_);
      for (int j = 0; j < 3; ++j) {
        Enqueue(doomed, "rolled-back-" + std::to_string(next_++), rolled_back_);
      }
      doomed.Rollback();
    }
  }

  std::int64_t CountWithStatus(store::Status status, bool equal) {
    SQLite::Statement q(*app_, equal ? "SELECT count(*) FROM outbox WHERE status = ?"
                                     : "SELECT count(*) FROM outbox WHERE status <> ?");
    q.bind(1, static_cast<int>(status));
    q.executeStep();
    return q.getColumn(0).getInt64();
  }

  testing::TempDir files_;
  std::string db_path_;
  std::string config_path_;
  std::string database_id_;
  std::unique_ptr<SQLite::Database> app_;
  std::unique_ptr<store::Producer> producer_;
  std::set<std::string> committed_;
  std::set<std::string> rolled_back_;

 private:
  void Enqueue(agent::Transaction& txn, const std::string& key, std::set<std::string>& ids) {
    txn.Enqueue({"orders", key, R"({"order":")" + key + R"("})", "", {}});
    ids.insert(MessageId(database_id_, "orders", key));
  }

  int next_ = 0;
};

TEST_F(OutboxdIntoRabbit, TenKillsDuringDeliveryLoseNothingAndDedupAppliesEachOnce) {
  testing::AmqpClient client(testing::Broker().port());
  client.DeclareQueue(kQueue);
  Commit(1500);
  for (int kill_no = 0; kill_no < kKills; ++kill_no) {
    const std::uint32_t target = client.Count(kQueue) + 100;
    std::unique_ptr<testing::ChildProcess> outboxd = StartOutboxd(kill_no);
    // Killed once it is visibly delivering: mid-stream, publishes in flight.
    ASSERT_TRUE(WaitFor([&] { return client.Count(kQueue) >= target; }, kDeadline))
        << "run " << kill_no << ": queue has " << client.Count(kQueue) << " of " << target;
    ASSERT_EQ(::kill(outboxd->pid(), SIGKILL), 0);
    ASSERT_TRUE(WaitFor([&] { return !outboxd->Running(); }, kDeadline));
    Commit(100);  // while no daemon runs
  }
  std::unique_ptr<testing::ChildProcess> outboxd = StartOutboxd(kKills);
  ASSERT_TRUE(WaitFor(
      [&] { return CountWithStatus(store::Status::kDelivered, false) == 0; }, kDeadline))
      << CountWithStatus(store::Status::kDead, true) << " dead";
  outboxd->Stop();

  EXPECT_EQ(CountWithStatus(store::Status::kDead, true), 0);
  // The consumer's view: every message at least once; applied once each by
  // message_id.
  std::set<std::string> applied;
  std::size_t arrivals = 0;
  for (const auto& message : client.Drain(kQueue)) {
    ++arrivals;
    applied.insert(message.message_id);
  }
  EXPECT_EQ(applied, committed_);
  EXPECT_GE(arrivals, committed_.size());
  for (const std::string& id : rolled_back_) EXPECT_EQ(applied.count(id), 0u) << id;
  std::printf("amqp kill test: %zu committed, %zu arrivals (%zu duplicates dropped by id)\n",
              committed_.size(), arrivals, arrivals - committed_.size());
}

}  // namespace
}  // namespace outbox::transport
