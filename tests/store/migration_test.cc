// Migrating files written by earlier versions to the payload layout: in
// place, in one transaction, after a backup copy.
#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "../common/temp_dir.h"
#include "old_schema.h"
#include "outbox/store.h"

namespace outbox::store {
namespace {

using outbox::testing::TempDir;

int SchemaVersionOf(const std::string& path) {
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  SQLite::Statement q(db, "SELECT value FROM outbox_meta WHERE key = 'schema_version'");
  EXPECT_TRUE(q.executeStep());
  return q.getColumn(0).getInt();
}

struct OldRow {
  std::string payload;
  std::optional<std::string> headers;
  int status = 0;
  std::string lease_owner;
};

// The rows as the old layout holds them, payload inline.
std::map<std::int64_t, OldRow> ReadOldRows(const std::string& path) {
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  SQLite::Statement q(db,
                      "SELECT id, payload, headers, status, coalesce(lease_owner, '') FROM outbox");
  std::map<std::int64_t, OldRow> rows;
  while (q.executeStep()) {
    OldRow row;
    row.payload.assign(static_cast<const char*>(q.getColumn(1).getBlob()),
                       static_cast<std::size_t>(q.getColumn(1).getBytes()));
    if (!q.getColumn(2).isNull()) row.headers = q.getColumn(2).getString();
    row.status = q.getColumn(3).getInt();
    row.lease_owner = q.getColumn(4).getString();
    rows[q.getColumn(0).getInt64()] = row;
  }
  return rows;
}

std::string CopyFixture(const TempDir& dir) {
  const std::string path = dir.File("app.db");
  std::filesystem::copy_file(std::string(OUTBOX_STORE_FIXTURES) + "/schema3.db", path);
  return path;
}

void ExpectSameRows(Store& store, const std::map<std::int64_t, OldRow>& before) {
  for (const auto& [id, old] : before) {
    const std::optional<Row> row = store.Get(id);
    ASSERT_TRUE(row) << id;
    EXPECT_EQ(row->payload, old.payload) << id;
    EXPECT_EQ(row->headers_json, old.headers) << id;
    EXPECT_EQ(static_cast<int>(row->status), old.status) << id;
    EXPECT_EQ(row->lease_owner.value_or(""), old.lease_owner) << id;
  }
}

// tests/store/fixtures/schema3.db was made by `outboxctl init` and `outboxctl
// enqueue` of schema 3, then given rows in every state with the sqlite3 shell
// (one with headers, a binary one, a 6 000-byte one on overflow pages, an
// empty one, a delivered, a dead and a leased one).
TEST(Migration, AFileOfTheCurrentReleaseIsMigratedInPlaceAfterABackup) {
  TempDir dir;
  const std::string path = CopyFixture(dir);
  ASSERT_EQ(SchemaVersionOf(path), 3);
  const std::map<std::int64_t, OldRow> before = ReadOldRows(path);
  ASSERT_EQ(before.size(), 6u);
  std::string database_id;
  {
    Options options;
    options.path = path;
    Store store(options);
    database_id = store.database_id();
    EXPECT_EQ(SchemaVersionOf(path), kSchemaVersion);
    ExpectSameRows(store, before);
    SQLite::Database& db = store.connection();
    SQLite::Statement inline_bytes(db, "SELECT sum(length(payload)) FROM outbox");
    ASSERT_TRUE(inline_bytes.executeStep());
    EXPECT_EQ(inline_bytes.getColumn(0).getInt64(), 0);  // every payload moved
    // New rows, through the Producer and through plain SQL, take the new layout.
    Producer producer(db);
    const EnqueueResult added = producer.Enqueue({"orders", "k7", "new", "", {}}, {true, false});
    db.exec("INSERT INTO outbox(topic, msg_key, payload) VALUES('orders', 'k8', 'plain')");
    EXPECT_EQ(store.Get(added.id)->payload, "new");
    EXPECT_EQ(store.Get(added.id + 1)->payload, "plain");
  }
  EXPECT_EQ(database_id, "6f68fe73becd613db857a8a7ebfff9ae");  // the fixture's, kept
  // The backup is the file as it was: schema 3, payloads inline.
  const std::string backup = path + ".bak-schema3";
  ASSERT_TRUE(std::filesystem::exists(backup));
  EXPECT_EQ(SchemaVersionOf(backup), 3);
  const std::map<std::int64_t, OldRow> saved = ReadOldRows(backup);
  ASSERT_EQ(saved.size(), before.size());
  for (const auto& [id, old] : before) EXPECT_EQ(saved.at(id).payload, old.payload) << id;
  // No temporary copy left behind.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    files += entry.path().filename().string().find(".tmp") != std::string::npos ? 100 : 1;
  }
  EXPECT_LT(files, 100);
}

TEST(Migration, TheBackupCanBeTurnedOff) {
  TempDir dir;
  const std::string path = CopyFixture(dir);
  Options options;
  options.path = path;
  options.backup_before_migration = false;
  { Store store(options); }
  EXPECT_EQ(SchemaVersionOf(path), kSchemaVersion);
  EXPECT_FALSE(std::filesystem::exists(path + ".bak-schema3"));
}

TEST(Migration, AnUpToDateFileGetsNoBackup) {
  TempDir dir;
  const std::string path = dir.File("app.db");
  Options options;
  options.path = path;
  options.create = true;
  { Store store(options); }
  { Store again(options); }
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename().string().find(".bak"), std::string::npos)
        << entry.path();
  }
}

