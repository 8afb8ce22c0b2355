// Completion hooks: the application's state changes in the transaction that
// marks the message delivered or dead. Real SQLite, real HTTP receiver.
#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <unistd.h>

#include <set>
#include <string>

#include "agent_fixture.h"

namespace outbox::agent::testing {
namespace {

using namespace std::chrono_literals;

constexpr char kConfirm[] =
    "UPDATE shop SET confirmed_at = :now,"
    " remote_id = coalesce(json_extract(:response, '$.id'), remote_id),"
    " status_code = coalesce(:status_code, status_code) WHERE order_key = :key";

class HooksTest : public AgentTest {
 protected:
  HooksTest() {
    app_->exec(
        "CREATE TABLE shop(order_key TEXT PRIMARY KEY, confirmed_at INTEGER, remote_id TEXT,"
        " status_code INTEGER);"
        "CREATE TABLE refused(order_key TEXT PRIMARY KEY);"
        "CREATE TABLE dead_log(id INTEGER, reason TEXT, error TEXT);"
        // The application's own rule: a refused order may never be confirmed.
        "CREATE TRIGGER shop_refuse BEFORE UPDATE OF confirmed_at ON shop"
        " WHEN NEW.order_key IN (SELECT order_key FROM refused)"
        " BEGIN SELECT RAISE(ABORT, 'order refused'); END;");
  }

  // The receiver answers 200 with an id of its own and counts per key.
  void StartReceiver() {
    server_.Post("/events", [this](const httplib::Request& req, httplib::Response& res) {
      const std::string key = req.get_header_value("X-Key");
      {
        std::lock_guard lock(mutex_);
        ++per_key_[req.get_header_value("Idempotency-Key")];
      }
      res.status = 200;
      res.set_content(R"({"id":"remote-)" + std::to_string(++served_) + R"("})",
                      "application/json");
    });
    server_.Start();
  }

  // An order and its message in one transaction.
  std::int64_t Order(Agent* agent, const std::string& key) {
    Transaction txn(agent, *producer_);
    SQLite::Statement q(*app_, "INSERT INTO shop(order_key) VALUES(?)");
    q.bind(1, key);
    q.exec();
    const auto id = txn.Enqueue({"t", key, R"({"order":")" + key + R"("})", "", {}}).id;
    txn.Commit();
    return id;
  }

  bool Confirmed(const std::string& key) {
    SQLite::Statement q(*observer_, "SELECT confirmed_at IS NOT NULL FROM shop WHERE order_key = ?");
    q.bind(1, key);
    return q.executeStep() && q.getColumn(0).getInt() == 1;
  }

  std::string RemoteId(const std::string& key) {
    SQLite::Statement q(*observer_, "SELECT coalesce(remote_id, '') FROM shop WHERE order_key = ?");
    q.bind(1, key);
    return q.executeStep() ? q.getColumn(0).getString() : "";
  }

  int Requests() { return static_cast<int>(server_.requests().size()); }

  std::int64_t Count(const std::string& sql) {
    SQLite::Statement q(*observer_, sql);
    q.executeStep();
    return q.getColumn(0).getInt64();
  }

