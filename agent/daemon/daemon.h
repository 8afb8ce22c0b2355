// outboxd's logic as a library: runs an agent over the configured database,
// serves /metrics and /healthz, reloads the configuration on SIGHUP and stops
// on SIGTERM/SIGINT with a grace period that a second signal cuts short.
// outboxd's main() parses flags and calls this; tests drive it in-process
// through Signal().
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <string>

#include "outbox/agent.h"

namespace spdlog {
class logger;
}

namespace outbox::daemon {

// Exit statuses of outboxd.
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;  // the database or the environment failed
constexpr int kExitUsage = 2;    // bad flags or a bad config

struct DaemonOptions {
  // The application's SQLite file.
  std::string db_path;
  // The JSON configuration file, read again on SIGHUP.
  std::string config_path;
  // SIGTERM/SIGINT: in-flight sends get this long to finish before they are
  // aborted and their rows go back to pending. A second signal cuts it short.
  std::chrono::milliseconds stop_grace{10'000};
  // SIGHUP: the old agent's sends in flight get this long.
  std::chrono::milliseconds reload_grace{5'000};
  // Also read SIGTERM, SIGINT and SIGHUP sent to the process (through a
  // signalfd). The caller must have blocked them in every thread first:
  // BlockDaemonSignals() at the top of main(). Tests leave it off and call
  // Signal().
  bool read_process_signals = true;
};

// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread. Call it in main()
// before any thread exists, so that every thread inherits the mask and no
// handler runs in an arbitrary thread.
void BlockDaemonSignals();

// Not thread-safe except Signal(); Start() and Wait() run on one thread.
class Daemon {
 public:
  // `config` is the parsed file; `logger` gets every line (its format and
  // level follow the config, also after a reload).
  Daemon(DaemonOptions options, agent::Config config, std::shared_ptr<spdlog::logger> logger);
  // Stops a running agent with no grace and joins every thread.
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Opens the database, binds the metrics address and starts the agent.
  // Returns kExitOk, or the exit status after logging why it failed
  // (kExitUsage for options the agent refuses, kExitFailure otherwise).
  int Start();
  // The port /metrics listens on (the bound one when the config says port
  // 0), or 0 when metrics are disabled. After a successful Start().
  int metrics_port() const;
  // Handles signals until the agent has stopped; returns the exit status.
  // Throws std::system_error when it cannot wait for signals.
  int Wait();
  // Start(), then Wait() if it succeeded.
  int Run();

  // Handles SIGTERM, SIGINT or SIGHUP as if the process had received it.
  // Thread-safe. The future is ready once Wait() has handled it: a reload
  // done (or refused), a stop begun, a second stop signal passed on; or at
  // once when Wait() has already returned.
  std::future<void> Signal(int signal);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace outbox::daemon