// A migration that stops halfway (here its last step fails after the
// payloads were moved; a kill ends the transaction the same way) leaves the
// file at its version with every payload where it was, and the next open
// does the whole migration.
TEST(Migration, AStoppedMigrationIsUndoneAndTheNextOpenFinishesIt) {
  TempDir dir;
  const std::string path = CopyFixture(dir);
  const std::map<std::int64_t, OldRow> before = ReadOldRows(path);
  {
    SQLite::Database app(path, SQLite::OPEN_READWRITE);
    app.exec("CREATE VIEW outbox_message AS SELECT 1");  // the migration's last step collides
  }
  Options options;
  options.path = path;
  EXPECT_THROW(Store store(options), StoreError);
  EXPECT_EQ(SchemaVersionOf(path), 3);
  {
    SQLite::Database app(path, SQLite::OPEN_READWRITE);
    SQLite::Statement tables(
        app, "SELECT count(*) FROM sqlite_schema WHERE name = 'outbox_payload'");
    ASSERT_TRUE(tables.executeStep());
    EXPECT_EQ(tables.getColumn(0).getInt(), 0);
    app.exec("DROP VIEW outbox_message");
  }
  EXPECT_EQ(ReadOldRows(path).at(5).payload, before.at(5).payload);
  Store store(options);
  EXPECT_EQ(SchemaVersionOf(path), kSchemaVersion);
  ExpectSameRows(store, before);
}

// Files older than the fixture, made with their own versions' SQL.
TEST(Migration, EveryOlderVersionMigrates) {
  for (int version = 1; version < kSchemaVersion; ++version) {
    TempDir dir;
    const std::string path = dir.File("app.db");
    testing::MakeFileAtVersion(path, version);
    {
      SQLite::Database app(path, SQLite::OPEN_READWRITE);
      app.exec(
          "INSERT INTO outbox(topic, msg_key, payload, headers)"
          " VALUES('t', 'k', 'body', '{\"X-A\":\"1\"}')");
    }
    Options options;
    options.path = path;
    Store store(options);
    EXPECT_EQ(SchemaVersionOf(path), kSchemaVersion) << version;
    EXPECT_EQ(store.Get(1)->payload, "body") << version;
    EXPECT_EQ(store.Get(1)->headers_json, "{\"X-A\":\"1\"}") << version;
    EXPECT_TRUE(std::filesystem::exists(path + ".bak-schema" + std::to_string(version)));
  }
}

std::string IndexSql(SQLite::Database& db, const char* name) {
  SQLite::Statement q(db, "SELECT sql FROM sqlite_schema WHERE name = ?");
  q.bind(1, name);
  return q.executeStep() ? q.getColumn(0).getString() : "";
}

int Count(SQLite::Database& db, const std::string& query) {
  SQLite::Statement q(db, query);
  EXPECT_TRUE(q.executeStep()) << query;
  return q.getColumn(0).getInt();
}

