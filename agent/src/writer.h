// The one thread that writes outbox state for an agent (group commit).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "outbox/store.h"

namespace spdlog {
class logger;
}

namespace outbox::agent {

class TransactionEnded;  // completion.h

// Per-key ordering: the next rows of keys whose rows a writer transaction
// completed are claimed in that transaction (docs/ordering.md). The writer
// gathers the keys of a group and asks once; implemented by the dispatcher.
class SuccessorClaims {
 public:
  virtual ~SuccessorClaims() = default;
  // Inside the transaction, after the completions: the rows that may go now.
  virtual std::vector<store::Claimed> Claim(store::Store& s, const std::string& topic,
                                            std::span<const std::string> ordering_keys) = 0;
  // On the writer thread, once they committed. Must not block.
  virtual void HandOver(std::vector<store::Claimed> claimed) = 0;
};

// A key whose next row a completion claims.
struct NextOfKey {
  SuccessorClaims* claims = nullptr;
  std::string topic;
  std::string ordering_key;
};

// Owns a write connection and a thread. Tasks submitted from any thread are
// applied in submission order; everything queued while a transaction runs
// goes into the next one, so N workers finishing at once cost one commit,
// not N. Deferrable tasks (completions) also wait up to kGroupWindow for
// company before a transaction starts, so that workers finishing one after
// the other share a commit too. Thread-safe.
class Writer {
 public:
  struct Task {
    // Applied inside the shared write transaction. May run more than once if
    // the transaction is retried (SQLITE_BUSY), so it must only touch the
    // database and state it resets itself.
    std::function<void(store::Store&)> apply;
    // Runs on the writer thread after the commit succeeded. Must not block.
    std::function<void()> after_commit;
    // Nobody waits for this change (a completion after the receiver's
    // acknowledgement): it may wait up to kGroupWindow for more changes to
    // share its commit. Anything else starts a transaction at once and takes
    // the waiting changes with it.
    bool deferrable = false;
    // Set when `apply` runs a completion hook that may end the whole
    // transaction (it throws TransactionEnded then): the writer redoes the
    // group with this in place of `apply`, given the hook's error.
    std::function<void(store::Store&, const std::string& error)> apply_after_abort = nullptr;
    // A plain completion (Store::Complete of this lease at this time),
    // recorded before `apply` runs (which may then be empty). The writer
    // records consecutive ones in one call (Store::Complete of a span).
    std::optional<store::DeliveredLease> complete = std::nullopt;
    // With `complete`: the key whose next row is claimed in the same
    // transaction, after the plain completions queued before the next task
    // that does more (or the end), for all their keys at once.
    std::optional<NextOfKey> claim_next = std::nullopt;
  };

  // How long deferrable changes wait for company, and how many end the wait.
  static constexpr std::chrono::microseconds kGroupWindow{1000};
  static constexpr std::size_t kGroupMax = 256;

  // Opens the write connection (creating or migrating the schema); throws
  // store errors.
  Writer(const store::Options& options, std::shared_ptr<spdlog::logger> logger);
  // Applies what is queued, then joins the thread.
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  void Submit(Task task);
  // Applies `apply` in the next transaction and waits for its commit.
  // Rethrows what `apply` or the commit threw.
  void Run(std::function<void(store::Store&)> apply);
  // Like Run, but outside any transaction (Store::Checkpoint and the like).
  void RunAlone(std::function<void(store::Store&)> apply);

  const std::string& database_id() const { return database_id_; }
  // Tasks submitted and not yet taken into a transaction (tests wait on it).
  std::size_t queued() const;
  std::int64_t transactions() const;

 private:
  struct Item {
    Task task;
    std::shared_ptr<std::promise<void>> done;  // for Run; null for Submit
    bool alone = false;
  };

  // Run and RunAlone: queue as urgent and wait for the outcome.
  void Wait(std::function<void(store::Store&)> apply, bool alone);
  void Loop(std::stop_token stop);
  void ApplyBatch(std::deque<Item>& batch);
  // Retries SQLITE_BUSY with backoff; returns false when the stop came first.
  bool Commit(std::deque<Item>& batch, std::stop_token& stop);
  // One attempt: applies the group in one transaction (an `alone` item in
  // its own), then runs the after-commit steps. `current` names the item
  // being applied, for RedoWithoutHook.
  void ApplyAndCommit(std::deque<Item>& segment, Item*& current);
  // After a hook ended the transaction: swaps that item's task for its
  // fallback; false when it has none.
  bool RedoWithoutHook(Item* current, const TransactionEnded& e);
  void GiveUp(Item& item, const std::exception_ptr& failure);
  // Logs an abandoned asynchronous change, at most once per interval.
  void ReportGiveUp(const std::string& what);

  std::unique_ptr<store::Store> store_;
  std::string database_id_;
  std::shared_ptr<spdlog::logger> logger_;

  mutable std::mutex mutex_;
  std::condition_variable_any wake_;
  std::deque<Item> queue_;          // guarded by mutex_
  std::size_t urgent_queued_ = 0;   // items of queue_ not deferrable; guarded by mutex_
  std::int64_t transactions_ = 0;   // guarded by mutex_
  // Owned by the writer thread: the rate limit of ReportGiveUp.
  std::chrono::steady_clock::time_point last_report_{};
  bool reported_once_ = false;
  std::int64_t unreported_failures_ = 0;
  std::jthread thread_;             // last: joined before the rest goes
};

}  // namespace outbox::agent
