// outboxd under systemd's Type=notify, in-process: the test listens on a
// NOTIFY_SOCKET of its own (a Unix datagram socket, as systemd's) and reads
// what the daemon tells the manager: READY=1, STATUS=, RELOADING=1,
// STOPPING=1 and WATCHDOG=1 pings, which stop while another connection holds
// the database's write lock past the watchdog interval and resume after.
#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/null_sink.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <string>

#include "common/temp_dir.h"
#include "daemon.h"
#include "outbox/agent.h"
#include "outbox/store.h"

namespace outbox::daemon {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

constexpr auto kDeadline = std::chrono::seconds(20);
// WatchdogSec= as the test's manager sets it: pings every 150 ms.
constexpr milliseconds kWatchdog{300};

// The manager's end of NOTIFY_SOCKET.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : fd_(::socket(AF_UNIX, SOCK_DGRAM, 0)) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
      throw std::runtime_error("cannot bind the notify socket " + path);
    }
  }
  ~NotifySocket() { ::close(fd_); }
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;

  // The next datagram, or nullopt after `timeout`.
  std::optional<std::string> Next(milliseconds timeout) {
    pollfd entry{fd_, POLLIN, 0};
    if (::poll(&entry, 1, static_cast<int>(timeout.count())) <= 0) return std::nullopt;
    char buffer[4096];
    const ssize_t got = ::recv(fd_, buffer, sizeof buffer, 0);
    if (got < 0) return std::nullopt;
    return std::string(buffer, static_cast<std::size_t>(got));
  }

  // Reads until a datagram holds `text`; false at the deadline.
  bool WaitFor(const std::string& text, milliseconds within = kDeadline) {
    const auto deadline = SteadyClock::now() + within;
    while (SteadyClock::now() < deadline) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - SteadyClock::now());
      const std::optional<std::string> message = Next(left);
      if (message && message->find(text) != std::string::npos) return true;
    }
    return false;
  }

 private:
  int fd_;
};

class WatchdogTest : public ::testing::Test {
 protected:
  WatchdogTest() {
    store::Options init;
    init.path = db_path_;
    init.create = true;
    store::Store create(init);
    // What systemd puts in the environment of a Type=notify service with
    // WatchdogSec=: each test runs in a process of its own (ctest).
    ::setenv("NOTIFY_SOCKET", socket_path_.c_str(), 1);
    ::setenv("WATCHDOG_USEC", std::to_string(kWatchdog.count() * 1000).c_str(), 1);
    ::unsetenv("WATCHDOG_PID");
  }

  ~WatchdogTest() override {
    if (waiting_.valid()) {
      daemon_->Signal(SIGTERM);
      daemon_->Signal(SIGTERM);
      waiting_.wait();
    }
    ::unsetenv("NOTIFY_SOCKET");
    ::unsetenv("WATCHDOG_USEC");
  }

  void StartDaemon() {
    const std::string config =
        R"({"sweep_interval_ms": 50, "metrics": {"listen": ""},
            "topics": {"orders": {"url": "http://127.0.0.1:9/unused"}}})";
    std::ofstream(config_path_) << config;
    DaemonOptions options;
    options.db_path = db_path_;
    options.config_path = config_path_;
    options.read_process_signals = false;
    daemon_ = std::make_unique<Daemon>(options, agent::ParseConfig(config), logger_);
    ASSERT_EQ(daemon_->Start(), kExitOk);
    waiting_ = std::async(std::launch::async, [this] { return daemon_->Wait(); });
  }

  outbox::testing::TempDir dir_;
  std::string db_path_ = dir_.File("app.db");
  std::string config_path_ = dir_.File("outboxd.json");
  std::string socket_path_ = dir_.File("notify");
  NotifySocket manager_{socket_path_};
  std::shared_ptr<spdlog::logger> logger_ = std::make_shared<spdlog::logger>(
      "watchdog-test", std::make_shared<spdlog::sinks::null_sink_mt>());
  std::unique_ptr<Daemon> daemon_;
  std::future<int> waiting_;
};

TEST_F(WatchdogTest, ReadyThenPingsThatStopWhileAnotherConnectionHoldsTheWriteLock) {
  StartDaemon();
  ASSERT_TRUE(manager_.WaitFor("READY=1"));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(manager_.WaitFor("WATCHDOG=1")) << "ping " << i;

  SQLite::Database other(db_path_, SQLite::OPEN_READWRITE);
  // The daemon may be in a write of its own (a sweep): wait for it, as any
  // writer sharing the file would, rather than fail with "database is locked".
  other.setBusyTimeout(static_cast<int>(milliseconds(kDeadline).count()));
  other.exec("BEGIN IMMEDIATE");
  // The daemon notices (its STATUS= says why) and then stays silent for
  // twice the watchdog interval: systemd would have restarted it.
  ASSERT_TRUE(manager_.WaitFor("STATUS=stalled: the writer has not committed"));
  const auto quiet_until = SteadyClock::now() + 2 * kWatchdog;
  while (SteadyClock::now() < quiet_until) {
    const auto left = std::chrono::duration_cast<milliseconds>(quiet_until - SteadyClock::now());
    const std::optional<std::string> message = manager_.Next(left);
    if (message) {
      EXPECT_EQ(message->find("WATCHDOG=1"), std::string::npos) << *message;
    }
  }

  other.exec("ROLLBACK");
  EXPECT_TRUE(manager_.WaitFor("WATCHDOG=1"));
}

TEST_F(WatchdogTest, ReloadAndStopAreAnnounced) {
  StartDaemon();
  ASSERT_TRUE(manager_.WaitFor("READY=1"));
  ASSERT_EQ(daemon_->Signal(SIGHUP).wait_for(kDeadline), std::future_status::ready);
  EXPECT_TRUE(manager_.WaitFor("RELOADING=1"));
  EXPECT_TRUE(manager_.WaitFor("READY=1"));
  daemon_->Signal(SIGTERM);
  EXPECT_TRUE(manager_.WaitFor("STOPPING=1"));
  ASSERT_EQ(waiting_.wait_for(kDeadline), std::future_status::ready);
  EXPECT_EQ(waiting_.get(), kExitOk);
}

TEST_F(WatchdogTest, StatusSummarisesPendingDeadAndBreakers) {
  StartDaemon();
  EXPECT_TRUE(manager_.WaitFor("STATUS=delivering: pending 0, dead 0, breakers open 0"));
}

}  // namespace
}  // namespace outbox::daemon