// A schema 5 file with keyed rows in every state, and one delivered row
// without a key.
std::string MakeSchema5WithKeyedRows(const TempDir& dir) {
  const std::string path = dir.File("app.db");
  testing::MakeFileAtVersion(path, 5);
  SQLite::Database app(path, SQLite::OPEN_READWRITE);
  app.exec(
      "INSERT INTO outbox(id, topic, msg_key, payload, ordering_key, status, updated_at) VALUES"
      " (1, 't', 'a1', 'x', 'a', 1, 11), (2, 't', 'a2', 'x', 'a', 0, 12),"
      " (3, 't', 'b1', 'x', 'b', 3, 13), (4, 't', 'c1', 'x', 'c', 2, 14),"
      " (5, 't', 'n1', 'x', NULL, 1, 15)");
  return path;
}

// Migration 6: outbox_ordering names delivered_at instead of status, and
// keyed rows delivered before it leave the index.
TEST(Migration, Schema6TakesDeliveredKeyedRowsOutOfTheOrderingIndex) {
  TempDir dir;
  const std::string path = MakeSchema5WithKeyedRows(dir);
  Options options;
  options.path = path;
  Store store(options);
  EXPECT_EQ(SchemaVersionOf(path), kSchemaVersion);
  SQLite::Database& db = store.connection();
  EXPECT_NE(IndexSql(db, "outbox_ordering").find("delivered_at IS NULL"), std::string::npos);
  EXPECT_EQ(IndexSql(db, "outbox_ordering").find("status"), std::string::npos);
  EXPECT_EQ(Count(db, "SELECT count(*) FROM outbox WHERE delivered_at = 11 AND id = 1"), 1);
  EXPECT_EQ(Count(db, "SELECT count(*) FROM outbox WHERE delivered_at IS NOT NULL"), 1);
  EXPECT_EQ(Count(db, "SELECT count(*) FROM outbox INDEXED BY outbox_ordering"
                      " WHERE ordering_key IS NOT NULL AND delivered_at IS NULL"),
            3);
  EXPECT_EQ(Count(db, "SELECT count(*) FROM outbox_message WHERE delivered_at = 11"), 1);
  // The rule holds on the migrated rows: a2 may go (a1 delivered), and the
  // in-flight b1 still holds key b.
  store.AgreeOrdering("t", {true, DeadHead::kBlock}, 20);
  db.exec("INSERT INTO outbox(topic, msg_key, payload, ordering_key) VALUES('t', 'b2', 'x', 'b')");
  const auto claimed = store.ClaimDue("t", "me", 1'000'000'000'000'000, 1'000'000'000'000'000, 10);
  ASSERT_EQ(claimed.size(), 1u);
  EXPECT_EQ(claimed[0].lease.id, 2);
}

// A migration 6 that stops halfway (its trigger step fails after the column,
// the rows and the index were changed; a kill ends the transaction the same
// way) leaves the file at schema 5 as it was; the next open does it all.
TEST(Migration, AStoppedMigration6IsUndoneAndTheNextOpenFinishesIt) {
  TempDir dir;
  const std::string path = MakeSchema5WithKeyedRows(dir);
  const char* count_update =
      "CREATE TRIGGER outbox_count_update AFTER UPDATE OF status ON outbox"
      "  WHEN (OLD.status = 1) <> (NEW.status = 1)"
      " BEGIN"
      "  UPDATE outbox_counters SET value = value + (CASE WHEN NEW.status = 1 THEN -1 ELSE 1 END)"
      "   WHERE name = 'undelivered';"
      " END";
  {
    SQLite::Database app(path, SQLite::OPEN_READWRITE);
    app.exec("DROP TRIGGER outbox_count_update");  // the migration's DROP TRIGGER fails
  }
  Options options;
  options.path = path;
  options.backup_before_migration = false;
  EXPECT_THROW(Store store(options), StoreError);
  EXPECT_EQ(SchemaVersionOf(path), 5);
  {
    SQLite::Database app(path, SQLite::OPEN_READWRITE);
    EXPECT_EQ(Count(app, "SELECT count(*) FROM pragma_table_info('outbox')"
                         " WHERE name = 'delivered_at'"),
              0);
    EXPECT_NE(IndexSql(app, "outbox_ordering").find("status <> 1"), std::string::npos);
    app.exec(count_update);
  }
  Store store(options);
  EXPECT_EQ(SchemaVersionOf(path), kSchemaVersion);
  EXPECT_EQ(Count(store.connection(), "SELECT count(*) FROM outbox WHERE delivered_at = 11"), 1);
}

