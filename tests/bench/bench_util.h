// Shared pieces of the benchmarks: paired repetitions, medians, the result
// rows packaging/bench.sh collects, raw SQLite helpers for the baselines and
// the standard 256-byte payload.
//
// Every figure runs its own side and its baseline back to back, in
// alternating order, in each repetition; a row shows the median of each side
// and the median of the per-repetition ratios, which stays steady when other
// work on the machine makes absolute rates swing.
#pragma once

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace outbox::bench {

using SteadyClock = std::chrono::steady_clock;

// 1 while any row is undelivered (pending, in flight or dead), else 0: a
// few seeks in outbox_claim. Benchmarks poll it for the end of a run (the
// outbox_counters row alone no longer holds every row: schema 8).
inline constexpr char kAnyUndelivered[] =
    "SELECT EXISTS(SELECT 1 FROM outbox WHERE status IN (0, 2, 3))";

inline double SecondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

inline std::int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double Median(std::vector<double> values);
// Nearest-rank percentile, p in [0, 100].
double Percentile(std::vector<double> values, double p);

struct Paired {
  std::vector<double> ours, baseline, ratios;  // ratio = ours / baseline
  double ours_median() const { return Median(ours); }
  double baseline_median() const { return Median(baseline); }
  double ratio_median() const { return Median(ratios); }
};

// `reps` repetitions of ours() and baseline(), alternating which goes first.
Paired RunPaired(int reps, const std::function<double()>& ours,
                 const std::function<double()>& baseline);

// Run-wide settings, from the command line.
struct Settings {
  int reps = 9;         // repetitions of every paired measurement
  double scale = 1.0;   // multiplies every N (smaller for a quick look)
  std::string dir;      // where the database files go ("" = a temp dir)
  std::string outboxd;  // path of outboxd ("" = not available)
  std::string relay;    // path of naive_relay
  std::string only;     // run only the cases whose title contains this (profiling)
  std::size_t payload = 16 * 1024;  // bytes per message of figure 6's large-payload delivery

  bool Wanted(const std::string& title) const {
    return only.empty() || title.find(only) != std::string::npos;
  }

  int N(int n) const { return std::max(1, static_cast<int>(n * scale)); }
};

// One result row for packaging/bench.sh: a line starting with "@row", fields
// separated by tabs. `met` nullopt = no target.
void Row(const std::string& figure, const std::string& ours, const std::string& baseline,
         const std::string& ratio, const std::string& target, std::optional<bool> met);
// A row for a figure that could not be measured.
void NotMeasured(const std::string& figure, const std::string& why, const std::string& target);

// "12 345/s"-style formatting.
std::string FormatRate(double per_second, const char* unit);
std::string FormatRatio(double ratio);
std::string FormatMs(double ms);
std::string FormatBytes(double bytes);

// A JSON object of exactly 256 bytes, different for each n.
std::string Payload256(std::int64_t n);
// The same JSON padded to `bytes` (at least its fixed part).
std::string PayloadOfSize(std::int64_t n, std::size_t bytes);

// --- raw SQLite, for the baselines (the "plain C program" side) -------------

struct StatementDeleter {
  void operator()(sqlite3_stmt* statement) const { sqlite3_finalize(statement); }
};
using Statement = std::unique_ptr<sqlite3_stmt, StatementDeleter>;

class RawDb {
 public:
  // Opens an existing file read-write; busy timeout 5 s.
  explicit RawDb(const std::string& path);
  ~RawDb();
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  sqlite3* get() const { return db_; }
  void Exec(const std::string& sql);
  Statement Prepare(const char* sql);
  std::int64_t QueryInt(const char* sql);
  // Steps a prepared statement to the end and resets it; throws on error.
  void Run(sqlite3_stmt* statement);
  [[noreturn]] void Fail(const std::string& what) const;

 private:
  sqlite3* db_ = nullptr;
};

// Creates an outbox database at `path` through the store (WAL, the schema,
// the default limits) and adds the application's business table `orders`.
void CreateDatabase(const std::string& path);

// Inserts `n` pending rows of `topic` with plain SQL (one prepared INSERT per
// row) in transactions of up to `per_transaction` rows, keys "<prefix><i>",
// 256-byte payloads.
void InsertPending(RawDb& db, const std::string& topic, const std::string& key_prefix,
                   std::int64_t n, std::int64_t per_transaction = 50'000,
                   std::size_t payload_bytes = 256);

// The bare statements a plain C program would use for a store cycle (figure
// 2's baseline, also figure 3's batch target): prepared BEGIN IMMEDIATE /
// COMMIT and minimal guarded UPDATEs of the status, on a connection of its
// own with synchronous = NORMAL.
class BareCycle {
 public:
  explicit BareCycle(const std::string& path);
  RawDb& db() { return db_; }
  // Claims and completes each id, one transaction each: rows/s.
  double Eager(const std::vector<std::int64_t>& ids);
  // `batches` times: claim up to `batch` due rows of `topic` in one
  // transaction, complete them in another: rows/s. Throws if the topic ran
  // out of rows.
  double Batch(const std::string& topic, int batches, int batch);

 private:
  void Begin();
  void Commit();
  RawDb db_;
  Statement begin_, commit_, claim_one_, complete_, claim_batch_;
};

// Ids of pending rows of `topic`, oldest first.
std::vector<std::int64_t> PendingIds(RawDb& db, const std::string& topic);

// File size of `path` plus its -wal file, bytes.
std::int64_t FileBytes(const std::string& path);

// A directory for database files, removed at exit unless the caller kept it.
class WorkDir {
 public:
  explicit WorkDir(const std::string& parent);
  ~WorkDir();
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Figures, one function each (defined in their own files).
void RunEnqueue(const Settings& settings);   // figure 1
void RunStore(const Settings& settings);     // figure 2
void RunDelivery(const Settings& settings);  // figure 3
void RunLatency(const Settings& settings);   // figure 4a
void RunScale(const Settings& settings);     // figure 5
void RunSidecar(const Settings& settings);   // figures 4b and 6
void RunOrdering(const Settings& settings);  // figure 8 (per-key ordering)

}  // namespace outbox::bench
