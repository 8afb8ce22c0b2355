#include "power_cut_scenario.h"

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/null_sink.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "../common/wait_for.h"
#include "../store/old_schema.h"
#include "outbox/agent.h"

namespace outbox::powercut {
namespace {

using Label = PowerCutVfs::ScopedLabel;

constexpr const char* kTopic = "t";
constexpr int kBatches = 24;

// The receiving end: counts receipts per key. Once the power is off the
// device sends nothing, so a call after the cut is refused unrecorded.
class Receiver final : public agent::Handler {
 public:
  explicit Receiver(int cut_at_send) : cut_at_send_(cut_at_send) {}

  agent::HandlerResult Handle(const agent::Delivery& delivery) override {
    std::lock_guard lock(mutex_);
    PowerCutVfs& vfs = PowerCutVfs::Instance();
    if (vfs.IsCut()) {
      return {agent::Outcome::kEndpointFailure, 503, false, std::nullopt, "the power is off"};
    }
    ++receipts_[std::string(delivery.key)];
    if (++sends_ == cut_at_send_) {
      Label label("send");
      vfs.CutNow();
    }
    return {};
  }

  void StopCutting() {
    std::lock_guard lock(mutex_);
    cut_at_send_ = 0;
  }
  std::map<std::string, int> Receipts() const {
    std::lock_guard lock(mutex_);
    return receipts_;
  }

 private:
  mutable std::mutex mutex_;
  int cut_at_send_;                      // guarded by mutex_
  int sends_ = 0;                        // guarded by mutex_
  std::map<std::string, int> receipts_;  // guarded by mutex_
};

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown-host";
  return name;
}

agent::Options AgentOptions(const std::string& path, const std::string& owner) {
  agent::Options options;
  options.db_path = path;
  options.owner = owner;
  agent::TopicOptions topic;
  topic.workers = 2;
  options.topics.emplace(kTopic, topic);
  options.sweep_interval_ms = 10;
  // Retention purges what was delivered a millisecond ago: it runs all along.
  options.retention.delivered_ms = 1;
  options.retention.interval_ms = 20;
  options.logger = std::make_shared<spdlog::logger>(
      "powercut", std::make_shared<spdlog::sinks::null_sink_mt>());
  return options;
}

using outbox::testing::WaitFor;

std::string Payload(std::mt19937_64& random) {
  std::string payload(16 + static_cast<std::size_t>(random() % 3000), 'x');
  for (char& c : payload) c = static_cast<char>('a' + random() % 26);
  return payload;
}

const char* SynchronousPragma(store::Synchronous mode) {
  switch (mode) {
    case store::Synchronous::kOff:
      return "PRAGMA synchronous = OFF";
    case store::Synchronous::kNormal:
      return "PRAGMA synchronous = NORMAL";
    case store::Synchronous::kFull:
      break;
  }
  return "PRAGMA synchronous = FULL";
}

// A durable starting point: the schema (at version 4 to be migrated, or
// current), a trigger that remembers what retention deleted, and a few rows.
void SetUp(const PointPlan& plan, const std::string& path, std::mt19937_64& random,
           std::set<std::string>& acknowledged) {
  Label label("setup");
  std::optional<store::Store> current;
  std::optional<SQLite::Database> older;
  if (plan.migrate) {
    // The file as schema version 4 (the release before payloads moved to
    // outbox_payload) left it, made with that version's SQL; the Producer
    // writes payloads inline there, and the agent's start moves them.
    store::testing::MakeFileAtVersion(path, 4);
    older.emplace(path, SQLite::OPEN_READWRITE);
  } else {
    store::Options options;
    options.path = path;
    options.create = true;
    current.emplace(options);
  }
  SQLite::Database& db = plan.migrate ? *older : current->connection();
  // In the same transaction as retention's DELETE: a purge that survived
  // the cut is recorded, one that did not is not.
  db.exec(
      "CREATE TABLE purged(msg_key TEXT PRIMARY KEY);"
      "CREATE TRIGGER outbox_purged AFTER DELETE ON outbox BEGIN"
      " INSERT OR IGNORE INTO purged VALUES(old.msg_key); END;");
  store::Producer producer(db);
  for (int i = 0; i < 3; ++i) {
    const std::string key = "pre-" + std::to_string(i);
    producer.Enqueue({kTopic, key, Payload(random), "", {}}, {.standalone = true});
    acknowledged.insert(key);
  }
}

struct Rebooted {
  std::set<std::string> keys;    // in outbox or purged after the reboot
  std::map<std::string, int> undelivered;  // key → status, of outbox rows
};

Rebooted ReadRebooted(SQLite::Database& db, PointResult& result) {
  Rebooted rebooted;
  {
    SQLite::Statement check(db, "PRAGMA integrity_check");
    std::string first;
    int rows = 0;
    while (check.executeStep()) {
      if (rows++ == 0) first = check.getColumn(0).getString();
    }
    if (rows != 1 || first != "ok") {
      ++result.integrity_errors;
      if (result.failure.empty()) result.failure = "integrity_check: " + first;
    }
  }
  {
    SQLite::Statement mode(db, "PRAGMA journal_mode");
    mode.executeStep();
    if (mode.getColumn(0).getString() != "wal" && result.failure.empty()) {
      ++result.integrity_errors;
      result.failure = "journal_mode is " + mode.getColumn(0).getString() + ", not wal";
    }
  }
  SQLite::Statement rows(db, "SELECT msg_key, status FROM outbox");
  while (rows.executeStep()) {
    const std::string key = rows.getColumn(0).getString();
    rebooted.keys.insert(key);
    if (rows.getColumn(1).getInt() != 1) rebooted.undelivered[key] = rows.getColumn(1).getInt();
  }
  SQLite::Statement purged(db, "SELECT msg_key FROM purged");
  while (purged.executeStep()) rebooted.keys.insert(purged.getColumn(0).getString());
  return rebooted;
}

void Fail(PointResult& result, const std::string& what) {
  if (result.failure.empty()) result.failure = what;
}

}  // namespace