  std::mutex mutex_;
  std::map<std::string, int> per_key_;  // guarded by mutex_
  std::atomic<int> served_{0};
};

TEST_F(HooksTest, OnDeliveredStoresTheReceiversIdInTheSameTransaction) {
  StartReceiver();
  Options options = BaseOptions();
  options.topics["t"] = HttpTopic();
  options.topics["t"].hooks.on_delivered_sql = kConfirm;
  Agent agent(options);
  agent.Start();
  const auto id = Order(&agent, "order-1");
  ASSERT_TRUE(WaitFor([&] { return Row(id).status == store::Status::kDelivered; }));
  EXPECT_TRUE(Confirmed("order-1"));
  EXPECT_EQ(RemoteId("order-1"), "remote-1");
  EXPECT_EQ(Count("SELECT status_code FROM shop WHERE order_key = 'order-1'"), 200);
  agent.Stop();
}

TEST_F(HooksTest, AFailingHookInABatchOfFiftyCostsOnlyItsOwnMessageAndIsNeverResent) {
  StartReceiver();
  Options options = BaseOptions();
  options.topics["t"] = HttpTopic();
  options.topics["t"].endpoint.batch.max_messages = 50;
  options.topics["t"].hooks.on_delivered_sql = kConfirm;
  options.topics["t"].hooks.on_dead_sql =
      "INSERT INTO dead_log VALUES(:id, :dead_reason, :last_error)";
  options.topics["t"].retry.max_attempts = 3;
  options.topics["t"].retry.first_interval_ms = 1000;
  app_->exec("INSERT INTO refused VALUES('order-13')");
  Agent agent(options);
  // Fifty messages committed before the agent starts: the sweeper's first
  // claim takes them together, one request, one completion group.
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 50; ++i) ids.push_back(Order(nullptr, "order-" + std::to_string(i)));
  agent.Start();
  ASSERT_TRUE(WaitFor([&] {
    return CountStatus(store::Status::kDelivered) == 49 && Row(ids[13]).acked_at.has_value();
  }));
  for (int i = 0; i < 50; ++i) EXPECT_EQ(Confirmed("order-" + std::to_string(i)), i != 13) << i;
  const int requests = Requests();
  store::Row refused = Row(ids[13]);
  EXPECT_EQ(refused.status, store::Status::kPending);  // to plain SQL: not done yet
  EXPECT_EQ(refused.attempts, 1);
  ASSERT_TRUE(refused.last_error);
  EXPECT_NE(refused.last_error->find("order refused"), std::string::npos) << *refused.last_error;

  // Each retry runs the completion only; the third failure makes it dead.
  for (int round = 0; round < 5 && Row(ids[13]).status != store::Status::kDead; ++round) {
    const int attempts = Row(ids[13]).attempts;
    clock_->Advance(10s);
    agent.NotifyExternalCommit();
    ASSERT_TRUE(WaitFor([&] {
      const store::Row row = Row(ids[13]);
      return row.attempts > attempts || row.status == store::Status::kDead;
    }));
  }
  refused = Row(ids[13]);
  EXPECT_EQ(refused.status, store::Status::kDead);
  EXPECT_EQ(refused.dead_reason, "hook");
  EXPECT_NE(refused.last_error->find("on_delivered failed"), std::string::npos);
  EXPECT_NE(refused.last_error->find("after 3 completions"), std::string::npos);
  EXPECT_EQ(Requests(), requests) << "a completion retry must not send again";
  EXPECT_EQ(Count("SELECT count(*) FROM dead_log"), 0) << "on_dead does not run for 'hook'";
  agent.Stop();
}

TEST_F(HooksTest, AnOperatorRetryOfAHookDeadMessageRetriesTheCompletionNotTheSend) {
  StartReceiver();
  Options options = BaseOptions();
  options.topics["t"] = HttpTopic();
  options.topics["t"].hooks.on_delivered_sql = kConfirm;
  options.topics["t"].retry.max_attempts = 1;
  app_->exec("INSERT INTO refused VALUES('order-1')");
  Agent agent(options);
  agent.Start();
  const auto id = Order(&agent, "order-1");
  ASSERT_TRUE(WaitFor([&] { return Row(id).status == store::Status::kDead; }));
  EXPECT_EQ(Row(id).dead_reason, "hook");
  EXPECT_EQ(Requests(), 1);
  // The operator fixes the application's data and retries the message.
  app_->exec("DELETE FROM refused");
  {
    store::Options admin;
    admin.path = db_path_;
    store::Store s(admin);
    store::RowSelector which;
    which.id = id;
    store::Operator(s).Retry(which, {"test", "host"}, clock_->WallMs());
  }
  agent.NotifyExternalCommit();
  ASSERT_TRUE(WaitFor([&] { return Row(id).status == store::Status::kDelivered; }));
  EXPECT_TRUE(Confirmed("order-1"));
  EXPECT_EQ(Requests(), 1);
  agent.Stop();
}

TEST_F(HooksTest, AHookEndingTheWholeTransactionCostsTheOthersNothing) {
  StartReceiver();
  // An application trigger that ends the whole transaction.
  app_->exec(
      "CREATE TRIGGER shop_veto BEFORE UPDATE OF confirmed_at ON shop"
      " WHEN NEW.order_key = 'order-7' BEGIN SELECT RAISE(ROLLBACK, 'vetoed'); END;");
  Options options = BaseOptions();
  options.topics["t"] = HttpTopic();
  options.topics["t"].endpoint.batch.max_messages = 50;
  options.topics["t"].hooks.on_delivered_sql = kConfirm;
  Agent agent(options);
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 50; ++i) ids.push_back(Order(nullptr, "order-" + std::to_string(i)));
  agent.Start();
  ASSERT_TRUE(WaitFor([&] {
    return CountStatus(store::Status::kDelivered) == 49 && Row(ids[7]).acked_at.has_value();
  }));
  for (int i = 0; i < 50; ++i) EXPECT_EQ(Confirmed("order-" + std::to_string(i)), i != 7) << i;
  const store::Row vetoed = Row(ids[7]);
  EXPECT_EQ(vetoed.status, store::Status::kPending);
  ASSERT_TRUE(vetoed.last_error);
  EXPECT_NE(vetoed.last_error->find("vetoed"), std::string::npos) << *vetoed.last_error;
  EXPECT_EQ(Requests(), 1);
  agent.Stop();
}

