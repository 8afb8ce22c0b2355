// Helpers for the code that works on an application's bare sqlite3*
// (Producer, Inbox), where SQLiteCpp's classes are not available.
#pragma once

#include <sqlite3.h>

#include <memory>
#include <string>
#include <string_view>

#include "outbox/store.h"

namespace outbox::store::c_api {

struct StatementDeleter {
  void operator()(sqlite3_stmt* statement) const { sqlite3_finalize(statement); }
};
using StatementPtr = std::unique_ptr<sqlite3_stmt, StatementDeleter>;

// Throws the store's error for the connection's last failure.
[[noreturn]] inline void ThrowSqlite(sqlite3* db, const std::string& context) {
  const int code = sqlite3_extended_errcode(db);
  if ((code & 0xff) == SQLITE_NOTADB) {
    throw NotAnOutboxError(context + ": not an SQLite database", code);
  }
  throw StoreError(context + ": " + sqlite3_errmsg(db), code);
}

// Prepares a statement kept for the connection's lifetime.
inline StatementPtr Prepare(sqlite3* db, const char* text, const std::string& context) {
  sqlite3_stmt* statement = nullptr;
  if (sqlite3_prepare_v3(db, text, -1, SQLITE_PREPARE_PERSISTENT, &statement, nullptr) !=
      SQLITE_OK) {
    ThrowSqlite(db, context);
  }
  return StatementPtr(statement);
}

// Resets the statement on every path so that it holds no lock and no
// bindings (payloads may be large) once a call returns.
class Use {
 public:
  explicit Use(sqlite3_stmt* statement) : statement_(statement) {}
  ~Use() {
    sqlite3_reset(statement_);
    sqlite3_clear_bindings(statement_);
  }
  Use(const Use&) = delete;
  Use& operator=(const Use&) = delete;

 private:
  sqlite3_stmt* statement_;
};

inline void BindText(sqlite3_stmt* q, int index, std::string_view text) {
  sqlite3_bind_text64(q, index, text.data(), text.size(), SQLITE_STATIC, SQLITE_UTF8);
}

}  // namespace outbox::store::c_api
