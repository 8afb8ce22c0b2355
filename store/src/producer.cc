// Enqueue on the application's own connection, inside its transaction.
//
// Uses the C API because the caller may hand us a bare sqlite3*. Field checks
// that need the database (headers JSON, limits) live in the BEFORE INSERT
// trigger so that plain-SQL writers get them too; here their RAISE messages
// become typed errors. From schema 5 on, the payload and headers go into
// outbox_payload, which has no trigger: the Producer checks them itself in
// the statements it runs (sql::kCheckHeaders, sql::kInsertState).
#include <SQLiteCpp/Database.h>
#include <sqlite3.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "outbox/store.h"
#include "c_api.h"
#include "sql.h"
#include "util/utf8.h"

namespace outbox::store {
namespace {

using c_api::BindText;
using c_api::StatementPtr;
using c_api::ThrowSqlite;
using c_api::Use;

StatementPtr Prepare(sqlite3* db, const char* text) {
  try {
    return c_api::Prepare(db, text, "enqueue: prepare");
  } catch (const NotAnOutboxError&) {
    throw;
  } catch (const StoreError& e) {
    // A missing table or column means the schema was never installed (or is
    // older than this build): say so rather than "prepare failed".
    const std::string message = e.what();
    if (message.find("no such table") != std::string::npos ||
        message.find("no such column") != std::string::npos) {
      throw NotAnOutboxError(
          "enqueue: the database has no (current) outbox schema; run `outboxctl init`: " +
              message,
          e.sqlite_code());
    }
    throw;
  }
}

void BindOptional(sqlite3_stmt* q, int index, const std::optional<std::int64_t>& value) {
  if (value) {
    sqlite3_bind_int64(q, index, *value);
  } else {
    sqlite3_bind_null(q, index);
  }
}

void BindOptionalText(sqlite3_stmt* q, int index, const std::optional<std::string>& value) {
  if (value) {
    BindText(q, index, *value);
  } else {
    sqlite3_bind_null(q, index);
  }
}

// Turns a trigger's "outbox: <field>: <reason>" into the error a caller of
// the API expects.
[[noreturn]] void ThrowInsertError(const NewMessage& message, int code,
                                   const std::string& text) {
  constexpr std::string_view kPrefix = "outbox: ";
  if (text.rfind(kPrefix, 0) == 0) {
    const std::string reason = text.substr(kPrefix.size());
    if (reason.rfind("capacity: ", 0) == 0) {
      throw CapacityError("enqueue refused: " + reason.substr(10), code);
    }
    if (reason.rfind("payload: ", 0) == 0) {
      throw std::invalid_argument("payload: " + std::to_string(message.payload.size()) +
                                  " bytes is larger than limits.max_payload_bytes");
    }
    throw std::invalid_argument(reason);
  }
  if (code == SQLITE_CONSTRAINT_UNIQUE || code == SQLITE_CONSTRAINT_PRIMARYKEY) {
    throw DuplicateError("enqueue: a message with topic '" + message.topic + "' and key '" +
                             message.key + "' already exists",
                         code);
  }
  c_api::ThrowCode("enqueue", code, text);
}

[[noreturn]] void ThrowInsertError(sqlite3* db, const NewMessage& message) {
  ThrowInsertError(message, sqlite3_extended_errcode(db), sqlite3_errmsg(db));
}

constexpr char kBadHeaders[] =
    "outbox: headers: must be a JSON object of string values without CR or LF";


// The \uXXXX escape at `at` (a backslash), or -1 if it is none.
long EscapedUnit(std::string_view text, std::size_t at) {
  if (at + 6 > text.size() || text[at + 1] != 'u') return -1;
  long unit = 0;
  for (std::size_t i = at + 2; i < at + 6; ++i) {
    const char c = text[i];
    const int digit = (c >= '0' && c <= '9')   ? c - '0'
                      : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                      : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                               : -1;
    if (digit < 0) return -1;
    unit = unit * 16 + digit;
  }
  return unit;
}

// JSON text whose strings are all Unicode: valid UTF-8, and no \u escape of
// a lone surrogate. The trigger's json_valid() checks neither, but the
// agent's parser refuses both, so such headers would be accepted here and
// dead-lettered at the first send.
bool IsUnicodeJsonText(std::string_view text) {
  for (std::size_t at = 0; at < text.size();) {
    if (text[at] != '\\') {
      const std::size_t length = util::Utf8SequenceAt(text, at);
      if (length == 0) return false;
      at += length;
      continue;
    }
    const long unit = EscapedUnit(text, at);
    if (unit >= 0xD800 && unit <= 0xDBFF) {
      const long next = EscapedUnit(text, at + 6);
      if (next < 0xDC00 || next > 0xDFFF) return false;
      at += 12;
    } else if (unit >= 0xDC00 && unit <= 0xDFFF) {
      return false;
    } else {
      at += 2;  // the escaped character is checked on the next round
    }
  }
  return true;
}

// RFC 9110 token characters, as the insert trigger checks them.
bool IsSchemaVersion(std::string_view text) {
  if (text.empty() || text.size() > kMaxSchemaVersionBytes) return false;
  constexpr std::string_view kSymbols = "!#$%&'*+-.^_`|~";
  for (const char c : text) {
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!alnum && kSymbols.find(c) == std::string_view::npos) return false;
  }
  return true;
}

// headers_json with the message's trace-context fields added (by SQLite's
// own JSON functions, so the result is what the insert trigger reads). A
// header of the same name in any case must already hold the same value.
std::string MergeTraceContext(sqlite3* db, const NewMessage& message) {
  std::string headers = message.headers_json.empty() ? "{}" : message.headers_json;
  const std::pair<const char*, const std::optional<std::string>*> fields[] = {
      {"traceparent", &message.traceparent}, {"tracestate", &message.tracestate}};
  for (const auto& [name, value] : fields) {
    if (!value->has_value()) continue;
    if ((*value)->empty()) throw std::invalid_argument(std::string(name) + ": must not be empty");
    StatementPtr q = Prepare(db,
                             "SELECT json_valid(?1) AND json_type(?1) = 'object',"
                             " (SELECT value FROM json_each(?1) WHERE lower(key) = ?2 LIMIT 1),"
                             " CASE WHEN json_valid(?1) THEN json_set(?1, '$.' || ?2, ?3) END");
    BindText(q.get(), 1, headers);
    BindText(q.get(), 2, name);
    BindText(q.get(), 3, **value);
    if (sqlite3_step(q.get()) != SQLITE_ROW) ThrowSqlite(db, "enqueue: add trace context");
    if (sqlite3_column_int(q.get(), 0) == 0) {
      throw std::invalid_argument(std::string("headers: expected a JSON object to add ") + name +
                                  " to");
    }
    if (sqlite3_column_type(q.get(), 1) != SQLITE_NULL) {
      const char* existing = reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 1));
      if (existing == nullptr || **value != existing) {
        throw std::invalid_argument(std::string(name) + ": headers_json already has a different " +
                                    name);
      }
      continue;  // the same value already there
    }
    headers = reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 2));
  }
  return headers;
}

}  // namespace

