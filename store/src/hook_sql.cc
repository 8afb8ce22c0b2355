// Completion hooks' SQL: prepared, bound and stepped here, under an
// authorizer that lets a statement from a config file read and write rows and
// call a fixed list of functions, nothing else (docs/reliability.md, "Threat
// model").
#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <array>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include "internal.h"
#include "util/utf8.h"

namespace outbox::store {
namespace {

constexpr std::array<std::string_view, 11> kParameters = {
    ":id",          ":topic",    ":key",        ":payload",     ":headers", ":attempts",
    ":status_code", ":response", ":last_error", ":dead_reason", ":now"};

// Core scalar, aggregate, window, date, math and JSON functions of SQLite
// 3.40 and later (names as SQLite registers them). Sorted, for binary search.
constexpr auto kFunctions = [] {
  auto names = std::to_array<std::string_view>({
      "->",          "->>",          "abs",           "acos",         "acosh",
      "asin",        "asinh",        "atan",          "atan2",        "atanh",
      "avg",         "ceil",         "ceiling",       "changes",      "char",
      "coalesce",    "concat",       "concat_ws",     "cos",          "cosh",
      "count",       "cume_dist",    "date",          "datetime",     "degrees",
      "dense_rank",  "exp",          "first_value",   "floor",        "format",
      "glob",        "group_concat", "hex",           "ifnull",       "iif",
      "instr",       "json",         "json_array",    "json_array_length",
      "json_extract", "json_group_array", "json_group_object", "json_insert",
      "json_object", "json_patch",   "json_quote",    "json_remove",  "json_replace",
      "json_set",    "json_type",    "json_valid",    "julianday",    "lag",
      "last_insert_rowid", "last_value", "lead",      "length",       "like",
      "likelihood",  "likely",       "ln",            "log",          "log10",
      "log2",        "lower",        "ltrim",         "max",          "min",
      "mod",         "nth_value",    "ntile",         "nullif",       "octet_length",
      "percent_rank", "pi",          "pow",           "power",        "printf",
      "quote",       "radians",      "random",        "randomblob",   "rank",
      "replace",     "round",        "row_number",    "rtrim",        "sign",
      "sin",         "sinh",         "sqrt",          "strftime",     "string_agg",
      "substr",      "substring",    "sum",           "tan",          "tanh",
      "time",        "timediff",     "total",         "total_changes", "trim",
      "trunc",       "typeof",       "unhex",         "unicode",      "unixepoch",
      "unlikely",    "upper",        "zeroblob"});
  std::sort(names.begin(), names.end());
  return names;
}();

bool AllowedFunction(const char* name) {
  if (name == nullptr) return false;
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return std::binary_search(kFunctions.begin(), kFunctions.end(), std::string_view(lower));
}

// Decides per action while the statement compiles (also for the triggers it
// fires, whose names arrive in `inner`). The refusal is what the user sees,
// so the callback records the first thing it refused.
struct Authorizer {
  std::string refused;

  static int Callback(void* self, int action, const char* /*arg1*/, const char* arg2,
                      const char* /*database*/, const char* inner) noexcept {
    auto* me = static_cast<Authorizer*>(self);
    switch (action) {
      case SQLITE_INSERT:
      case SQLITE_UPDATE:
      case SQLITE_DELETE:
      case SQLITE_READ:
      case SQLITE_SELECT:
      case SQLITE_RECURSIVE:
        return SQLITE_OK;
      case SQLITE_FUNCTION:
        if (AllowedFunction(arg2)) return SQLITE_OK;
        me->Refuse(std::string("function ") + (arg2 != nullptr ? arg2 : "?") +
                   (inner != nullptr ? std::string(" (inside trigger or view ") + inner + ")" : ""));
        return SQLITE_DENY;
      case SQLITE_PRAGMA:
        // The outbox's own insert trigger reads pragma_page_count(); a
        // PRAGMA written in the hook itself is refused.
        if (inner != nullptr) return SQLITE_OK;
        me->Refuse("PRAGMA");
        return SQLITE_DENY;
      case SQLITE_TRANSACTION:
      case SQLITE_SAVEPOINT:
        me->Refuse("transaction control");
        return SQLITE_DENY;
      case SQLITE_ATTACH:
      case SQLITE_DETACH:
        me->Refuse("ATTACH/DETACH");
        return SQLITE_DENY;
      default:
        me->Refuse("schema changes and other statements");
        return SQLITE_DENY;
    }
  }