// A schema 6 file with keyed rows in every state: a1 delivered, a2 pending,
// b1 in flight, c1 dead (permanent) with c2 parked behind it.
std::string MakeSchema6WithKeyedRows(const TempDir& dir) {
  const std::string path = dir.File("app.db");
  testing::MakeFileAtVersion(path, 6);
  SQLite::Database app(path, SQLite::OPEN_READWRITE);
  app.exec(
      "INSERT INTO outbox(id, topic, msg_key, payload, ordering_key, status, dead_reason,"
      " delivered_at, next_attempt_at, updated_at) VALUES"
      " (1, 't', 'a1', 'x', 'a', 1, NULL, 11, 11, 11),"
      " (2, 't', 'a2', 'x', 'a', 0, NULL, NULL, 12, 12),"
      " (3, 't', 'b1', 'x', 'b', 3, NULL, NULL, 13, 13),"
      " (4, 't', 'c1', 'x', 'c', 2, 'permanent', NULL, 14, 14),"
      " (5, 't', 'c2', 'x', 'c', 0, NULL, NULL, " +
      std::to_string(kParkedAt) + ", 15)");
  return path;
}

std::string TriggerSql(SQLite::Database& db) {
  SQLite::Statement q(db,
                      "SELECT name, sql FROM sqlite_schema WHERE type = 'trigger' ORDER BY name");
  std::string all;
  while (q.executeStep()) {
    all += q.getColumn(0).getString() + ": " + q.getColumn(1).getString() + "\n";
  }
  return all;
}

// Migration 7: outbox_count_update keeps only the counter; delivered_at and
// the unparking have triggers of their own (so have the counter and the
// unparking on delete). No row changes.
TEST(Migration, Schema7SplitsTheUpdateAndDeleteTriggersAndKeepsEveryRow) {
  TempDir dir;
  const std::string path = MakeSchema6WithKeyedRows(dir);
  Options options;
  options.path = path;
  Store store(options);
  EXPECT_EQ(SchemaVersionOf(path), kSchemaVersion);
  SQLite::Database& db = store.connection();
  const std::string counter = IndexSql(db, "outbox_count_update");
  EXPECT_NE(counter.find("outbox_counters"), std::string::npos) << counter;
  EXPECT_EQ(counter.find("delivered_at"), std::string::npos) << counter;
  EXPECT_EQ(counter.find("next_attempt_at"), std::string::npos) << counter;
  EXPECT_EQ(IndexSql(db, "outbox_count_delete").find("next_attempt_at"), std::string::npos);
  for (const char* name : {"outbox_delivered_at", "outbox_unpark_update", "outbox_unpark_delete"}) {
    EXPECT_NE(IndexSql(db, name), "") << name;
  }
  // A file made now has the same triggers, made by the same migrations.
  {
    Options fresh;
    fresh.path = dir.File("fresh.db");
    fresh.create = true;
    Store made(fresh);
    EXPECT_EQ(TriggerSql(made.connection()), TriggerSql(db));
  }
  EXPECT_EQ(Count(db, "SELECT value FROM outbox_counters WHERE name = 'undelivered'"), 4);
  EXPECT_EQ(Count(db, "SELECT count(*) FROM outbox WHERE id = 1 AND delivered_at = 11"), 1);
  EXPECT_EQ(Count(db, "SELECT count(*) FROM outbox WHERE id = 5 AND next_attempt_at = " +
                          std::to_string(kParkedAt)),
            1);
  // The jobs still done on the migrated rows: a plain-SQL retry of the dead
  // head gives c2 its place back and counts nothing twice.
  db.exec("UPDATE outbox SET status = 0, dead_reason = NULL WHERE id = 4");
  EXPECT_EQ(Count(db, "SELECT next_attempt_at FROM outbox WHERE id = 5"), 15);
  EXPECT_EQ(Count(db, "SELECT value FROM outbox_counters WHERE name = 'undelivered'"), 4);
}

