#include "page_cost.h"

#include <SQLiteCpp/Database.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <stdexcept>
#include <vector>

#include "outbox/store.h"

namespace outbox::bench {
namespace {

namespace store = outbox::store;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr std::int64_t kFarFuture = 4'102'444'800'000;  // 2100: every row is due
constexpr int kSmall = 1024;
constexpr int kLarge = 4096;
// The b-trees every message enters, as dbstat names them.
constexpr const char* kTrees[] = {"outbox", "sqlite_autoindex_outbox_1", "outbox_claim",
                                  "outbox_payload"};

struct Shape {
  std::map<std::string, int> depth;  // levels of pages, root to leaf
  double overflow = 0;               // outbox_payload's overflow pages per message
};

struct Times {
  std::vector<double> claim;
  std::vector<double> read;
};

// A new outbox file holding `n` messages of `payload`, inserted by plain SQL
// (1 000 per transaction: the trees come out the same as one per
// transaction), checkpointed and closed.
void Fill(const std::string& path, int page_size, const std::string& payload, int n) {
  MakeFile(path, page_size);
  {
    store::Options options;
    options.path = path;
    options.create = true;
    store::Store agent(options);
    agent.SetLimits({0, 0, 0});
  }
  SQLite::Database app(path, SQLite::OPEN_READWRITE);
  SQLite::Statement insert(app, "INSERT INTO outbox(topic, msg_key, payload) VALUES('t', ?, ?)");
  for (int i = 0; i < n; ++i) {
    if (i % 1000 == 0) app.exec("BEGIN IMMEDIATE");
    insert.bind(1, "k" + std::to_string(i));
    insert.bind(2, payload.data(), static_cast<int>(payload.size()));
    insert.exec();
    insert.reset();
    if (i % 1000 == 999 || i == n - 1) app.exec("COMMIT");
  }
  app.exec("PRAGMA wal_checkpoint(TRUNCATE)");
}

// dbstat's path has one '/' per level ("/" the root, "/000/" its first
// child); overflow pages hang below a leaf and are not a level.
Shape Measure(const std::string& path, int n) {
  SQLite::Database db(path, SQLite::OPEN_READWRITE);
  Shape shape;
  SQLite::Statement depth(db, "SELECT name, max(length(path) - length(replace(path, '/', '')))"
                              " FROM dbstat WHERE pagetype != 'overflow' GROUP BY name");
  while (depth.executeStep()) {
    shape.depth[depth.getColumn(0).getString()] = depth.getColumn(1).getInt();
  }
  SQLite::Statement overflow(db, "SELECT count(*) FROM dbstat"
                                 " WHERE name = 'outbox_payload' AND pagetype = 'overflow'");
  overflow.executeStep();
  shape.overflow = overflow.getColumn(0).getDouble() / n;
  return shape;
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Claims every row through the store (64 per committed transaction, as the
// sweeper does; durable_claims off so that no fsync is timed) on a copy of
// the filled file. The claim reads each row's payload too.
double ClaimAll(const std::string& filled, const std::string& copy, int n) {
  for (const char* suffix : {"-wal", "-shm"}) fs::remove(copy + suffix);
  fs::copy_file(filled, copy, fs::copy_options::overwrite_existing);
  store::Options options;
  options.path = copy;
  options.durable_claims = false;
  store::Store agent(options);
  const Clock::time_point start = Clock::now();
  int claimed = 0;
  for (;;) {
    store::Store::WriteTransaction txn(agent);
    const std::vector<store::Claimed> rows =
        agent.ClaimDue("t", "bench", kFarFuture + 60'000, kFarFuture, 64);
    txn.Commit();
    if (rows.empty()) break;
    claimed += static_cast<int>(rows.size());
  }
  const double seconds = SecondsSince(start);
  if (claimed != n) throw std::runtime_error("page cost: claimed " + std::to_string(claimed));
  return seconds;
}

// Reads every payload back by id in `ids`' (shuffled) order on a fresh
// connection with the store's page cache (2 MiB whatever the page size).
double ReadAll(const std::string& path, const std::vector<std::int64_t>& ids) {
  SQLite::Database db(path, SQLite::OPEN_READWRITE);
  db.exec("PRAGMA cache_size = -2048");
  SQLite::Statement read(db, "SELECT payload FROM outbox_payload WHERE id = ?");
  std::size_t bytes = 0;
  const Clock::time_point start = Clock::now();
  for (const std::int64_t id : ids) {
    read.bind(1, id);
    if (read.executeStep()) bytes += static_cast<std::size_t>(read.getColumn(0).getBytes());
    read.reset();
  }
  const double seconds = SecondsSince(start);
  if (bytes == 0) throw std::runtime_error("page cost: no payload read from " + path);
  return seconds;
}

std::vector<std::int64_t> ShuffledIds(const std::string& path) {
  SQLite::Database db(path, SQLite::OPEN_READWRITE);
  SQLite::Statement q(db, "SELECT id FROM outbox_payload");
  std::vector<std::int64_t> ids;
  while (q.executeStep()) ids.push_back(q.getColumn(0).getInt64());
  std::shuffle(ids.begin(), ids.end(), std::mt19937(7));
  return ids;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string Depths(const Shape& shape) {
  std::string text;
  for (const char* tree : kTrees) {
    const auto found = shape.depth.find(tree);
    text += (text.empty() ? "" : " / ") + std::to_string(found == shape.depth.end() ? 0
                                                                                   : found->second);
  }
  return text;
}

int DeepestTree(const Shape& shape) {
  int deepest = 0;
  for (const char* tree : kTrees) {
    const auto found = shape.depth.find(tree);
    if (found != shape.depth.end()) deepest = std::max(deepest, found->second);
  }
  return deepest;
}

std::string Fixed(double value, const char* format) {
  char text[32];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

// A row without target: 1024's figure, 4096's, and their ratio (for the
// depths: of the deepest trees).
void Row(const std::string& figure, const std::string& small, const std::string& large,
         double small_value, double large_value) {
  const std::string ratio = large_value > 0 ? Fixed(small_value / large_value, "%.2f")
                            : small_value > 0 ? "-"
                                              : "1.00";
  std::printf("@row\t%s\t%s\t%s\t%s\t-\t-\n", figure.c_str(), small.c_str(), large.c_str(),
              ratio.c_str());
}

void Report(std::size_t size, int n, std::map<int, Shape>& shapes, std::map<int, Times>& times) {
  const std::string what = "7d page_size 1024 vs 4096, " + std::to_string(n) + " messages of " +
                           std::to_string(size) + " B: ";
  Row(what + "b-tree depth, outbox / UNIQUE(topic, msg_key) / outbox_claim / outbox_payload",
      Depths(shapes[kSmall]), Depths(shapes[kLarge]), DeepestTree(shapes[kSmall]),
      DeepestTree(shapes[kLarge]));
  Row(what + "overflow pages per message", Fixed(shapes[kSmall].overflow, "%.2f"),
      Fixed(shapes[kLarge].overflow, "%.2f"), shapes[kSmall].overflow, shapes[kLarge].overflow);
  const double claim_small = Median(times[kSmall].claim) * 1000;
  const double claim_large = Median(times[kLarge].claim) * 1000;
  Row(what + "claim every row through the store, 64 per transaction (median)",
      Fixed(claim_small, "%.1f ms"), Fixed(claim_large, "%.1f ms"), claim_small, claim_large);
  const double read_small = Median(times[kSmall].read) * 1000;
  const double read_large = Median(times[kLarge].read) * 1000;
  Row(what + "read every payload back by id, shuffled (median)", Fixed(read_small, "%.1f ms"),
      Fixed(read_large, "%.1f ms"), read_small, read_large);
  std::fflush(stdout);
}

// Both page sizes' files of `n` messages of `size` bytes, measured; timed
// passes alternate which page size goes first.
void Compare(const PageCostRun& run, std::size_t size, int n) {
  const std::string payload(size, 'x');
  std::map<int, std::string> files;
  std::map<int, Shape> shapes;
  std::map<int, Times> times;
  for (const int page_size : {kSmall, kLarge}) {
    files[page_size] =
        (run.dir / ("cost-" + std::to_string(page_size) + "-" + std::to_string(size) + ".db"))
            .string();
    Fill(files[page_size], page_size, payload, n);
    shapes[page_size] = Measure(files[page_size], n);
  }
  const std::vector<std::int64_t> ids = ShuffledIds(files[kLarge]);
  for (int rep = 0; rep < run.reps; ++rep) {
    for (const int page_size : rep % 2 == 0 ? std::vector{kLarge, kSmall}
                                            : std::vector{kSmall, kLarge}) {
      times[page_size].claim.push_back(ClaimAll(files[page_size], files[page_size] + "-claim", n));
      times[page_size].read.push_back(ReadAll(files[page_size], ids));
    }
  }
  Report(size, n, shapes, times);
  for (const auto& [page_size, file] : files) {
    for (const std::string& f : {file, file + "-claim"}) {
      for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(f + suffix);
    }
  }
}

}  // namespace

void MakeFile(const std::string& path, int page_size) {
  SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  db.exec("PRAGMA page_size = " + std::to_string(page_size));
  db.exec("PRAGMA auto_vacuum = INCREMENTAL");
  db.exec("PRAGMA journal_mode = WAL");
}

void PageCost(const PageCostRun& run) {
  for (const std::size_t size : {256u, 4096u, 16384u, 65536u}) Compare(run, size, run.messages);
  Compare(run, 256, run.messages * 100);
}

}  // namespace outbox::bench