  void Refuse(std::string what) noexcept {
    if (refused.empty()) refused = std::move(what);
  }
};

// Keeps the authorizer on the connection for the statement's whole life, so
// that a re-prepare during a step (after a schema change) is judged too, and
// removes it so that the connection's other statements never see it.
class AuthorizerScope {
 public:
  AuthorizerScope(sqlite3* db, Authorizer& authorizer) : db_(db) {
    sqlite3_set_authorizer(db_, &Authorizer::Callback, &authorizer);
  }
  ~AuthorizerScope() { sqlite3_set_authorizer(db_, nullptr, nullptr); }
  AuthorizerScope(const AuthorizerScope&) = delete;
  AuthorizerScope& operator=(const AuthorizerScope&) = delete;

 private:
  sqlite3* db_;
};

struct Finalizer {
  void operator()(sqlite3_stmt* statement) const { sqlite3_finalize(statement); }
};
using Statement = std::unique_ptr<sqlite3_stmt, Finalizer>;

void CheckParameters(sqlite3_stmt* statement) {
  for (int i = 1; i <= sqlite3_bind_parameter_count(statement); ++i) {
    const char* name = sqlite3_bind_parameter_name(statement, i);
    const bool known = name != nullptr && std::find(kParameters.begin(), kParameters.end(),
                                                    std::string_view(name)) != kParameters.end();
    if (!known) {
      throw std::invalid_argument(std::string("unknown parameter ") +
                                  (name != nullptr ? name : "?") +
                                  " (known: :id :topic :key :payload :headers :attempts "
                                  ":status_code :response :last_error :dead_reason :now)");
    }
  }
}

// Prepares under the (already installed) authorizer; throws
// std::invalid_argument with the reason.
Statement Prepare(sqlite3* db, const Authorizer& authorizer, std::string_view sql) {
  sqlite3_stmt* raw = nullptr;
  const char* tail = nullptr;
  const int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), 0, &raw, &tail);
  Statement statement(raw);
  if (rc != SQLITE_OK) {
    if (!authorizer.refused.empty()) {
      throw std::invalid_argument(authorizer.refused + " is not allowed in a hook");
    }
    throw std::invalid_argument(sqlite3_errmsg(db));
  }
  if (!statement) throw std::invalid_argument("expected one SQL statement, got none");
  const std::string_view rest(tail, static_cast<std::size_t>(sql.data() + sql.size() - tail));
  if (rest.find_first_not_of(" \t\r\n;") != std::string_view::npos) {
    throw std::invalid_argument("expected one SQL statement, got more");
  }
  if (sqlite3_stmt_readonly(statement.get()) != 0) {
    throw std::invalid_argument("expected an INSERT, UPDATE, DELETE or REPLACE statement");
  }
  CheckParameters(statement.get());
  return statement;
}

int Index(sqlite3_stmt* statement, const char* name) {
  return sqlite3_bind_parameter_index(statement, name);
}

void BindText(sqlite3_stmt* statement, const char* name, std::string_view text) {
  if (const int index = Index(statement, name); index > 0) {
    sqlite3_bind_text64(statement, index, text.data(), text.size(), SQLITE_TRANSIENT,
                        SQLITE_UTF8);
  }
}

void BindInt(sqlite3_stmt* statement, const char* name, std::int64_t value) {
  if (const int index = Index(statement, name); index > 0) {
    sqlite3_bind_int64(statement, index, value);
  }
}

void BindNull(sqlite3_stmt* statement, const char* name) {
  if (const int index = Index(statement, name); index > 0) sqlite3_bind_null(statement, index);
}

void Bind(sqlite3_stmt* statement, const Completion& c) {
  BindInt(statement, ":id", c.id);
  BindText(statement, ":topic", c.topic);
  BindText(statement, ":key", c.key);
  // The payload as the column holds it: bytes.
  if (const int index = Index(statement, ":payload"); index > 0) {
    sqlite3_bind_blob64(statement, index, c.payload.data(), c.payload.size(), SQLITE_TRANSIENT);
  }
  if (c.headers_json.empty()) {
    BindNull(statement, ":headers");
  } else {
    BindText(statement, ":headers", c.headers_json);
  }
  BindInt(statement, ":attempts", c.attempts);
  if (c.status_code == 0 && c.response.empty()) {
    // No answer to hand on (a retried completion: the answer is not
    // stored): NULL, on which json_extract gives NULL instead of failing.
    BindNull(statement, ":status_code");
    BindNull(statement, ":response");
  } else {
    BindInt(statement, ":status_code", c.status_code);
    // As valid UTF-8 so that json_extract(:response, ...) works.
    BindText(statement, ":response", util::ToValidUtf8(c.response));
  }
  BindText(statement, ":last_error", c.last_error);
  BindText(statement, ":dead_reason", c.dead_reason);
  BindInt(statement, ":now", c.now_ms);
}

