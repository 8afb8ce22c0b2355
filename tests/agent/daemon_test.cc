// The daemon library in-process: reload on SIGHUP and the two-signal stop
// with its grace period, against a real SQLite file and real HTTP receivers
// on 127.0.0.1, port 0. Signals are handed in through Daemon::Signal, whose
// future tells when the daemon has handled them: nothing waits a fixed time.
#include "daemon.h"

#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/null_sink.h>

#include <chrono>
#include <fstream>
#include <future>
#include <memory>
#include <string>

#include "common/temp_dir.h"
#include "outbox/agent.h"
#include "outbox/store.h"
#include "transport/test_server.h"

namespace outbox::daemon {
namespace {

using std::chrono::seconds;
using transport::testing::TestServer;

constexpr auto kDeadline = seconds(20);

// A receiver that answers 200 at once.
std::unique_ptr<TestServer> AcceptingReceiver() {
  auto server = std::make_unique<TestServer>();
  server->Post("/events", [](const httplib::Request&, httplib::Response& response) {
    response.status = 200;
  });
  server->Start();
  return server;
}

class DaemonTest : public ::testing::Test {
 protected:
  DaemonTest() {
    store::Options init;
    init.path = db_path_;
    init.create = true;
    store::Store create(init);
    app_ = std::make_unique<SQLite::Database>(db_path_, SQLite::OPEN_READWRITE, 5000);
  }

  ~DaemonTest() override {
    try {
      release_.set_value();  // a held receiver answers now
    } catch (const std::future_error&) {  // the test released it already
    }
    if (waiting_.valid()) {
      // A test that failed half-way: cut the grace short and join.
      daemon_->Signal(SIGTERM);
      daemon_->Signal(SIGTERM);
      waiting_.wait();
    }
  }

  // One topic "orders" sent to `url`; metrics on a free port.
  static std::string ConfigFor(const std::string& url) {
    return R"({"sweep_interval_ms": 60000, "metrics": {"listen": "127.0.0.1:0"},
               "topics": {"orders": {"url": ")" +
           url + R"(", "timeout_ms": 60000, "retry": {"jitter": 0}}}})";
  }

  void WriteConfig(const std::string& text) {
    std::ofstream file(config_path_, std::ios::trunc);
    file << text;
  }

  // Writes the config, starts the daemon and runs its signal loop on
  // another thread.
  void StartDaemon(const std::string& config_text, DaemonOptions options = {}) {
    WriteConfig(config_text);
    options.db_path = db_path_;
    options.config_path = config_path_;
    options.read_process_signals = false;
    daemon_ = std::make_unique<Daemon>(options, agent::ParseConfig(config_text), logger_);
    ASSERT_EQ(daemon_->Start(), kExitOk);
    waiting_ = std::async(std::launch::async, [this] { return daemon_->Wait(); });
  }

  // Hands `signal` to the daemon and waits until it has been handled.
  void Send(int signal) {
    ASSERT_EQ(daemon_->Signal(signal).wait_for(kDeadline), std::future_status::ready);
  }

  // The exit status, once the daemon has stopped.
  int ExitStatus() {
    EXPECT_EQ(waiting_.wait_for(kDeadline), std::future_status::ready);
    return waiting_.get();
  }

  // Inserts with plain SQL, as another application would; the daemon's
  // watcher notices the commit.
  std::int64_t Insert(const std::string& key) {
    SQLite::Statement insert(*app_,
                             "INSERT INTO outbox(topic, msg_key, payload) VALUES('orders', ?, '{}')");
    insert.bind(1, key);
    insert.exec();
    return app_->getLastInsertRowid();
  }

  store::Status StatusOf(std::int64_t id) {
    store::Options read;
    read.path = db_path_;
    store::Store store(read);
    return store.Get(id).value().status;
  }

  // A receiver that holds every request until the test releases it (or
  // the fixture goes, which releases it before the server stops).
  TestServer* HoldingReceiver() {
    holding_ = std::make_unique<TestServer>();
    TestServer* server = holding_.get();
    server->Post("/events", [released = released_](const httplib::Request&,
                                                   httplib::Response& response) {
      released.wait_for(seconds(60));
      response.status = 200;
    });
    server->Start();
    return server;
  }

  // Starts the daemon with `stop_grace` and one row whose send the receiver
  // holds; returns the row's id once the request has arrived.
  std::int64_t StartWithASendHeld(std::chrono::milliseconds stop_grace) {
    TestServer* receiver = HoldingReceiver();
    DaemonOptions options;
    options.stop_grace = stop_grace;
    StartDaemon(ConfigFor(receiver->Url("/events")), options);
    const std::int64_t id = Insert("held");
    EXPECT_TRUE(receiver->WaitForRequests(1, kDeadline));
    return id;
  }

  outbox::testing::TempDir dir_;
  std::string db_path_ = dir_.File("app.db");
  std::string config_path_ = dir_.File("outboxd.json");
  std::unique_ptr<SQLite::Database> app_;
  std::shared_ptr<spdlog::logger> logger_ =
      std::make_shared<spdlog::logger>("daemon-test", std::make_shared<spdlog::sinks::null_sink_mt>());
  std::promise<void> release_;
  std::shared_future<void> released_ = release_.get_future().share();
  std::unique_ptr<TestServer> holding_;
  std::unique_ptr<Daemon> daemon_;
  std::future<int> waiting_;
};

