#include "completion.h"

#include "sql_hook.h"

namespace outbox::agent {

HookRun RunWithHook(sqlite3* db, const std::function<bool()>& change, const CompletionHook& hook,
                    const Completion& completion) {
  HookRun run;
  store::CompletionSavepoint savepoint(db);
  try {
    run.changed = change();
  } catch (...) {
    savepoint.Abandon();
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
  if (savepoint.TransactionEnded()) {
    throw TransactionEnded(run.ok ? std::string("the hook ended the transaction") : run.error);
  }
  if (run.ok) {
    savepoint.Release();
  } else {
    savepoint.RollBack();
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