void ExecSavepointSql(sqlite3* db, const char* sql) {
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    throw StoreError(std::string(sql) + ": " + sqlite3_errmsg(db), sqlite3_extended_errcode(db));
  }
}

// The savepoint's name: no application uses it, so a hook cannot release it
// by accident.
constexpr char kBegin[] = "SAVEPOINT outbox_completion";
constexpr char kRelease[] = "RELEASE outbox_completion";
constexpr char kRollback[] = "ROLLBACK TO outbox_completion";

}  // namespace

namespace internal {

void HardenConnection(sqlite3* db) {
  // DEFENSIVE: no writable_schema, no journal_mode=OFF, no writes to shadow
  // tables or sqlite_dbpage. FTS3_TOKENIZER off: the two-argument
  // fts3_tokenizer() plants a pointer that FTS3 later calls. trusted_schema
  // stays on: SQLite 3.40 does not mark json_valid, json_type or
  // pragma_page_count innocuous, and the outbox's insert trigger uses them.
  int value = 0;
  if (sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, &value) != SQLITE_OK || value != 1 ||
      sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, 0, &value) != SQLITE_OK ||
      value != 0 ||
      sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, &value) != SQLITE_OK ||
      value != 0) {
    throw StoreError("cannot set the connection's defensive settings", SQLITE_ERROR);
  }
}

}  // namespace internal

std::span<const std::string_view> HookFunctions() { return kFunctions; }

void CheckHookSql(sqlite3* connection, std::string_view sql) {
  Authorizer authorizer;
  AuthorizerScope scope(connection, authorizer);
  Prepare(connection, authorizer, sql);
}

void RunHookSql(sqlite3* connection, std::string_view sql, const Completion& completion) {
  Authorizer authorizer;
  AuthorizerScope scope(connection, authorizer);
  Statement statement;
  try {
    statement = Prepare(connection, authorizer, sql);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
  Bind(statement.get(), completion);
  int rc = SQLITE_ROW;
  while (rc == SQLITE_ROW) rc = sqlite3_step(statement.get());  // RETURNING rows
  if (rc != SQLITE_DONE) {
    if (!authorizer.refused.empty()) {
      throw std::runtime_error(authorizer.refused + " is not allowed in a hook");
    }
    throw std::runtime_error(sqlite3_errmsg(connection));
  }
}

bool CheckHookSqlInFile(const std::string& db_path,
                        std::span<const std::pair<std::string, std::string>> key_and_sql) {
  std::error_code error;
  if (!std::filesystem::exists(db_path, error)) return false;
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(db_path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
  std::unique_ptr<sqlite3, decltype(&sqlite3_close)> db(raw, &sqlite3_close);
  if (rc != SQLITE_OK) {
    throw StoreError(db_path + ": " + (raw != nullptr ? sqlite3_errmsg(raw) : "cannot open"), rc);
  }
  internal::HardenConnection(db.get());
  for (const auto& [key, sql] : key_and_sql) {
    try {
      CheckHookSql(db.get(), sql);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(key + ": " + e.what());
    }
  }
  return true;
}

CompletionSavepoint::CompletionSavepoint(sqlite3* connection) : connection_(connection) {
  ExecSavepointSql(connection_, kBegin);
}

bool CompletionSavepoint::TransactionEnded() const {
  return sqlite3_get_autocommit(connection_) != 0;
}

void CompletionSavepoint::Release() noexcept {
  // A library hook that released our savepoint itself leaves nothing to
  // release; the changes are in the transaction either way.
  sqlite3_exec(connection_, kRelease, nullptr, nullptr, nullptr);
}

void CompletionSavepoint::RollBack() {
  ExecSavepointSql(connection_, kRollback);
  ExecSavepointSql(connection_, kRelease);
}

void CompletionSavepoint::Abandon() noexcept {
  if (TransactionEnded()) return;
  sqlite3_exec(connection_, kRollback, nullptr, nullptr, nullptr);
  sqlite3_exec(connection_, kRelease, nullptr, nullptr, nullptr);
}

}  // namespace outbox::store
