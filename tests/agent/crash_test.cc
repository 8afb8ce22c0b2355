// Agents that crash or are killed, in real child processes.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <atomic>

#include "agent_fixture.h"

extern char** environ;

namespace outbox::agent::testing {
namespace {

using namespace std::chrono_literals;

std::string ChildPath() { return OUTBOX_AGENT_CHILD; }

pid_t Spawn(const std::string& db, const char* mode, const std::string& url = "") {
  const std::string child = ChildPath();
  std::vector<char*> argv = {const_cast<char*>(child.c_str()), const_cast<char*>(db.c_str()),
                             const_cast<char*>(mode)};
  if (!url.empty()) argv.push_back(const_cast<char*>(url.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, child.c_str(), nullptr, nullptr, argv.data(), environ) != 0) {
    ADD_FAILURE() << "cannot start " << child;
    return -1;
  }
  return pid;
}

int WaitExit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

class CrashTest : public AgentTest {
 protected:
  void InsertPayload(const std::string& key, const std::string& payload) {
    SQLite::Statement q(*app_, "INSERT INTO outbox(topic, msg_key, payload) VALUES('t', ?, ?)");
    q.bind(1, key);
    q.bind(2, payload);
    q.exec();
  }
};

TEST_F(CrashTest, APoisonMessageEndsDeadByCrashBudgetAndTheRestIsDelivered) {
  for (int i = 0; i < 20; ++i) InsertPayload("ok-" + std::to_string(i), "fine");
  InsertPayload("poison", "poison");
  int crashes = 0;
  for (int run = 0; run < 20; ++run) {
    const int status = WaitExit(Spawn(db_path_, "poison"));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) break;
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << status;
    ++crashes;
  }
  EXPECT_GE(crashes, 3);
  EXPECT_EQ(CountStatus(store::Status::kDelivered), 20);
  EXPECT_EQ(CountStatus(store::Status::kDead), 1);
  SQLite::Statement poison(*observer_, "SELECT crashes, last_error FROM outbox WHERE msg_key = 'poison'");
  ASSERT_TRUE(poison.executeStep());
  EXPECT_EQ(poison.getColumn(0).getInt(), 3);
  EXPECT_NE(poison.getColumn(1).getString().find("crash budget"), std::string::npos);
}

// The hook's update and the status change commit together: killed anywhere
// between the receiver's answer and the completion, an order is confirmed
// exactly when its message is delivered.
TEST_F(CrashTest, KilledBetweenSendAndCompletionNeitherOrBothAreVisible) {
  app_->exec("CREATE TABLE shop(order_key TEXT PRIMARY KEY, confirmed_at INTEGER)");
  for (int i = 0; i < 400; ++i) {
    const std::string key = "order-" + std::to_string(i);
    app_->exec("INSERT INTO shop(order_key) VALUES('" + key + "')");
    InsertPayload(key, "{}");
  }
  std::atomic<int> answered{0};
  server_.Post("/events", [&](const httplib::Request&, httplib::Response& res) {
    ++answered;
    res.status = 200;
  });
  server_.Start();
  const auto mismatches = [&] {
    SQLite::Statement q(*observer_,
                        "SELECT count(*) FROM outbox JOIN shop ON order_key = msg_key"
                        " WHERE (status = 1) <> (confirmed_at IS NOT NULL)");
    q.executeStep();
    return q.getColumn(0).getInt64();
  };
  for (int kill_after : {40, 150}) {
    const pid_t child = Spawn(db_path_, "hook", server_.Url("/events"));
    ASSERT_GT(child, 0);
    ASSERT_TRUE(WaitFor([&] { return answered.load() >= kill_after; }));
    kill(child, SIGKILL);
    WaitExit(child);
    EXPECT_EQ(mismatches(), 0) << "after a kill at " << kill_after << " answers";
  }
  // A survivor finishes the rest (resending what was answered but not
  // completed: at least once).
  const int status = WaitExit(Spawn(db_path_, "hook", server_.Url("/events")));
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(CountStatus(store::Status::kDelivered), 400);
  EXPECT_EQ(mismatches(), 0);
}

class KilledHolderTest : public CrashTest {
 protected:
  void SetUp() override {
    for (int i = 0; i < 5; ++i) InsertPayload("k" + std::to_string(i), "fine");
    holder_ = Spawn(db_path_, "hold");
    ASSERT_GT(holder_, 0);
    ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kInFlight) > 0; }));
  }
  void TearDown() override {
    if (holder_ > 0) {
      kill(holder_, SIGKILL);
      WaitExit(holder_);
    }
  }
  Options LongLeases() {
    Options options = BaseOptions();
    options.lease_timeout_ms = 3'600'000;
    options.sweep_interval_ms = 10;
    return options;
  }
  pid_t holder_ = -1;
};

TEST_F(KilledHolderTest, ASecondAgentTakesBackTheLeasesOfAKilledOneAtOnce) {
  kill(holder_, SIGKILL);
  WaitExit(holder_);
  holder_ = -1;
  auto handler = std::make_shared<ScriptedHandler>([](const Delivery&) { return Delivered(); });
  Agent agent(LongLeases());
  agent.RegisterHandler("t", handler);
  agent.Start();
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kDelivered) == 5; }));
  agent.Stop();
  EXPECT_GT(agent.Snapshot().taken_back_leases, 0);
}

TEST_F(KilledHolderTest, ALiveAgentsLeasesAreNotTaken) {
  const std::int64_t held = CountStatus(store::Status::kInFlight);
  auto handler = std::make_shared<ScriptedHandler>([](const Delivery&) { return Delivered(); });
  Agent agent(LongLeases());
  agent.RegisterHandler("t", handler);
  agent.Start();
  // Let the other agent's rows go by many sweeps: held rows must stay held.
  ASSERT_TRUE(WaitFor([&] { return CountStatus(store::Status::kPending) == 0; }));
  const auto writes = agent.WriterTransactions();
  ASSERT_TRUE(WaitFor([&] { return agent.WriterTransactions() >= writes + 20; }));
  EXPECT_EQ(CountStatus(store::Status::kInFlight), held);
  EXPECT_EQ(agent.Snapshot().taken_back_leases, 0);
  agent.Stop();
}

}  // namespace
}  // namespace outbox::agent::testing
