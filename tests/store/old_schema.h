// Files as older versions of edge-outbox left them, made with those
// versions' own SQL (the migrations up to `version`), for migration tests.
#pragma once

#include <SQLiteCpp/Database.h>

#include <string>

#include "../../store/src/sql.h"

namespace outbox::store::testing {

// Creates `path` at outbox schema `version` (1 .. kSchemaVersion - 1), the
// way `outboxctl init` of that version did: WAL, incremental vacuum, the
// migrations, the version and a database id.
inline void MakeFileAtVersion(const std::string& path, int version) {
  SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  db.exec("PRAGMA auto_vacuum = INCREMENTAL");
  db.exec("PRAGMA journal_mode = WAL");
  const char* steps[] = {sql::kMigration1, sql::kMigration2, sql::kMigration3,
                         sql::kMigration4};
  for (int v = 0; v < version && v < 4; ++v) db.exec(steps[v]);
  // Schema 5 on an empty file: its payload move has nothing to move.
  if (version >= 5) {
    db.exec(sql::kMigration5Table);
    db.exec(sql::kMigration5Triggers);
  }
  if (version >= 6) db.exec(sql::kMigration6);
  if (version >= 7) db.exec(sql::kMigration7);
  db.exec("INSERT INTO outbox_meta VALUES('schema_version', " + std::to_string(version) +
          "), ('database_id', lower(hex(randomblob(16))))");
}

}  // namespace outbox::store::testing
