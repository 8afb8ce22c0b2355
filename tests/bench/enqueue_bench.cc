// Figure 1: what an enqueue adds to the application's transaction.
//
//  1a. One transaction of one business row (`orders`) plus one enqueue,
//      through the public API (agent::Transaction over store::Producer),
//      beside the same transaction without the enqueue (plain C API: BEGIN
//      IMMEDIATE, a prepared INSERT, COMMIT); WAL with synchronous NORMAL and
//      FULL on the application's connection.
//  1b. 1000 enqueues in one transaction beside 1000 prepared INSERTs of the
//      same row shape into a table with the outbox's columns and defaults:
//      once with its indexes (UNIQUE(topic, msg_key) and the store's own,
//      copied from the schema), once bare (no index, no trigger).
//  With NORMAL, 1a also shows the floor: the same transaction with a plain
//  INSERT into those raw tables instead of the enqueue.
//  1a and 1b also show what the payload layout costs before any check: the
//  state row (empty payload) into the indexed raw table plus the payload
//  row into a raw payload table, two plain INSERTs without triggers, against
//  the one-row floor. The enqueue cannot beat this pair.
#include <cstdio>
#include <vector>

#include "bench_util.h"
#include "outbox/agent.h"
#include "outbox/store.h"

namespace outbox::bench {
namespace {

constexpr char kTopic[] = "order.created";

// The outbox's columns and defaults without its indexes and triggers.
constexpr char kRawColumns[] = R"sql(
  id                INTEGER PRIMARY KEY,
  topic             TEXT NOT NULL,
  msg_key           TEXT NOT NULL,
  payload           BLOB NOT NULL,
  headers           TEXT,
  status            INTEGER NOT NULL DEFAULT 0,
  attempts          INTEGER NOT NULL DEFAULT 0,
  max_attempts      INTEGER,
  backoff           TEXT,
  first_interval_ms INTEGER,
  next_attempt_at   INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)),
  lease_owner       TEXT,
  last_error        TEXT,
  created_at        INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)),
  updated_at        INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)),
  lease_token       INTEGER NOT NULL DEFAULT 0,
  lease_expires_at  INTEGER,
  last_attempt_at   INTEGER,
  crashes           INTEGER NOT NULL DEFAULT 0,
  quarantined       INTEGER NOT NULL DEFAULT 0,
  operator_retries  INTEGER NOT NULL DEFAULT 0,
  lease_boot_id     TEXT,
  lease_boot_until  INTEGER,
  schema_version    TEXT,
  ordering_key      TEXT,
  deliver_at        INTEGER,
  expires_at        INTEGER,
  dead_reason       TEXT,
  acked_at          INTEGER,
  delivered_at      INTEGER)sql";

class EnqueueBench {
 public:
  EnqueueBench(const std::string& path, const char* synchronous) : path_(path) {
    CreateDatabase(path);
    app_ = std::make_unique<RawDb>(path);
    app_->Exec(std::string("PRAGMA synchronous = ") + synchronous);
    app_->Exec(std::string("CREATE TABLE raw_bare(") + kRawColumns + ")");
    app_->Exec(std::string("CREATE TABLE raw_indexed(") + kRawColumns +
               ", UNIQUE(topic, msg_key))");
    app_->Exec("CREATE TABLE raw_payload(id INTEGER PRIMARY KEY, payload BLOB NOT NULL,"
               " headers TEXT)");
    // The outbox's own indexes, whatever the current schema makes them.
    {
      Statement indexes = app_->Prepare(
          "SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'outbox'"
          " AND sql IS NOT NULL");
      std::vector<std::string> copies;
      while (sqlite3_step(indexes.get()) == SQLITE_ROW) {
        const std::string name = reinterpret_cast<const char*>(sqlite3_column_text(indexes.get(), 0));
        std::string sql = reinterpret_cast<const char*>(sqlite3_column_text(indexes.get(), 1));
        sql.replace(sql.find(name), name.size(), "raw_" + name);
        sql.replace(sql.find(" ON outbox"), 10, " ON raw_indexed");
        copies.push_back(sql);
      }
      for (const std::string& sql : copies) app_->Exec(sql);
    }
    producer_ = std::make_unique<store::Producer>(app_->get());
    order_ = app_->Prepare("INSERT INTO orders(customer, total_cents, body) VALUES(?1, ?2, ?3)");
    raw_bare_ =
        app_->Prepare("INSERT INTO raw_bare(topic, msg_key, payload) VALUES(?1, ?2, ?3)");
    raw_indexed_ =
        app_->Prepare("INSERT INTO raw_indexed(topic, msg_key, payload) VALUES(?1, ?2, ?3)");
    raw_state_ =
        app_->Prepare("INSERT INTO raw_indexed(topic, msg_key, payload) VALUES(?1, ?2, X'')");
    raw_payload_ =
        app_->Prepare("INSERT INTO raw_payload(id, payload, headers) VALUES(?1, ?2, NULL)");
    payload_ = Payload256(1);
  }

