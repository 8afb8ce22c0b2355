// Operator's state shared by the files that implement it (operator.cc,
// console.cc): the statement cache and the transaction helper. Not installed.
#pragma once

#include <sqlite3.h>

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "internal.h"

namespace outbox::store {

namespace internal {

// Operator::Impl's body, named here so that helpers outside the class can
// take it.
struct OperatorState {
  Store& store;
  std::unordered_map<const char*, std::unique_ptr<SQLite::Statement>> statements;

  SQLite::Statement& Prepare(const char* text) {
    auto& slot = statements[text];
    if (!slot) slot = std::make_unique<SQLite::Statement>(store.connection(), text);
    return *slot;
  }

  // One write transaction around `body`, or the caller's if one is open.
  template <typename Body>
  auto Atomically(Body&& body) -> decltype(body()) {
    sqlite3* db = store.connection().getHandle();
    if (sqlite3_get_autocommit(db) == 0) return body();
    c_api::RawTransaction transaction(db, "");
    auto result = body();
    transaction.Commit();
    return result;
  }

  void Audit(const Actor& actor, std::string_view action, std::int64_t rows,
             std::optional<std::int64_t> row_id, std::string_view detail, std::int64_t now);
};

}  // namespace internal

struct Operator::Impl : internal::OperatorState {};

}  // namespace outbox::store