void ValidateMessage(const NewMessage& message) {
  if (message.topic.empty()) throw std::invalid_argument("topic: must not be empty");
  if (message.topic.size() > kMaxTopicBytes) {
    throw std::invalid_argument("topic: " + std::to_string(message.topic.size()) +
                                " bytes is longer than " + std::to_string(kMaxTopicBytes));
  }
  if (message.key.empty()) throw std::invalid_argument("msg_key: must not be empty");
  if (message.key.size() > kMaxKeyBytes) {
    throw std::invalid_argument("msg_key: " + std::to_string(message.key.size()) +
                                " bytes is longer than " + std::to_string(kMaxKeyBytes));
  }
  // SQLite's JSON functions stop at a NUL byte, so the trigger would judge
  // only the text before it; valid JSON never holds one (found by fuzzing).
  if (message.headers_json.size() > kMaxHeadersBytes) {
    throw std::invalid_argument("headers: " + std::to_string(message.headers_json.size()) +
                                " bytes is longer than " + std::to_string(kMaxHeadersBytes));
  }
  if (message.headers_json.find('\0') != std::string::npos) {
    throw std::invalid_argument("headers: holds a NUL byte");
  }
  if (!IsUnicodeJsonText(message.headers_json)) {
    throw std::invalid_argument(
        "headers: not valid UTF-8 (or a \\u escape of a lone surrogate)");
  }
  if (message.retry.max_attempts && *message.retry.max_attempts < 1) {
    throw std::invalid_argument("max_attempts: expected a positive integer");
  }
  if (message.retry.first_interval_ms && *message.retry.first_interval_ms <= 0) {
    throw std::invalid_argument("first_interval_ms: expected a positive integer");
  }
  if (message.schema_version && !IsSchemaVersion(*message.schema_version)) {
    throw std::invalid_argument("schema_version: must be 1 to " +
                                std::to_string(kMaxSchemaVersionBytes) +
                                " token characters (letters, digits, !#$%&'*+-.^_`|~)");
  }
  if (message.ordering_key &&
      (message.ordering_key->empty() || message.ordering_key->size() > kMaxKeyBytes)) {
    throw std::invalid_argument("ordering_key: must be a non-empty string of at most " +
                                std::to_string(kMaxKeyBytes) + " bytes");
  }
}

