// Completion hooks inside the writer's transaction: each under a SAVEPOINT
// of its own together with the status change it belongs to. Not installed.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>

#include "outbox/agent.h"

namespace outbox::agent {

// Thrown out of a writer task when a hook (or an application trigger it
// fired, e.g. with RAISE(ROLLBACK)) ended the writer's whole transaction.
// The writer redoes its group with the task's apply_after_abort instead.
class TransactionEnded : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct HookRun {
  bool changed = false;  // the status change applied (the lease still held)
  bool ok = true;        // false: the hook failed; nothing of either remains
  std::string error;     // the hook's error when !ok
};

// Runs under `SAVEPOINT`: `change` (the guarded status change, false when
// the lease was lost, in which case the hook does not run), then `hook`.
// A failed hook rolls back to the savepoint, undoing both. Rethrows what
// `change` throws (a store error: the writer's business). Throws
// TransactionEnded when the hook ended the enclosing transaction.
HookRun RunWithHook(sqlite3* db, const std::function<bool()>& change, const CompletionHook& hook,
                    const Completion& completion);

// The hooks a route runs: the library's functions, else the config's SQL.
struct RouteHooks {
  CompletionHook on_delivered;
  CompletionHook on_dead;
  bool any() const { return on_delivered || on_dead; }
};
RouteHooks ResolveHooks(const CompletionHooks& hooks);

}  // namespace outbox::agent
