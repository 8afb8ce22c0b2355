// Runs of one ordering key (docs/ordering.md, "Runs"): one worker sends the
// rows of a key in id order while the writer claims the next ones.
#include <spdlog/logger.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <mutex>

#include "delivery_worker.h"

namespace outbox::agent {

struct DeliveryWorker::RunFeed {
  std::mutex mutex;
  std::deque<store::Claimed> rows;  // grown, not yet taken by the worker; guarded by mutex
  store::Lease last;                // the run's last claimed row; guarded by mutex
  bool growing = false;             // a growth is queued on the writer; guarded by mutex
  bool attached = true;             // the worker still sends the run; guarded by mutex
  bool ended = false;               // ended early: rows grown later go back; guarded by mutex
  // A growth that found nothing waits until the hand is down to half of
  // what it held then, so that a run which has claimed all of its key does
  // not cost the writer a claim per message; guarded by mutex.
  std::size_t grow_below = SIZE_MAX;
  std::size_t hand_at_growth = 0;  // guarded by mutex
};

int DeliveryWorker::RunRows(const Route& route) {
  return std::max(1, std::min(kRunMaxRows, route.options.queue_capacity));
}

std::int64_t DeliveryWorker::RunBytes(const Route& route) {
  return std::max<std::int64_t>(1, std::min(kRunMaxBytes, route.options.queue_bytes));
}

bool DeliveryWorker::Alone(const Route& route) {
  return route.pool == nullptr || route.pool->Load() <= 1;
}

bool DeliveryWorker::StartsRun(const Route& route, const std::vector<store::Claimed>& batch) const {
  return dispatcher_ != nullptr && batch.size() == 1 && route.options.ordering.by_key &&
         route.options.endpoint.batch.max_messages <= 1 && batch.front().row.ordering_key &&
         Alone(route);
}

void DeliveryWorker::WorkRun(Route& route, std::vector<store::Claimed>& run) {
  const auto accounted = static_cast<std::int64_t>(run.size());
  auto feed = std::make_shared<RunFeed>();
  feed->last = run.back().lease;
  const std::string topic = run.front().topic;
  const std::string key = run.front().row.ordering_key.value_or("");
  const int rows = RunRows(route);
  const std::int64_t bytes = RunBytes(route);
  std::deque<store::Claimed> hand(std::make_move_iterator(run.begin()),
                                  std::make_move_iterator(run.end()));
  std::optional<store::Lease> current;  // taken from the hand, outcome not yet queued
  // Everything not yet sent goes back to pending, and rows grown later too.
  const auto end_run = [&] {
    std::vector<store::Lease> back;
    {
      std::lock_guard lock(feed->mutex);
      feed->ended = true;
      for (const store::Claimed& c : hand) back.push_back(c.lease);
      for (const store::Claimed& c : feed->rows) back.push_back(c.lease);
      feed->rows.clear();
    }
    hand.clear();
    HandBack(std::move(back));
  };
  try {
    for (;;) {
      bool grow = false;
      store::Lease after;
      {
        std::lock_guard lock(feed->mutex);
        while (!feed->rows.empty()) {
          hand.push_back(std::move(feed->rows.front()));
          feed->rows.pop_front();
        }
        if (hand.empty()) {
          // A growth still queued dispatches what it claims as a new run.
          feed->attached = false;
          break;
        }
        // Grow early: the claim's commit (an fsync) then overlaps the sends
        // of the rows still in hand instead of following the last one.
        if (dispatcher_ != nullptr && !key.empty() && !feed->growing &&
            hand.size() <= static_cast<std::size_t>(rows - rows / 4) &&
            hand.size() <= feed->grow_below && !rt_.stopping.load() && Alone(route)) {
          feed->growing = true;
          feed->hand_at_growth = hand.size();
          after = feed->last;
          grow = true;
        }
      }
      if (grow) GrowRun(feed, after, topic, key, std::max(1, rows / 4), std::max<std::int64_t>(1, bytes / 4));
      // A lapsed row (and those behind it) may be another agent's now.
      if (rt_.stopping.load() || rt_.LeaseLapsed(hand.front())) {
        end_run();
        break;
      }
      store::Claimed claimed = std::move(hand.front());
      hand.pop_front();
      current = claimed.lease;
      // With nothing left in hand, the outcome claims the key's next run:
      // a growth queued before it has claimed what there was, and then
      // this finds nothing; otherwise it catches rows committed since.
      const bool delivered = SendInRun(route, claimed, hand.empty(), end_run);
      current.reset();
      if (!delivered) break;
    }
  } catch (const std::exception& e) {
    rt_.log->error("worker: {}: {}", route.name, e.what());
    // Its outcome may be queued already: the writer applies that first and
    // the revert then finds the lease gone.
    if (current) HandBack({*current});
    end_run();
  }
  rt_.NoteSent(accounted);
}

bool DeliveryWorker::SendInRun(Route& route, store::Claimed& claimed, bool last,
                               const std::function<void()>& end_run) {
  Loaded item{claimed.lease, std::move(claimed.row), {}, {}};
  item.lease_boot_until = claimed.lease_boot_until;
  item.claim_next = last;
  item.message_id = transport::MessageId(rt_.database_id, item.row.topic, item.row.key);
  // The rows behind go back before this row's outcome, so that the outcome
  // may claim them again (a dead head under skip, an expiry).
  const auto end = [&] {
    end_run();
    item.claim_next = true;
  };
  try {
    if (item.row.headers_json) item.headers = transport::ParseRowHeaders(*item.row.headers_json);
  } catch (const std::invalid_argument& e) {
    end();
    FinishDead(route, item, std::string("malformed row: ") + e.what(), true,
               store::dead_reason::kPermanent);
    return false;
  }
  if (IsExpired(item.row, route.options.ttl_ms, rt_.clock->WallMs())) {
    end();
    FinishExpired(route, item);
    return false;
  }
  std::span<Loaded> one(&item, 1);
  if (item.row.acked_at) {  // only its completion was left to do
    FinishDelivered(route, one, nullptr);
    return true;
  }
  const Delivery delivery = ToDelivery(item);
  if (SafeAlreadyDone(*route.handler, delivery)) {
    FinishDelivered(route, one, nullptr);
    return true;
  }
  if (route.bucket && !AwaitRate(route, one)) {  // gave this row back
    end_run();
    return false;
  }
  const HandlerResult result = SafeHandle(route, std::span<const Delivery>(&delivery, 1));
  if (result.outcome == Outcome::kDelivered) {
    FinishDelivered(route, one, &result);
    return true;
  }
  end();
  Resolve(route, one, result);
  return false;
}

void DeliveryWorker::GrowRun(const std::shared_ptr<RunFeed>& feed, const store::Lease& last,
                             const std::string& topic, const std::string& ordering_key, int rows,
                             std::int64_t bytes) {
  auto grown = std::make_shared<std::vector<store::Claimed>>();
  Writer::Task task;
  task.apply = [this, grown, last, topic, ordering_key, rows, bytes](store::Store& s) {
    grown->clear();  // the transaction may be retried
    if (rt_.stopping.load() || rt_.probation.load()) return;
    const std::int64_t now = rt_.clock->WallMs();
    *grown = s.ClaimRunAfter(last, topic, ordering_key, rt_.owner, rt_.LeaseUntil(now), now, rows,
                             bytes);
  };
  task.after_commit = [this, feed, grown] {
    std::vector<store::Claimed> orphans;
    bool back = false;
    {
      std::lock_guard lock(feed->mutex);
      feed->growing = false;
      feed->grow_below = grown->empty() ? feed->hand_at_growth / 2 : SIZE_MAX;
      if (grown->empty()) return;
      feed->last = grown->back().lease;
      if (feed->ended || rt_.stopping.load()) {
        back = true;
        orphans = std::move(*grown);
      } else if (feed->attached) {
        for (store::Claimed& c : *grown) feed->rows.push_back(std::move(c));
      } else {
        orphans = std::move(*grown);  // the worker left: a new run
      }
    }
    if (back) {
      std::vector<store::Lease> leases;
      for (const store::Claimed& c : orphans) leases.push_back(c.lease);
      HandBack(std::move(leases));
    } else if (!orphans.empty()) {
      dispatcher_->DispatchRun(std::move(orphans));
    }
  };
  // Nobody waits for it yet: it may share a commit with the completions.
  task.deferrable = true;
  rt_.writer->Submit(std::move(task));
}

void DeliveryWorker::HandBack(std::vector<store::Lease> leases) {
  if (leases.empty()) return;
  // The runtime outlives the writer's queue; this worker need not.
  rt_.writer->Submit({[&rt = rt_, leases = std::move(leases)](store::Store& s) {
                        const std::int64_t now = rt.clock->WallMs();
                        for (const store::Lease& lease : leases) s.Revert(lease, now);
                      },
                      {}});
}

}  // namespace outbox::agent
