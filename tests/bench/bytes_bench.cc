// Bytes written to the database file and its -wal per message, by payload
// size (figure 7): the application's plain-SQL enqueue, all messages in one
// transaction and one message per transaction, each against its floor (the
// same INSERTs into a plain table with every column of outbox, its UNIQUE key
// and its claim index, in a file of the same page size and auto-vacuum, no
// triggers); the agent's delivery (claims of 64 rows per transaction, one
// transaction of completions per batch, as the sweeper and the writer group
// them; then a checkpoint); retention (purge, incremental vacuum,
// checkpoint); and a message's whole life, for both enqueue modes. Counted
// by a VFS shim from the xWrite calls, i.e. what reaches the disk,
// checkpoints included.
//
//   bytes_bench [--messages N] [--dir DIR] [--page-size BYTES] [--pages]
//   bytes_bench --page-cost [--messages N] [--reps R] [--dir DIR]
//
// --pages also lists, per payload size, the pages a one-message transaction
// writes (averaged over its last 50 transactions), by b-tree, for the outbox
// file and for the floor; and the pages per message of delivery (claims,
// completions) and purge (deletes, incremental vacuum), with the distinct
// pages each checkpoint writes. --page-cost prints figure 7d instead: files at
// page_size 1024 against 4096 by b-tree depth, overflow pages and read speed
// (page_cost.h).
#include <SQLiteCpp/Database.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include "counting_vfs.h"
#include "page_cost.h"
#include "outbox/store.h"
#include "wal_pages.h"