struct Producer::Impl {
  sqlite3* db = nullptr;
  // With outbox_payload (schema 5 on): insert_state, insert_payload and
  // undo_state. Before it: insert, the payload inline.
  StatementPtr insert;
  StatementPtr insert_state;
  StatementPtr insert_payload;
  StatementPtr undo_state;
  StatementPtr check_headers;
  StatementPtr find;

  // Every parameter of kInsert and kInsertState but the payload's (?3, ?4).
  static void BindState(sqlite3_stmt* q, const NewMessage& message) {
    BindText(q, 1, message.topic);
    BindText(q, 2, message.key);
    BindOptional(q, 5, message.retry.max_attempts);
    if (message.retry.backoff) {
      BindText(q, 6, BackoffName(*message.retry.backoff));
    } else {
      sqlite3_bind_null(q, 6);
    }
    BindOptional(q, 7, message.retry.first_interval_ms);
    BindOptionalText(q, 8, message.schema_version);
    BindOptionalText(q, 9, message.ordering_key);
    BindOptional(q, 10, message.deliver_at);
    BindOptional(q, 11, message.expires_at);
  }

  static void BindPayload(sqlite3_stmt* q, int first, const NewMessage& message) {
    sqlite3_bind_blob64(q, first, message.payload.data(), message.payload.size(),
                        SQLITE_STATIC);
    if (message.headers_json.empty()) {
      sqlite3_bind_null(q, first + 1);
    } else {
      BindText(q, first + 1, message.headers_json);
    }
  }

  // The checks outbox_check_insert makes of plain SQL's headers.
  void CheckHeaders(const NewMessage& message) {
    if (message.headers_json.empty()) return;
    sqlite3_stmt* q = check_headers.get();
    Use use(q);
    BindText(q, 1, message.headers_json);
    const int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) ThrowInsertError(message, SQLITE_CONSTRAINT_TRIGGER, kBadHeaders);
    if (rc != SQLITE_DONE) ThrowSqlite(db, "enqueue: check headers");
  }

  // Two rows, one payload write: the state row in outbox (which also has
  // the trigger check the payload's size, before capacity), then the
  // payload under its id. If the second insert fails, the first is deleted
  // again so that the caller's transaction is as it was.
  EnqueueResult InsertSplit(const NewMessage& message) {
    CheckHeaders(message);
    std::int64_t id = 0;
    {
      sqlite3_stmt* q = insert_state.get();
      Use use(q);
      BindState(q, message);
      sqlite3_bind_int64(q, 12, static_cast<sqlite3_int64>(message.payload.size()));
      if (sqlite3_step(q) != SQLITE_DONE) ThrowInsertError(db, message);
      id = sqlite3_last_insert_rowid(db);
    }
    sqlite3_stmt* q = insert_payload.get();
    Use use(q);
    sqlite3_bind_int64(q, 1, id);
    BindPayload(q, 2, message);
    if (sqlite3_step(q) == SQLITE_DONE) return {id, true};
    const int code = sqlite3_extended_errcode(db);
    const std::string text = sqlite3_errmsg(db);
    sqlite3_reset(q);
    sqlite3_stmt* undo = undo_state.get();
    Use use_undo(undo);
    sqlite3_bind_int64(undo, 1, id);
    if (sqlite3_step(undo) != SQLITE_DONE) {
      ThrowSqlite(db, "enqueue: undo the state row after the payload was refused (" + text +
                          "); roll the transaction back");
    }
    ThrowInsertError(message, code, text);
  }

  EnqueueResult Insert(const NewMessage& message, bool idempotent) {
    if (idempotent) {
      Use use(find.get());
      BindText(find.get(), 1, message.topic);
      BindText(find.get(), 2, message.key);
      const int rc = sqlite3_step(find.get());
      if (rc == SQLITE_ROW) return {sqlite3_column_int64(find.get(), 0), false};
      if (rc != SQLITE_DONE) ThrowSqlite(db, "enqueue: look up key");
    }
    if (insert_state) return InsertSplit(message);
    sqlite3_stmt* q = insert.get();
    Use use(q);
    BindState(q, message);
    BindPayload(q, 3, message);
    if (sqlite3_step(q) != SQLITE_DONE) ThrowInsertError(db, message);
    return {sqlite3_last_insert_rowid(db), true};
  }
};

