// Power cuts at seeded random points of a real agent's work, on the
// PowerCutVfs. OUTBOX_POWERCUT_POINTS sets the number of cut points of the
// suites (default: a few dozen, for CI; the reliability figures use 1000),
// OUTBOX_POWERCUT_SEED the first seed.
#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <map>
#include <random>
#include <string>

#include "../common/temp_dir.h"
#include "outbox/store.h"
#include "power_cut_scenario.h"
#include "power_cut_vfs.h"

namespace outbox::powercut {
namespace {

using outbox::testing::TempDir;

int EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  return std::atoi(value);
}

struct Tally {
  int points = 0;
  std::map<std::string, int> sites;
  std::int64_t acknowledged = 0;
  std::int64_t resent = 0;
  int worst_resent = 0;        // resends of the worst point
  int most_receipts = 0;       // receipts of the most-received message
  std::int64_t lost = 0, phantoms = 0, rolled_back_sent = 0, stuck = 0, integrity = 0;
  Survival survival;

  void Add(const PointResult& r) {
    ++points;
    ++sites[SiteName(r.site)];
    acknowledged += r.acknowledged;
    resent += r.resent;
    worst_resent = std::max(worst_resent, r.resent);
    most_receipts = std::max(most_receipts, r.most_receipts);
    lost += r.lost;
    phantoms += r.phantoms;
    rolled_back_sent += r.rolled_back_sent;
    stuck += r.stuck;
    integrity += r.integrity_errors;
    survival.files += r.survival.files;
    survival.writes_kept += r.survival.writes_kept;
    survival.writes_dropped += r.survival.writes_dropped;
    survival.writes_torn += r.survival.writes_torn;
  }