  void InsertOrder() {
    sqlite3_bind_text(order_.get(), 1, "c-77", -1, SQLITE_STATIC);
    sqlite3_bind_int64(order_.get(), 2, 4599);
    sqlite3_bind_blob(order_.get(), 3, payload_.data(), static_cast<int>(payload_.size()),
                      SQLITE_STATIC);
    app_->Run(order_.get());
  }

  // Transactions per second: a business row and an enqueue.
  double BusinessWithEnqueue(int transactions) {
    const auto start = SteadyClock::now();
    for (int i = 0; i < transactions; ++i) {
      agent::Transaction txn(nullptr, *producer_);
      InsertOrder();
      txn.Enqueue({kTopic, "k" + std::to_string(++key_), payload_, "", {}});
      txn.Commit();
    }
    return transactions / SecondsSince(start);
  }

  // What the plain INSERTs of one message write, by table layout.
  enum class Raw { kBare, kIndexed, kTwoRows };

  void InsertRaw(Raw layout) {
    const std::string key = "k" + std::to_string(++key_);
    if (layout == Raw::kTwoRows) {
      sqlite3_stmt* state = raw_state_.get();
      sqlite3_bind_text(state, 1, kTopic, -1, SQLITE_STATIC);
      sqlite3_bind_text(state, 2, key.c_str(), static_cast<int>(key.size()), SQLITE_STATIC);
      app_->Run(state);
      sqlite3_stmt* payload = raw_payload_.get();
      sqlite3_bind_int64(payload, 1, sqlite3_last_insert_rowid(app_->get()));
      sqlite3_bind_blob(payload, 2, payload_.data(), static_cast<int>(payload_.size()),
                        SQLITE_STATIC);
      app_->Run(payload);
      return;
    }
    sqlite3_stmt* insert = layout == Raw::kIndexed ? raw_indexed_.get() : raw_bare_.get();
    sqlite3_bind_text(insert, 1, kTopic, -1, SQLITE_STATIC);
    sqlite3_bind_text(insert, 2, key.c_str(), static_cast<int>(key.size()), SQLITE_STATIC);
    sqlite3_bind_blob(insert, 3, payload_.data(), static_cast<int>(payload_.size()),
                      SQLITE_STATIC);
    app_->Run(insert);
  }

  // Transactions per second: the business row and one message written by
  // plain INSERTs (the floor of any second row in the transaction).
  double BusinessWithRaw(int transactions, Raw layout) {
    const auto start = SteadyClock::now();
    for (int i = 0; i < transactions; ++i) {
      app_->Exec("BEGIN IMMEDIATE");
      InsertOrder();
      InsertRaw(layout);
      app_->Exec("COMMIT");
    }
    return transactions / SecondsSince(start);
  }

