// Schema version, identity and forward migrations.
//
// The file belongs to the application: we never touch PRAGMA user_version
// and keep our version in our own table, outbox_meta.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

#include "internal.h"
#include "util/safe_file.h"
#include "sql.h"

namespace outbox::store::internal {
namespace {

// Rows moved per statement by MovePayloads: one progress line each.
constexpr std::int64_t kMoveBatch = 20'000;
// Below this many rows a migration is quick and says nothing.
constexpr std::int64_t kProgressRows = 100'000;

// Moves every payload and headers value into outbox_payload, in id ranges
// so that a large file can report progress, all inside the caller's
// transaction (a kill undoes the lot; the next open starts again).
void MovePayloads(SQLite::Database& db, const MigrationProgress& progress) {
  std::int64_t first = 0;
  std::int64_t last = 0;
  std::int64_t rows = 0;
  {
    SQLite::Statement q(db, sql::kOutboxIdRange);
    q.executeStep();
    // Ids may have gaps, or be negative (another application's): walk the range.
    first = q.getColumn(0).getInt64() - 1;
    last = q.getColumn(1).getInt64();
    rows = q.getColumn(2).getInt64();
  }
  const bool report = progress && rows >= kProgressRows;
  SQLite::Statement copy(db, sql::kMovePayloadsCopy);
  SQLite::Statement clear(db, sql::kMovePayloadsClear);
  for (std::int64_t from = first; from < last;) {
    const std::int64_t to = from > last - kMoveBatch ? last : from + kMoveBatch;
    for (SQLite::Statement* q : {&copy, &clear}) {
      q->bind(1, from);
      q->bind(2, to);
      q->exec();
      q->reset();
    }
    from = to;
    if (report) progress(from - first, last - first);
  }
}

using Step = void (*)(SQLite::Database&, const MigrationProgress&);

// Index i holds the step from version i to i + 1.
constexpr std::array<Step, kSchemaVersion> kMigrations = {
    [](SQLite::Database& db, const MigrationProgress&) { db.exec(sql::kMigration1); },
    [](SQLite::Database& db, const MigrationProgress&) { db.exec(sql::kMigration2); },
    [](SQLite::Database& db, const MigrationProgress&) { db.exec(sql::kMigration3); },
    [](SQLite::Database& db, const MigrationProgress&) { db.exec(sql::kMigration4); },
    [](SQLite::Database& db, const MigrationProgress& progress) {
      db.exec(sql::kMigration5Table);
      MovePayloads(db, progress);
      db.exec(sql::kMigration5Triggers);
    },
    [](SQLite::Database& db, const MigrationProgress&) { db.exec(sql::kMigration6); },
    [](SQLite::Database& db, const MigrationProgress&) { db.exec(sql::kMigration7); },
    [](SQLite::Database& db, const MigrationProgress&) { db.exec(sql::kMigration8); },
};

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

SchemaState EnsureSchema(SQLite::Database& db, bool fresh_file,
                         const MigrationProgress& progress) {
  if (fresh_file) {
    // Only a file we create gets incremental vacuum: switching an existing
    // file would need the full VACUUM we promise never to run.
    db.exec("PRAGMA auto_vacuum = INCREMENTAL");
  }
  db.exec("PRAGMA journal_mode = WAL");

  // IMMEDIATE: two processes running init at once serialise here, and the
  // second sees the first one's version.
  c_api::RawTransaction txn(db.getHandle(), "open database");
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
    kMigrations[static_cast<std::size_t>(v)](db, progress);
  }
  if (state.version != kSchemaVersion) {
    SQLite::Statement put(db, sql::kPutMeta);
    put.bind(1, "schema_version");
    put.bind(2, kSchemaVersion);
    put.exec();
    // Written once: the message ids of every row depend on it.
    db.exec(sql::kInitDatabaseId);
  }
  txn.Commit();
  return ReadSchema(db);
}

void BackUpBeforeMigration(SQLite::Database& db, const std::string& path, int version) {
  const std::string target = path + ".bak-schema" + std::to_string(version);
  const auto fail = [&](const std::string& what) {
    throw StoreError(path + ": backup before the schema migration: " + what +
                         " (free space, or turn the backup off with Options::backup_before_migration)",
                     0);
  };
  // Per process: two agents opening the file at once must not write one copy.
  const std::string temporary = target + ".tmp-" + std::to_string(::getpid());
  const std::string name = temporary.substr(temporary.rfind('/') + 1);
  try {
    // Made by us, without following a link, with the database's group
    // access and none for others whatever the umask; SQLite then fills the
    // empty file.
    const util::Directory dir = util::Directory::Of(temporary);
    dir.Remove(name);
    dir.Create(name, NewFileMode(path));
    {
      // A consistent snapshot, the -wal file's commits included.
      SQLite::Statement q(db, "VACUUM INTO ?");
      q.bind(1, temporary);
      q.exec();
    }
    const util::UniqueFd fd = dir.OpenRead(name);
    if (::fsync(fd.get()) != 0) fail("cannot sync " + temporary + ": " + std::strerror(errno));
    dir.Rename(name, target.substr(target.rfind('/') + 1));
    dir.Sync();  // the rename is durable with its directory
  } catch (const std::runtime_error& e) {
    if (dynamic_cast<const StoreError*>(&e) != nullptr) throw;
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    fail(e.what());
  }
}

mode_t NewFileMode(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return static_cast<mode_t>(st.st_mode & 0660);
  // A new database: group-writable in a setgid directory (the shared-group
  // layout of docs/operations.md), else readable by its group only.
  const std::string dir = path.rfind('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  if (::stat(dir.empty() ? "/" : dir.c_str(), &st) == 0 && (st.st_mode & S_ISGID) != 0) {
    return 0660;
  }
  return 0640;
}

}  // namespace outbox::store::internal
