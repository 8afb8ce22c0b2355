// The sweeper: recycles expired leases, takes back rows of dead agents,
// claims due rows for the topics that can send now, resends quarantined rows
// one at a time (probation) and runs retention. Not installed.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dispatcher.h"
#include "pool.h"
#include "probation.h"
#include "retention.h"
#include "route_table.h"
#include "runtime.h"
#include "runtime_state.h"

namespace outbox::agent {

// Owns its thread and its read connection. Created by Agent::Start after the
// routes, destroyed by Stop before they are.
class Sweeper {
 public:
  // Opens the read connection; throws store errors.
  Sweeper(Runtime& runtime, RouteTable& routes, Dispatcher& dispatcher);
  // Stops and joins the thread.
  ~Sweeper();
  Sweeper(const Sweeper&) = delete;
  Sweeper& operator=(const Sweeper&) = delete;

  // Leases of agents on this host that no longer run go back to pending
  // (quarantined). Before Start() only: afterwards the thread owns the reader.
  void TakeBackFromDeadOwners();
  void Start();
  // Requests the stop, wakes the thread and joins it.
  void Stop();

  // Rows the sweeper claims in one write transaction (in statements of
  // claim_batch), as far as the pool has room. Since payloads live in
  // outbox_payload a claim writes state only, so this no longer guards a
  // full disk (ClaimDue retries a full disk with a quarter of the rows
  // anyway). Each claim transaction costs the sweeper one fsync of the log
  // (milliseconds here), so at 100 a round could not claim faster than the
  // workers of a batch topic deliver (benchmark figure 3, batch mode).
  static constexpr int kClaimRowsPerTransaction = 500;
  // Payload bytes one claim statement aims at: SQLite holds a statement's
  // RETURNING rows in memory until it is done, beside the copies handed to
  // the pool, so 50 rows of 16 KiB would hold 1.6 MB at once.
  static constexpr std::int64_t kClaimStatementBytes = 256 * 1024;
  static constexpr int kRecycleBatch = 1000;
  // Expired rows per topic and pass.
  static constexpr int kExpireBatch = 1000;

 private:
  void Loop(std::stop_token stop);
  void FullPass();
  void ExpirePass(const RouteTable::Served& served, std::int64_t now);
  // Inside the take-back's write transaction; `ended` survives the writer's
  // retries, `after_commit` collects what to run once it committed.
  void RunCrashDeathHooks(store::Store& s, const std::vector<store::Row>& rows, std::int64_t now,
                          std::map<std::int64_t, std::string>& ended,
                          std::vector<std::function<void()>>& after_commit);
  RouteTable::Served TopicsToServe();
  void PumpPass();
  // Claims up to `want` due rows of `topic`, stopping after the statement
  // that reaches `room.bytes` of payload and headers, in statements of
  // claim_batch rows and about kClaimStatementBytes; on a full disk retries
  // with a smaller `want`. `want` ends as the rows asked for in the end
  // (fewer claimed means nothing more is due).
  std::vector<store::Claimed> ClaimDue(const std::string& topic, int& want,
                                       const WorkerPool::Room& room, std::int64_t now);
  bool ProbationStep();

  Runtime& rt_;
  RouteTable& routes_;
  Dispatcher& dispatcher_;
  std::unique_ptr<store::Store> reader_;  // used by the thread only (after Start)
  Retention retention_;
  RuntimeStatePublisher runtime_state_;
  Probation probation_;
  std::set<std::string> unrouted_logged_;
  std::chrono::steady_clock::time_point next_retention_{};
  std::jthread thread_;  // last: joined before the rest goes
};

}  // namespace outbox::agent