  void Print(const char* name, int seed) const {
    std::printf(
        "power cut %s: seed %d, %d cut points, %lld acknowledged messages, %lld resent "
        "(worst point %d, one message received at most %d times); unsynced writes kept %d, "
        "dropped %d, torn %d; lost %lld, phantom sends %lld, rolled back sent %lld, stuck %lld, "
        "integrity failures %lld\n",
        name, seed, points, static_cast<long long>(acknowledged), static_cast<long long>(resent),
        worst_resent, most_receipts, survival.writes_kept, survival.writes_dropped,
        survival.writes_torn, static_cast<long long>(lost), static_cast<long long>(phantoms),
        static_cast<long long>(rolled_back_sent), static_cast<long long>(stuck),
        static_cast<long long>(integrity));
    std::printf("power cut %s: cut sites:", name);
    for (const auto& [site, count] : sites) std::printf(" %s=%d", site.c_str(), count);
    std::printf("\n");
    std::fflush(stdout);
  }
};

// Runs `points` seeded cut points: most at a random write, sync or
// truncation of the whole run, some while the receiver takes a message.
Tally RunPoints(store::Synchronous app_synchronous, int points, int seed, bool sends_only) {
  std::mt19937_64 schedule(static_cast<std::uint64_t>(seed));
  std::int64_t ops[2] = {0, 0};
  for (int migrate = 0; migrate < 2; ++migrate) {
    TempDir dir;
    PointPlan plan;
    plan.seed = static_cast<std::uint64_t>(seed);
    plan.app_synchronous = app_synchronous;
    plan.migrate = migrate == 1;
    ops[migrate] = MeasureOps(plan, dir.path().string());
  }
  Tally tally;
  for (int i = 0; i < points; ++i) {
    PointPlan plan;
    plan.seed = schedule();
    plan.app_synchronous = app_synchronous;
    plan.migrate = schedule() % 4 == 0;
    if (plan.migrate && !sends_only && schedule() % 2 == 0) {
      // Early in the run: while the agent migrates the file.
      plan.cut_at_op = 1 + static_cast<std::int64_t>(schedule() % 16);
    } else if (sends_only || schedule() % 5 == 0) {
      plan.cut_at_send = 1 + static_cast<int>(schedule() % 60);
    } else {
      plan.cut_at_op =
          1 + static_cast<std::int64_t>(
                  schedule() % static_cast<std::uint64_t>(std::max<std::int64_t>(1, ops[plan.migrate ? 1 : 0])));
    }
    TempDir dir;
    const PointResult result = RunPoint(plan, dir.path().string());
    tally.Add(result);
    EXPECT_TRUE(result.failure.empty())
        << "cut point " << i << " (seed " << plan.seed << ", at op " << plan.cut_at_op
        << ", at send " << plan.cut_at_send << ", cut at " << SiteName(result.site)
        << "): " << result.failure;
  }
  return tally;
}

TEST(PowerCut, TheShimRunsWalThroughItsSharedMemory) {
  PowerCutVfs& vfs = PowerCutVfs::Instance();
  TempDir dir;
  vfs.Reset();
  {
    store::Options options;
    options.path = dir.File("app.db");
    options.create = true;
    store::Store store(options);
    SQLite::Statement mode(store.connection(), "PRAGMA journal_mode");
    ASSERT_TRUE(mode.executeStep());
    EXPECT_EQ(mode.getColumn(0).getString(), "wal");
  }
  EXPECT_GT(vfs.ShmMaps(), 0);
  EXPECT_GT(vfs.Ops(), 0);
}

TEST(PowerCut, UnsyncedWritesAreLostOrTornAndSyncedOnesStay) {
  PowerCutVfs& vfs = PowerCutVfs::Instance();
  TempDir dir;
  const std::string path = dir.File("plain.db");
  vfs.Reset();
  int unsynced_lost = 0;
  std::mt19937_64 random(7);
  for (int round = 0; round < 12; ++round) {
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-wal");
    {
      SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
      db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;"
              "CREATE TABLE t(v TEXT); INSERT INTO t VALUES('synced');"
              "PRAGMA synchronous = OFF; INSERT INTO t VALUES('unsynced')");
      vfs.CutNow();
    }
    vfs.Reboot(random);
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    SQLite::Statement check(db, "PRAGMA integrity_check");
    ASSERT_TRUE(check.executeStep());
    EXPECT_EQ(check.getColumn(0).getString(), "ok");
    EXPECT_EQ(db.execAndGet("SELECT count(*) FROM t WHERE v = 'synced'").getInt(), 1);
    unsynced_lost += db.execAndGet("SELECT count(*) FROM t WHERE v = 'unsynced'").getInt() == 0;
  }
  // The cut must really lose unsynced commits, or the suites prove nothing.
  EXPECT_GT(unsynced_lost, 0);
  EXPECT_LT(unsynced_lost, 12);
}

// How the claims of PhantomsOfStoreClaims are made durable.
enum class ClaimSyncBy {
  kNobody,         // durable_claims off
  kStore,          // the claim's commit
  kCallerUnsynced, // ClaimSync::kByCaller, and the caller never syncs
  kCallerReader,   // ClaimSync::kByCaller, synced through another connection
  kStoreNextOfKeys,  // the commit of a writer transaction that claimed a key's next row
};