TEST_F(HooksTest, OnDeadRunsWithTheReasonAndAFailingOneLeavesTheMessageDeadAnyway) {
  server_.Post("/events", [](const httplib::Request&, httplib::Response& res) {
    res.status = 422;
  });
  server_.Start();
  app_->exec("CREATE TABLE strict(id INTEGER CHECK (id < 0))");
  Options options = BaseOptions();
  options.topics["t"] = HttpTopic();
  options.topics["t"].hooks.on_dead_sql =
      "INSERT INTO dead_log VALUES(:id, :dead_reason, :last_error)";
  options.topics["u"] = HttpTopic();
  options.topics["u"].hooks.on_dead_sql = "INSERT INTO strict VALUES(:id)";
  Agent agent(options);
  agent.Start();
  const auto logged = Order(&agent, "order-1");
  Transaction txn(&agent, *producer_);
  const auto failing = txn.Enqueue({"u", "order-2", "{}", "", {}}).id;
  txn.Commit();
  ASSERT_TRUE(WaitFor([&] {
    return Row(logged).status == store::Status::kDead && Row(failing).status == store::Status::kDead;
  }));
  EXPECT_EQ(Count("SELECT count(*) FROM dead_log WHERE reason = 'permanent' AND error = 'HTTP 422'"
                  " AND id = " + std::to_string(logged)),
            1);
  const store::Row row = Row(failing);
  EXPECT_EQ(row.dead_reason, "permanent");
  EXPECT_NE(row.last_error->find("on_dead failed"), std::string::npos) << *row.last_error;
  EXPECT_NE(row.last_error->find("CHECK constraint failed"), std::string::npos) << *row.last_error;
  agent.Stop();
}

TEST_F(HooksTest, ALibraryHookGetsTheWriteConnectionAndTheAnswer) {
  StartReceiver();
  Options options = BaseOptions();
  options.topics["t"] = HttpTopic();
  std::atomic<int> status{0};
  options.topics["t"].hooks.on_delivered = [&](sqlite3* db, const Completion& c) {
    status = c.status_code;
    sqlite3_stmt* q = nullptr;
    sqlite3_prepare_v2(db, "UPDATE shop SET remote_id = ?1 WHERE order_key = ?2", -1, &q, nullptr);
    sqlite3_bind_text(q, 1, c.response.data(), static_cast<int>(c.response.size()), SQLITE_TRANSIENT);
    sqlite3_bind_text(q, 2, c.key.data(), static_cast<int>(c.key.size()), SQLITE_TRANSIENT);
    const int rc = sqlite3_step(q);
    sqlite3_finalize(q);
    if (rc != SQLITE_DONE) throw std::runtime_error("update failed");
  };
  Agent agent(options);
  agent.Start();
  const auto id = Order(&agent, "order-1");
  ASSERT_TRUE(WaitFor([&] { return Row(id).status == store::Status::kDelivered; }));
  EXPECT_EQ(RemoteId("order-1"), R"({"id":"remote-1"})");
  EXPECT_EQ(status.load(), 200);
  agent.Stop();
}

