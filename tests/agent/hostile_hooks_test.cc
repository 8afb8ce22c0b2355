// A hook statement comes from a config file: it runs in a closed room. These
// tests try to leave it (issue: a hook reached native code through
// fts3_tokenizer). Real SQLite, real HTTP receiver.
#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>
#include <utility>
#include <vector>

#include "agent_fixture.h"

namespace outbox::agent::testing {
namespace {

class HostileHooks : public AgentTest {
 protected:
  HostileHooks() {
    app_->exec(
        "CREATE TABLE shop(order_key TEXT PRIMARY KEY, note TEXT);"
        "CREATE TABLE notes(n TEXT);"
        // An application trigger that a hook fires by writing to notes.
        "CREATE TRIGGER notes_leak AFTER INSERT ON notes"
        " BEGIN UPDATE shop SET note = hex(fts3_tokenizer('simple')); END;");
  }

  Options WithHook(const std::string& which, const std::string& sql) {
    Options options = BaseOptions();
    options.topics["t"] = HttpTopic();
    (which == "on_delivered" ? options.topics["t"].hooks.on_delivered_sql
                             : options.topics["t"].hooks.on_dead_sql) = sql;
    return options;
  }

  // The check and the agent both refuse `sql`, naming the key and `why`.
  void ExpectRefused(const std::string& sql, const std::string& why) {
    for (const std::string which : {"on_delivered", "on_dead"}) {
      const Options options = WithHook(which, sql);
      const std::string key = "topics.\"t\"." + which + ": ";
      try {
        CheckHookSql(options);
        ADD_FAILURE() << "--check-config accepted: " << sql;
      } catch (const std::invalid_argument& e) {
        const std::string what = e.what();
        EXPECT_EQ(what.rfind(key, 0), 0u) << what;
        EXPECT_NE(what.find(why), std::string::npos) << sql << " → " << what;
      }
      try {
        Agent agent(options);
        agent.Start();
        agent.Stop();
        ADD_FAILURE() << "the agent accepted: " << sql;
      } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
      }
    }
  }
};

TEST_F(HostileHooks, FunctionsOutsideTheAllowListAreRefusedNamingTheKeyAndTheFunction) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      // The address leak and the planted pointer of the review.
      {"UPDATE shop SET note = hex(fts3_tokenizer('simple')) WHERE order_key = :key",
       "function fts3_tokenizer is not allowed in a hook"},
      {"UPDATE shop SET note = fts3_tokenizer('simple', x'4141414141414141')",
       "function fts3_tokenizer is not allowed"},
      {"UPDATE shop SET note = load_extension('/tmp/evil.so')",
       "function load_extension is not allowed"},
      {"UPDATE shop SET note = sqlite_version()", "function sqlite_version is not allowed"},
      {"UPDATE shop SET note = sqlite_compileoption_used('ENABLE_FTS3_TOKENIZER')",
       "function sqlite_compileoption_used is not allowed"},
      // Hidden in a subquery, a CTE and an upsert.
      {"UPDATE shop SET note = (SELECT quote(fts3_tokenizer('simple')))",
       "function fts3_tokenizer is not allowed"},
      {"WITH x(v) AS (SELECT fts3_tokenizer('porter')) UPDATE shop SET note = (SELECT v FROM x)",
       "function fts3_tokenizer (inside trigger or view x) is not allowed"},
      {"INSERT INTO shop(order_key) VALUES(:key) ON CONFLICT DO UPDATE SET"
       " note = fts3_tokenizer('simple')",
       "function fts3_tokenizer is not allowed"},
  };
  for (const auto& [sql, why] : cases) ExpectRefused(sql, why);
}

TEST_F(HostileHooks, FunctionsInTheTriggersAHookFiresAreRefusedToo) {
  ExpectRefused("INSERT INTO notes(n) VALUES(:key)",
                "function fts3_tokenizer (inside trigger or view notes_leak) is not allowed in a hook");
}

TEST_F(HostileHooks, AnAllowedHookStillRunsThroughTheOutboxsOwnInsertTrigger) {
  // Chaining a follow-up message fires the outbox's insert trigger
  // (json_valid, json_type, pragma_page_count): the room must not shut it.
  server_.Post("/events", [](const httplib::Request&, httplib::Response& res) {
    res.status = 200;
    res.set_content(R"({"id":"r-1"})", "application/json");
  });
  server_.Start();
  const std::string sql =
      "INSERT INTO outbox(topic, msg_key, payload) VALUES('follow-up', :key,"
      " json_object('of', :id, 'remote', :response ->> '$.id', 'at', datetime(:now / 1000,"
      " 'unixepoch'), 'n', printf('%d', length(:payload))))";
  const Options options = WithHook("on_delivered", sql);
  EXPECT_TRUE(CheckHookSql(options));
  Agent agent(options);
  agent.Start();
  const auto id = Commit(&agent, "t", "k1");
  ASSERT_TRUE(WaitFor([&] { return Row(id).status == store::Status::kDelivered; }));
  agent.Stop();
  SQLite::Statement q(*observer_,
                      "SELECT CAST(payload AS TEXT) ->> '$.remote', CAST(payload AS TEXT) ->> '$.of'"
                      " FROM outbox_message"
                      " WHERE topic = 'follow-up'");
  ASSERT_TRUE(q.executeStep());
  EXPECT_EQ(q.getColumn(0).getString(), "r-1");
  EXPECT_EQ(q.getColumn(1).getInt64(), id);
}

int DbConfig(sqlite3* db, int option) {
  int value = -1;
  sqlite3_db_config(db, option, -1, &value);
  return value;
}

TEST_F(HostileHooks, EveryAgentAndOutboxctlConnectionIsDefensiveWithoutTheTokenizerPointer) {
  // outboxctl opens a Store; so do the agent's writer and readers.
  store::Options read;
  read.path = db_path_;
  store::Store store(read);
  sqlite3* db = store.connection().getHandle();
  EXPECT_EQ(DbConfig(db, SQLITE_DBCONFIG_DEFENSIVE), 1);
  EXPECT_EQ(DbConfig(db, SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER), 0);
  EXPECT_EQ(DbConfig(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION), 0);
  // trusted_schema stays on: the outbox's trigger needs it (SQLite 3.40).
  EXPECT_EQ(DbConfig(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA), 1);

  // The writer's connection, as a library hook sees it.
  server_.Post("/events", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  server_.Start();
  Options options = BaseOptions();
  options.topics["t"] = HttpTopic();
  std::atomic<int> defensive{-1};
  std::atomic<int> tokenizer{-1};
  options.topics["t"].hooks.on_delivered = [&](sqlite3* writer, const Completion&) {
    defensive = DbConfig(writer, SQLITE_DBCONFIG_DEFENSIVE);
    tokenizer = DbConfig(writer, SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER);
  };
  Agent agent(options);
  agent.Start();
  const auto id = Commit(&agent, "t", "k1");
  ASSERT_TRUE(WaitFor([&] { return Row(id).status == store::Status::kDelivered; }));
  agent.Stop();
  EXPECT_EQ(defensive.load(), 1);
  EXPECT_EQ(tokenizer.load(), 0);
}

}  // namespace
}  // namespace outbox::agent::testing
