#include "bench_util.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "outbox/store.h"

namespace outbox::bench {

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(p / 100.0 * static_cast<double>(values.size()));
  const std::size_t index =
      static_cast<std::size_t>(std::clamp(rank, 1.0, static_cast<double>(values.size()))) - 1;
  return values[index];
}

Paired RunPaired(int reps, const std::function<double()>& ours,
                 const std::function<double()>& baseline) {
  Paired paired;
  for (int r = 0; r < reps; ++r) {
    double a = 0;
    double b = 0;
    if (r % 2 == 0) {
      a = ours();
      b = baseline();
    } else {
      b = baseline();
      a = ours();
    }
    paired.ours.push_back(a);
    paired.baseline.push_back(b);
    paired.ratios.push_back(a / b);
  }
  return paired;
}

void Row(const std::string& figure, const std::string& ours, const std::string& baseline,
         const std::string& ratio, const std::string& target, std::optional<bool> met) {
  std::printf("@row\t%s\t%s\t%s\t%s\t%s\t%s\n", figure.c_str(), ours.c_str(), baseline.c_str(),
              ratio.c_str(), target.empty() ? "-" : target.c_str(),
              !met ? "-" : (*met ? "yes" : "NO"));
  std::fflush(stdout);
}

void NotMeasured(const std::string& figure, const std::string& why, const std::string& target) {
  Row(figure, "not measured: " + why, "-", "-", target, std::nullopt);
}

namespace {

// Thousands separated by a thin space for readability in the table.
std::string Grouped(double value) {
  char digits[64];
  std::snprintf(digits, sizeof digits, "%.0f", value);
  std::string text = digits;
  const std::size_t start = text[0] == '-' ? 1 : 0;
  for (std::ptrdiff_t at = static_cast<std::ptrdiff_t>(text.size()) - 3;
       at > static_cast<std::ptrdiff_t>(start); at -= 3) {
    text.insert(static_cast<std::size_t>(at), " ");
  }
  return text;
}

}  // namespace

std::string FormatRate(double per_second, const char* unit) {
  return Grouped(per_second) + " " + unit;
}

std::string FormatRatio(double ratio) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", ratio);
  return text;
}

std::string FormatMs(double ms) {
  char text[32];
  std::snprintf(text, sizeof text, ms < 10 ? "%.3f ms" : "%.1f ms", ms);
  return text;
}

std::string FormatBytes(double bytes) {
  char text[32];
  if (bytes >= 1024.0 * 1024.0) {
    std::snprintf(text, sizeof text, "%.1f MiB", bytes / (1024.0 * 1024.0));
  } else {
    std::snprintf(text, sizeof text, "%.0f KiB", bytes / 1024.0);
  }
  return text;
}

std::string Payload256(std::int64_t n) { return PayloadOfSize(n, 256); }

std::string PayloadOfSize(std::int64_t n, std::size_t bytes) {
  char head[96];
  std::snprintf(head, sizeof head,
                R"({"order_id":"A-%08lld","customer":"c-77","total_cents":4599,"pad":")",
                static_cast<long long>(n));
  std::string payload = head;
  payload.append(std::max(bytes, payload.size() + 2) - payload.size() - 2, 'x');
  payload += "\"}";
  return payload;
}

RawDb::RawDb(const std::string& path) {
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) !=
      SQLITE_OK) {
    Fail("open " + path);
  }
  sqlite3_busy_timeout(db_, 5000);
}

RawDb::~RawDb() { sqlite3_close_v2(db_); }

void RawDb::Fail(const std::string& what) const {
  throw std::runtime_error(what + ": " + sqlite3_errmsg(db_));
}

void RawDb::Exec(const std::string& sql) {
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) Fail(sql);
}

Statement RawDb::Prepare(const char* sql) {
  sqlite3_stmt* statement = nullptr;
  if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &statement, nullptr) !=
      SQLITE_OK) {
    Fail(std::string("prepare ") + sql);
  }
  return Statement(statement);
}

std::int64_t RawDb::QueryInt(const char* sql) {
  Statement q = Prepare(sql);
  if (sqlite3_step(q.get()) != SQLITE_ROW) Fail(sql);
  return sqlite3_column_int64(q.get(), 0);
}

void RawDb::Run(sqlite3_stmt* statement) {
  int rc;
  while ((rc = sqlite3_step(statement)) == SQLITE_ROW) {
  }
  sqlite3_reset(statement);
  if (rc != SQLITE_DONE) Fail(sqlite3_sql(statement));
}

void CreateDatabase(const std::string& path) {
  {
    store::Options init;
    init.path = path;
    init.create = true;
    store::Store create(init);
  }
  RawDb db(path);
  db.Exec(
      "CREATE TABLE IF NOT EXISTS orders(id INTEGER PRIMARY KEY, customer TEXT NOT NULL,"
      " total_cents INTEGER NOT NULL, body BLOB NOT NULL)");
}