TEST_F(DaemonTest, SighupSendsToTheEndpointTheFileNowNames) {
  const auto first = AcceptingReceiver();
  const auto second = AcceptingReceiver();
  StartDaemon(ConfigFor(first->Url("/events")));
  Insert("before");
  ASSERT_TRUE(first->WaitForRequests(1, kDeadline));

  WriteConfig(ConfigFor(second->Url("/events")));
  Send(SIGHUP);
  const std::int64_t after = Insert("after");
  ASSERT_TRUE(second->WaitForRequests(1, kDeadline));
  EXPECT_EQ(second->requests()[0].Header("Idempotency-Key").empty(), false);
  EXPECT_EQ(first->requests().size(), 1u);

  Send(SIGTERM);
  EXPECT_EQ(ExitStatus(), kExitOk);
  EXPECT_EQ(StatusOf(after), store::Status::kDelivered);
}

TEST_F(DaemonTest, SighupWithABrokenFileKeepsTheRunningConfiguration) {
  const auto receiver = AcceptingReceiver();
  StartDaemon(ConfigFor(receiver->Url("/events")));
  WriteConfig(R"({"topics": {"orders": {"url": )");
  Send(SIGHUP);
  Insert("still-delivered");
  EXPECT_TRUE(receiver->WaitForRequests(1, kDeadline));
  Send(SIGTERM);
  EXPECT_EQ(ExitStatus(), kExitOk);
}

TEST_F(DaemonTest, StopLetsASendInFlightFinishWithinTheGracePeriod) {
  const std::int64_t id = StartWithASendHeld(std::chrono::minutes(10));
  Send(SIGTERM);
  EXPECT_EQ(StatusOf(id), store::Status::kInFlight);
  release_.set_value();
  EXPECT_EQ(ExitStatus(), kExitOk);
  EXPECT_EQ(StatusOf(id), store::Status::kDelivered);
}

TEST_F(DaemonTest, SecondStopSignalAbortsTheSendInFlight) {
  const std::int64_t id = StartWithASendHeld(std::chrono::minutes(10));
  Send(SIGTERM);
  Send(SIGINT);
  // Well inside the ten-minute grace: the second signal ended it.
  EXPECT_EQ(ExitStatus(), kExitOk);
  const store::Status status = StatusOf(id);
  EXPECT_EQ(status, store::Status::kPending) << store::StatusName(status);
}

TEST_F(DaemonTest, StopAbortsWhatIsStillInFlightWhenTheGracePeriodEnds) {
  const std::int64_t id = StartWithASendHeld(std::chrono::milliseconds(100));
  Send(SIGTERM);
  EXPECT_EQ(ExitStatus(), kExitOk);
  EXPECT_EQ(StatusOf(id), store::Status::kPending);
}

// A reload whose configuration does not start, while the database no longer
// lets the previous one start either: the daemon keeps running without an
// agent, says why on /healthz, and the next reload that starts delivers.
TEST_F(DaemonTest, WhenNoConfigurationStartsTheDaemonStaysUpAndSaysWhy) {
  const auto receiver = AcceptingReceiver();
  const std::string url = receiver->Url("/events");
  // "payments" is recorded with dead_head skip; a config saying block for
  // it does not start, after recording key ordering for "orders" (topics
  // start in name order), which the previous config (no ordering) then
  // refuses.
  {
    store::Options open;
    open.path = db_path_;
    store::Store s(open);
    store::TopicOrdering skip;
    skip.by_key = true;
    skip.dead_head = store::DeadHead::kSkip;
    s.AgreeOrdering("payments", skip, 0);
  }
  StartDaemon(ConfigFor(url));
  const std::string topic = R"(": {"url": ")" + url + R"(", "ordering": {"by": "key", )";
  WriteConfig(R"({"sweep_interval_ms": 60000, "metrics": {"listen": "127.0.0.1:0"},
               "topics": {"orders)" + topic +
              R"("dead_head": "block"}}, "payments)" + topic + R"("dead_head": "block"}}}})");
  Send(SIGHUP);
  httplib::Client metrics("127.0.0.1", daemon_->metrics_port());
  auto health = metrics.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_NE(health->body.find("neither does the previous one"), std::string::npos) << health->body;
  EXPECT_NE(health->body.find("ordering"), std::string::npos) << health->body;

  WriteConfig(R"({"sweep_interval_ms": 60000, "metrics": {"listen": "127.0.0.1:0"},
               "topics": {"orders)" + topic +
              R"("dead_head": "block"}}, "payments)" + topic + R"("dead_head": "skip"}}}})");
  Send(SIGHUP);
  health = metrics.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200) << health->body;
  const std::int64_t id = Insert("after");
  ASSERT_TRUE(receiver->WaitForRequests(1, kDeadline));
  Send(SIGTERM);
  EXPECT_EQ(ExitStatus(), kExitOk);
  EXPECT_EQ(StatusOf(id), store::Status::kDelivered);
}

TEST_F(DaemonTest, HealthzTurnsUnavailableOnceAStopBegins) {
  // The held send keeps the stop in its grace period.
  StartWithASendHeld(std::chrono::minutes(10));
  httplib::Client metrics("127.0.0.1", daemon_->metrics_port());
  auto health = metrics.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto text = metrics.Get("/metrics");
  ASSERT_TRUE(text);
  EXPECT_EQ(text->status, 200);
  EXPECT_NE(text->body.find("outbox_"), std::string::npos);

  Send(SIGTERM);
  health = metrics.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  Send(SIGTERM);
  EXPECT_EQ(ExitStatus(), kExitOk);
}

TEST_F(DaemonTest, SignalAfterTheStopIsReadyAtOnce) {
  const auto receiver = AcceptingReceiver();
  StartDaemon(ConfigFor(receiver->Url("/events")));
  Send(SIGTERM);
  EXPECT_EQ(ExitStatus(), kExitOk);
  EXPECT_EQ(daemon_->Signal(SIGHUP).wait_for(seconds(0)), std::future_status::ready);
}

}  // namespace
}  // namespace outbox::daemon