  // Transactions per second: the business row alone.
  double BusinessOnly(int transactions) {
    const auto start = SteadyClock::now();
    for (int i = 0; i < transactions; ++i) {
      app_->Exec("BEGIN IMMEDIATE");
      InsertOrder();
      app_->Exec("COMMIT");
    }
    return transactions / SecondsSince(start);
  }

  // Rows per second: `transactions` transactions of 1000 enqueues.
  double ThousandEnqueues(int transactions) {
    const auto start = SteadyClock::now();
    for (int t = 0; t < transactions; ++t) {
      agent::Transaction txn(nullptr, *producer_);
      for (int i = 0; i < 1000; ++i) {
        txn.Enqueue({kTopic, "k" + std::to_string(++key_), payload_, "", {}});
      }
      txn.Commit();
    }
    return transactions * 1000 / SecondsSince(start);
  }

  // Rows per second: the same with prepared plain INSERTs.
  double ThousandRaw(int transactions, Raw layout) {
    const auto start = SteadyClock::now();
    for (int t = 0; t < transactions; ++t) {
      app_->Exec("BEGIN IMMEDIATE");
      for (int i = 0; i < 1000; ++i) InsertRaw(layout);
      app_->Exec("COMMIT");
    }
    return transactions * 1000 / SecondsSince(start);
  }

  // The outbox rows are never delivered here: keep them under max_pending
  // and the file small by clearing them between figures.
  void Clear() {
    app_->Exec("DELETE FROM outbox; DELETE FROM raw_bare; DELETE FROM raw_indexed;"
               " DELETE FROM raw_payload; DELETE FROM orders; PRAGMA wal_checkpoint(TRUNCATE)");
  }

 private:
  std::string path_;
  std::unique_ptr<RawDb> app_;
  std::unique_ptr<store::Producer> producer_;
  Statement order_, raw_bare_, raw_indexed_, raw_state_, raw_payload_;
  std::string payload_;
  std::int64_t key_ = 0;
};

}  // namespace

