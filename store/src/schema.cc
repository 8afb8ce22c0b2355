// Schema version, identity and forward migrations.
//
// The file belongs to the application: we never touch PRAGMA user_version
// and keep our version in our own table, outbox_meta.
#include <SQLiteCpp/Transaction.h>

#include <array>
#include <string>

#include "internal.h"
#include "sql.h"

namespace outbox::store::internal {
namespace {

// Index i holds the step from version i to i + 1.
constexpr std::array<const char*, kSchemaVersion> kMigrations = {
    sql::kMigration1, sql::kMigration2, sql::kMigration3, sql::kMigration4};

int ParseVersion(const SQLite::Column& column) {
  if (column.isNull()) return 0;
  return column.getInt();
}

}  // namespace

SchemaState ReadSchema(SQLite::Database& db) {
  SchemaState state;
  SQLite::Statement has_meta(db, sql::kHasOutboxMeta);
  has_meta.executeStep();
  if (has_meta.getColumn(0).getInt() == 0) return state;
  SQLite::Statement get(db, sql::kGetMeta);
  get.bind(1, "schema_version");
  if (get.executeStep()) state.version = ParseVersion(get.getColumn(0));
  get.reset();
  get.bind(1, "database_id");
  if (get.executeStep()) state.database_id = get.getColumn(0).getString();
  return state;
}

SchemaState EnsureSchema(SQLite::Database& db, bool fresh_file) {
  if (fresh_file) {
    // Only a file we create gets incremental vacuum: switching an existing
    // file would need the full VACUUM we promise never to run.
    db.exec("PRAGMA auto_vacuum = INCREMENTAL");
  }
  db.exec("PRAGMA journal_mode = WAL");

  // IMMEDIATE: two processes running init at once serialise here, and the
  // second sees the first one's version.
  SQLite::Transaction txn(db, SQLite::TransactionBehavior::IMMEDIATE);
  SchemaState state = ReadSchema(db);
  if (state.version == 0) {
    SQLite::Statement has_outbox(db, sql::kHasOutboxTable);
    has_outbox.executeStep();
    if (has_outbox.getColumn(0).getInt() != 0) {
      throw NotAnOutboxError(
          "the database has a table named 'outbox' that edge-outbox did not create; "
          "refusing to touch it",
          0);
    }
  }
  if (state.version > kSchemaVersion) {
    throw NotAnOutboxError("outbox schema version " + std::to_string(state.version) +
                               " is newer than this build supports (" +
                               std::to_string(kSchemaVersion) + "); upgrade edge-outbox",
                           0);
  }
  for (int v = state.version; v < kSchemaVersion; ++v) {
    db.exec(kMigrations[static_cast<std::size_t>(v)]);
  }
  if (state.version != kSchemaVersion) {
    SQLite::Statement put(db, sql::kPutMeta);
    put.bind(1, "schema_version");
    put.bind(2, kSchemaVersion);
    put.exec();
    // Written once: the message ids of every row depend on it.
    db.exec(sql::kInitDatabaseId);
  }
  txn.commit();
  return ReadSchema(db);
}

}  // namespace outbox::store::internal
