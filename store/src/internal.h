// Helpers shared by the store's translation units. Not installed.
#pragma once

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Exception.h>
#include <SQLiteCpp/Statement.h>

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "c_api.h"
#include "outbox/store.h"

namespace outbox::store::internal {

// Runs `body`, turning SQLiteCpp's exceptions into the store's own types
// (keeping SQLite's extended code) and prefixing `context` to the message.
template <typename Body>
auto Wrap(const char* context, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const SQLite::Exception& e) {
    c_api::ThrowCode(context, e.getExtendedErrorCode(), e.what());
  }
}

// Resets a cached statement on scope exit so that it never holds a read
// transaction open or blocks COMMIT.
class StatementUse {
 public:
  explicit StatementUse(SQLite::Statement& statement) : statement_(statement) {}
  ~StatementUse() {
    try {
      statement_.reset();
      statement_.clearBindings();
    } catch (...) {  // reset() reports the step's error again; already handled
    }
  }
  StatementUse(const StatementUse&) = delete;
  StatementUse& operator=(const StatementUse&) = delete;
  SQLite::Statement* operator->() { return &statement_; }
  SQLite::Statement& operator*() { return statement_; }

 private:
  SQLite::Statement& statement_;
};

// A row from a statement that selects OUTBOX_ROW_COLUMNS (store.cc).
Row ReadRowColumns(SQLite::Statement& q);

// Every connection the agent and outboxctl open: SQLITE_DBCONFIG_DEFENSIVE
// on, fts3_tokenizer's pointer form and load_extension off. Defined in
// hook_sql.cc; throws StoreError.
void HardenConnection(sqlite3* db);

// Schema: checks, creates or migrates. Defined in schema.cc.
struct SchemaState {
  int version = 0;          // 0: no outbox schema
  std::string database_id;  // empty if none
};
SchemaState ReadSchema(SQLite::Database& db);
// Told (rows done, rows in all) while a migration moves many rows.
using MigrationProgress = std::function<void(std::int64_t done, std::int64_t total)>;
// Creates or migrates to kSchemaVersion inside one BEGIN IMMEDIATE.
// Throws NotAnOutboxError for a newer schema.
SchemaState EnsureSchema(SQLite::Database& db, bool fresh_file,
                         const MigrationProgress& progress = {});
// Copies the file, as it is now, to `path`.bak-schema`version` (through a
// temporary name, so that a kill leaves no half copy under that name).
// Outside any transaction. Throws StoreError.
void BackUpBeforeMigration(SQLite::Database& db, const std::string& path, int version);
// The mode of a file the store makes for the database at `path` (a new
// database, a backup): an existing database's mode without any access for
// others; for a new one 0660 in a setgid directory (the shared-group layout)
// and 0640 elsewhere, whatever the umask.
mode_t NewFileMode(const std::string& path);

}  // namespace outbox::store::internal