void InsertPending(RawDb& db, const std::string& topic, const std::string& key_prefix,
                   std::int64_t n, std::int64_t per_transaction, std::size_t payload_bytes) {
  Statement insert = db.Prepare("INSERT INTO outbox(topic, msg_key, payload) VALUES(?1, ?2, ?3)");
  for (std::int64_t done = 0; done < n;) {
    db.Exec("BEGIN IMMEDIATE");
    const std::int64_t end = std::min(n, done + per_transaction);
    for (; done < end; ++done) {
      const std::string key = key_prefix + std::to_string(done);
      const std::string payload = PayloadOfSize(done, payload_bytes);
      sqlite3_bind_text(insert.get(), 1, topic.c_str(), -1, SQLITE_STATIC);
      sqlite3_bind_text(insert.get(), 2, key.c_str(), -1, SQLITE_STATIC);
      sqlite3_bind_blob(insert.get(), 3, payload.data(), static_cast<int>(payload.size()),
                        SQLITE_STATIC);
      db.Run(insert.get());
    }
    db.Exec("COMMIT");
  }
}

BareCycle::BareCycle(const std::string& path) : db_(path) {
  db_.Exec("PRAGMA synchronous = NORMAL");
  begin_ = db_.Prepare("BEGIN IMMEDIATE");
  commit_ = db_.Prepare("COMMIT");
  claim_one_ = db_.Prepare("UPDATE outbox SET status = 3 WHERE id = ?1 AND status = 0");
  complete_ = db_.Prepare("UPDATE outbox SET status = 1 WHERE id = ?1 AND status = 3");
  claim_batch_ = db_.Prepare(
      "UPDATE outbox SET status = 3 WHERE id IN (SELECT id FROM outbox"
      " WHERE status = 0 AND topic = ?1 ORDER BY next_attempt_at, id LIMIT ?2) RETURNING id");
}

void BareCycle::Begin() { db_.Run(begin_.get()); }
void BareCycle::Commit() { db_.Run(commit_.get()); }

double BareCycle::Eager(const std::vector<std::int64_t>& ids) {
  const auto start = SteadyClock::now();
  for (const std::int64_t id : ids) {
    Begin();
    sqlite3_bind_int64(claim_one_.get(), 1, id);
    db_.Run(claim_one_.get());
    if (sqlite3_changes(db_.get()) != 1) throw std::runtime_error("bare claim: row not pending");
    Commit();
    Begin();
    sqlite3_bind_int64(complete_.get(), 1, id);
    db_.Run(complete_.get());
    Commit();
  }
  return static_cast<double>(ids.size()) / SecondsSince(start);
}

double BareCycle::Batch(const std::string& topic, int batches, int batch) {
  std::vector<std::int64_t> claimed;
  claimed.reserve(static_cast<std::size_t>(batch));
  std::int64_t rows = 0;
  const auto start = SteadyClock::now();
  for (int b = 0; b < batches; ++b) {
    claimed.clear();
    Begin();
    sqlite3_stmt* claim = claim_batch_.get();
    sqlite3_bind_text(claim, 1, topic.c_str(), static_cast<int>(topic.size()), SQLITE_STATIC);
    sqlite3_bind_int(claim, 2, batch);
    int rc;
    while ((rc = sqlite3_step(claim)) == SQLITE_ROW) claimed.push_back(sqlite3_column_int64(claim, 0));
    sqlite3_reset(claim);
    if (rc != SQLITE_DONE) db_.Fail("bare batch claim");
    Commit();
    if (claimed.size() != static_cast<std::size_t>(batch)) {
      throw std::runtime_error("bare batch claim: topic " + topic + " ran out of rows");
    }
    Begin();
    for (const std::int64_t id : claimed) {
      sqlite3_bind_int64(complete_.get(), 1, id);
      db_.Run(complete_.get());
    }
    Commit();
    rows += static_cast<std::int64_t>(claimed.size());
  }
  return static_cast<double>(rows) / SecondsSince(start);
}

std::vector<std::int64_t> PendingIds(RawDb& db, const std::string& topic) {
  Statement q = db.Prepare(
      "SELECT id FROM outbox WHERE status = 0 AND topic = ?1 ORDER BY next_attempt_at, id");
  sqlite3_bind_text(q.get(), 1, topic.c_str(), static_cast<int>(topic.size()), SQLITE_STATIC);
  std::vector<std::int64_t> ids;
  while (sqlite3_step(q.get()) == SQLITE_ROW) ids.push_back(sqlite3_column_int64(q.get(), 0));
  return ids;
}

std::int64_t FileBytes(const std::string& path) {
  std::int64_t total = 0;
  for (const std::string& file : {path, path + "-wal"}) {
    struct stat st {};
    if (::stat(file.c_str(), &st) == 0) total += static_cast<std::int64_t>(st.st_size);
  }
  return total;
}

WorkDir::WorkDir(const std::string& parent) {
  std::string base = parent.empty() ? std::filesystem::temp_directory_path().string() : parent;
  std::filesystem::create_directories(base);
  std::string pattern = base + "/outbox-bench-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

WorkDir::~WorkDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace outbox::bench