// Every malformed hook is refused before anything runs, naming its key.
TEST_F(HooksTest, MalformedHookSqlIsRefusedNamingTheKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"UPDATE shop SET", "incomplete input"},
      {"UPDATE shop SET WHERE", "syntax error"},
      {"UPDATE nowhere SET x = 1", "no such table"},
      {"UPDATE shop SET missing_column = 1", "no such column"},
      {"UPDATE shop SET remote_id = 1; DELETE FROM shop", "got more"},
      {"SELECT * FROM shop", "expected an INSERT, UPDATE, DELETE or REPLACE"},
      {"PRAGMA user_version = 3", "PRAGMA"},
      {"BEGIN", "transaction control"},
      {"COMMIT", "transaction control"},
      {"SAVEPOINT x", "transaction control"},
      {"ATTACH 'other.db' AS other", "ATTACH"},
      {"CREATE TABLE sneaky(x)", "schema changes"},
      {"DROP TABLE shop", "schema changes"},
      {"UPDATE shop SET remote_id = :remote WHERE order_key = :key", "unknown parameter :remote"},
      {"UPDATE shop SET remote_id = ? WHERE order_key = :key", "unknown parameter ?"},
  };
  for (const auto& [sql, why] : cases) {
    for (const char* which : {"on_delivered", "on_dead"}) {
      Options options = BaseOptions();
      options.topics["t"] = HttpTopic();
      (std::string(which) == "on_delivered" ? options.topics["t"].hooks.on_delivered_sql
                                            : options.topics["t"].hooks.on_dead_sql) = sql;
      const std::string key = std::string("topics.\"t\".") + which + ": ";
      try {
        CheckHookSql(options);
        ADD_FAILURE() << "accepted: " << sql;
      } catch (const std::invalid_argument& e) {
        const std::string what = e.what();
        EXPECT_EQ(what.rfind(key, 0), 0u) << what;
        EXPECT_NE(what.find(why), std::string::npos) << sql << " → " << what;
      }
      EXPECT_THROW(Agent{options}, std::invalid_argument) << sql;
    }
  }
  // Nothing was changed by the checks.
  EXPECT_EQ(Count("SELECT count(*) FROM sqlite_schema WHERE name = 'sneaky'"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM pragma_database_list WHERE name = 'other'"), 0);
}

TEST_F(HooksTest, CheckingWithoutADatabaseSaysNothingWasChecked) {
  Options options = BaseOptions();
  options.db_path = dir_.File("missing.db");
  options.topics["t"] = HttpTopic();
  options.topics["t"].hooks.on_delivered_sql = kConfirm;
  EXPECT_FALSE(CheckHookSql(options));
  EXPECT_FALSE(std::filesystem::exists(options.db_path));
  options.db_path = db_path_;
  EXPECT_TRUE(CheckHookSql(options));
}

TEST(HookConfig, OnDeliveredAndOnDeadAreReadPerTopicAndEmptyIsRefused) {
  const Config config = ParseConfig(R"({"topics": {"t": {"url": "http://127.0.0.1:1/x",
      "on_delivered": "UPDATE a SET b = :now", "on_dead": "DELETE FROM a WHERE k = :key"}}})");
  EXPECT_EQ(config.options.topics.at("t").hooks.on_delivered_sql, "UPDATE a SET b = :now");
  EXPECT_EQ(config.options.topics.at("t").hooks.on_dead_sql, "DELETE FROM a WHERE k = :key");
  try {
    ParseConfig(R"({"topics": {"t": {"url": "http://127.0.0.1:1/x", "on_dead": " ; "}}})");
    ADD_FAILURE() << "accepted an empty hook";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("on_dead"), std::string::npos) << e.what();
  }
  EXPECT_THROW(
      ParseConfig(R"({"topics": {"t": {"url": "http://127.0.0.1:1/x", "on_dead": 3}}})"),
      std::invalid_argument);
}