Producer::Producer(sqlite3* connection) : impl_(std::make_unique<Impl>()) {
  if (connection == nullptr) throw std::invalid_argument("connection: must not be null");
  impl_->db = connection;
  impl_->find = Prepare(connection, sql::kFindByKey);
  // A file the agent has not migrated yet has no outbox_payload: write the
  // old way, and the migration moves the payload later.
  StatementPtr has_payload_table = Prepare(connection, sql::kHasPayloadTable);
  if (sqlite3_step(has_payload_table.get()) == SQLITE_ROW &&
      sqlite3_column_int(has_payload_table.get(), 0) != 0) {
    impl_->insert_state = Prepare(connection, sql::kInsertState);
    impl_->insert_payload = Prepare(connection, sql::kInsertPayload);
    impl_->undo_state = Prepare(connection, sql::kDeleteInserted);
    impl_->check_headers = Prepare(connection, sql::kCheckHeaders);
  } else {
    impl_->insert = Prepare(connection, sql::kInsert);
  }
  // A schema newer than this build may have changed what a row means.
  StatementPtr version = Prepare(connection, sql::kGetMeta);
  BindText(version.get(), 1, "schema_version");
  if (sqlite3_step(version.get()) == SQLITE_ROW &&
      sqlite3_column_int(version.get(), 0) > kSchemaVersion) {
    throw NotAnOutboxError("enqueue: the outbox schema is newer than this build supports", 0);
  }
}

Producer::Producer(SQLite::Database& connection) : Producer(connection.getHandle()) {}

Producer::~Producer() = default;

sqlite3* Producer::connection() const { return impl_->db; }

EnqueueResult Producer::Enqueue(const NewMessage& given, const EnqueueOptions& options) {
  ValidateMessage(given);
  std::optional<NewMessage> traced;
  if (given.traceparent || given.tracestate) {
    traced.emplace(given);
    traced->headers_json = MergeTraceContext(impl_->db, given);
  }
  const NewMessage& message = traced ? *traced : given;
  sqlite3* db = impl_->db;
  if (sqlite3_get_autocommit(db) == 0) return impl_->Insert(message, options.idempotent);
  if (!options.standalone) {
    throw std::invalid_argument(
        "enqueue: no open transaction on this connection; begin one so the message commits "
        "with your data, or ask for a standalone enqueue");
  }
  c_api::RawTransaction transaction(db, "enqueue");
  EnqueueResult result = impl_->Insert(message, options.idempotent);
  transaction.Commit();
  return result;
}

ProducerTransaction::ProducerTransaction(Producer& producer)
    : producer_(producer),
      transaction_(std::make_unique<c_api::RawTransaction>(producer.connection(), "")) {}

ProducerTransaction::~ProducerTransaction() = default;

EnqueueResult ProducerTransaction::Enqueue(const NewMessage& message,
                                           const EnqueueOptions& options) {
  if (!open()) throw std::logic_error("Enqueue: the transaction is finished");
  EnqueueResult result = producer_.Enqueue(message, options);
  if (result.inserted) inserted_.push_back({result.id, message.topic});
  return result;
}

std::vector<EnqueuedRow> ProducerTransaction::Commit() {
  if (!open()) throw std::logic_error("Commit: the transaction is finished");
  std::vector<EnqueuedRow> inserted = std::move(inserted_);
  inserted_.clear();
  transaction_->Commit();
  return inserted;
}

void ProducerTransaction::Rollback() {
  inserted_.clear();
  transaction_->Rollback();
}

bool ProducerTransaction::open() const { return transaction_->open(); }

}  // namespace outbox::store