std::string SiteName(const CutSite& site) {
  const std::string who = site.label.empty() ? "agent" : site.label;
  if (site.call.empty()) return who;
  // In WAL mode only a checkpoint writes to the database file (the
  // application's and the agent's automatic ones included).
  if (site.file_kind == "db" && who != "migration" && who != "checkpoint") {
    return "checkpoint(" + who + ")/db/" + site.call;
  }
  return who + "/" + site.file_kind + "/" + site.call;
}

PointResult RunPoint(const PointPlan& plan, const std::string& dir) {
  PowerCutVfs& vfs = PowerCutVfs::Instance();
  std::mt19937_64 random(plan.seed);
  const std::string path = dir + "/app.db";
  PointResult result;
  std::set<std::string> acknowledged;
  std::set<std::string> rolled_back;
  vfs.Reset();
  SetUp(plan, path, random, acknowledged);
  vfs.Reset();

  auto receiver = std::make_shared<Receiver>(plan.cut_at_send);
  // An owner whose process is gone once the power is back (no such pid).
  const std::string dead_owner = HostName() + "/2147483647/powercut/0";
  if (plan.cut_at_op > 0) vfs.ArmAfter(plan.cut_at_op);
  {
    std::unique_ptr<agent::Agent> agent;
    std::optional<SQLite::Database> app;
    std::optional<store::Producer> producer;
    std::unique_ptr<store::Store> retention;  // retention as the agent runs it
    try {
      {
        Label label(plan.migrate ? "migration" : "start");
        agent = std::make_unique<agent::Agent>(AgentOptions(path, dead_owner));
        agent->RegisterHandler(kTopic, receiver);
        agent->Start();
      }
      Label label("enqueue");
      app.emplace(path, SQLite::OPEN_READWRITE, 5000);
      app->exec(SynchronousPragma(plan.app_synchronous));
      // Small, so that the application's commits checkpoint now and then.
      app->exec("PRAGMA wal_autocheckpoint = 16");
      producer.emplace(*app);
      store::Options options;
      options.path = path;
      // Last: the loop below runs only if everything above is there.
      retention = std::make_unique<store::Store>(options);
    } catch (const std::exception&) {
      // The power went during start-up.
    }
    for (int batch = 0; retention && batch < kBatches && !vfs.IsCut(); ++batch) {
      if (batch % 8 == 7) {
        Label label("checkpoint");
        try {
          app->exec("PRAGMA wal_checkpoint(TRUNCATE)");
        } catch (const std::exception&) {
        }
      }
      if (batch % 6 == 5) {
        Label label("retention");
        try {
          retention->PurgeDelivered(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count(),
                                    100);
        } catch (const std::exception&) {
        }
      }
      Label label("enqueue");
      std::vector<std::string> keys;
      const int n = 1 + static_cast<int>(random() % 4);
      const bool roll_back = random() % 10 == 0;
      for (int i = 0; i < n; ++i) {
        keys.push_back("b" + std::to_string(batch) + "-" + std::to_string(i));
      }
      try {
        agent::Transaction txn(agent.get(), *producer);
        for (const auto& key : keys) txn.Enqueue({kTopic, key, Payload(random), "", {}});
        if (roll_back) {
          txn.Rollback();
          rolled_back.insert(keys.begin(), keys.end());
        } else {
          txn.Commit();
          acknowledged.insert(keys.begin(), keys.end());
        }
      } catch (const std::exception&) {
        // COMMIT did not return: these may or may not exist after the reboot.
      }
    }
    if (!vfs.IsCut()) {
      // Everything done and nothing cut yet: wait for the deliveries, then cut.
      WaitFor(
          [&] {
            if (vfs.IsCut()) return true;  // a send-time cut came meanwhile
            const auto receipts = receiver->Receipts();
            for (const auto& key : acknowledged) {
              if (receipts.count(key) == 0) return false;
            }
            return true;
          },
          std::chrono::seconds(20));
      Label label("idle");
      if (!vfs.IsCut()) vfs.CutNow();
    }
    result.ops = vfs.Ops();
    result.site = vfs.Site();
    retention.reset();
    producer.reset();
    app.reset();
    agent.reset();
  }
  const std::map<std::string, int> before_cut = receiver->Receipts();
  receiver->StopCutting();
  result.survival = vfs.Reboot(random);
  result.acknowledged = static_cast<int>(acknowledged.size());
  result.received_before_cut = static_cast<int>(before_cut.size());
  Label label("verify");
  SQLite::Database db(path, SQLite::OPEN_READWRITE, 5000);
  const Rebooted rebooted = ReadRebooted(db, result);
  if (plan.app_synchronous == store::Synchronous::kFull) {
    for (const auto& key : acknowledged) {
      if (rebooted.keys.count(key) == 0) {
        ++result.lost;
        Fail(result, "acknowledged " + key + " is gone after the reboot");
      }
    }
  }
  for (const auto& [key, times] : before_cut) {
    if (rebooted.keys.count(key) == 0) {
      ++result.phantoms;
      Fail(result, "sent " + key + " is not in the rebooted database");
    }
  }
  for (const auto& key : rolled_back) {
    if (rebooted.keys.count(key) != 0 || before_cut.count(key) != 0) {
      ++result.rolled_back_sent;
      Fail(result, "rolled-back " + key + " was stored or sent");
    }
  }

  // After the reboot: a fresh agent takes back the dead owner's leases and
  // delivers everything the file holds.
  {
    agent::Agent agent(AgentOptions(path, ""));
    agent.RegisterHandler(kTopic, receiver);
    agent.Start();
    SQLite::Statement undelivered(db, "SELECT count(*) FROM outbox WHERE status != 1");
    WaitFor(
        [&] {
          undelivered.executeStep();
          const std::int64_t count = undelivered.getColumn(0).getInt64();
          undelivered.reset();  // no read snapshot held between polls
          if (count != 0) return false;
          const auto receipts = receiver->Receipts();
          for (const auto& key : rebooted.keys) {
            if (receipts.count(key) == 0) return false;
          }
          return true;
        },
        std::chrono::seconds(30));
    agent.Stop();
  }
  SQLite::Statement left(db, "SELECT msg_key, status, lease_owner FROM outbox WHERE status != 1");
  while (left.executeStep()) {
    ++result.stuck;
    Fail(result, "row " + left.getColumn(0).getString() + " still has status " +
                     left.getColumn(1).getString() + " (owner " + left.getColumn(2).getString() +
                     ")");
  }
  const auto receipts = receiver->Receipts();
  for (const auto& key : rebooted.keys) {
    if (receipts.count(key) == 0) {
      ++result.stuck;
      Fail(result, key + " was never delivered");
    }
  }
  for (const auto& [key, times] : receipts) {
    if (times > 1) ++result.resent;
    result.most_receipts = std::max(result.most_receipts, times);
    if (rolled_back.count(key) != 0) {
      ++result.rolled_back_sent;
      Fail(result, "rolled-back " + key + " was sent");
    }
  }
  return result;
}

std::int64_t MeasureOps(const PointPlan& plan, const std::string& dir) {
  PointPlan whole = plan;
  whole.cut_at_op = 0;
  whole.cut_at_send = 0;
  return RunPoint(whole, dir).ops;
}

}  // namespace outbox::powercut
