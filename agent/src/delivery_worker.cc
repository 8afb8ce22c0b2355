#include "delivery_worker.h"

#include <spdlog/logger.h>

#include <algorithm>

#include "completion_tasks.h"

namespace outbox::agent {
HandlerResult DeliveryWorker::SafeHandle(Route& route, std::span<const Delivery> deliveries) {
  Handler& handler = *route.handler;
  try {
    return route.options.endpoint.batch.max_messages > 1 ? handler.HandleBatch(deliveries)
                                                         : handler.Handle(deliveries.front());
  } catch (const std::exception& e) {
    return {Outcome::kEndpointFailure, 0, false, std::nullopt,
            std::string("handler threw: ") + e.what()};
  } catch (...) {
    return {Outcome::kEndpointFailure, 0, false, std::nullopt, "handler threw"};
  }
}

bool DeliveryWorker::SafeAlreadyDone(Handler& handler, const Delivery& delivery) {
  try {
    return handler.AlreadyDone(delivery);
  } catch (...) {
    return false;
  }
}

void DeliveryWorker::Work(Route& route, int /*index*/, std::vector<store::Claimed>& batch,
                          bool run) {
  if (run || StartsRun(route, batch)) {
    WorkRun(route, batch);
    return;
  }
  std::vector<Loaded> loaded;
  try {
    loaded.reserve(batch.size());
    // The claim returned each row as it left it: nothing to read here. A row
    // that waited in the queue past its lease may have been recycled and
    // claimed again meanwhile: it is handed back (a no-op if its token moved
    // on) rather than sent a second time.
    for (store::Claimed& claimed : batch) {
      if (rt_.LeaseLapsed(claimed)) {
        rt_.Revert(claimed.lease);
        continue;
      }
      Loaded item{claimed.lease, std::move(claimed.row), {}, {}};
      item.lease_boot_until = claimed.lease_boot_until;
      item.message_id = transport::MessageId(rt_.database_id, item.row.topic, item.row.key);
      try {
        if (item.row.headers_json) item.headers = transport::ParseRowHeaders(*item.row.headers_json);
      } catch (const std::invalid_argument& e) {
        // Written by another application without our triggers: the row can
        // never be sent as it is.
        FinishDead(route, item, std::string("malformed row: ") + e.what(), true,
                   store::dead_reason::kPermanent);
        continue;
      }
      if (IsExpired(item.row, route.options.ttl_ms, rt_.clock->WallMs())) {
        // Past its deadline before this attempt started: never sent.
        FinishExpired(route, item);
        continue;
      }
      if (item.row.acked_at) {
        // The receiver has it; only the completion (a hook that failed) is
        // left to do. Never sent again.
        FinishDelivered(route, std::span<Loaded>(&item, 1), nullptr);
        continue;
      }
      loaded.push_back(std::move(item));
    }
    if (!loaded.empty()) Send(route, loaded);
  } catch (const std::exception& e) {
    // Give the whole batch back. A row whose outcome was already queued is
    // not touched: the writer applies in order and the revert's lease no
    // longer matches an in-flight row.
    rt_.log->error("worker: {}: {}", route.name, e.what());
    for (const auto& claimed : batch) rt_.Revert(claimed.lease);
  }
  rt_.NoteSent(static_cast<std::int64_t>(batch.size()));
}

Delivery DeliveryWorker::ToDelivery(const Loaded& item) {
  Delivery d;
  d.id = item.row.id;
  d.topic = item.row.topic;
  d.key = item.row.key;
  d.message_id = item.message_id;
  d.payload = item.row.payload;
  d.headers = item.headers;
  d.attempt = AttemptsPlus(item.row.attempts, 1);
  d.created_at_ms = item.row.created_at;
  if (item.row.schema_version) d.schema_version = *item.row.schema_version;
  return d;
}

void DeliveryWorker::Send(Route& route, std::span<Loaded> items) {
  std::vector<Delivery> deliveries;
  deliveries.reserve(items.size());
  for (const Loaded& item : items) deliveries.push_back(ToDelivery(item));
  if (items.size() == 1 && SafeAlreadyDone(*route.handler, deliveries.front())) {
    FinishDelivered(route, items, nullptr);
    return;
  }
  if (route.bucket && !AwaitRate(route, items)) return;
  HandlerResult result = SafeHandle(route, deliveries);
  if (result.outcome == Outcome::kMessageFailure && !result.endpoint_gone && items.size() > 1) {
    // One bad member refuses the whole batch: halve it until the bad one
    // is alone, so that no good message goes dead with it.
    const std::size_t half = items.size() / 2;
    Send(route, items.subspan(0, half));
    Send(route, items.subspan(half));
    return;
  }
  if (result.outcome == Outcome::kDelivered) {
    FinishDelivered(route, items, &result);
    return;
  }
  Resolve(route, items, result);
}

bool DeliveryWorker::AwaitRate(Route& route, std::span<Loaded> items) {
  std::int64_t bytes = 0;
  for (const Loaded& item : items) bytes += static_cast<std::int64_t>(item.row.payload.size());
  const auto messages = static_cast<std::int64_t>(items.size());
  const std::chrono::microseconds wait =
      route.bucket->Reserve(messages, bytes, rt_.clock->Monotonic());
  if (wait.count() == 0) return true;
  // The clock may be a test's: the pause is measured on the steady clock
  // from the wait the bucket computed.
  bool go = rt_.PauseUntil(std::chrono::steady_clock::now() + wait);
  // A row whose lease lapsed during the wait may be another agent's now:
  // the whole send is given back, as Work() does for a lapse in the queue.
  for (const Loaded& item : items) {
    if (rt_.LeaseLapsed(item.lease_boot_until, item.row.lease_expires_at)) go = false;
  }
  if (go) return true;
  // Stopping or lapsed: nothing was sent, so nothing is spent.
  route.bucket->Refund(messages, bytes);
  for (const Loaded& item : items) rt_.Revert(item.lease);
  return false;
}

void DeliveryWorker::Resolve(Route& route, std::span<Loaded> items, const HandlerResult& result) {
  Breaker& breaker = *route.breaker;
  // One request is one breaker event and one view of the endpoint for every
  // member: read before the event, so that a batch whose failure opens the
  // breaker charges all of its members alike.
  EndpointHealth health;
  health.breaker_closed = breaker.IsClosed();
  health.last_ack_wall_ms = breaker.last_ack_wall_ms();
  health.stopping = rt_.stopping.load();
  const std::int64_t now = rt_.clock->WallMs();
  std::vector<Decision> decisions;
  decisions.reserve(items.size());
  for (const Loaded& item : items) {
    const double unit = result.outcome != Outcome::kDelivered ? rt_.Unit() : 0.0;
    decisions.push_back(Decide(item.row, result, health, route.options.retry, now, unit));
  }
  NoteEndpointEvent(route, decisions.front(), health, result);
  for (std::size_t i = 0; i < items.size(); ++i) Apply(route, items[i], decisions[i], now, result);
}

void DeliveryWorker::NoteEndpointEvent(Route& route, const Decision& decision,
                                       const EndpointHealth& health,
                                       const HandlerResult& result) {
  Breaker& breaker = *route.breaker;
  if (decision.endpoint_gone && breaker.MarkGone()) {
    rt_.log->error("endpoint {} answered 410 Gone: nothing more is sent there until a reload",
                   breaker.endpoint());
  }
  if (!decision.endpoint_failure || !breaker.OnFailure(decision.configuration_failure)) return;
  if (decision.configuration_failure && !health.breaker_closed) {
    // A failed probe: said once already, when the breaker opened.
    rt_.log->debug("endpoint {} still refuses us: {}", breaker.endpoint(), Describe(result));
  } else if (decision.configuration_failure) {
    rt_.log->error(
        "endpoint {} refused us ({}): check its URL, credentials and options; breaker open, "
        "the backlog waits",
        breaker.endpoint(), Describe(result));
  } else {
    rt_.log->warn("breaker open for endpoint {} after: {}", breaker.endpoint(), Describe(result));
  }
}

void DeliveryWorker::Apply(Route& route, Loaded& item, const Decision& decision,
                           std::int64_t now, const HandlerResult& result) {
  switch (decision.action) {
    case Action::kComplete:
      FinishDelivered(route, std::span<Loaded>(&item, 1), &result);
      return;
    case Action::kRevert:
      rt_.Revert(item.lease);
      return;
    case Action::kDead:
      rt_.metrics->AttemptFailed(item.row.topic, decision.count_attempt, route.sink);
      FinishDead(route, item, decision.error, decision.count_attempt, decision.dead_reason);
      return;
    case Action::kReschedule: {
      rt_.metrics->AttemptFailed(item.row.topic, decision.count_attempt, route.sink);
      const store::Lease lease = item.lease;
      rt_.writer->Submit({[lease, cost = decision.count_attempt, next = decision.next_attempt_at,
                           error = decision.error, now](store::Store& s) {
                            s.Reschedule(lease, cost, next, error, now);
                          },
                          {}});
      rt_.log->debug("retry topic={} id={} attempt={} cost={} delay_ms={} error={}",
                     item.row.topic, item.row.id, decision.failures, decision.count_attempt,
                     decision.delay_ms, decision.error);
      return;
    }
  }
}

// One pass for a whole acknowledged batch; one writer task per row where a
// row's completion runs a hook or claims its key's successor.
void DeliveryWorker::FinishDelivered(Route& route, std::span<Loaded> items,
                                     const HandlerResult* answer) {
  const std::int64_t now = rt_.clock->WallMs();
  const bool sent = answer != nullptr || !items.front().row.acked_at;
  if (sent && route.breaker->OnSuccess(now)) {
    rt_.log->info("breaker closed for endpoint {}: it answers again", route.breaker->endpoint());
    rt_.wakeup.Notify();  // the backlog may go now, not at the next sweep
  }
  // An acknowledged batch without hooks or ordering is one writer task and
  // one statement: completions write state only (the payload lives in
  // outbox_payload), so even a large batch is a small transaction, and one
  // statement instead of one per row saves the writer about 40 % of a
  // completion's cost (benchmark figure 3, batch mode).
  const bool one_task = items.size() > 1 && !(route.hooks && route.hooks->on_delivered) &&
                        !(dispatcher_ != nullptr && route.options.ordering.by_key);
  std::vector<store::DeliveredLease> leases;
  if (one_task) leases.reserve(items.size());
  for (const Loaded& item : items) {
    // In doubles: created_at may hold anything another application wrote,
    // and INT64_MIN would overflow the subtraction.
    if (!item.row.acked_at) {
      rt_.metrics->Delivered(
          item.row.topic,
          std::max(0.0, static_cast<double>(now) - static_cast<double>(item.row.created_at)) /
              1000.0);
    }
    const store::Lease lease = item.lease;
    if (one_task) {
      leases.push_back({lease, now});
      rt_.log->debug("delivered topic={} id={}", item.row.topic, item.row.id);
      continue;
    }
    Writer::Task task;
    if (route.hooks && route.hooks->on_delivered) {
      Answer given;
      if (answer != nullptr) {
        given.status_code = answer->http_status;
        given.response = answer->response_body.substr(0, kMaxResponseBytes);
      }
      task = DeliveredTask(rt_, route.hooks, lease, item.row, std::move(given),
                           route.options.retry, now);
    } else {
      // A completion that claims its key's successor stays
      // deferrable too: not waiting cut a hot key's gap but cost many keys
      // their group commits (benchmark figure 8a against 8b).
      // The writer records plain completions queued together in one
      // statement (Writer::Task::complete).
      task.deferrable = true;
      task.complete = store::DeliveredLease{lease, now};
    }
    SubmitOutcome(route, item, std::move(task));
    rt_.log->debug("delivered topic={} id={}", item.row.topic, item.row.id);
  }
  if (one_task) {
    rt_.writer->Submit({[leases = std::move(leases)](store::Store& s) { s.Complete(leases); },
                        {},
                        /*deferrable=*/true});
  }
}

void DeliveryWorker::FinishDead(Route& route, const Loaded& item, const std::string& error,
                                bool count_attempt, std::string reason) {
  const std::int64_t now = rt_.clock->WallMs();
  rt_.metrics->Dead(item.row.topic);
  MarkDeadFn mark = [lease = item.lease, count_attempt, reason, now](store::Store& s,
                                                                     const std::string& text) {
    return s.MarkDead(lease, count_attempt, text, reason, now);
  };
  // A dead head with dead_head skip lets its key go on; the claim statement
  // decides whether it does.
  SubmitOutcome(route, item,
                DeadTask(rt_, route.hooks, item.row, std::move(mark), error, std::move(reason), now));
  rt_.log->warn("dead-lettered topic={} id={} key={} error={}", item.row.topic, item.row.id,
                item.row.key, error);
}

void DeliveryWorker::FinishExpired(Route& route, const Loaded& item) {
  const std::int64_t now = rt_.clock->WallMs();
  rt_.metrics->Expired(item.row.topic);
  MarkDeadFn mark = [lease = item.lease, now](store::Store& s, const std::string& text) {
    return s.MarkDead(lease, false, text, store::dead_reason::kExpired, now);
  };
  SubmitOutcome(route, item,
                DeadTask(rt_, route.hooks, item.row, std::move(mark), "expired",
                         store::dead_reason::kExpired, now));
  rt_.log->warn("expired topic={} id={} key={}", item.row.topic, item.row.id, item.row.key);
}

void DeliveryWorker::SubmitOutcome(Route& route, const Loaded& item, Writer::Task task) {
  if (dispatcher_ == nullptr || !route.options.ordering.by_key || !item.row.ordering_key ||
      !item.claim_next) {
    rt_.writer->Submit(std::move(task));
    return;
  }
  // A plain completion: the writer claims the key's next row together with
  // those of the other keys completed in the same transaction.
  if (task.complete && !task.apply && !task.apply_after_abort && !task.after_commit) {
    task.claim_next = NextOfKey{dispatcher_, item.row.topic, *item.row.ordering_key};
    rt_.writer->Submit(std::move(task));
    return;
  }
  auto next = std::make_shared<std::vector<store::Claimed>>();
  // As the eager path: nothing new while stopping, and rows taken back from
  // a crashed agent go one at a time (the sweeper's probation).
  auto claim_next = [this, next, topic = item.row.topic,
                     key = *item.row.ordering_key](store::Store& s) {
    if (rt_.stopping.load() || rt_.probation.load()) return;
    const std::int64_t now = rt_.clock->WallMs();
    if (auto one = s.ClaimNextOfKey(topic, key, rt_.owner, rt_.LeaseUntil(now), now)) {
      next->push_back(std::move(*one));
    }
  };
  task.apply = [next, claim_next, apply = std::move(task.apply)](store::Store& s) {
    next->clear();  // the transaction may be retried
    if (apply) apply(s);  // a plain completion is recorded before this runs
    claim_next(s);
  };
  if (task.apply_after_abort) {
    task.apply_after_abort = [next, claim_next, redo = std::move(task.apply_after_abort)](
                                 store::Store& s, const std::string& error) {
      next->clear();
      redo(s, error);
      claim_next(s);
    };
  }
  task.after_commit = [this, next, after = std::move(task.after_commit)] {
    if (after) after();
    if (!next->empty()) dispatcher_->DispatchEager(std::move(*next));
  };
  rt_.writer->Submit(std::move(task));
}

}  // namespace outbox::agent
