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

// The one translation of an SQLite failure into the store's errors; SQLiteCpp's
// exceptions (internal::Wrap) come through here too.
[[noreturn]] inline void ThrowCode(const std::string& context, int code,
                                   const std::string& message) {
  if ((code & 0xff) == SQLITE_NOTADB) {
    throw NotAnOutboxError(context + ": not an SQLite database", code);
  }
  throw StoreError(context + ": " + message, code);
}

// Throws the store's error for the connection's last failure.
[[noreturn]] inline void ThrowSqlite(sqlite3* db, const std::string& context) {
  ThrowCode(context, sqlite3_extended_errcode(db), sqlite3_errmsg(db));
}

// The store's one transaction guard: rolled back on scope exit unless
// committed. It works on a bare sqlite3* because the producer and the inbox
// run on the application's connection, which SQLiteCpp does not wrap; the
// store's own connections pass getHandle(), so every transaction the store
// opens begins, commits and reports failures the same way.
class RawTransaction {
 public:
  // IMMEDIATE takes the write lock at BEGIN (every write transaction: a
  // writer waits there, under the busy timeout, instead of failing at its
  // first write when another connection wrote meanwhile); DEFERRED is for a
  // consistent read of several statements.
  enum class Begin { kImmediate, kDeferred };

  // `context` prefixes error messages ("enqueue" → "enqueue: begin: ...").
  RawTransaction(sqlite3* db, const std::string& context, Begin begin = Begin::kImmediate)
      : db_(db), context_(context) {
    const char* text = begin == Begin::kImmediate ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED";
    if (sqlite3_exec(db_, text, nullptr, nullptr, nullptr) != SQLITE_OK) {
      ThrowSqlite(db_, Context("begin"));
    }
    open_ = true;
  }
  ~RawTransaction() { Rollback(); }
  RawTransaction(const RawTransaction&) = delete;
  RawTransaction& operator=(const RawTransaction&) = delete;

  // On failure rolls back (a failed COMMIT may leave the transaction open)
  // and throws.
  void Commit() {
    open_ = false;
    if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
      const int code = sqlite3_extended_errcode(db_);
      const std::string message = sqlite3_errmsg(db_);
      if (sqlite3_get_autocommit(db_) == 0) {
        sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      }
      ThrowCode(Context("commit"), code, message);
    }
  }
  void Rollback() noexcept {
    if (!open_) return;
    open_ = false;
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  bool open() const { return open_; }

 private:
  std::string Context(const char* step) const {
    return context_.empty() ? step : context_ + ": " + step;
  }

  sqlite3* db_;
  std::string context_;
  bool open_ = false;
};

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
