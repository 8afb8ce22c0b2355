// Figure 5: scale.
//  - A sweeper pass (what Agent's sweeper asks of the store for one topic:
//    recycle expired leases, list lease owners, list pending topics, fix
//    far-ahead rows, count quarantined rows, look for due rows, claim a batch
//    of claim_batch = 50) over 1 000 000 pending rows beside the same pass
//    over 1 000. The claimed rows are reverted after each pass, untimed.
//  - The database file (plus -wal) after 1 000 000 messages were delivered
//    and purged by the agent's own retention, beside a freshly initialised
//    file.
// The rows are bulk-inserted with one plain SQL statement per 100 000 rows
// (through the outbox's triggers, as any application's INSERT), not through
// the API, to keep the run short.
#include <spdlog/logger.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <cstdio>
#include <thread>

#include "../../store/src/sql.h"
#include "bench_util.h"
#include "outbox/agent.h"
#include "outbox/store.h"

namespace outbox::bench {
namespace {

namespace sql = store::sql;

constexpr char kTopic[] = "bench";
constexpr char kOwner[] = "bench/1/1/1";
constexpr std::int64_t kLeaseMs = 180'000;
constexpr int kClaimBatch = 50;

// n rows of kTopic, 256-byte payloads, inserted in statements of 100 000.
void BulkInsert(RawDb& db, std::int64_t n) {
  constexpr std::int64_t kChunk = 100'000;
  Statement insert = db.Prepare(
      "WITH RECURSIVE c(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM c WHERE i < ?2)"
      " INSERT INTO outbox(topic, msg_key, payload)"
      " SELECT 'bench', 'k' || i, zeroblob(256) FROM c");
  for (std::int64_t first = 0; first < n; first += kChunk) {
    db.Exec("BEGIN IMMEDIATE");
    sqlite3_bind_int64(insert.get(), 1, first);
    sqlite3_bind_int64(insert.get(), 2, std::min(n, first + kChunk) - 1);
    db.Run(insert.get());
    db.Exec("COMMIT");
  }
}

store::Options StoreOptions(const std::string& path) {
  store::Options options;
  options.path = path;
  return options;
}

// The sweeper's store calls for one topic, on a writer and a reader
// connection as the agent has them.
class SweepPass {
 public:
  explicit SweepPass(const std::string& path)
      : writer_(WriterOptions(path)), reader_(ReaderOptions(path)) {}

  // Seconds of one pass.
  double Pass() {
    const auto start = SteadyClock::now();
    const std::int64_t now = WallMs();
    {
      store::Store::WriteTransaction txn(writer_);
      writer_.RecycleExpired(now, kLeaseMs, 1000);
      txn.Commit();
    }
    reader_.LeaseOwners();
    std::vector<std::string> topics = reader_.PendingTopics();
    {
      store::Store::WriteTransaction txn(writer_);
      for (const auto& topic : topics) writer_.MakeDueIfFarAhead(topic, now, 86'400'000);
      txn.Commit();
    }
    reader_.QuarantinedCount();
    topics = reader_.PendingTopics();
    if (!reader_.HasDue(kTopic, now)) throw std::runtime_error("sweep pass: nothing due");
    {
      store::Store::WriteTransaction txn(writer_);
      claimed_ = writer_.ClaimDue(kTopic, kOwner, now + kLeaseMs, now, kClaimBatch);
      txn.Commit();
    }
    const double seconds = SecondsSince(start);
    if (claimed_.size() != kClaimBatch) throw std::runtime_error("sweep pass: claimed too few");
    // Untimed: back to pending, so every pass finds the same backlog.
    store::Store::WriteTransaction txn(writer_);
    for (const auto& c : claimed_) writer_.Revert(c.lease, now);
    txn.Commit();
    return seconds;
  }

 private:
  // Page caches as the agent opens its writer and its sweeper's reader.
  static store::Options WriterOptions(const std::string& path) {
    store::Options options = StoreOptions(path);
    options.cache_kib = 512;
    return options;
  }
  static store::Options ReaderOptions(const std::string& path) {
    store::Options options = StoreOptions(path);
    options.cache_kib = 128;
    return options;
  }