// The store alone: an application commits on NORMAL, a claimer claims the
// row and "sends" it after its commit, then the power goes. Without the log
// sync of a claim the sent row can vanish; with it, it never does.
int PhantomsOfStoreClaims(ClaimSyncBy by, int rounds) {
  PowerCutVfs& vfs = PowerCutVfs::Instance();
  std::mt19937_64 random(11);
  int phantoms = 0;
  for (int round = 0; round < rounds; ++round) {
    TempDir dir;
    const std::string path = dir.File("app.db");
    vfs.Reset();
    {
      store::Options options;
      options.path = path;
      options.create = true;
      store::Store init(options);
    }
    vfs.Reset();
    std::vector<std::string> sent;
    {
      store::Options options;
      options.path = path;
      options.durable_claims = by != ClaimSyncBy::kNobody;
      store::Store claimer(options);
      // Opened before anything is claimed, and never read: its sync must
      // open its own handle of the log.
      store::Store reader(options);
      SQLite::Database app(path, SQLite::OPEN_READWRITE);
      app.exec("PRAGMA synchronous = NORMAL");
      store::Producer producer(app);
      for (int i = 0; i < 3; ++i) {
        const std::string key = "k" + std::to_string(i);
        store::NewMessage message{"t", key, "p", "", {}};
        message.ordering_key = key;
        const auto id = producer.Enqueue(message, {.standalone = true}).id;
        const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count();
        bool claimed = false;
        if (by == ClaimSyncBy::kCallerUnsynced || by == ClaimSyncBy::kCallerReader) {
          store::Store::WriteTransaction txn(claimer);
          claimed = !claimer
                         .ClaimDue("t", "owner", now + 60'000, now, 1, false,
                                   store::Store::ClaimSync::kByCaller)
                         .empty();
          txn.Commit();
          if (by == ClaimSyncBy::kCallerReader) reader.SyncLogForClaims();
        } else if (by == ClaimSyncBy::kStoreNextOfKeys) {
          store::Store::WriteTransaction txn(claimer);
          const std::string keys[] = {key};
          claimed = !claimer.ClaimNextOfKeys("t", keys, "owner", now + 60'000, now).empty();
          txn.Commit();
        } else {
          store::Store::WriteTransaction txn(claimer);
          claimed = claimer.ClaimById(id, "owner", now + 60'000, now).has_value();
          txn.Commit();
        }
        if (claimed) sent.push_back(key);
      }
      vfs.CutNow();
    }
    vfs.Reboot(random);
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    for (const auto& key : sent) {
      SQLite::Statement q(db, "SELECT count(*) FROM outbox WHERE msg_key = ?");
      q.bind(1, key);
      q.executeStep();
      phantoms += q.getColumn(0).getInt() == 0;
    }
  }
  return phantoms;
}

TEST(PowerCut, ClaimsWithoutALogSyncWouldSendLostCommits) {
  EXPECT_GT(PhantomsOfStoreClaims(ClaimSyncBy::kNobody, 12), 0);
}

TEST(PowerCut, ClaimedRowsSurviveEveryCut) {
  EXPECT_EQ(PhantomsOfStoreClaims(ClaimSyncBy::kStore, 12), 0);
}

// The writer's claim of the next rows of keys (per-key ordering), made in
// its group's transaction.
TEST(PowerCut, RowsClaimedAsTheNextOfTheirKeySurviveEveryCut) {
  EXPECT_EQ(PhantomsOfStoreClaims(ClaimSyncBy::kStoreNextOfKeys, 12), 0);
}

TEST(PowerCut, AClaimLeftToItsCallerIsNotSyncedByItsCommit) {
  EXPECT_GT(PhantomsOfStoreClaims(ClaimSyncBy::kCallerUnsynced, 12), 0);
}

TEST(PowerCut, AClaimSyncedThroughAnotherConnectionSurvivesEveryCut) {
  EXPECT_EQ(PhantomsOfStoreClaims(ClaimSyncBy::kCallerReader, 12), 0);
}

// Item 2 of the reliability claims: application on FULL, agent on NORMAL.
TEST(PowerCut, CommittedMessagesSurviveAndOnlyCommittedOnesAreSent) {
  const int seed = EnvInt("OUTBOX_POWERCUT_SEED", 20);
  const int points = EnvInt("OUTBOX_POWERCUT_POINTS", 40);
  const Tally tally = RunPoints(store::Synchronous::kFull, points, seed, false);
  tally.Print("(application FULL)", seed);
  EXPECT_EQ(tally.points, points);
}

// No phantom sends: application on NORMAL, cuts while messages are sent.
TEST(PowerCut, NoMessageIsSentBeforeItsCommitIsDurable) {
  const int seed = EnvInt("OUTBOX_POWERCUT_SEED", 20) + 1;
  const int points = std::max(10, EnvInt("OUTBOX_POWERCUT_POINTS", 40) / 2);
  const Tally tally = RunPoints(store::Synchronous::kNormal, points, seed, true);
  tally.Print("(application NORMAL)", seed);
  EXPECT_EQ(tally.phantoms, 0);
}

}  // namespace
}  // namespace outbox::powercut
