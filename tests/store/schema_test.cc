#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <iterator>

#include "../common/temp_dir.h"
#include "old_schema.h"
#include "outbox/store.h"

namespace outbox::store {
namespace {

using outbox::testing::TempDir;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Options CreateAt(const std::string& path) {
  Options options;
  options.path = path;
  options.create = true;
  return options;
}

TEST(OutboxSchema, InitCreatesSchemaWithIdentity) {
  TempDir dir;
  Store store(CreateAt(dir.File("app.db")));
  EXPECT_EQ(store.database_id().size(), 32u);
  SQLite::Statement mode(store.connection(), "PRAGMA journal_mode");
  ASSERT_TRUE(mode.executeStep());
  EXPECT_EQ(mode.getColumn(0).getString(), "wal");
  SQLite::Statement vacuum(store.connection(), "PRAGMA auto_vacuum");
  ASSERT_TRUE(vacuum.executeStep());
  EXPECT_EQ(vacuum.getColumn(0).getInt(), 2);  // incremental, on a file we created
}

TEST(OutboxSchema, ReopenAndReinitAreIdempotent) {
  TempDir dir;
  const std::string path = dir.File("app.db");
  std::string id;
  {
    Store store(CreateAt(path));
    id = store.database_id();
  }
  {
    Store again(CreateAt(path));
    EXPECT_EQ(again.database_id(), id);
  }
  Options plain;
  plain.path = path;
  Store reopened(plain);
  EXPECT_EQ(reopened.database_id(), id);
}

TEST(OutboxSchema, IdentitiesDifferBetweenDatabases) {
  TempDir dir;
  Store a(CreateAt(dir.File("a.db")));
  Store b(CreateAt(dir.File("b.db")));
  EXPECT_NE(a.database_id(), b.database_id());
}

TEST(OutboxSchema, MissingFileIsRefusedAndNotCreated) {
  TempDir dir;
  Options options;
  options.path = dir.File("missing.db");
  try {
    Store store(options);
    FAIL() << "expected NotAnOutboxError";
  } catch (const NotAnOutboxError& e) {
    EXPECT_NE(std::string(e.what()).find("no such file"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(options.path));
}

TEST(OutboxSchema, NonSqliteFileIsRefusedAndLeftByteIdentical) {
  TempDir dir;
  const std::string path = dir.File("notes.txt");
  const std::string content(5000, 'x');
  std::ofstream(path, std::ios::binary) << content;
  for (bool create : {false, true}) {
    Options options;
    options.path = path;
    options.create = create;
    try {
      Store store(options);
      FAIL() << "expected NotAnOutboxError";
    } catch (const NotAnOutboxError& e) {
      EXPECT_NE(std::string(e.what()).find("not an SQLite database"), std::string::npos)
          << e.what();
    }
    EXPECT_EQ(ReadFile(path), content);
    EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
  }
}

TEST(OutboxSchema, ApplicationDatabaseWithoutSchemaIsRefusedUntouched) {
  TempDir dir;
  const std::string path = dir.File("app.db");
  {
    SQLite::Database app(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    app.exec("CREATE TABLE orders(id INTEGER PRIMARY KEY, total INTEGER)");
  }
  const std::string before = ReadFile(path);
  Options options;
  options.path = path;
  try {
    Store store(options);
    FAIL() << "expected NotAnOutboxError";
  } catch (const NotAnOutboxError& e) {
    EXPECT_NE(std::string(e.what()).find("not an outbox database"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(ReadFile(path), before);
}

TEST(OutboxSchema, ForeignTableNamedOutboxIsNotAdopted) {
  TempDir dir;
  const std::string path = dir.File("app.db");
  {
    SQLite::Database app(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    app.exec("CREATE TABLE outbox(whatever TEXT)");
  }
  EXPECT_THROW(Store store(CreateAt(path)), NotAnOutboxError);
}

TEST(OutboxSchema, NewerSchemaIsRefused) {
  TempDir dir;
  const std::string path = dir.File("app.db");
  {
    Store store(CreateAt(path));
    store.connection().exec(
        "UPDATE outbox_meta SET value = 99 WHERE key = 'schema_version'");
  }
  for (bool create : {false, true}) {
    Options options;
    options.path = path;
    options.create = create;
    try {
      Store store(options);
      FAIL() << "expected NotAnOutboxError";
    } catch (const NotAnOutboxError& e) {
      EXPECT_NE(std::string(e.what()).find("newer"), std::string::npos) << e.what();
    }
  }
}

TEST(OutboxSchema, VersionOneFileIsMigratedOnOpenAndKeepsItsRows) {
  TempDir dir;
  const std::string path = dir.File("app.db");
  {
    // A file as schema 1 left it: outbox_retention over every row.
    testing::MakeFileAtVersion(path, 1);
    SQLite::Database app(path, SQLite::OPEN_READWRITE);
    app.exec(
        "INSERT INTO outbox(topic, msg_key, payload, status, updated_at)"
        " VALUES('t', 'delivered', 'p', 1, 5), ('t', 'pending', 'p', 0, 5)");
  }
  Options plain;
  plain.path = path;
  Store store(plain);
  SQLite::Statement version(store.connection(),
                            "SELECT value FROM outbox_meta WHERE key = 'schema_version'");
  ASSERT_TRUE(version.executeStep());
  EXPECT_EQ(version.getColumn(0).getInt(), kSchemaVersion);
  SQLite::Statement index(store.connection(),
                          "SELECT sql FROM sqlite_schema WHERE name = 'outbox_retention'");
  ASSERT_TRUE(index.executeStep());
  EXPECT_NE(index.getColumn(0).getString().find("WHERE status = 1"), std::string::npos);
  EXPECT_EQ(store.PurgeDelivered(WallMs(), 10), 1);
  EXPECT_EQ(store.List({}).size(), 1u);
}

int SchemaVersionOf(const std::string& path) {
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  SQLite::Statement version(db, "SELECT value FROM outbox_meta WHERE key = 'schema_version'");
  EXPECT_TRUE(version.executeStep());
  return version.getColumn(0).getInt();
}

TEST(OutboxSchema, VersionTwoFileGetsBootClockLeasesAndKeepsItsLeases) {
  TempDir dir;
  const std::string path = dir.File("app.db");
  const std::int64_t now = WallMs();
  testing::MakeFileAtVersion(path, 2);
  {
    // A version-2 agent's lease, on wall time only.
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    db.exec("INSERT INTO outbox(topic, msg_key, payload, status, lease_owner, lease_token,"
            " lease_expires_at) VALUES('t', 'leased', 'p', 3, 'old-agent', 1, " +
            std::to_string(now + 60'000) + ")");
  }
  Options plain;
  plain.path = path;
  Store store(plain);
  EXPECT_EQ(SchemaVersionOf(path), kSchemaVersion);
  const std::vector<Row> rows = store.List({});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].status, Status::kInFlight);
  // Its lease still runs on wall time, and ends on wall time.
  EXPECT_TRUE(store.RecycleExpired(now + 59'000, 60'000, 10).empty());
  EXPECT_EQ(store.RecycleExpired(now + 60'000, 60'000, 10).size(), 1u);
}

// The migration is one transaction with the version bump: a process killed
// in the middle of it leaves the file as it was. Here its second statement
// fails, which ends the transaction the same way a kill does (rolled back).
TEST(OutboxSchema, AMigrationStoppedHalfwayLeavesTheFileAtItsVersion) {
  TempDir dir;
  const std::string path = dir.File("app.db");
  {
    testing::MakeFileAtVersion(path, 2);
    // Makes migration 3's second ADD COLUMN fail after its first succeeded.
    SQLite::Database app(path, SQLite::OPEN_READWRITE);
    app.exec("ALTER TABLE outbox ADD COLUMN lease_boot_until INTEGER");
  }
  Options plain;
  plain.path = path;
  EXPECT_THROW(Store store(plain), StoreError);
  EXPECT_EQ(SchemaVersionOf(path), 2);
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  SQLite::Statement column(db,
                           "SELECT count(*) FROM pragma_table_info('outbox')"
                           " WHERE name = 'lease_boot_id'");
  ASSERT_TRUE(column.executeStep());
  EXPECT_EQ(column.getColumn(0).getInt(), 0);  // the first ADD COLUMN was undone
}

TEST(OutboxSchema, VersionThreeFileGetsTheMessageAttributesAndKeepsItsRows) {
  TempDir dir;
  const std::string path = dir.File("app.db");
  {
    testing::MakeFileAtVersion(path, 3);
    SQLite::Database app(path, SQLite::OPEN_READWRITE);
    app.exec("INSERT INTO outbox(topic, msg_key, payload, status) VALUES('t', 'old', 'p', 2)");
  }
  Options plain;
  plain.path = path;
  Store store(plain);
  EXPECT_EQ(SchemaVersionOf(path), kSchemaVersion);
  const std::vector<Row> rows = store.List({});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].status, Status::kDead);
  EXPECT_FALSE(rows[0].dead_reason);  // dead before reasons were recorded
  EXPECT_FALSE(rows[0].ordering_key);
  // The new checks hold for plain SQL at once.
  EXPECT_THROW(store.connection().exec("INSERT INTO outbox(topic, msg_key, payload, "
                                       "schema_version) VALUES('t', 'k', 'p', 'v 2')"),
               SQLite::Exception);
}

TEST(OutboxSchema, ApplicationUserVersionSurvivesInit) {
  TempDir dir;
  const std::string path = dir.File("app.db");
  {
    SQLite::Database app(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    app.exec("PRAGMA user_version = 42");
    app.exec("CREATE TABLE orders(id INTEGER PRIMARY KEY)");
  }
  { Store store(CreateAt(path)); }
  SQLite::Database app(path, SQLite::OPEN_READONLY);
  SQLite::Statement version(app, "PRAGMA user_version");
  ASSERT_TRUE(version.executeStep());
  EXPECT_EQ(version.getColumn(0).getInt(), 42);
  // An existing file is never switched to incremental vacuum (that needs VACUUM).
  SQLite::Statement vacuum(app, "PRAGMA auto_vacuum");
  ASSERT_TRUE(vacuum.executeStep());
  EXPECT_EQ(vacuum.getColumn(0).getInt(), 0);
}

TEST(OutboxSchema, PlainSqlInsertYieldsAPendingRowDueNow) {
  Store store(CreateAt(":memory:"));
  const std::int64_t before = WallMs();
  store.connection().exec(
      "INSERT INTO outbox(topic, msg_key, payload) VALUES('t', 'k', 'hello')");
  const std::int64_t after = WallMs();
  auto row = store.Get(1);
  ASSERT_TRUE(row);
  EXPECT_EQ(row->status, Status::kPending);
  EXPECT_EQ(row->attempts, 0);
  EXPECT_EQ(row->payload, "hello");
  EXPECT_GE(row->next_attempt_at, before - 1);
  EXPECT_LE(row->next_attempt_at, after + 1);
  EXPECT_GE(row->created_at, before - 1);
  EXPECT_EQ(row->updated_at, row->created_at);
}

TEST(OutboxSchema, ReadOnlyOpenChangesNothing) {
  TempDir dir;
  const std::string path = dir.File("app.db");
  { Store store(CreateAt(path)); }
  const std::string before = ReadFile(path);
  Options options;
  options.path = path;
  options.read_only = true;
  Store store(options);
  EXPECT_TRUE(store.List({}).empty());
  EXPECT_EQ(ReadFile(path), before);
}

}  // namespace
}  // namespace outbox::store
