// The writer tasks that finish a message (delivered or dead) and run its
// route's completion hook in the same transaction. Not installed.
#pragma once

#include <memory>
#include <string>

#include "completion.h"
#include "runtime.h"
#include "writer.h"

namespace outbox::agent {

// What the receiver answered, for on_delivered.
struct Answer {
  int status_code = 0;
  std::string response;  // at most kMaxResponseBytes
};

// in flight → delivered with on_delivered. A failing hook leaves the row
// acknowledged with its completion pending (retried on `policy`), or dead
// with dead_reason "hook" once the completions are spent.
Writer::Task DeliveredTask(Runtime& rt, std::shared_ptr<const RouteHooks> hooks,
                           const store::Lease& lease, const store::Row& row, Answer answer,
                           const store::RetryPolicy& policy, std::int64_t now);

// Makes the row dead with the given last_error; false when it no longer can
// (the lease was lost, the row is no longer pending).
using MarkDeadFn = std::function<bool(store::Store&, const std::string& error)>;

// The row → dead through `mark` with `error`, then on_dead (if any) with
// `reason`. A failing on_dead leaves the row dead with the hook's error added
// to last_error. `after` runs after the commit if the row did die.
Writer::Task DeadTask(Runtime& rt, std::shared_ptr<const RouteHooks> hooks, const store::Row& row,
                      MarkDeadFn mark, std::string error, std::string reason, std::int64_t now,
                      std::function<void()> after = {});

}  // namespace outbox::agent