  store::Store writer_;
  store::Store reader_;
  std::vector<store::Claimed> claimed_;
};

// The query plans of the sweeper's statements on the large file, for the log.
void PrintPlans(const std::string& path) {
  RawDb db(path);
  for (const char* statement : {sql::kRecycleExpired, sql::kLeaseOwners, sql::kPendingTopics,
                                sql::kMakeDueIfFarAhead, sql::kQuarantinedCount, sql::kHasDue,
                                sql::kClaimDue}) {
    Statement plan = db.Prepare((std::string("EXPLAIN QUERY PLAN ") + statement).c_str());
    std::fprintf(stderr, "plan: %s\n", statement);
    while (sqlite3_step(plan.get()) == SQLITE_ROW) {
      std::fprintf(stderr, "        %s\n",
                   reinterpret_cast<const char*>(sqlite3_column_text(plan.get(), 3)));
    }
  }
}

}  // namespace

void RunScale(const Settings& settings) {
  WorkDir dir(settings.dir);
  const std::int64_t large = static_cast<std::int64_t>(1'000'000 * std::min(1.0, settings.scale));
  const std::string small_path = dir.File("scale-1k.db");
  const std::string large_path = dir.File("scale-1m.db");
  CreateDatabase(small_path);
  CreateDatabase(large_path);
  const std::int64_t fresh_bytes = FileBytes(large_path);
  {
    RawDb small(small_path);
    BulkInsert(small, 1000);
    RawDb db(large_path);
    const auto start = SteadyClock::now();
    BulkInsert(db, large);
    std::fprintf(stderr, "scale: inserted %lld rows in %.1f s\n", static_cast<long long>(large),
                 SecondsSince(start));
  }
  PrintPlans(large_path);
  const std::int64_t full_bytes = FileBytes(large_path);

  {
    SweepPass small(small_path);
    SweepPass big(large_path);
    const int passes = settings.N(200);
    for (int i = 0; i < passes / 10; ++i) small.Pass(), big.Pass();  // warm-up
    // Each repetition: the median of `passes` passes on each side.
    const Paired p = RunPaired(
        settings.reps,
        [&] {
          std::vector<double> s;
          for (int i = 0; i < passes; ++i) s.push_back(big.Pass());
          return Median(s);
        },
        [&] {
          std::vector<double> s;
          for (int i = 0; i < passes; ++i) s.push_back(small.Pass());
          return Median(s);
        });
    char figure[128];
    std::snprintf(figure, sizeof figure, "5 sweeper pass (claim 50): %lld pending vs 1 000 pending",
                  static_cast<long long>(large));
    Row(figure, FormatMs(p.ours_median() * 1000), FormatMs(p.baseline_median() * 1000),
        FormatRatio(p.ratio_median()), "≤ 1.50", p.ratio_median() <= 1.5);
  }

  // Deliver (bulk UPDATE, as the agent's completions would leave them) and
  // let the agent's retention purge them.
  {
    RawDb db(large_path);
    db.Exec("PRAGMA synchronous = NORMAL");
    const auto start = SteadyClock::now();
    Statement deliver = db.Prepare(
        "UPDATE outbox SET status = 1, updated_at = 0 WHERE id IN"
        " (SELECT id FROM outbox WHERE status = 0 LIMIT 100000)");
    for (;;) {
      db.Exec("BEGIN IMMEDIATE");
      db.Run(deliver.get());
      const int changed = sqlite3_changes(db.get());
      db.Exec("COMMIT");
      if (changed == 0) break;
    }
    std::fprintf(stderr, "scale: marked delivered in %.1f s\n", SecondsSince(start));
  }
  {
    agent::Options options;
    options.db_path = large_path;
    options.sweep_interval_ms = 1;
    options.retention.delivered_ms = 1;
    options.retention.interval_ms = 1;
    auto logger = std::make_shared<spdlog::logger>(
        "outbox", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    logger->set_level(spdlog::level::err);
    options.logger = logger;
    agent::TopicOptions topic;
    topic.endpoint.url = "http://127.0.0.1:9/unused";
    options.topics[kTopic] = topic;
    agent::Agent agent(options);
    const auto start = SteadyClock::now();
    agent.Start();
    RawDb db(large_path);
    Statement left = db.Prepare("SELECT count(*) FROM outbox WHERE status = 1");
    for (;;) {
      sqlite3_step(left.get());
      const std::int64_t n = sqlite3_column_int64(left.get(), 0);
      sqlite3_reset(left.get());
      if (n == 0) break;
      if (SecondsSince(start) > 300) throw std::runtime_error("retention: timed out");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    // The pass that deleted the last rows gives pages back and truncates
    // the -wal file after its deletes; wait for that pass to finish.
    agent.Stop();
    std::fprintf(stderr, "scale: retention purged in %.1f s\n", SecondsSince(start));
  }
  const std::int64_t purged_bytes = FileBytes(large_path);
  char figure[128];
  std::snprintf(figure, sizeof figure,
                "5 db + wal size after %lld delivered and purged vs fresh (full: %s)",
                static_cast<long long>(large), FormatBytes(static_cast<double>(full_bytes)).c_str());
  Row(figure, FormatBytes(static_cast<double>(purged_bytes)),
      FormatBytes(static_cast<double>(fresh_bytes)),
      FormatRatio(static_cast<double>(purged_bytes) / static_cast<double>(fresh_bytes)),
      "(near 1)", std::nullopt);
}

}  // namespace outbox::bench
