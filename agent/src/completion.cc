#include "completion.h"

#include <sqlite3.h>

#include "sql_hook.h"

namespace outbox::agent {
namespace {

// The savepoint's name: no application uses it, so a hook cannot release it
// by accident.
constexpr char kBegin[] = "SAVEPOINT outbox_completion";
constexpr char kRelease[] = "RELEASE outbox_completion";
constexpr char kRollback[] = "ROLLBACK TO outbox_completion";

void Exec(sqlite3* db, const char* sql) {
  if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
    throw std::runtime_error(std::string(sql) + ": " + sqlite3_errmsg(db));
  }
}

}  // namespace

HookRun RunWithHook(sqlite3* db, const std::function<bool()>& change, const CompletionHook& hook,
                    const Completion& completion) {
  HookRun run;
  Exec(db, kBegin);
  try {
    run.changed = change();
  } catch (...) {
    if (sqlite3_get_autocommit(db) == 0) {
      sqlite3_exec(db, kRollback, nullptr, nullptr, nullptr);
      sqlite3_exec(db, kRelease, nullptr, nullptr, nullptr);
    }
    throw;
  }
  if (run.changed && hook) {
    try {
      hook(db, completion);
    } catch (const std::exception& e) {
      run.ok = false;
      run.error = e.what();
    } catch (...) {
      run.ok = false;
      run.error = "hook threw";
    }
  }
  // Nothing left to roll back to: the hook's statement (RAISE(ROLLBACK), a
  // COMMIT in a library hook) ended the writer's transaction, taking the
  // other messages' changes with it.
  if (sqlite3_get_autocommit(db) != 0) {
    throw TransactionEnded(run.ok ? std::string("the hook ended the transaction") : run.error);
  }
  if (run.ok) {
    // A library hook that released our savepoint itself leaves nothing to
    // release; the changes are in the transaction either way.
    sqlite3_exec(db, kRelease, nullptr, nullptr, nullptr);
  } else {
    Exec(db, kRollback);
    Exec(db, kRelease);
  }
  return run;
}

RouteHooks ResolveHooks(const CompletionHooks& hooks) {
  RouteHooks out;
  out.on_delivered = hooks.on_delivered;
  if (!out.on_delivered && !hooks.on_delivered_sql.empty()) {
    out.on_delivered = MakeSqlHook(hooks.on_delivered_sql);
  }
  out.on_dead = hooks.on_dead;
  if (!out.on_dead && !hooks.on_dead_sql.empty()) out.on_dead = MakeSqlHook(hooks.on_dead_sql);
  return out;
}

}  // namespace outbox::agent