namespace {

using outbox::bench::MakeFile;
using outbox::bench::Written;
namespace store = outbox::store;

constexpr std::int64_t kFarFuture = 4'102'444'800'000;  // 2100: everything is due and old
// One-message transactions listed by --pages (after the bench's own n).
constexpr int kListedCommits = 50;

std::int64_t Since(std::int64_t before) { return Written().total() - before; }

struct Run {
  int messages = 1000;
  int page_size = 4096;
  bool list_pages = false;
  bool page_cost = false;
  int reps = 5;
};

struct Figures {
  // Per message. Enqueue of all messages in one transaction (as the bulk of
  // an application's writes), and of one message per transaction; the
  // delivery and purge of each file's messages.
  double floor = 0;
  double enqueue = 0;
  double floor_single = 0;
  double enqueue_single = 0;
  double delivery = 0;
  double purge = 0;
  double delivery_single = 0;
  double purge_single = 0;
};

// Inserts `n` rows, `per_txn` per transaction; returns the bytes per row,
// checkpoint included.
std::int64_t Enqueue(SQLite::Database& db, SQLite::Statement& insert, const std::string& payload,
                     int n, int per_txn, int first = 0) {
  const std::int64_t before = Written().total();
  for (int i = first; i < first + n; ++i) {
    if ((i - first) % per_txn == 0) db.exec("BEGIN IMMEDIATE");
    insert.bind(1, "k" + std::to_string(i));
    insert.bind(2, payload.data(), static_cast<int>(payload.size()));
    insert.exec();
    insert.reset();
    if ((i - first) % per_txn == per_txn - 1 || i == first + n - 1) db.exec("COMMIT");
  }
  db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  return Since(before) / n;
}

// The pages of kListedCommits more one-message transactions, by b-tree.
void ListPages(SQLite::Database& db, SQLite::Statement& insert, const std::string& path,
               const std::string& payload, int first, const char* what) {
  db.exec("PRAGMA wal_autocheckpoint = 0");  // the listed commits stay in the log
  for (int i = first; i < first + kListedCommits; ++i) {
    db.exec("BEGIN IMMEDIATE");
    insert.bind(1, "k" + std::to_string(i));
    insert.bind(2, payload.data(), static_cast<int>(payload.size()));
    insert.exec();
    insert.reset();
    db.exec("COMMIT");
  }
  double total = 0;
  for (const auto& [page, count] :
       outbox::bench::PagesPerCommit(db, path + "-wal", kListedCommits)) {
    std::printf("@pages\t%s\t%zu B\t%s\t%.2f\n", what, payload.size(), page.c_str(), count);
    total += count;
  }
  std::printf("@pages\t%s\t%zu B\tall\t%.2f\n", what, payload.size(), total);
  db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
}

// The floor: a plain table with every column of outbox (its CREATE TABLE as
// the store left it, defaults included), outbox's UNIQUE key and claim
// index, no triggers, the payload in the row.
double Floor(const std::string& path, const std::string& outbox_sql, const std::string& payload,
             const Run& run, int per_txn) {
  MakeFile(path, run.page_size);
  SQLite::Database db(path, SQLite::OPEN_READWRITE);
  const std::string table = "CREATE TABLE plain" + outbox_sql.substr(outbox_sql.find('('));
  db.exec(table + ";CREATE INDEX plain_claim ON plain(status, topic, next_attempt_at);");
  db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  SQLite::Statement insert(db, "INSERT INTO plain(topic, msg_key, payload) VALUES('t', ?, ?)");
  const double bytes = static_cast<double>(Enqueue(db, insert, payload, run.messages, per_txn));
  if (run.list_pages && per_txn == 1) ListPages(db, insert, path, payload, run.messages, "floor");
  return bytes;
}

// The application's plain-SQL enqueue into a fresh outbox file; leaves the
// rows there.
double AppEnqueue(store::Store& agent, const std::string& path, const std::string& payload,
                  const Run& run, int per_txn) {
  agent.SetLimits({0, 0, 0});
  agent.Checkpoint();
  SQLite::Database app(path, SQLite::OPEN_READWRITE);
  SQLite::Statement insert(app, "INSERT INTO outbox(topic, msg_key, payload) VALUES('t', ?, ?)");
  const double bytes = static_cast<double>(Enqueue(app, insert, payload, run.messages, per_txn));
  if (run.list_pages && per_txn == 1) ListPages(app, insert, path, payload, run.messages, "outbox");
  return bytes;
}

// With --pages: the frames in `path`'s -wal (written since the last
// checkpoint), per message, by what the page is and by the step each commit
// belongs to (`steps`, one per commit in log order), and the pages its
// checkpoint will write.
void ListSteps(store::Store& agent, const std::string& path, int n,
               const std::vector<std::string>& steps, const char* what,
               const outbox::bench::PageOwners* owners = nullptr) {
  const auto commits = outbox::bench::PagesOfEachCommit(agent.connection(), path + "-wal", owners);
  if (commits.size() != steps.size()) {
    std::printf("@pages\t%s\t%zu commits in the log, %zu expected: not listed\n", what,
                commits.size(), steps.size());
    return;
  }
  std::map<std::string, double> pages;
  for (std::size_t c = 0; c < commits.size(); ++c) {
    for (const auto& [page, count] : commits[c]) {
      pages[steps[c] + "\t" + page] += static_cast<double>(count) / n;
      pages[steps[c] + "\tall"] += static_cast<double>(count) / n;
    }
  }
  for (const auto& [page, count] : pages) {
    std::printf("@pages\t%s\t%s\t%.3f\n", what, page.c_str(), count);
  }
  std::printf("@pages\t%s\tcheckpoint\tdistinct pages\t%.3f\n", what,
              static_cast<double>(outbox::bench::DistinctPages(path + "-wal")) / n);
}

// Delivers every row (claims of 64, completions per batch), then purges
// them; bytes per message of each, `n` messages. With `list` (--pages), the
// pages of each step too.
void Deliver(store::Store& agent, const std::string& path, int n, const char* list,
             double& delivery, double& purge) {
  std::int64_t before = Written().total();
  std::vector<std::string> steps;
  for (;;) {
    std::vector<store::Claimed> claimed;
    {
      store::Store::WriteTransaction txn(agent);
      claimed = agent.ClaimDue("t", "bench", kFarFuture + 60'000, kFarFuture, 64);
      txn.Commit();
    }
    if (claimed.empty()) break;
    store::Store::WriteTransaction txn(agent);
    for (const auto& c : claimed) agent.Complete(c.lease, 5);
    txn.Commit();
    steps.insert(steps.end(), {"claim", "completion"});
  }
  if (list != nullptr) ListSteps(agent, path, n, steps, (std::string(list) + " delivery").c_str());
  agent.Checkpoint();
  delivery = static_cast<double>(Since(before)) / n;
  before = Written().total();
  steps.clear();
  // The purge frees its pages: they are named by what they were before it.
  const outbox::bench::PageOwners owners =
      list != nullptr ? outbox::bench::OwnersNow(agent.connection()) : outbox::bench::PageOwners{};
  while (agent.PurgeDelivered(kFarFuture, 1000) > 0) steps.emplace_back("delete");
  const std::int64_t deleted = Since(before);
  agent.ReclaimFreePages();
  const std::int64_t vacuumed = Since(before);
  if (list != nullptr) {
    steps.resize(outbox::bench::PagesOfEachCommit(agent.connection(), path + "-wal").size(),
                 "incremental vacuum");
    ListSteps(agent, path, n, steps, (std::string(list) + " purge").c_str(), &owners);
  }
  agent.Checkpoint();
  purge = static_cast<double>(Since(before)) / n;
  std::fprintf(stderr, "  purge steps, bytes per message: delete %.0f, incremental vacuum %.0f,"
               " checkpoint %.0f\n", static_cast<double>(deleted) / n,
               static_cast<double>(vacuumed - deleted) / n,
               purge - static_cast<double>(vacuumed) / n);
}

store::Options FileOptions(const std::string& path, int page_size) {
  MakeFile(path, page_size);
  store::Options options;
  options.path = path;
  options.create = true;
  return options;
}

// Returns outbox's CREATE TABLE as the store made it.
std::string Outbox(const std::string& path, const std::string& payload, const Run& run,
                   Figures& f) {
  const int n = run.messages + (run.list_pages ? kListedCommits : 0);
  {
    // One message per business transaction, on a file of its own.
    store::Store single(FileOptions(path + "-single", run.page_size));
    f.enqueue_single = AppEnqueue(single, path + "-single", payload, run, 1);
    Deliver(single, path + "-single", n, run.list_pages ? "outbox, txn per message" : nullptr,
            f.delivery_single, f.purge_single);
  }
  store::Store agent(FileOptions(path, run.page_size));
  f.enqueue = AppEnqueue(agent, path, payload, run, run.messages);
  Deliver(agent, path, run.messages, run.list_pages ? "outbox, one txn" : nullptr, f.delivery,
          f.purge);
  SQLite::Statement q(agent.connection(),
                      "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'outbox'");
  q.executeStep();
  return q.getColumn(0).getString();
}

void Row(const std::string& figure, const std::string& ours, const std::string& baseline,
         double ratio, const std::string& target, bool met) {
  std::printf("@row\t%s\t%s\t%s\t%.2f\t%s\t%s\n", figure.c_str(), ours.c_str(), baseline.c_str(),
              ratio, target.c_str(), met ? "yes" : "NO");
}

std::string Bytes(double b) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f B", b);
  return text;
}

void Report(std::size_t size, const Figures& f, const Run& run) {
  const std::string p = std::to_string(size) + " B";
  std::fprintf(stderr,
               "payload %zu B, %d messages, page size %d, B per message: enqueue in one"
               " transaction %.0f (floor %.0f), one per transaction %.0f (floor %.0f);"
               " delivery %.0f / %.0f; purge %.0f / %.0f\n",
               size, run.messages, run.page_size, f.enqueue, f.floor, f.enqueue_single,
               f.floor_single, f.delivery, f.delivery_single, f.purge, f.purge_single);
  const double delivery = std::max(f.delivery, f.delivery_single);
  Row("7a bytes written per delivered message, payload " + p, Bytes(delivery), "1536 B",
      delivery / 1536.0, "<= 1.0", delivery <= 1536.0);
  const double bulk = f.enqueue / f.floor;
  Row("7b enqueue bytes (all in one transaction) vs plain-table floor, payload " + p,
      Bytes(f.enqueue), Bytes(f.floor), bulk, "<= 1.05", bulk <= 1.05);
  const double single = f.enqueue_single / f.floor_single;
  const double single_target = size >= 16384 ? 1.3 : 1.35;
  Row("7b enqueue bytes (one per transaction) vs plain-table floor, payload " + p,
      Bytes(f.enqueue_single), Bytes(f.floor_single), single,
      size <= 16384 ? (size >= 16384 ? "<= 1.3" : "<= 1.35") : "-",
      size > 16384 || single <= single_target);
  // The application's bulk enqueue, the delivery and the purge.
  const double life = f.enqueue + f.delivery + f.purge;
  const bool large = size >= 16384;
  Row("7c whole life (enqueue+delivery+purge) / payload, payload " + p, Bytes(life),
      Bytes(static_cast<double>(size)), life / static_cast<double>(size),
      large ? "<= 2.5" : "-", !large || life <= 2.5 * static_cast<double>(size));
  // The same, sent one message per transaction: the device's common case.
  const double life_single = f.enqueue_single + f.delivery_single + f.purge_single;
  Row("7c whole life, one message per transaction, payload " + p, Bytes(life_single),
      size == 256 ? "20000 B" : Bytes(static_cast<double>(size)),
      life_single / (size == 256 ? 20000.0 : static_cast<double>(size)),
      size == 256 ? "<= 1.0" : "-", size != 256 || life_single <= 20000.0);
}

int Usage(const std::string& problem) {
  std::fprintf(stderr, "bytes_bench: %s\n", problem.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Run run;
  std::filesystem::path dir = std::filesystem::temp_directory_path();
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--pages" || flag == "--page-cost") {
      (flag == "--pages" ? run.list_pages : run.page_cost) = true;
      continue;
    }
    if (i + 1 >= argc) return Usage(flag + ": expected a value");
    const std::string value = argv[++i];
    if (flag == "--messages") {
      run.messages = std::atoi(value.c_str());
      if (run.messages < 1) return Usage("--messages: expected a positive integer");
    } else if (flag == "--reps") {
      run.reps = std::atoi(value.c_str());
      if (run.reps < 1) return Usage("--reps: expected a positive integer");
    } else if (flag == "--dir") {
      dir = value;
    } else if (flag == "--page-size") {
      run.page_size = std::atoi(value.c_str());
      if (run.page_size < 512 || run.page_size > 65536 || (run.page_size & (run.page_size - 1))) {
        return Usage("--page-size: expected a power of two from 512 to 65536");
      }
    } else {
      return Usage("unknown flag " + flag);
    }
  }
  outbox::bench::InstallCountingVfs();
  const std::filesystem::path work = dir / ("outbox-bytes-" + std::to_string(::getpid()));
  std::filesystem::create_directories(work);
  if (run.page_cost) {
    outbox::bench::PageCost({run.messages, run.reps, work});
    std::filesystem::remove_all(work);
    return 0;
  }
  for (const std::size_t size : {256u, 4096u, 16384u, 65536u}) {
    const std::string payload(size, 'x');
    const std::string tag = std::to_string(size) + ".db";
    Figures f;
    const std::string outbox_sql = Outbox((work / ("outbox-" + tag)).string(), payload, run, f);
    f.floor = Floor((work / ("floor-" + tag)).string(), outbox_sql, payload, run, run.messages);
    f.floor_single = Floor((work / ("floor1-" + tag)).string(), outbox_sql, payload, run, 1);
    Report(size, f, run);
  }
  std::filesystem::remove_all(work);
  return 0;
}
