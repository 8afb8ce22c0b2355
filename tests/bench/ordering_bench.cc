// Figure 8: per-key ordering (docs/ordering.md).
//
//  8a  100 000 messages over 1 000 ordering keys, 8 workers: a topic with
//      ordering against the same rows on a topic without (target ≥ 0.7).
//  8b  one hot key (every message on one ordering key): the agent against a
//      raw sequential libcurl loop posting the same requests (target ≥ 0.6).
//  8c  one claim pass (ClaimDue of 100 rows, rolled back) at 1 000 000
//      pending rows over 10 000 keys against the pass at 1 000 pending rows
//      over 1 000 keys (target ≤ 1.5 × the small one's time, i.e. a rate
//      ratio ≥ 0.67); the large file again with half of its keys held by
//      a head waiting for its retry; and with one key's 10 000 due rows
//      behind a dead head, before and after the sweeper parked them.
//
// The sink is figure 3's NullHttpServer; rows are inserted with plain SQL
// before the clock starts, as in figure 3.
#include <SQLiteCpp/Database.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <cstdio>
#include <thread>

#include "../common/null_http_server.h"
#include "bench_util.h"
#include "outbox/agent.h"
#include "outbox/store.h"
#include "raw_curl.h"

namespace outbox::bench {
namespace {

std::shared_ptr<spdlog::logger> QuietLogger() {
  auto logger = std::make_shared<spdlog::logger>("outbox",
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_level(spdlog::level::err);
  return logger;
}

// Inserts `n` pending rows of `topic`, row i on ordering key i % keys (none
// when keys = 0), in one transaction per 50 000 rows.
void InsertKeyed(RawDb& db, const std::string& topic, const std::string& prefix, std::int64_t n,
                 std::int64_t keys) {
  Statement insert = db.Prepare(
      "INSERT INTO outbox(topic, msg_key, payload, ordering_key) VALUES(?1, ?2, ?3, ?4)");
  for (std::int64_t done = 0; done < n;) {
    db.Exec("BEGIN IMMEDIATE");
    const std::int64_t end = std::min(n, done + 50'000);
    for (; done < end; ++done) {
      const std::string key = prefix + std::to_string(done);
      const std::string payload = Payload256(done);
      const std::string ordering_key = "key-" + std::to_string(keys > 0 ? done % keys : 0);
      sqlite3_bind_text(insert.get(), 1, topic.c_str(), -1, SQLITE_STATIC);
      sqlite3_bind_text(insert.get(), 2, key.c_str(), -1, SQLITE_STATIC);
      sqlite3_bind_blob(insert.get(), 3, payload.data(), static_cast<int>(payload.size()),
                        SQLITE_STATIC);
      if (keys > 0) {
        sqlite3_bind_text(insert.get(), 4, ordering_key.c_str(), -1, SQLITE_STATIC);
      } else {
        sqlite3_bind_null(insert.get(), 4);
      }
      db.Run(insert.get());
    }
    db.Exec("COMMIT");
  }
}

// An agent delivering one topic to the sink, on a file of its own.
class Rig {
 public:
  Rig(const std::string& path, const std::string& url, int workers, bool ordered)
      : path_(path) {
    CreateDatabase(path);
    agent::Options options;
    options.db_path = path;
    options.logger = QuietLogger();
    agent::TopicOptions topic;
    topic.endpoint.url = url;
    topic.workers = workers;
    topic.ordering.by_key = ordered;
    options.topics["t"] = topic;
    agent_ = std::make_unique<agent::Agent>(options);
    agent_->Start();
    app_ = std::make_unique<RawDb>(path);
    app_->Exec("UPDATE outbox_limits SET max_pending = 0");
    undelivered_ = app_->Prepare(kAnyUndelivered);
  }
  ~Rig() { agent_->Stop(std::chrono::seconds(5)); }

  // Messages per second for `n` rows over `keys` ordering keys.
  double Drain(int n, int keys) {
    InsertKeyed(*app_, "t", "m" + std::to_string(round_++) + "-", n, keys);
    const auto start = SteadyClock::now();
    agent_->NotifyExternalCommit();
    const auto deadline = start + std::chrono::seconds(300);
    for (;;) {
      sqlite3_stmt* q = undelivered_.get();
      if (sqlite3_step(q) != SQLITE_ROW) app_->Fail("read undelivered");
      const std::int64_t left = sqlite3_column_int64(q, 0);
      sqlite3_reset(q);
      if (left == 0) break;
      if (SteadyClock::now() > deadline) throw std::runtime_error("ordering: timed out");
      std::this_thread::sleep_for(std::chrono::microseconds(500));  // paces the polling only
    }
    return n / SecondsSince(start);
  }

  const std::string& database_id() const { return agent_->database_id(); }

 private:
  std::string path_;
  std::unique_ptr<agent::Agent> agent_;
  std::unique_ptr<RawDb> app_;
  Statement undelivered_;
  int round_ = 0;
};

void ManyKeys(const Settings& settings, WorkDir& dir, const std::string& url) {
  const char* figure = "8a ordering: 100 000 messages over 1 000 keys, 8 workers, on vs off";
  if (!settings.Wanted(figure)) return;
  const int n = settings.N(100'000);
  Rig on(dir.File("ordering-on.db"), url, 8, true);
  Rig off(dir.File("ordering-off.db"), url, 8, false);
  on.Drain(n / 10, 1000);
  off.Drain(n / 10, 1000);
  const Paired p = RunPaired(
      settings.reps, [&] { return on.Drain(n, 1000); }, [&] { return off.Drain(n, 1000); });
  Row(figure, FormatRate(p.ours_median(), "msg/s"), FormatRate(p.baseline_median(), "msg/s"),
      FormatRatio(p.ratio_median()), "≥ 0.70", p.ratio_median() >= 0.7);
}

void HotKey(const Settings& settings, WorkDir& dir, const std::string& url) {
  const char* figure = "8b ordering: one hot key vs raw sequential libcurl loop";
  if (!settings.Wanted(figure)) return;
  const int n = settings.N(5000);
  Rig rig(dir.File("ordering-hot.db"), url, 2, true);
  transport::EndpointOptions options;
  options.url = url;
  std::vector<RawRequest> requests;
  const std::int64_t now_s = WallMs() / 1000;
  for (int i = 0; i < n; ++i) {
    const std::string id = transport::MessageId(rig.database_id(), "t", "k" + std::to_string(i));
    const std::string payload = Payload256(i);
    transport::Message m{.message_id = id, .topic = "t", .payload = payload};
    std::string body = transport::BuildBody(options, m);
    requests.emplace_back(body, transport::BuildHeaders(options, m, body, now_s));
  }
  rig.Drain(n / 10, 1);
  RawSequential(url, requests);
  const Paired p = RunPaired(
      settings.reps, [&] { return rig.Drain(n, 1); }, [&] { return RawSequential(url, requests); });
  Row(figure, FormatRate(p.ours_median(), "msg/s"), FormatRate(p.baseline_median(), "msg/s"),
      FormatRatio(p.ratio_median()), "≥ 0.60", p.ratio_median() >= 0.6);
}

// Claim passes per second: ClaimDue of 100 rows, rolled back, `passes` times.
double ClaimPasses(store::Store& s, int passes, std::int64_t now) {
  const auto start = SteadyClock::now();
  for (int i = 0; i < passes; ++i) {
    s.connection().exec("BEGIN IMMEDIATE");
    const auto claimed = s.ClaimDue("t", "bench", now + 60'000, now, 100);
    s.connection().exec("ROLLBACK");
    if (claimed.size() != 100) throw std::runtime_error("claim pass: expected 100 rows");
  }
  return passes / SecondsSince(start);
}

void ClaimScale(const Settings& settings, WorkDir& dir) {
  const char* figure = "8c ordering: claim pass at 1 000 000 pending over 10 000 keys vs 1 000";
  if (!settings.Wanted("8c ordering")) return;
  const auto open = [&](const std::string& path, std::int64_t n, std::int64_t keys) {
    CreateDatabase(path);
    {
      RawDb db(path);
      db.Exec("UPDATE outbox_limits SET max_pending = 0");
      InsertKeyed(db, "t", "m", n, keys);
    }
    store::Options options;
    options.path = path;
    auto s = std::make_unique<store::Store>(options);
    s->AgreeOrdering("t", {true, store::DeadHead::kBlock}, WallMs());
    return s;
  };
  const std::int64_t large_n = settings.N(1'000'000);
  auto small = open(dir.File("claim-small.db"), 1000, 1000);
  auto large = open(dir.File("claim-large.db"), large_n, 10'000);
  const std::int64_t now = WallMs() + 1000;
  const int passes = 200;
  ClaimPasses(*small, passes / 4, now);
  ClaimPasses(*large, passes / 4, now);
  Paired p = RunPaired(
      settings.reps, [&] { return ClaimPasses(*large, passes, now); },
      [&] { return ClaimPasses(*small, passes, now); });
  Row(figure, FormatRate(p.ours_median(), "passes/s"), FormatRate(p.baseline_median(), "passes/s"),
      FormatRatio(p.ratio_median()), "≥ 0.67 (≤ 1.5× the time)", p.ratio_median() >= 1 / 1.5);

  // The claim's own growth with the file, no ordering keys at all: rows
  // without a key are not in outbox_ordering.
  {
    large.reset();
    auto plain_large = open(dir.File("claim-plain-large.db"), large_n, 0);
    auto plain_small = open(dir.File("claim-plain-small.db"), 1000, 0);
    const std::int64_t plain_now = WallMs() + 1000;  // the rows were just written
    ClaimPasses(*plain_large, passes / 4, plain_now);
    ClaimPasses(*plain_small, passes / 4, plain_now);
    const Paired plain = RunPaired(
        settings.reps, [&] { return ClaimPasses(*plain_large, passes, plain_now); },
        [&] { return ClaimPasses(*plain_small, passes, plain_now); });
    Row("8c claim pass without ordering keys: 1 000 000 pending vs 1 000",
        FormatRate(plain.ours_median(), "passes/s"), FormatRate(plain.baseline_median(), "passes/s"),
        FormatRatio(plain.ratio_median()), "(info)", std::nullopt);
    store::Options reopen;
    reopen.path = dir.File("claim-large.db");
    large = std::make_unique<store::Store>(reopen);
  }

  // The same pass on the same file with the topic's ordering forgotten: what
  // the ordering itself costs, apart from the file's size.
  large->ForgetOrdering("t");
  p = RunPaired(
      settings.reps, [&] { return ClaimPasses(*large, passes, now); },
      [&] {
        large->AgreeOrdering("t", {true, store::DeadHead::kBlock}, WallMs());
        const double rate = ClaimPasses(*large, passes, now);
        large->ForgetOrdering("t");
        return rate;
      });
  // (ours here is the pass without ordering; the ratio is off / on.)
  Row("8c ordering: claim pass at 1 000 000 pending, ordering on vs off (same file)",
      FormatRate(p.baseline_median(), "passes/s"), FormatRate(p.ours_median(), "passes/s"),
      FormatRatio(p.baseline_median() / p.ours_median()), "(info)", std::nullopt);
  large->AgreeOrdering("t", {true, store::DeadHead::kBlock}, WallMs());

  // Half of the keys wait for a retry of their head: their later rows are
  // due and lie in the claim index among the rows that may go.
  large->connection().exec(
      "UPDATE outbox SET next_attempt_at = next_attempt_at + 3600000, attempts = 1"
      " WHERE id IN (SELECT min(id) FROM outbox WHERE ordering_key IS NOT NULL"
      " GROUP BY ordering_key) AND CAST(substr(ordering_key, 5) AS INTEGER) % 2 = 0");
  p = RunPaired(
      settings.reps, [&] { return ClaimPasses(*large, passes, now); },
      [&] { return ClaimPasses(*small, passes, now); });
  Row("8c ordering: claim pass, 1 000 000 pending, half of the 10 000 keys held by a retry, vs "
      "1 000",
      FormatRate(p.ours_median(), "passes/s"), FormatRate(p.baseline_median(), "passes/s"),
      FormatRatio(p.ratio_median()), "≥ 0.67 (≤ 1.5× the time)", p.ratio_median() >= 1 / 1.5);
  large->connection().exec(
      "UPDATE outbox SET next_attempt_at = next_attempt_at - 3600000, attempts = 0"
      " WHERE attempts = 1 AND status = 0");

  // One key with 10 000 due rows behind a dead head (dead_head block), all
  // of them older than every other row: each claim pass walks and rejects
  // them first, until the sweeper parks them (Store::ParkBehindDeadHeads).
  const int stuck = static_cast<int>(settings.N(10'000));
  large->connection().exec(
      "INSERT INTO outbox(topic, msg_key, payload, ordering_key, status, dead_reason,"
      " next_attempt_at) VALUES('t', 'stuck-head', 'x', 'stuck', 2, 'permanent', 1)");
  large->connection().exec(
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < " +
      std::to_string(stuck) +
      ")"
      " INSERT INTO outbox(topic, msg_key, payload, ordering_key, next_attempt_at)"
      " SELECT 't', 'stuck-' || i, 'x', 'stuck', 1 + i FROM n");
  const int few = passes / 20;  // each walks the whole backlog
  p = RunPaired(
      settings.reps, [&] { return ClaimPasses(*large, few, now); },
      [&] { return ClaimPasses(*small, passes, now); });
  Row("8c dead head: claim pass, 1 000 000 pending + 10 000 due behind one dead head, not parked, "
      "vs 1 000",
      FormatRate(p.ours_median(), "passes/s"), FormatRate(p.baseline_median(), "passes/s"),
      FormatRatio(p.ratio_median()), "(info)", std::nullopt);
  const auto park_start = SteadyClock::now();
  large->connection().exec("BEGIN IMMEDIATE");
  const int parked = large->ParkBehindDeadHeads("t", now);
  large->connection().exec("COMMIT");
  const double park_ms = SecondsSince(park_start) * 1000;
  if (parked != stuck) throw std::runtime_error("dead head: expected every stuck row parked");
  // What a sweeper pass with nothing new to park costs.
  const auto repark_start = SteadyClock::now();
  large->connection().exec("BEGIN IMMEDIATE");
  const int reparked = large->ParkBehindDeadHeads("t", now);
  large->connection().exec("COMMIT");
  const double repark_ms = SecondsSince(repark_start) * 1000;
  if (reparked != 0) throw std::runtime_error("dead head: parked twice");
  p = RunPaired(
      settings.reps, [&] { return ClaimPasses(*large, passes, now); },
      [&] { return ClaimPasses(*small, passes, now); });
  Row("8c dead head: claim pass, 1 000 000 pending + 10 000 parked behind one dead head, vs "
      "1 000 (parking them: " + FormatMs(park_ms) + ", a pass with none new: " +
          FormatMs(repark_ms) + ")",
      FormatRate(p.ours_median(), "passes/s"), FormatRate(p.baseline_median(), "passes/s"),
      FormatRatio(p.ratio_median()), "≥ 0.67 (≤ 1.5× the time)", p.ratio_median() >= 1 / 1.5);
}

}  // namespace

void RunOrdering(const Settings& settings) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  WorkDir dir(settings.dir);
  testing::NullHttpServer sink;
  ManyKeys(settings, dir, sink.Url());
  HotKey(settings, dir, sink.Url());
  ClaimScale(settings, dir);
}

}  // namespace outbox::bench