void RunEnqueue(const Settings& settings) {
  WorkDir dir(settings.dir);
  struct Mode {
    const char* name;
    int transactions;
  };
  for (const Mode mode : {Mode{"NORMAL", settings.N(5000)}, Mode{"FULL", settings.N(600)}}) {
    EnqueueBench bench(dir.File(std::string("enqueue-") + mode.name + ".db"), mode.name);
    bench.BusinessWithEnqueue(mode.transactions / 4);  // warm-up
    bench.BusinessOnly(mode.transactions / 4);
    const Paired p = RunPaired(
        settings.reps, [&] { return bench.BusinessWithEnqueue(mode.transactions); },
        [&] { return bench.BusinessOnly(mode.transactions); });
    const double ratio = p.ratio_median();
    Row(std::string("1a txn: business row + enqueue vs business row alone (WAL, ") + mode.name +
            ")",
        FormatRate(p.ours_median(), "txn/s"), FormatRate(p.baseline_median(), "txn/s"),
        FormatRatio(ratio) + " (+" + std::to_string(static_cast<int>((1 / ratio - 1) * 100 + 0.5)) +
            " % time)",
        "≥ 0.77 (enqueue adds ≤ 30 %)", ratio >= 1 / 1.3);
    if (std::string(mode.name) == "NORMAL") {
      // The target's own pairing: the enqueue against the floor (the same
      // row as a plain INSERT into the indexed raw table), same run.
      const Paired against_floor = RunPaired(
          settings.reps, [&] { return bench.BusinessWithEnqueue(mode.transactions); },
          [&] { return bench.BusinessWithRaw(mode.transactions, EnqueueBench::Raw::kIndexed); });
      Row("1a txn: business row + enqueue vs business row + plain INSERT with the outbox's"
          " columns and indexes, no trigger (NORMAL)",
          FormatRate(against_floor.ours_median(), "txn/s"),
          FormatRate(against_floor.baseline_median(), "txn/s"),
          FormatRatio(against_floor.ratio_median()), "≥ 0.90",
          against_floor.ratio_median() >= 0.9);
      // The layout's own floor: state row + payload row, no trigger.
      const Paired two_rows = RunPaired(
          settings.reps,
          [&] { return bench.BusinessWithRaw(mode.transactions, EnqueueBench::Raw::kTwoRows); },
          [&] { return bench.BusinessWithRaw(mode.transactions, EnqueueBench::Raw::kIndexed); });
      Row("1a layout: business row + plain INSERTs of a state row and a payload row (no"
          " trigger) vs business row + plain INSERT with the outbox's columns and indexes (NORMAL)",
          FormatRate(two_rows.ours_median(), "txn/s"),
          FormatRate(two_rows.baseline_median(), "txn/s"), FormatRatio(two_rows.ratio_median()),
          "", std::nullopt);
      // Where the floor is: a second row costs WAL pages however it is written.
      for (const bool indexed : {false, true}) {
        const auto layout = indexed ? EnqueueBench::Raw::kIndexed : EnqueueBench::Raw::kBare;
        const Paired floor = RunPaired(
            settings.reps, [&] { return bench.BusinessWithRaw(mode.transactions, layout); },
            [&] { return bench.BusinessOnly(mode.transactions); });
        Row(std::string("1a floor: business row + a plain INSERT into a raw table ") +
                (indexed ? "with the outbox's columns and indexes, no trigger"
                         : "with the outbox's columns, no index") +
                " vs business row alone (NORMAL)",
            FormatRate(floor.ours_median(), "txn/s"), FormatRate(floor.baseline_median(), "txn/s"),
            FormatRatio(floor.ratio_median()) + " (+" +
                std::to_string(static_cast<int>((1 / floor.ratio_median() - 1) * 100 + 0.5)) +
                " % time)",
            "", std::nullopt);
      }
    }
    bench.Clear();
  }

  EnqueueBench bench(dir.File("enqueue-batch.db"), "NORMAL");
  const int transactions = settings.N(5);
  bench.ThousandEnqueues(1);
  bench.ThousandRaw(1, EnqueueBench::Raw::kIndexed);
  bench.ThousandRaw(1, EnqueueBench::Raw::kBare);
  bench.ThousandRaw(1, EnqueueBench::Raw::kTwoRows);
  const Paired indexed = RunPaired(
      settings.reps, [&] { return bench.ThousandEnqueues(transactions); },
      [&] { return bench.ThousandRaw(transactions, EnqueueBench::Raw::kIndexed); });
  Row("1b 1000 enqueues in one txn vs 1000 raw INSERTs, same columns and indexes",
      FormatRate(indexed.ours_median(), "rows/s"), FormatRate(indexed.baseline_median(), "rows/s"),
      FormatRatio(indexed.ratio_median()), "≥ 0.80", indexed.ratio_median() >= 0.8);
  bench.Clear();
  const Paired two_rows = RunPaired(
      settings.reps, [&] { return bench.ThousandRaw(transactions, EnqueueBench::Raw::kTwoRows); },
      [&] { return bench.ThousandRaw(transactions, EnqueueBench::Raw::kIndexed); });
  Row("1b layout: 1000 plain INSERTs of a state row and a payload row (no trigger) in one txn"
      " vs 1000 raw INSERTs, same columns and indexes",
      FormatRate(two_rows.ours_median(), "rows/s"),
      FormatRate(two_rows.baseline_median(), "rows/s"), FormatRatio(two_rows.ratio_median()), "",
      std::nullopt);
  bench.Clear();
  const Paired bare = RunPaired(
      settings.reps, [&] { return bench.ThousandEnqueues(transactions); },
      [&] { return bench.ThousandRaw(transactions, EnqueueBench::Raw::kBare); });
  Row("1b 1000 enqueues in one txn vs 1000 raw INSERTs, same columns, no index",
      FormatRate(bare.ours_median(), "rows/s"), FormatRate(bare.baseline_median(), "rows/s"),
      FormatRatio(bare.ratio_median()), "≥ 0.80", bare.ratio_median() >= 0.8);
}

}  // namespace outbox::bench