// A migration 7 that stops halfway (its last trigger collides with one of
// the application's after the update trigger was replaced; a kill ends the
// transaction the same way) leaves the file at schema 6 with its triggers;
// the next open does it all.
TEST(Migration, AStoppedMigration7IsUndoneAndTheNextOpenFinishesIt) {
  TempDir dir;
  const std::string path = MakeSchema6WithKeyedRows(dir);
  {
    SQLite::Database app(path, SQLite::OPEN_READWRITE);
    app.exec("CREATE TABLE app_log(x)");
    app.exec("CREATE TRIGGER outbox_unpark_delete AFTER INSERT ON app_log BEGIN SELECT 1; END");
  }
  Options options;
  options.path = path;
  options.backup_before_migration = false;
  EXPECT_THROW(Store store(options), StoreError);
  EXPECT_EQ(SchemaVersionOf(path), 6);
  {
    SQLite::Database app(path, SQLite::OPEN_READWRITE);
    EXPECT_NE(IndexSql(app, "outbox_count_update").find("delivered_at"), std::string::npos);
    EXPECT_EQ(IndexSql(app, "outbox_delivered_at"), "");
    app.exec("DROP TRIGGER outbox_unpark_delete");
  }
  Store store(options);
  EXPECT_EQ(SchemaVersionOf(path), kSchemaVersion);
  EXPECT_EQ(IndexSql(store.connection(), "outbox_count_update").find("delivered_at"),
            std::string::npos);
  EXPECT_NE(IndexSql(store.connection(), "outbox_unpark_delete"), "");
}

// A schema 7 file with the rows schema 8's insert checks refuse, written
// when nothing refused them: an unknown backoff, no attempts at all, a
// negative interval, a 300-byte topic.
std::string MakeSchema7WithRowsSchema8Refuses(const TempDir& dir) {
  const std::string path = dir.File("app.db");
  testing::MakeFileAtVersion(path, 7);
  SQLite::Database app(path, SQLite::OPEN_READWRITE);
  app.exec(
      "INSERT INTO outbox(id, topic, msg_key, payload, backoff, max_attempts, first_interval_ms)"
      " VALUES (1, 't', 'a', 'x', 'linear', 0, -5),"
      " (2, printf('%.*c', 300, 't'), 'b', 'y', NULL, NULL, NULL)");
  return path;
}

// Migration 8: the insert trigger checks the retry columns, the topic's
// length and the headers' size; rows already written stay as they are; the
// undelivered counter gets its mark above every row.
TEST(Migration, Schema8ChecksNewRowsAndKeepsEveryOldOne) {
  TempDir dir;
  const std::string path = MakeSchema7WithRowsSchema8Refuses(dir);
  Options options;
  options.path = path;
  Store store(options);
  EXPECT_EQ(SchemaVersionOf(path), kSchemaVersion);
  SQLite::Database& db = store.connection();
  EXPECT_EQ(Count(db, "SELECT count(*) FROM outbox WHERE backoff = 'linear' AND first_interval_ms"
                      " = -5 AND max_attempts = 0"),
            1);
  EXPECT_EQ(store.Get(2)->payload, "y");
  EXPECT_EQ(Count(db, "SELECT value FROM outbox_counters WHERE name = 'undelivered'"), 2);
  // Every row is below the counter's mark; the count stays exact after it.
  EXPECT_EQ(Count(db, "SELECT value FROM outbox_counters WHERE name = 'counted_upto'"), 2);
  EXPECT_EQ(store.GetStats().undelivered, 2);
  db.exec("INSERT INTO outbox(topic, msg_key, payload) VALUES('t', 'big', zeroblob(20000))");
  db.exec("UPDATE outbox SET status = 1 WHERE id = 1");
  EXPECT_EQ(store.GetStats().undelivered, 2);
  EXPECT_EQ(store.Get(3)->payload.size(), 20000u);
  for (const char* bad :
       {"INSERT INTO outbox(topic, msg_key, payload, backoff) VALUES('t', 'c', 'x', 'linear')",
        "INSERT INTO outbox(topic, msg_key, payload, max_attempts) VALUES('t', 'c', 'x', 0)",
        "INSERT INTO outbox(topic, msg_key, payload, first_interval_ms) VALUES('t', 'c', 'x', -5)",
        "INSERT INTO outbox(topic, msg_key, payload) VALUES(printf('%.*c', 256, 't'), 'c', 'x')",
        "INSERT INTO outbox(topic, msg_key, payload, headers)"
        " VALUES('t', 'c', 'x', json_object('a', zeroblob(70000)))"}) {
    EXPECT_THROW(db.exec(bad), SQLite::Exception) << bad;
  }
  // A file made now has the same triggers, made by the same migrations.
  Options fresh;
  fresh.path = dir.File("fresh.db");
  fresh.create = true;
  Store made(fresh);
  EXPECT_EQ(TriggerSql(made.connection()), TriggerSql(db));
}