// A row held by an agent that died with it in flight, alone, for the last
// time its crash budget allows; the next agent's start-up takes it back.
std::int64_t LeaveCrashedRow(SQLite::Database& app, int crashes) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  // Our own pid with a start time that is not ours: a process that is gone.
  const std::string gone = std::string(host) + "/" + std::to_string(::getpid()) + "/1/0";
  app.exec("INSERT INTO shop(order_key) VALUES('poison')");
  app.exec("INSERT INTO outbox(topic, msg_key, payload) VALUES('t', 'poison', '{}')");
  const std::int64_t id = app.getLastInsertRowid();
  SQLite::Statement q(app,
                      "UPDATE outbox SET status = 3, lease_owner = ?, crashes = ?,"
                      " lease_expires_at = 9000000000000 WHERE id = ?");
  q.bind(1, gone);
  q.bind(2, crashes);
  q.bind(3, id);
  q.exec();
  return id;
}

TEST_F(HooksTest, OnDeadRunsForACrashBudgetDeathInTheTakeBacksTransaction) {
  StartReceiver();
  Options options = BaseOptions();
  options.crash_budget = 3;
  options.topics["t"] = HttpTopic();
  options.topics["t"].hooks.on_dead_sql =
      "INSERT INTO dead_log VALUES(:id, :dead_reason, :last_error)";
  const std::int64_t id = LeaveCrashedRow(*app_, 2);
  Agent agent(options);
  agent.Start();  // takes the row back before it returns
  const store::Row row = Row(id);
  EXPECT_EQ(row.status, store::Status::kDead);
  EXPECT_EQ(row.dead_reason, "crash");
  SQLite::Statement log(*observer_, "SELECT id, reason, error FROM dead_log");
  ASSERT_TRUE(log.executeStep());
  EXPECT_EQ(log.getColumn(0).getInt64(), id);
  EXPECT_EQ(log.getColumn(1).getString(), "crash");
  EXPECT_EQ(log.getColumn(2).getString(), row.last_error.value_or(""));
  EXPECT_FALSE(log.executeStep());
  agent.Stop();
  EXPECT_EQ(Requests(), 0);
}

TEST_F(HooksTest, AFailingOnDeadLeavesTheCrashedRowDeadWithTheHooksError) {
  StartReceiver();
  app_->exec("CREATE TABLE strict(id INTEGER CHECK (id < 0))");
  Options options = BaseOptions();
  options.crash_budget = 3;
  options.topics["t"] = HttpTopic();
  options.topics["t"].hooks.on_dead_sql = "INSERT INTO strict VALUES(:id)";
  const std::int64_t id = LeaveCrashedRow(*app_, 2);
  Agent agent(options);
  agent.Start();
  const store::Row row = Row(id);
  agent.Stop();
  EXPECT_EQ(row.status, store::Status::kDead);
  EXPECT_EQ(row.dead_reason, "crash");
  EXPECT_NE(row.last_error.value_or("").find("crash budget 3"), std::string::npos)
      << row.last_error.value_or("");
  EXPECT_NE(row.last_error.value_or("").find("on_dead failed"), std::string::npos)
      << row.last_error.value_or("");
}

TEST_F(HooksTest, AnOnDeadThatEndsTheTransactionStillLetsTheCrashedRowDie) {
  StartReceiver();
  app_->exec(
      "CREATE TABLE doomed(id INTEGER);"
      "CREATE TRIGGER doomed_rollback BEFORE INSERT ON doomed"
      " BEGIN SELECT RAISE(ROLLBACK, 'application says no'); END;");
  Options options = BaseOptions();
  options.crash_budget = 3;
  options.topics["t"] = HttpTopic();
  options.topics["t"].hooks.on_dead_sql = "INSERT INTO doomed VALUES(:id)";
  const std::int64_t id = LeaveCrashedRow(*app_, 2);
  Agent agent(options);
  agent.Start();
  const store::Row row = Row(id);
  agent.Stop();
  EXPECT_EQ(row.status, store::Status::kDead);
  EXPECT_EQ(row.dead_reason, "crash");
  EXPECT_NE(row.last_error.value_or("").find("application says no"), std::string::npos)
      << row.last_error.value_or("");
}

}  // namespace
}  // namespace outbox::agent::testing
