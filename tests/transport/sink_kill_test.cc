// outboxd delivering into a real nats-server JetStream stream, SIGKILLed ten
// times while it delivers: every committed message lands in the stream
// exactly once (count and ids), and no rolled-back one ever does. Between
// kills the application keeps committing (and rolling back). What makes this
// hold: the message id is the Nats-Msg-Id, so JetStream's duplicate window
// drops what a killed daemon had published but not yet marked delivered.
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <string>

#include "../common/wait_for.h"
#include "broker_servers.h"
#include "jetstream_stream.h"
#include "outbox/agent.h"
#include "outbox/store.h"
#include "outbox/transport.h"

namespace outbox::transport {
namespace {

using namespace std::chrono_literals;
using outbox::testing::WaitFor;

constexpr int kKills = 10;
constexpr std::chrono::milliseconds kDeadline = 60s;

class OutboxdIntoJetStream : public ::testing::Test {
 protected:
  OutboxdIntoJetStream() : db_path_((files_.path() / "app.db").string()) {
    store::Options init;
    init.path = db_path_;
    init.create = true;
    store::Store create(init);
    database_id_ = create.database_id();
    app_ = std::make_unique<SQLite::Database>(db_path_, SQLite::OPEN_READWRITE, 5000);
    producer_ = std::make_unique<store::Producer>(*app_);
    // Retries come back fast; a kill costs no attempt but spends crash
    // budget, and ten kills must not make any message dead.
    config_path_ = files_.Write("outboxd.json", R"({
      "sweep_interval_ms": 100,
      "crash_budget": 1000,
      "metrics": {"listen": ""},
      "topics": {"orders": {
        "url": ")" + server_.Url("orders") + R"(",
        "workers": 8, "timeout_ms": 1000, "connect_timeout_ms": 1000,
        "retry": {"first_interval_ms": 100, "max_interval_ms": 500, "jitter": 0}}}})");
  }

  std::unique_ptr<testing::ChildProcess> StartOutboxd(int run) {
    return std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{OUTBOX_OUTBOXD, "--db", db_path_, "--config", config_path_},
        files_.path() / ("outboxd-" + std::to_string(run) + ".log"));
  }

  // Commits `count` messages, ten per transaction, and after each commit
  // enqueues three more in a transaction that rolls back.
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

  std::int64_t Undelivered() {
    SQLite::Statement q(*app_, "SELECT count(*) FROM outbox WHERE status <> ?");
    q.bind(1, static_cast<int>(store::Status::kDelivered));
    q.executeStep();
    return q.getColumn(0).getInt64();
  }

  // Runs whose log says they took back rows a killed predecessor had in
  // flight: proof that the kills landed mid-delivery.
  int RunsThatTookBack() const {
    int runs = 0;
    for (int run = 1; run <= kKills; ++run) {
      std::ifstream log(files_.path() / ("outboxd-" + std::to_string(run) + ".log"));
      const std::string text((std::istreambuf_iterator<char>(log)),
                             std::istreambuf_iterator<char>());
      if (text.find("took back") != std::string::npos) ++runs;
    }
    return runs;
  }

  std::int64_t Dead() {
    SQLite::Statement q(*app_, "SELECT count(*) FROM outbox WHERE status = ?");
    q.bind(1, static_cast<int>(store::Status::kDead));
    q.executeStep();
    return q.getColumn(0).getInt64();
  }

  testing::NatsServer server_;
  testing::TempDir files_;
  std::string db_path_;
  std::string config_path_;
  std::string database_id_;
  std::unique_ptr<SQLite::Database> app_;
  std::unique_ptr<store::Producer> producer_;
  std::multiset<std::string> committed_;
  std::set<std::string> rolled_back_;

 private:
  void Enqueue(agent::Transaction& txn, const std::string& key, auto& ids) {
    txn.Enqueue({"orders", key, R"({"order":")" + key + R"("})", "", {}});
    ids.insert(MessageId(database_id_, "orders", key));
  }

  int next_ = 0;
};

TEST_F(OutboxdIntoJetStream, TenKillsDuringDeliveryLandEachCommittedMessageOnce) {
  testing::JetStreamStream stream(server_.port(), "ORDERS", "orders");
  Commit(1500);
  for (int kill_no = 0; kill_no < kKills; ++kill_no) {
    const std::uint64_t before = stream.Count();
    const std::uint64_t target = std::min<std::uint64_t>(before + 100, committed_.size());
    std::unique_ptr<testing::ChildProcess> outboxd = StartOutboxd(kill_no);
    // Killed once it is visibly delivering: mid-stream, with sends in flight.
    ASSERT_TRUE(WaitFor([&] { return stream.Count() >= target; }, kDeadline))
        << "run " << kill_no << ": stream has " << stream.Count() << " of " << target;
    ASSERT_EQ(::kill(outboxd->pid(), SIGKILL), 0);
    ASSERT_TRUE(WaitFor([&] { return !outboxd->Running(); }, kDeadline));
    Commit(100);  // while no daemon runs
  }
  std::unique_ptr<testing::ChildProcess> outboxd = StartOutboxd(kKills);
  ASSERT_TRUE(WaitFor([&] { return Undelivered() == 0; }, kDeadline))
      << Undelivered() << " undelivered, " << Dead() << " dead";
  outboxd->Stop();

  EXPECT_EQ(Dead(), 0);
  EXPECT_GE(RunsThatTookBack(), kKills / 2);
  EXPECT_EQ(stream.Count(), committed_.size());
  const std::multiset<std::string> landed = stream.Ids();
  EXPECT_EQ(landed, committed_);
  for (const std::string& id : rolled_back_) EXPECT_EQ(landed.count(id), 0u) << id;
}

}  // namespace
}  // namespace outbox::transport
