// What the WAL fsync after a claim (store::Options::durable_claims) costs,
// measured against the old behaviour in the same run, on a real disk.
//
//   claim_sync_bench [DIR] [ROUNDS]
//
// The application commits with synchronous=NORMAL on its own connection; the
// agent's connection (synchronous=NORMAL) claims and completes, as the
// agent's writer does:
//  - eager: one row per commit, claimed by id in its own transaction, then
//    completed; latency is application COMMIT → claim committed (and synced),
//    the moment the agent may send;
//  - sweep: 100 rows per claim transaction (the sweeper's group), then one
//    completion transaction; delivery rate in rows per second.
// Rounds alternate the two settings so that both see the same disk.
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Transaction.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "outbox/store.h"

namespace {

using Clock = std::chrono::steady_clock;
using outbox::store::Lease;
using outbox::store::Options;
using outbox::store::Producer;
using outbox::store::Store;

std::int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Rig {
  Rig(const std::string& path, bool durable_claims) : app(path, SQLite::OPEN_READWRITE) {
    Options options;
    options.path = path;
    options.durable_claims = durable_claims;
    agent = std::make_unique<Store>(options);
    app.exec("PRAGMA synchronous = NORMAL");
    producer = std::make_unique<Producer>(app);
  }
  SQLite::Database app;
  std::unique_ptr<Store> agent;
  std::unique_ptr<Producer> producer;
  static inline int next = 0;  // keys stay unique across rigs on one file

  std::int64_t Enqueue(const std::string& topic) {
    return producer
        ->Enqueue({topic, "k" + std::to_string(next++), std::string(200, 'p'), "", {}},
                  {.standalone = true})
        .id;
  }
};

// Microseconds from COMMIT to a durable claim, per message.
std::vector<double> Eager(Rig& rig, int n) {
  std::vector<double> latencies;
  for (int i = 0; i < n; ++i) {
    const std::int64_t id = rig.Enqueue("eager");
    const auto committed = Clock::now();
    const std::int64_t now = WallMs();
    std::optional<outbox::store::Claimed> claimed;
    {
      Store::WriteTransaction txn(*rig.agent);
      claimed = rig.agent->ClaimById(id, "bench", now + 60'000, now);
      txn.Commit();
    }
    latencies.push_back(
        std::chrono::duration<double, std::micro>(Clock::now() - committed).count());
    Store::WriteTransaction txn(*rig.agent);
    rig.agent->Complete(claimed->lease, now);
    txn.Commit();
  }
  return latencies;
}

// Rows per second through claim (100 per transaction) and completion.
double Sweep(Rig& rig, int groups) {
  constexpr int kGroup = 100;
  {
    SQLite::Transaction txn(rig.app);
    for (int i = 0; i < groups * kGroup; ++i) {
      rig.producer->Enqueue(
          {"sweep", "s" + std::to_string(rig.next++), std::string(200, 'p'), "", {}});
    }
    txn.commit();
  }
  const auto start = Clock::now();
  for (int g = 0; g < groups; ++g) {
    const std::int64_t now = WallMs();
    std::vector<outbox::store::Claimed> claimed;
    {
      Store::WriteTransaction txn(*rig.agent);
      claimed = rig.agent->ClaimDue("sweep", "bench", now + 60'000, now, kGroup);
      txn.Commit();
    }
    Store::WriteTransaction txn(*rig.agent);
    for (const auto& c : claimed) rig.agent->Complete(c.lease, now);
    txn.Commit();
  }
  return groups * kGroup / std::chrono::duration<double>(Clock::now() - start).count();
}

double Percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return values[static_cast<std::size_t>(p * static_cast<double>(values.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : ".";
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  const std::string path = dir + "/claim_sync_bench.db";
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  {
    Options init;
    init.path = path;
    init.create = true;
    Store store(init);
  }
  std::vector<double> eager[2];
  double rate[2] = {0, 0};
  for (int round = 0; round < rounds; ++round) {
    for (int durable = 0; durable < 2; ++durable) {
      Rig rig(path, durable == 1);
      const auto latencies = Eager(rig, 200);
      eager[durable].insert(eager[durable].end(), latencies.begin(), latencies.end());
      rate[durable] += Sweep(rig, 20) / rounds;
    }
  }
  const char* names[2] = {"claims not synced (old)", "claims synced (durable_claims)"};
  for (int d = 0; d < 2; ++d) {
    std::printf("%-32s eager commit->claim p50 %8.1f us  p99 %8.1f us   sweep %9.0f rows/s\n",
                names[d], Percentile(eager[d], 0.5), Percentile(eager[d], 0.99), rate[d]);
  }
  std::printf("ratio synced/old: eager p50 %.2fx, p99 %.2fx; sweep delivery rate %.2fx\n",
              Percentile(eager[1], 0.5) / Percentile(eager[0], 0.5),
              Percentile(eager[1], 0.99) / Percentile(eager[0], 0.99), rate[1] / rate[0]);
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  return 0;
}
