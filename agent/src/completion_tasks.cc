#include "completion_tasks.h"

#include <SQLiteCpp/Database.h>
#include <spdlog/logger.h>

#include "outcome.h"

namespace outbox::agent {
namespace {

sqlite3* Connection(store::Store& s) { return s.connection().getHandle(); }

Completion ToCompletion(const store::Row& row, std::int64_t now) {
  Completion c;
  c.id = row.id;
  c.topic = row.topic;
  c.key = row.key;
  c.payload = row.payload;
  c.headers_json = row.headers_json ? std::string_view(*row.headers_json) : std::string_view();
  c.attempts = row.attempts;
  c.now_ms = now;
  return c;
}

// Shared by a task's apply, its fallback and its after_commit; apply resets
// what it sets, since the writer may run it more than once.
struct DeliveredJob {
  Runtime& rt;
  std::shared_ptr<const RouteHooks> hooks;
  store::Lease lease;
  store::Row row;
  Answer answer;
  store::RetryPolicy policy;
  std::int64_t now = 0;
  double unit = 0;
  enum class Result { kNone, kDelivered, kPending, kDead } result = Result::kNone;
  std::string error;

  void Fail(store::Store& s, const std::string& hook_error) {
    const CompletionRetry retry = DecideCompletionFailure(row, policy, hook_error, now, unit);
    error = retry.error;
    if (s.Acknowledge(lease, retry.failures, retry.next_attempt_at, retry.error, now,
                      retry.dead)) {
      result = retry.dead ? Result::kDead : Result::kPending;
    }
  }
};

struct DeadJob {
  Runtime& rt;
  std::shared_ptr<const RouteHooks> hooks;
  store::Row row;
  MarkDeadFn mark;
  std::string error;
  std::string reason;
  std::int64_t now = 0;
  std::function<void()> after;
  std::string hook_error;
  bool died = false;

  std::string WithHookError(const std::string& failure) const {
    return TruncateError(error + "; on_dead failed: " + failure);
  }
};

}  // namespace

Writer::Task DeliveredTask(Runtime& rt, std::shared_ptr<const RouteHooks> hooks,
                           const store::Lease& lease, const store::Row& row, Answer answer,
                           const store::RetryPolicy& policy, std::int64_t now) {
  auto job = std::make_shared<DeliveredJob>(
      DeliveredJob{rt, std::move(hooks), lease, row, std::move(answer), policy, now, rt.Unit(),
                   DeliveredJob::Result::kNone, {}});
  Writer::Task task;
  task.deferrable = true;
  task.apply = [job](store::Store& s) {
    job->result = DeliveredJob::Result::kNone;
    job->error.clear();
    if (!job->hooks->on_delivered) {
      if (s.Complete(job->lease, job->now)) job->result = DeliveredJob::Result::kDelivered;
      return;
    }
    Completion c = ToCompletion(job->row, job->now);
    c.status_code = job->answer.status_code;
    c.response = job->answer.response;
    const HookRun run = RunWithHook(
        Connection(s), [&] { return s.Complete(job->lease, job->now); },
        job->hooks->on_delivered, c);
    if (!run.changed) return;  // the lease was lost: someone else finishes it
    if (run.ok) {
      job->result = DeliveredJob::Result::kDelivered;
    } else {
      job->Fail(s, run.error);
    }
  };
  task.apply_after_abort = [job](store::Store& s, const std::string& error) {
    job->result = DeliveredJob::Result::kNone;
    job->Fail(s, error);
  };
  task.after_commit = [job] {
    const store::Row& r = job->row;
    switch (job->result) {
      case DeliveredJob::Result::kPending:
        job->rt.log->warn("completion pending topic={} id={} key={}: {}", r.topic, r.id, r.key,
                          job->error);
        break;
      case DeliveredJob::Result::kDead:
        job->rt.metrics->Dead(r.topic);
        job->rt.log->warn("dead-lettered topic={} id={} key={} reason=hook error={}", r.topic,
                          r.id, r.key, job->error);
        break;
      case DeliveredJob::Result::kDelivered:
      case DeliveredJob::Result::kNone:
        break;
    }
  };
  return task;
}

Writer::Task DeadTask(Runtime& rt, std::shared_ptr<const RouteHooks> hooks, const store::Row& row,
                      MarkDeadFn mark, std::string error, std::string reason, std::int64_t now,
                      std::function<void()> after) {
  auto job = std::make_shared<DeadJob>(DeadJob{rt, std::move(hooks), row, std::move(mark),
                                               TruncateError(std::move(error)),
                                               std::move(reason), now, std::move(after), {},
                                               false});
  Writer::Task task;
  task.apply = [job](store::Store& s) {
    job->hook_error.clear();
    job->died = false;
    if (!job->hooks || !job->hooks->on_dead) {
      job->died = job->mark(s, job->error);
      return;
    }
    Completion c = ToCompletion(job->row, job->now);
    c.last_error = job->error;
    c.dead_reason = job->reason;
    const HookRun run = RunWithHook(
        Connection(s), [&] { return job->mark(s, job->error); }, job->hooks->on_dead, c);
    job->died = run.changed;
    if (run.changed && !run.ok) {
      // Dead anyway; the operator learns from last_error why the
      // application's state did not follow.
      job->hook_error = run.error;
      job->died = job->mark(s, job->WithHookError(run.error));
    }
  };
  task.apply_after_abort = [job](store::Store& s, const std::string& failure) {
    job->hook_error = failure;
    job->died = job->mark(s, job->WithHookError(failure));
  };
  task.after_commit = [job] {
    if (!job->hook_error.empty()) {
      job->rt.log->error("on_dead failed topic={} id={} key={}: {}", job->row.topic, job->row.id,
                         job->row.key, job->hook_error);
    }
    if (job->died && job->after) job->after();
  };
  return task;
}

}  // namespace outbox::agent
