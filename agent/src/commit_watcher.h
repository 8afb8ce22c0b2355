// CommitWatcher: notices commits of other processes to the database, so that
// the sidecar sends rows inserted with plain SQL within milliseconds instead
// of at the next sweep (docs/design.md "Components").
//
// inotify on the database's directory wakes it when the file or its -wal
// changes (the -wal file is deleted and recreated, so the directory is
// watched and events are filtered by name); `PRAGMA data_version` on its own
// read-only connection then confirms that another connection committed. Where
// inotify is unavailable it polls data_version instead.
//
// Internal to the agent component.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>

namespace spdlog {
class logger;
}

namespace outbox::store {
class Store;
}

namespace outbox::agent {

class CommitWatcher {
 public:
  struct Options {
    // The database file; it must already hold the outbox schema.
    std::string db_path;
    // Polling interval where inotify is unavailable, ms (1..1000). After an
    // inotify event that data_version does not confirm yet, it also paces
    // the re-checks (see kConfirmWindowMs in the .cc).
    std::int64_t poll_ms = 10;
    // Polls even where inotify works (for tests of the fallback).
    bool force_polling = false;
    // Lifecycle and error lines; null = silent.
    std::shared_ptr<spdlog::logger> logger;
  };

  enum class Mode { kInotify, kPolling };

  // Opens its own read-only connection, takes data_version as the baseline and
  // starts the watcher thread, which calls `on_commit` after each commit of
  // any other connection (several commits close together may give one call).
  // `on_commit` runs on the watcher thread and must be quick; an exception
  // from it is logged and swallowed. Throws std::invalid_argument for bad
  // options, store::StoreError (or NotAnOutboxError) if the database cannot
  // be opened, std::system_error if the thread or its eventfd cannot be made.
  CommitWatcher(Options options, std::function<void()> on_commit);
  // Wakes the thread and joins it; returns within a poll() wake-up, not a
  // poll interval.
  ~CommitWatcher();
  CommitWatcher(const CommitWatcher&) = delete;
  CommitWatcher& operator=(const CommitWatcher&) = delete;

  Mode mode() const { return mode_; }

 private:
  void Run(std::stop_token stop);
  // Reads every queued inotify event; true if one concerns the database.
  bool DrainEvents();
  // True if data_version moved since the last call.
  bool VersionChanged();
  void Notify();

  Options options_;
  std::function<void()> on_commit_;
  std::unique_ptr<store::Store> store_;  // used only by the thread once it runs
  std::int64_t last_version_ = 0;        // used only by the thread once it runs
  std::string db_name_;                  // file name without directory
  std::string wal_name_;
  int wake_fd_ = -1;     // eventfd: the destructor wakes the thread through it
  int inotify_fd_ = -1;  // -1 in polling mode
  Mode mode_ = Mode::kPolling;
  bool read_failing_ = false;  // only the thread: log a failing read once
  std::jthread thread_;        // last: starts once everything above is set
};

}  // namespace outbox::agent
