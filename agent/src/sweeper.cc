#include "sweeper.h"

#include <spdlog/logger.h>

#include <algorithm>
#include <map>

#include "completion_tasks.h"
#include "owner.h"
#include "util/thread_name.h"

namespace outbox::agent {

Sweeper::Sweeper(Runtime& runtime, RouteTable& routes, Dispatcher& dispatcher)
    : rt_(runtime), routes_(routes), dispatcher_(dispatcher), retention_(runtime),
      runtime_state_(runtime, routes), probation_(runtime, routes, dispatcher) {
  store::Options read = rt_.store_options;
  read.create = false;
  read.cache_kib = 128;  // index seeks, which no cache helps much
  reader_ = std::make_unique<store::Store>(read);
}

Sweeper::~Sweeper() { Stop(); }

void Sweeper::Start() {
  thread_ = std::jthread([this](std::stop_token stop) { Loop(std::move(stop)); });
}

void Sweeper::Stop() {
  thread_.request_stop();
  rt_.wakeup.Notify();
  if (thread_.joinable()) thread_.join();
}

void Sweeper::Loop(std::stop_token stop) {
  util::NameThisThread("outbox-sweeper");
  auto next_full = std::chrono::steady_clock::now();
  auto last_error_log = std::chrono::steady_clock::time_point{};
  while (!stop.stop_requested()) {
    try {
      if (std::chrono::steady_clock::now() >= next_full) {
        FullPass();
        next_full = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(rt_.options.sweep_interval_ms);
      }
      if (!ProbationStep()) PumpPass();
      rt_.metrics->SweeperSucceeded();
    } catch (const std::exception& e) {
      rt_.metrics->SweeperFailed(e.what());
      // Rate-limited: a locked or full disk would otherwise flood the log.
      const auto now = std::chrono::steady_clock::now();
      if (now - last_error_log > std::chrono::seconds(10)) {
        rt_.log->error("sweeper: {}", e.what());
        last_error_log = now;
      }
      next_full = std::min(
          next_full, now + std::min<std::chrono::milliseconds>(
                               std::chrono::seconds(1),
                               std::chrono::milliseconds(rt_.options.sweep_interval_ms)));
    }
    rt_.wakeup.WaitUntil(stop, next_full);
  }
}

void Sweeper::FullPass() {
  std::vector<std::string> recycled;
  rt_.writer->Run([&](store::Store& s) {
    // Read the time inside the transaction: a `now` from before the queue
    // wait would make leases claimed meanwhile look absurdly long.
    recycled = s.RecycleExpired(rt_.clock->WallMs(), rt_.options.lease_timeout_ms, kRecycleBatch);
  });
  if (!recycled.empty()) {
    rt_.log->info("recycled {} rows whose lease expired", recycled.size());
    for (const auto& topic : recycled) rt_.metrics->Recycled(topic, 1);
  }
  TakeBackFromDeadOwners();
  const auto served = TopicsToServe();
  const std::int64_t now = rt_.clock->WallMs();
  rt_.writer->Run([&](store::Store& s) {
    for (const auto& [route, topic] : served.topics) {
      s.MakeDueIfFarAhead(topic, now, route->options.retry.max_interval_ms);
      s.ParkBehindDeadHeads(topic, now);
    }
  });
  ExpirePass(served, now);
  runtime_state_.MaybePublish();
  if (rt_.clock->Monotonic() >= next_retention_) {
    retention_.Pass(*reader_);
    next_retention_ =
        rt_.clock->Monotonic() + std::chrono::milliseconds(rt_.options.retention.interval_ms);
  }
}

// Expiry does not wait for the endpoint: a message past its deadline dies
// during an outage too, no attempt spent. Each row is its own writer task so
// that its on_dead runs under its own savepoint.
void Sweeper::ExpirePass(const RouteTable::Served& served, std::int64_t now) {
  for (const auto& [route, topic] : served.topics) {
    const std::vector<store::Row> rows =
        reader_->ExpiredPending(topic, now, route->options.ttl_ms, kExpireBatch);
    for (const store::Row& row : rows) {
      MarkDeadFn mark = [id = row.id, now](store::Store& s, const std::string& text) {
        return s.Expire(id, now, text);
      };
      rt_.writer->Submit(DeadTask(rt_, route->hooks, row, std::move(mark), "expired",
                                  store::dead_reason::kExpired, now,
                                  // The runtime, not this sweeper: the writer may
                                  // run it after a stop destroyed the sweeper.
                                  [rt = &rt_, topic = row.topic, id = row.id, key = row.key] {
                                    rt->metrics->Expired(topic);
                                    rt->log->warn("expired topic={} id={} key={}", topic, id, key);
                                  }));
    }
  }
}

// on_dead of each row the crash budget killed, in the take-back's own
// transaction, through the same task as every other death.
void Sweeper::RunCrashDeathHooks(store::Store& s, const std::vector<store::Row>& rows,
                                 std::int64_t now, std::map<std::int64_t, std::string>& ended,
                                 std::vector<std::function<void()>>& after_commit) {
  for (const store::Row& row : rows) {
    const Route* route = routes_.For(row.topic);
    if (route == nullptr || !route->hooks || !route->hooks->on_dead) continue;
    MarkDeadFn mark = [id = row.id](store::Store& st, const std::string& error) {
      return st.RecordCrashError(id, error);
    };
    Writer::Task task = DeadTask(rt_, route->hooks, row, std::move(mark),
                                 row.last_error.value_or("crash"), store::dead_reason::kCrash, now);
    if (const auto it = ended.find(row.id); it != ended.end()) {
      task.apply_after_abort(s, it->second);
    } else {
      try {
        task.apply(s);
      } catch (const TransactionEnded& e) {
        ended.emplace(row.id, e.what());
        throw;  // the writer retries the take-back; this hook is then skipped
      }
    }
    after_commit.push_back(std::move(task.after_commit));
  }
}

void Sweeper::TakeBackFromDeadOwners() {
  for (const std::string& other : reader_->LeaseOwners()) {
    if (other == rt_.owner || !OwnerIsGone(other)) continue;
    store::Store::TakeBack taken;
    std::vector<std::function<void()>> after_commit;
    // Rows whose on_dead ended the writer's transaction: on the writer's
    // retry they are recorded as failed hooks instead of run again.
    std::map<std::int64_t, std::string> ended;
    const std::int64_t now = rt_.clock->WallMs();
    rt_.writer->Run([&](store::Store& s) {
      after_commit.clear();
      taken = s.TakeBackOwner(other, rt_.options.crash_budget, now);
      RunCrashDeathHooks(s, taken.dead_rows, now, ended, after_commit);
    });
    for (const auto& after : after_commit) after();
    if (taken.quarantined > 0) {
      rt_.metrics->TakenBack(taken.quarantined);
      rt_.log->warn(
          "took back {} rows leased by {}, which no longer runs; resending them one at a time",
          taken.quarantined, other);
    }
    for (const std::string& topic : taken.dead_topics) {
      rt_.metrics->Dead(topic, /*by_crash_budget=*/true);
      rt_.log->warn("dead-lettered topic={}: it crashed the agent {} times while alone in flight",
                    topic, rt_.options.crash_budget);
    }
  }
}

RouteTable::Served Sweeper::TopicsToServe() {
  RouteTable::Served served = routes_.ToServe(reader_->PendingTopics());
  for (const std::string& topic : served.unrouted) {
    // Logged once per topic; the set is capped against applications that
    // invent topics without end.
    if (unrouted_logged_.size() < 1000 && unrouted_logged_.insert(topic).second) {
      rt_.log->warn(
          "topic {} has pending rows but no route (no topics entry, no \"*\"): they stay "
          "pending",
          topic);
    }
  }
  rt_.unrouted_pending.store(static_cast<std::int64_t>(served.unrouted.size()));
  return served;
}

std::vector<store::Claimed> Sweeper::ClaimDue(const std::string& topic, int& want,
                                              const WorkerPool::Room& room, std::int64_t now) {
  const int statement_rows =
      room.row_bytes <= 0
          ? rt_.options.claim_batch
          : static_cast<int>(std::clamp<std::int64_t>(kClaimStatementBytes / room.row_bytes, 1,
                                                      rt_.options.claim_batch));
  std::vector<store::Claimed> claimed;
  for (;;) {
    try {
      bool filled = false;
      rt_.writer->Run([&](store::Store& s) {
        claimed.clear();  // the transaction may be retried
        filled = false;
        std::int64_t bytes = 0;
        while (static_cast<int>(claimed.size()) < want) {
          const int limit = std::min(statement_rows, want - static_cast<int>(claimed.size()));
          std::vector<store::Claimed> more =
              s.ClaimDue(topic, rt_.owner, rt_.LeaseUntil(now), now, limit,
                         /*quarantined_only=*/false, store::Store::ClaimSync::kByCaller);
          for (const store::Claimed& c : more) {
            const std::size_t headers = c.row.headers_json ? c.row.headers_json->size() : 0;
            bytes += static_cast<std::int64_t>(c.row.payload.size() + headers);
          }
          claimed.insert(claimed.end(), std::make_move_iterator(more.begin()),
                         std::make_move_iterator(more.end()));
          if (static_cast<int>(more.size()) < limit) break;
          // Larger rows than the pool's estimate (the payload size changed):
          // more would be held in memory beyond its fill target.
          if (bytes >= room.bytes) {
            filled = true;
            break;
          }
        }
      });
      if (filled) want = static_cast<int>(claimed.size());
      break;
    } catch (const store::StoreError& e) {
      // A claim writes each row's page into the WAL (the state only; the
      // payload lives in outbox_payload): on a nearly full disk a smaller
      // transaction may still fit, and delivering is what frees the space.
      if (!e.full() || want == 1) throw;
      want = std::max(1, want / 4);
    }
  }
  // The claim's fsync, here rather than in the writer's commit: the writer
  // goes on with completions meanwhile (on this disk an fsync took about as
  // long as delivering a batch of 100; benchmark figure 3, batch mode).
  // Nothing claimed is dispatched before it; if it fails, the rows stay in
  // flight until their lease expires, as after a failed fsync in a commit.
  if (!claimed.empty()) reader_->SyncLogForClaims();
  return claimed;
}

void Sweeper::PumpPass() {
  const std::int64_t now = rt_.clock->WallMs();
  const std::vector<std::pair<Route*, std::string>> topics = TopicsToServe().topics;
  // Per endpoint (breaker), the priority of a topic there whose pool is full
  // or whose breaker denies while it has due rows: lower priorities on that
  // endpoint wait for the rest of the pass.
  std::map<const Breaker*, int> held;
  // Round robin: each topic claims once per round (topics come highest
  // priority first). One topic claiming again and again while its workers
  // kept up used to take the whole pass, so that topics of equal priority
  // did not share the endpoint.
  std::vector<char> finished(topics.size(), 0);
  for (bool again = true; again;) {
    again = false;
    // This round also: topics that claimed all they asked for and may have
    // more due, which holds lower priorities until the next round.
    std::map<const Breaker*, int> busy = held;
    for (std::size_t i = 0; i < topics.size(); ++i) {
      if (finished[i] != 0) continue;
      if (rt_.stopping.load()) return;
      Route* route = topics[i].first;
      const std::string& topic = topics[i].second;
      const Breaker* breaker = route->breaker.get();
      const int priority = route->options.priority;
      if (const auto it = held.find(breaker); it != held.end() && it->second > priority) {
        finished[i] = 1;
        continue;
      }
      if (const auto it = busy.find(breaker); it != busy.end() && it->second > priority) {
        continue;  // a higher priority claimed this round: again is set
      }
      const auto hold = [&] {
        held.try_emplace(breaker, priority);
        busy.try_emplace(breaker, priority);
        finished[i] = 1;
      };
      if (!reader_->HasDue(topic, now)) {
        finished[i] = 1;
        continue;
      }
      const WorkerPool::Room room = route->pool->FreeRoom();
      const int free = room.rows;
      if (free == 0) {
        route->backlog.store(true);
        hold();
        continue;
      }
      const Breaker::Permit permit = route->breaker->Acquire();
      if (permit == Breaker::Permit::kDenied) {
        hold();
        continue;
      }
      // One transaction claims what the pool has room for, up to
      // kClaimRowsPerTransaction, in statements of claim_batch rows. A
      // transaction per statement made every claim_batch rows a round trip
      // through the writer, behind its group commits, while the workers
      // waited for rows (benchmark figure 3).
      int want =
          permit == Breaker::Permit::kProbe
              ? 1
              : std::min(free, std::max(rt_.options.claim_batch, kClaimRowsPerTransaction));
      std::vector<store::Claimed> claimed = ClaimDue(topic, want, room, now);
      if (claimed.empty() && permit == Breaker::Permit::kProbe) route->breaker->CancelProbe();
      const bool all_claimed = static_cast<int>(claimed.size()) >= want;
      dispatcher_.DispatchAll(std::move(claimed));
      if (permit == Breaker::Permit::kProbe) {
        hold();
      } else if (!all_claimed) {
        finished[i] = 1;  // nothing more is due
      } else {
        busy.try_emplace(breaker, priority);
        again = true;
      }
    }
  }
}

// Rows taken back from a crashed agent go alone (Probation). Returns false
// when no quarantined row holds delivery up.
bool Sweeper::ProbationStep() {
  return probation_.Step(reader_->QuarantinedTopics(), rt_.clock->WallMs());
}

}  // namespace outbox::agent
