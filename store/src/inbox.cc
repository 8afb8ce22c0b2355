// The receiving side: Idempotency-Keys recorded under a unique key, inside
// the receiver's own transaction (docs/receiving.md).
//
// Uses the C API, like the Producer, because the caller may hand us a bare
// sqlite3*.
#include <SQLiteCpp/Database.h>
#include <sqlite3.h>

#include <string>

#include "outbox/store.h"
#include "c_api.h"
#include "sql.h"

namespace outbox::store {
namespace {

using c_api::Prepare;
using c_api::StatementPtr;
using c_api::ThrowSqlite;
using c_api::Use;

bool HasInboxTable(sqlite3* db) {
  StatementPtr query = Prepare(db, sql::kHasInboxTable, "inbox: read schema");
  if (sqlite3_step(query.get()) != SQLITE_ROW) ThrowSqlite(db, "inbox: read schema");
  return sqlite3_column_int(query.get(), 0) != 0;
}

// Creates the table in a write transaction of its own. IMMEDIATE: two
// receivers starting at once serialise here; IF NOT EXISTS makes the second
// one a no-op.
void InstallInbox(sqlite3* db) {
  c_api::RawTransaction transaction(db, "inbox");
  if (sqlite3_exec(db, sql::kInstallInbox, nullptr, nullptr, nullptr) != SQLITE_OK) {
    ThrowSqlite(db, "inbox: create table outbox_inbox");
  }
  transaction.Commit();
}

bool HasSourceColumn(sqlite3* db) {
  StatementPtr query = Prepare(db, sql::kInboxHasSource, "inbox: read schema");
  if (sqlite3_step(query.get()) != SQLITE_ROW) ThrowSqlite(db, "inbox: read schema");
  return sqlite3_column_int(query.get(), 0) != 0;
}

// An inbox made by an older version: add `source`. Two receivers doing this
// at once serialise on IMMEDIATE; the second finds the column and stops.
void AddSourceColumn(sqlite3* db) {
  c_api::RawTransaction transaction(db, "inbox");
  if (!HasSourceColumn(db) &&
      sqlite3_exec(db, sql::kInboxAddSource, nullptr, nullptr, nullptr) != SQLITE_OK) {
    ThrowSqlite(db, "inbox: add column source");
  }
  transaction.Commit();
}

}  // namespace

struct Inbox::Impl {
  sqlite3* db = nullptr;
  InboxOptions options;
  StatementPtr record;
  StatementPtr purge;
  StatementPtr export_keys;
};

Inbox::Inbox(sqlite3* connection, const InboxOptions& options) : impl_(std::make_unique<Impl>()) {
  if (connection == nullptr) throw std::invalid_argument("connection: must not be null");
  if (options.max_key_bytes == 0) {
    throw std::invalid_argument("max_key_bytes: expected a positive integer");
  }
  // Creating the table inside the caller's transaction would tie it to that
  // transaction's fate (and a rollback would leave our statements dangling).
  if (sqlite3_get_autocommit(connection) == 0) {
    throw std::invalid_argument(
        "connection: construct the Inbox outside a transaction (it may create its table)");
  }
  impl_->db = connection;
  impl_->options = options;
  if (!HasInboxTable(connection)) InstallInbox(connection);
  if (!HasSourceColumn(connection)) AddSourceColumn(connection);
  impl_->record = Prepare(connection, sql::kInboxRecord, "inbox: prepare");
  impl_->purge = Prepare(connection, sql::kInboxPurge, "inbox: prepare");
  impl_->export_keys = Prepare(connection, sql::kInboxExport, "inbox: prepare");
}

Inbox::Inbox(SQLite::Database& connection, const InboxOptions& options)
    : Inbox(connection.getHandle(), options) {}

Inbox::~Inbox() = default;

sqlite3* Inbox::connection() const { return impl_->db; }

Receipt Inbox::Record(std::string_view key, std::int64_t now_ms) {
  return Record(key, now_ms, std::nullopt);
}

Receipt Inbox::Record(std::string_view key, std::int64_t now_ms,
                      std::optional<std::string_view> source) {
  if (key.empty()) throw std::invalid_argument("idempotency_key: must not be empty");
  if (key.size() > impl_->options.max_key_bytes) {
    throw std::invalid_argument("idempotency_key: " + std::to_string(key.size()) +
                                " bytes is longer than " +
                                std::to_string(impl_->options.max_key_bytes));
  }
  sqlite3* db = impl_->db;
  // Outside a transaction the key would commit on its own, before the
  // message is applied: a crash in between would lose the message for good.
  if (sqlite3_get_autocommit(db) != 0) {
    throw std::invalid_argument(
        "inbox: no open transaction on this connection; begin one so the key commits "
        "with the message's effects");
  }
  sqlite3_stmt* q = impl_->record.get();
  Use use(q);
  sqlite3_bind_text64(q, 1, key.data(), key.size(), SQLITE_STATIC, SQLITE_UTF8);
  sqlite3_bind_int64(q, 2, now_ms);
  if (source) {
    sqlite3_bind_text64(q, 3, source->data(), source->size(), SQLITE_STATIC, SQLITE_UTF8);
  } else {
    sqlite3_bind_null(q, 3);
  }
  if (sqlite3_step(q) != SQLITE_DONE) ThrowSqlite(db, "inbox: record key");
  // DO NOTHING on a conflict: no row changed, and no error that could have
  // touched the caller's transaction.
  return sqlite3_changes64(db) == 1 ? Receipt::kNew : Receipt::kDuplicate;
}

int Inbox::Purge(std::int64_t cutoff_ms, int batch) {
  if (batch < 1) throw std::invalid_argument("batch: expected a positive integer");
  sqlite3_stmt* q = impl_->purge.get();
  Use use(q);
  sqlite3_bind_int64(q, 1, cutoff_ms);
  sqlite3_bind_int(q, 2, batch);
  if (sqlite3_step(q) != SQLITE_DONE) ThrowSqlite(impl_->db, "inbox: purge");
  return static_cast<int>(sqlite3_changes64(impl_->db));
}

std::int64_t Inbox::ExportKeys(std::optional<std::string_view> source, std::int64_t since_ms,
                              std::int64_t until_ms,
                              const std::function<void(std::string_view key)>& each) {
  sqlite3_stmt* q = impl_->export_keys.get();
  Use use(q);
  if (source) {
    sqlite3_bind_text64(q, 1, source->data(), source->size(), SQLITE_STATIC, SQLITE_UTF8);
  } else {
    sqlite3_bind_null(q, 1);
  }
  sqlite3_bind_int64(q, 2, since_ms);
  sqlite3_bind_int64(q, 3, until_ms);
  std::int64_t count = 0;
  int step = SQLITE_ROW;
  while ((step = sqlite3_step(q)) == SQLITE_ROW) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(q, 0));
    each(std::string_view(text != nullptr ? text : "",
                          static_cast<std::size_t>(sqlite3_column_bytes(q, 0))));
    ++count;
  }
  if (step != SQLITE_DONE) ThrowSqlite(impl_->db, "inbox: export keys");
  return count;
}

}  // namespace outbox::store
