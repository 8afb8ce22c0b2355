// Bytes written to the database file and its -wal per message, by payload
// size (figure 7): the application's plain-SQL enqueue, all messages in one
// transaction and one message per transaction, each against its floor (the
// same INSERTs into a plain table with outbox's columns and indexes, no
// triggers); the agent's delivery (claims of 64 rows per transaction, one
// transaction of completions per batch, as the sweeper and the writer group
// them; then a checkpoint); and retention (purge, incremental vacuum,
// checkpoint). Counted by a VFS shim from the xWrite calls, i.e. what
// reaches the disk, checkpoints included.
//
//   bytes_bench [--messages N] [--dir DIR]
#include <SQLiteCpp/Database.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "counting_vfs.h"
#include "outbox/store.h"

namespace {

using outbox::bench::Written;
namespace store = outbox::store;

constexpr std::int64_t kFarFuture = 4'102'444'800'000;  // 2100: everything is due and old

std::int64_t Since(std::int64_t before) { return Written().total() - before; }

struct Figures {
  // Per message. Enqueue of all messages in one transaction (as the bulk of
  // an application's writes), and of one message per transaction.
  double floor = 0;
  double enqueue = 0;
  double floor_single = 0;
  double enqueue_single = 0;
  double delivery = 0;
  double purge = 0;
};

// The floor: outbox's columns and indexes as one plain table, no triggers.
// Inserts `n` rows, `per_txn` per transaction; returns the bytes per row,
// checkpoint included.
std::int64_t Enqueue(SQLite::Database& db, SQLite::Statement& insert, const std::string& payload,
                     int n, int per_txn) {
  const std::int64_t before = Written().total();
  for (int i = 0; i < n; ++i) {
    if (i % per_txn == 0) db.exec("BEGIN IMMEDIATE");
    insert.bind(1, "k" + std::to_string(i));
    insert.bind(2, payload.data(), static_cast<int>(payload.size()));
    insert.exec();
    insert.reset();
    if (i % per_txn == per_txn - 1 || i == n - 1) db.exec("COMMIT");
  }
  db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  return Since(before) / n;
}

double Floor(const std::string& path, const std::string& payload, int n, int per_txn) {
  SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  db.exec("PRAGMA journal_mode = WAL");
  db.exec(
      "CREATE TABLE plain(id INTEGER PRIMARY KEY, topic TEXT NOT NULL, msg_key TEXT NOT NULL,"
      " payload BLOB NOT NULL, headers TEXT, status INTEGER NOT NULL DEFAULT 0,"
      " attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at INTEGER NOT NULL DEFAULT 0,"
      " created_at INTEGER NOT NULL DEFAULT 0, updated_at INTEGER NOT NULL DEFAULT 0,"
      " UNIQUE(topic, msg_key));"
      "CREATE INDEX plain_claim ON plain(status, topic, next_attempt_at);");
  db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  SQLite::Statement insert(db, "INSERT INTO plain(topic, msg_key, payload) VALUES('t', ?, ?)");
  return static_cast<double>(Enqueue(db, insert, payload, n, per_txn));
}

// The application's plain-SQL enqueue into a fresh outbox file; leaves the
// rows there.
double AppEnqueue(store::Store& agent, const std::string& path, const std::string& payload, int n,
                  int per_txn) {
  agent.SetLimits({0, 0, 0});
  agent.Checkpoint();
  SQLite::Database app(path, SQLite::OPEN_READWRITE);
  SQLite::Statement insert(app, "INSERT INTO outbox(topic, msg_key, payload) VALUES('t', ?, ?)");
  return static_cast<double>(Enqueue(app, insert, payload, n, per_txn));
}

void Outbox(const std::string& path, const std::string& payload, int n, Figures& f) {
  store::Options options;
  options.path = path;
  options.create = true;
  {
    // One message per business transaction, on a file of its own.
    store::Options single = options;
    single.path = path + "-single";
    store::Store other(single);
    f.enqueue_single = AppEnqueue(other, single.path, payload, n, 1);
  }
  store::Store agent(options);
  f.enqueue = AppEnqueue(agent, path, payload, n, n);
  std::int64_t before = Written().total();
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
  }
  agent.Checkpoint();
  f.delivery = static_cast<double>(Since(before)) / n;
  before = Written().total();
  while (agent.PurgeDelivered(kFarFuture, 1000) > 0) {
  }
  const std::int64_t deleted = Since(before);
  agent.ReclaimFreePages();
  const std::int64_t vacuumed = Since(before);
  agent.Checkpoint();
  f.purge = static_cast<double>(Since(before)) / n;
  std::fprintf(stderr, "  purge steps, bytes per message: delete %.0f, incremental vacuum %.0f,"
               " checkpoint %.0f\n", static_cast<double>(deleted) / n,
               static_cast<double>(vacuumed - deleted) / n,
               f.purge - static_cast<double>(vacuumed) / n);
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

}  // namespace

int main(int argc, char** argv) {
  int n = 1000;
  std::filesystem::path dir = std::filesystem::temp_directory_path();
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--messages") {
      n = std::atoi(argv[i + 1]);
    } else if (flag == "--dir") {
      dir = argv[i + 1];
    } else {
      std::fprintf(stderr, "bytes_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (n < 1) {
    std::fprintf(stderr, "bytes_bench: --messages: expected a positive integer\n");
    return 2;
  }
  outbox::bench::InstallCountingVfs();
  const std::filesystem::path work = dir / ("outbox-bytes-" + std::to_string(::getpid()));
  std::filesystem::create_directories(work);
  for (const std::size_t size : {256u, 4096u, 16384u, 65536u}) {
    const std::string payload(size, 'x');
    Figures f;
    f.floor = Floor((work / ("floor-" + std::to_string(size) + ".db")).string(), payload, n, n);
    f.floor_single =
        Floor((work / ("floor1-" + std::to_string(size) + ".db")).string(), payload, n, 1);
    Outbox((work / ("outbox-" + std::to_string(size) + ".db")).string(), payload, n, f);
    const std::string p = std::to_string(size) + " B";
    std::fprintf(stderr,
                 "payload %zu B, %d messages, B per message: enqueue in one transaction %.0f"
                 " (floor %.0f), one per transaction %.0f (floor %.0f); delivery %.0f; purge %.0f\n",
                 size, n, f.enqueue, f.floor, f.enqueue_single, f.floor_single, f.delivery,
                 f.purge);
    Row("7a bytes written per delivered message, payload " + p, Bytes(f.delivery), "1536 B",
        f.delivery / 1536.0, "<= 1.0", f.delivery <= 1536.0);
    Row("7b enqueue bytes (all in one transaction) vs plain-table floor, payload " + p,
        Bytes(f.enqueue), Bytes(f.floor), f.enqueue / f.floor, "-", true);
    Row("7b enqueue bytes (one per transaction) vs plain-table floor, payload " + p,
        Bytes(f.enqueue_single), Bytes(f.floor_single), f.enqueue_single / f.floor_single, "-",
        true);
    // The application's bulk enqueue, the delivery and the purge.
    const double life = f.enqueue + f.delivery + f.purge;
    const bool large = size >= 16384;
    Row("7c whole life (enqueue+delivery+purge) / payload, payload " + p, Bytes(life),
        Bytes(static_cast<double>(size)), life / static_cast<double>(size),
        large ? "<= 2.5" : "-", !large || life <= 2.5 * static_cast<double>(size));
  }
  std::filesystem::remove_all(work);
  return 0;
}