// A migration 8 stopped at its very end (the version cannot be written; a
// kill at any earlier point ends the transaction the same way) leaves the
// file at schema 7 with schema 7's triggers; the next open does it all.
TEST(Migration, AStoppedMigration8IsUndoneAndTheNextOpenFinishesIt) {
  TempDir dir;
  const std::string path = MakeSchema7WithRowsSchema8Refuses(dir);
  std::string schema7;
  {
    SQLite::Database app(path, SQLite::OPEN_READWRITE);
    schema7 = TriggerSql(app);
    app.exec(
        "CREATE TRIGGER app_stop BEFORE UPDATE ON outbox_meta"
        " BEGIN SELECT RAISE(ABORT, 'stopped'); END");
  }
  Options options;
  options.path = path;
  options.backup_before_migration = false;
  EXPECT_THROW(Store store(options), StoreError);
  EXPECT_EQ(SchemaVersionOf(path), 7);
  {
    SQLite::Database app(path, SQLite::OPEN_READWRITE);
    app.exec("DROP TRIGGER app_stop");
    EXPECT_EQ(TriggerSql(app), schema7);
    // Schema 7's trigger still takes what schema 8's refuses.
    app.exec("INSERT INTO outbox(topic, msg_key, payload, backoff) VALUES('t', 'c', 'x', 'linear')");
  }
  Store store(options);
  EXPECT_EQ(SchemaVersionOf(path), kSchemaVersion);
  EXPECT_THROW(store.connection().exec("INSERT INTO outbox(topic, msg_key, payload, backoff)"
                                       " VALUES('t', 'd', 'x', 'linear')"),
               SQLite::Exception);
  EXPECT_EQ(Count(store.connection(), "SELECT count(*) FROM outbox"), 3);
}

// The same stop halfway: an application's trigger has the name of one that
// migration 8 creates after it replaced the insert trigger, the payload move
// and the insert counter and added the counter's mark.
TEST(Migration, AMigration8StoppedHalfwayLeavesSchema7AsItWas) {
  TempDir dir;
  const std::string path = MakeSchema7WithRowsSchema8Refuses(dir);
  std::string schema7;
  {
    SQLite::Database app(path, SQLite::OPEN_READWRITE);
    schema7 = TriggerSql(app);
    app.exec("CREATE TABLE app_log(x)");
    app.exec("CREATE TRIGGER outbox_count_fold AFTER INSERT ON app_log BEGIN SELECT 1; END");
  }
  Options options;
  options.path = path;
  options.backup_before_migration = false;
  EXPECT_THROW(Store store(options), StoreError);
  EXPECT_EQ(SchemaVersionOf(path), 7);
  {
    SQLite::Database app(path, SQLite::OPEN_READWRITE);
    app.exec("DROP TRIGGER outbox_count_fold");
    EXPECT_EQ(TriggerSql(app), schema7);
    EXPECT_EQ(Count(app, "SELECT count(*) FROM outbox_counters WHERE name = 'counted_upto'"), 0);
  }
  Store store(options);
  EXPECT_EQ(SchemaVersionOf(path), kSchemaVersion);
  EXPECT_EQ(store.GetStats().undelivered, 2);
}

// What an older binary says when it meets this file: one line naming the
// file and the way out (the check it runs is this build's own check, with
// the version one higher).
TEST(Migration, ANewerSchemaIsRefusedWithOneLine) {
  TempDir dir;
  const std::string path = dir.File("app.db");
  {
    Options options;
    options.path = path;
    options.create = true;
    Store store(options);
    store.connection().exec("UPDATE outbox_meta SET value = value + 1 WHERE key = 'schema_version'");
  }
  Options options;
  options.path = path;
  try {
    Store store(options);
    FAIL() << "expected NotAnOutboxError";
  } catch (const NotAnOutboxError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what, path + ": outbox schema version " + std::to_string(kSchemaVersion + 1) +
                        " is newer than this build supports (" +
                        std::to_string(kSchemaVersion) + "); upgrade edge-outbox");
  }
}

}  // namespace
}  // namespace outbox::store
