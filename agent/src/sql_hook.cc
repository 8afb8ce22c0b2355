#include "sql_hook.h"

#include <sqlite3.h>

#include <array>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include "util/utf8.h"

namespace outbox::agent {
namespace {

constexpr std::array<std::string_view, 11> kParameters = {
    ":id",          ":topic",    ":key",        ":payload",     ":headers", ":attempts",
    ":status_code", ":response", ":last_error", ":dead_reason", ":now"};

// Decides per action while the statement compiles (also for the triggers it
// fires, whose names arrive in `inner`): a hook may read and write rows,
// nothing else. The refusal is what the user sees, so the callback records
// which action it refused.
struct Authorizer {
  std::string refused;

  static int Callback(void* self, int action, const char* /*arg1*/, const char* /*arg2*/,
                      const char* /*database*/, const char* inner) noexcept {
    auto* me = static_cast<Authorizer*>(self);
    switch (action) {
      case SQLITE_INSERT:
      case SQLITE_UPDATE:
      case SQLITE_DELETE:
      case SQLITE_READ:
      case SQLITE_SELECT:
      case SQLITE_FUNCTION:
      case SQLITE_RECURSIVE:
        return SQLITE_OK;
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

  void Refuse(const char* what) noexcept {
    if (refused.empty()) refused = what;
  }
};

struct Finalizer {
  void operator()(sqlite3_stmt* statement) const { sqlite3_finalize(statement); }
};
using Statement = std::unique_ptr<sqlite3_stmt, Finalizer>;

// Prepares under the authorizer, which is removed again before returning so
// that the connection's other statements never see it.
Statement Prepare(sqlite3* db, std::string_view sql, bool checking) {
  Authorizer authorizer;
  sqlite3_set_authorizer(db, &Authorizer::Callback, &authorizer);
  sqlite3_stmt* raw = nullptr;
  const char* tail = nullptr;
  const int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), 0, &raw, &tail);
  sqlite3_set_authorizer(db, nullptr, nullptr);
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
  if (checking) {
    for (int i = 1; i <= sqlite3_bind_parameter_count(statement.get()); ++i) {
      const char* name = sqlite3_bind_parameter_name(statement.get(), i);
      bool known = false;
      for (std::string_view p : kParameters) known = known || (name != nullptr && p == name);
      if (!known) {
        throw std::invalid_argument(std::string("unknown parameter ") +
                                    (name != nullptr ? name : "?") +
                                    " (known: :id :topic :key :payload :headers :attempts "
                                    ":status_code :response :last_error :dead_reason :now)");
      }
    }
  }
  return statement;
}

void BindText(sqlite3_stmt* statement, const char* name, std::string_view text) {
  const int index = sqlite3_bind_parameter_index(statement, name);
  if (index > 0) {
    sqlite3_bind_text64(statement, index, text.data(), text.size(), SQLITE_TRANSIENT,
                        SQLITE_UTF8);
  }
}

void BindInt(sqlite3_stmt* statement, const char* name, std::int64_t value) {
  const int index = sqlite3_bind_parameter_index(statement, name);
  if (index > 0) sqlite3_bind_int64(statement, index, value);
}

void Bind(sqlite3_stmt* statement, const Completion& c) {
  BindInt(statement, ":id", c.id);
  BindText(statement, ":topic", c.topic);
  BindText(statement, ":key", c.key);
  // The payload as the column holds it: bytes.
  if (const int index = sqlite3_bind_parameter_index(statement, ":payload"); index > 0) {
    sqlite3_bind_blob64(statement, index, c.payload.data(), c.payload.size(), SQLITE_TRANSIENT);
  }
  if (c.headers_json.empty()) {
    if (const int index = sqlite3_bind_parameter_index(statement, ":headers"); index > 0) {
      sqlite3_bind_null(statement, index);
    }
  } else {
    BindText(statement, ":headers", c.headers_json);
  }
  BindInt(statement, ":attempts", c.attempts);
  if (c.status_code == 0 && c.response.empty()) {
    // No answer to hand on (a retried completion: the answer is not
    // stored): NULL, on which json_extract gives NULL instead of failing.
    for (const char* name : {":status_code", ":response"}) {
      if (const int index = sqlite3_bind_parameter_index(statement, name); index > 0) {
        sqlite3_bind_null(statement, index);
      }
    }
  } else {
    BindInt(statement, ":status_code", c.status_code);
    // As valid UTF-8 so that json_extract(:response, ...) works.
    const std::string response = util::ToValidUtf8(c.response);
    BindText(statement, ":response", response);
  }
  BindText(statement, ":last_error", c.last_error);
  BindText(statement, ":dead_reason", c.dead_reason);
  BindInt(statement, ":now", c.now_ms);
}

}  // namespace

void CheckSqlHook(sqlite3* db, std::string_view sql) { Prepare(db, sql, true); }

CompletionHook MakeSqlHook(std::string sql) {
  return [sql = std::move(sql)](sqlite3* db, const Completion& completion) {
    Statement statement;
    try {
      statement = Prepare(db, sql, true);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(e.what());
    }
    Bind(statement.get(), completion);
    int rc = SQLITE_ROW;
    while (rc == SQLITE_ROW) rc = sqlite3_step(statement.get());  // RETURNING rows
    if (rc != SQLITE_DONE) throw std::runtime_error(sqlite3_errmsg(db));
  };
}

void CheckTopicHooks(sqlite3* db, const Options& options) {
  for (const auto& [topic, topic_options] : options.topics) {
    const std::pair<const char*, const std::string*> hooks[] = {
        {"on_delivered", &topic_options.hooks.on_delivered_sql},
        {"on_dead", &topic_options.hooks.on_dead_sql}};
    for (const auto& [which, sql] : hooks) {
      if (sql->empty()) continue;
      try {
        CheckSqlHook(db, *sql);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(HookKey(topic, which) + ": " + e.what());
      }
    }
  }
}

bool CheckHookSql(const Options& options) {
  std::error_code error;
  if (!std::filesystem::exists(options.db_path, error)) return false;
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(options.db_path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
  std::unique_ptr<sqlite3, decltype(&sqlite3_close)> db(raw, &sqlite3_close);
  if (rc != SQLITE_OK) {
    throw store::StoreError(options.db_path + ": " + (raw ? sqlite3_errmsg(raw) : "cannot open"),
                            rc);
  }
  CheckTopicHooks(db.get(), options);
  return true;
}

std::string HookKey(std::string_view topic, std::string_view which) {
  std::string key = "topics.\"";
  key.append(topic);
  key += "\".";
  key.append(which);
  return key;
}

}  // namespace outbox::agent
