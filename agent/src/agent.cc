// The agent: eager dispatch after commit, the sweeper, per-route pools, the
// outcome rules of docs/design.md, retention and a clean stop.
#include "outbox/agent.h"

#include <SQLiteCpp/Database.h>
#include <fcntl.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cereal/external/base64.hpp>
#include <condition_variable>
#include <filesystem>
#include <limits>
#include <random>
#include <set>
#include <thread>

#include "breaker.h"
#include "commit_watcher.h"
#include "http_handler.h"
#include "owner.h"
#include "pool.h"
#include "writer.h"

namespace outbox::agent {

HandlerResult Handler::HandleBatch(std::span<const Delivery> deliveries) {
  for (const Delivery& delivery : deliveries) {
    HandlerResult result = Handle(delivery);
    if (result.outcome != Outcome::kDelivered) return result;
  }
  return {};
}

void Validate(const Options& options) {
  if (options.db_path.empty()) throw std::invalid_argument("db: a database path is required");
  if (options.sweep_interval_ms < 1) {
    throw std::invalid_argument("sweep_interval_ms: expected a positive integer");
  }
  if (options.lease_timeout_ms < 1) {
    throw std::invalid_argument("lease_timeout_ms: expected a positive integer");
  }
  if (options.claim_batch < 1) throw std::invalid_argument("claim_batch: expected a positive integer");
  if (options.crash_budget < 1) {
    throw std::invalid_argument("crash_budget: expected a positive integer");
  }
  if (options.retention.delivered_ms < 0) {
    throw std::invalid_argument("retention.delivered_ms: expected 0 (keep) or more");
  }
  for (const auto& [name, topic] : options.topics) {
    const std::string where = "topics.\"" + name + "\".";
    if (topic.workers < 1) throw std::invalid_argument(where + "workers: expected a positive integer");
    if (topic.queue_capacity < 1) {
      throw std::invalid_argument(where + "queue_capacity: expected a positive integer");
    }
    try {
      store::Validate(topic.retry);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(where + e.what());
    }
    if (topic.breaker.failure_threshold < 1) {
      throw std::invalid_argument(where + "breaker.failure_threshold: expected a positive integer");
    }
    if (topic.breaker.open_ms < 1 || topic.breaker.max_open_ms < topic.breaker.open_ms) {
      throw std::invalid_argument(where + "breaker.open_ms: expected 1 ≤ open_ms ≤ max_open_ms");
    }
  }
}

namespace {

constexpr int kRecycleBatch = 1000;
constexpr int kSqliteFull = 13;
// Rows the sweeper claims in one write transaction (in statements of
// claim_batch). Kept at 100: a claim rewrites each row, payload included,
// into the WAL, and on a disk that just got some space back a larger
// transaction can eat all of it before the checkpoint that would recycle the
// WAL (the full-disk reliability test found 500 × 16 KiB stuck for good).
constexpr int kClaimRowsPerTransaction = 100;
constexpr int kRetentionBatch = 500;
constexpr int kRetentionBatchesPerPass = 20;
constexpr std::size_t kMaxErrorBytes = 1024;

// A row's attempts plus `more`. Other applications may have written any
// number there: a negative one counts as none, and the sum saturates
// instead of overflowing.
int AttemptsPlus(int attempts, int more) {
  const int base = std::max(0, attempts);
  return base > std::numeric_limits<int>::max() - more ? std::numeric_limits<int>::max()
                                                         : base + more;
}

// An HTTP status that says the request itself is misconfigured (a rotated
// token, a wrong URL): the whole backlog would fail the same way, so stop
// sending at once instead of spending attempts.
bool IsConfigurationFailure(int status) {
  return status == 401 || status == 403 || status == 404 || status == 407;
}

std::string Truncate(std::string text) {
  if (text.size() > kMaxErrorBytes) text.resize(kMaxErrorBytes);
  return text;
}

struct Route {
  std::string name;  // the config key: a topic or "*"
  TopicOptions options;
  std::shared_ptr<Handler> handler;
  std::shared_ptr<Breaker> breaker;
  std::unique_ptr<WorkerPool> pool;
  // One read connection per worker, opened by and used only on that worker.
  std::vector<std::unique_ptr<store::Store>> readers;
  std::atomic<bool> backlog{false};
};

// A leased row loaded for sending.
struct Loaded {
  store::Claimed claimed;
  store::Row row;
  transport::Headers headers;
  std::string message_id;
};

}  // namespace

struct Agent::Impl {
  Options options;
  std::shared_ptr<Clock> clock;
  std::shared_ptr<spdlog::logger> log;
  std::shared_ptr<Metrics> metrics;
  std::string owner;
  store::Options store_options;
  std::unique_ptr<Writer> writer;
  std::string database_id;

  std::map<std::string, std::shared_ptr<Handler>, std::less<>> custom_handlers;
  std::map<std::string, std::unique_ptr<Route>, std::less<>> routes;  // fixed after Start
  Route* wildcard = nullptr;
  // Guards `breakers` against Snapshot() while Start/Stop rebuild them.
  std::mutex breakers_mutex;
  std::map<std::string, std::shared_ptr<Breaker>> breakers;  // by endpoint

  // Owned by the sweeper thread (and by Start before it runs).
  std::unique_ptr<store::Store> reader;
  std::set<std::string> unrouted_logged;
  std::chrono::steady_clock::time_point next_retention{};
  // Rows per purge transaction: shrinks when the disk is full, grows back.
  int retention_batch = kRetentionBatch;

  std::mutex stats_mutex;
  std::unique_ptr<store::Store> stats_reader;  // guarded by stats_mutex

  std::atomic<bool> running{false};
  std::atomic<bool> stopping{false};
  // Rows taken back from a crashed agent are being resent one at a time.
  std::atomic<bool> probation{false};
  // Rows handed to a pool and not yet finished sending.
  std::atomic<std::int64_t> sending{0};
  std::atomic<std::int64_t> unrouted_pending{0};

  std::unique_ptr<CommitWatcher> watcher;  // outboxd: commits of other processes

  // Handlers a second Stop() call aborts to cut the first one's grace short.
  std::mutex abort_mutex;
  std::vector<std::shared_ptr<Handler>> abortable;  // guarded by abort_mutex

  std::mutex wake_mutex;
  std::condition_variable_any wake_cv;
  bool wake_flag = false;  // guarded by wake_mutex
  std::jthread sweeper;

  std::mutex random_mutex;
  std::mt19937_64 random{std::random_device{}()};  // guarded by random_mutex

  // --- plumbing ------------------------------------------------------------

  void Wake() {
    {
      std::lock_guard lock(wake_mutex);
      wake_flag = true;
    }
    wake_cv.notify_one();
  }

  double Unit() {
    std::lock_guard lock(random_mutex);
    return std::uniform_real_distribution<double>(0.0, 1.0)(random);
  }

  Route* RouteFor(std::string_view topic) {
    const auto it = routes.find(topic);
    if (it != routes.end()) return it->second.get();
    return wildcard;
  }

  std::int64_t LeaseUntil(std::int64_t now) const { return now + options.lease_timeout_ms; }

  void Revert(const store::Claimed& claimed) {
    const store::Lease lease = claimed.lease;
    writer->Submit({[this, lease](store::Store& s) { s.Revert(lease, clock->WallMs()); }, {}});
  }

  // Hands a freshly claimed row to its pool, or gives it back at once.
  void Dispatch(const store::Claimed& claimed) { DispatchAll({claimed}); }

  // Dispatch for a group: the rows of one route enter its pool together, so
  // that a batch endpoint's worker finds a whole batch rather than the
  // fragment queued before it woke up.
  void DispatchAll(const std::vector<store::Claimed>& claimed) {
    std::vector<std::pair<Route*, std::vector<store::Claimed>>> groups;
    for (const auto& c : claimed) {
      // lease_token counts claims: 1 means the agent sees this row first.
      if (c.lease.token == 1) metrics->Enqueued(c.topic);
      if (stopping.load()) {  // before RouteFor: Stop() tears the routes down
        Revert(c);
        continue;
      }
      Route* route = RouteFor(c.topic);
      if (route == nullptr) {
        Revert(c);
        continue;
      }
      auto group = std::find_if(groups.begin(), groups.end(),
                                [route](const auto& g) { return g.first == route; });
      if (group == groups.end()) group = groups.insert(groups.end(), {route, {}});
      group->second.push_back(c);
    }
    for (auto& [route, items] : groups) {
      sending.fetch_add(static_cast<std::int64_t>(items.size()));
      for (const auto& rejected : route->pool->TrySubmitAll(std::move(items))) {
        sending.fetch_sub(1);
        metrics->PoolRejected(rejected.topic);
        route->backlog.store(true);
        Revert(rejected);
      }
    }
  }

  // --- eager path ------------------------------------------------------------

  void ClaimCommitted(std::vector<std::int64_t> ids) {
    auto claimed = std::make_shared<std::vector<store::Claimed>>();
    writer->Submit(
        {[this, ids = std::move(ids), claimed](store::Store& s) {
           claimed->clear();  // the transaction may be retried
           // A stopping agent claims nothing new: its last write releases
           // whatever it still holds, and nothing may be claimed after it.
           if (stopping.load()) return;
           const std::int64_t now = clock->WallMs();
           for (std::int64_t id : ids) {
             if (auto c = s.ClaimById(id, owner, LeaseUntil(now), now)) {
               claimed->push_back(std::move(*c));
             }
           }
         },
         [this, claimed] {
           std::vector<store::Claimed> ready;
           for (const auto& c : *claimed) {
             if (stopping.load()) {
               Revert(c);
               continue;
             }
             Route* route = RouteFor(c.topic);
             // An open breaker means the sweeper decides when to try again.
             if (route != nullptr && !route->breaker->IsClosed()) {
               Revert(c);
               continue;
             }
             ready.push_back(c);
           }
           DispatchAll(ready);
         }});
  }

  // --- workers ---------------------------------------------------------------

  store::Store& ReaderFor(Route& route, int index) {
    auto& reader_slot = route.readers[static_cast<std::size_t>(index)];
    if (!reader_slot) {
      store::Options read = store_options;
      read.create = false;
      // A rowid lookup touches three or four pages, and the writer's commits
      // in between drop this cache before every read anyway.
      read.cache_kib = 64;
      reader_slot = std::make_unique<store::Store>(read);
    }
    return *reader_slot;
  }

  void Work(Route& route, int index, std::vector<store::Claimed>& batch) {
    std::vector<Loaded> loaded;
    try {
      store::Store& reader_connection = ReaderFor(route, index);
      std::vector<store::Lease> leases;
      leases.reserve(batch.size());
      for (const auto& claimed : batch) leases.push_back(claimed.lease);
      // One read transaction for the whole batch, not one per row.
      std::vector<std::optional<store::Row>> rows = reader_connection.GetLeased(leases);
      for (std::size_t i = 0; i < batch.size(); ++i) {
        const store::Claimed& claimed = batch[i];
        std::optional<store::Row>& row = rows[i];
        if (!row) continue;  // the lease was lost (recycled): someone else sends it
        Loaded item{claimed, std::move(*row), {}, {}};
        item.message_id = transport::MessageId(database_id, item.row.topic, item.row.key);
        try {
          if (item.row.headers_json) {
            item.headers = transport::ParseRowHeaders(*item.row.headers_json);
          }
        } catch (const std::invalid_argument& e) {
          // Written by another application without our triggers: the row can
          // never be sent as it is.
          FinishDead(route, item, std::string("malformed row: ") + e.what(), true);
          continue;
        }
        loaded.push_back(std::move(item));
      }
      if (!loaded.empty()) SendBatch(route, loaded);
    } catch (const std::exception& e) {
      // Reading failed (disk, corruption): give the rows back, untouched.
      log->error("worker: {}: {}", route.name, e.what());
      for (const auto& item : loaded) Revert(item.claimed);
    }
    NoteSent(static_cast<std::int64_t>(batch.size()));
  }

  void NoteSent(std::int64_t n) {
    if (sending.fetch_sub(n) == n && probation.load()) Wake();
  }

  HandlerResult SafeHandle(Route& route, std::span<const Delivery> deliveries) {
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

  bool SafeAlreadyDone(Handler& handler, const Delivery& delivery) {
    try {
      return handler.AlreadyDone(delivery);
    } catch (...) {
      return false;
    }
  }

  static Delivery ToDelivery(const Loaded& item) {
    Delivery d;
    d.id = item.row.id;
    d.topic = item.row.topic;
    d.key = item.row.key;
    d.message_id = item.message_id;
    d.payload = item.row.payload;
    d.headers = &item.headers;
    d.attempt = AttemptsPlus(item.row.attempts, 1);
    d.created_at_ms = item.row.created_at;
    return d;
  }

  void SendBatch(Route& route, std::span<Loaded> items) {
    std::vector<Delivery> deliveries;
    deliveries.reserve(items.size());
    for (const Loaded& item : items) deliveries.push_back(ToDelivery(item));
    if (items.size() == 1 && SafeAlreadyDone(*route.handler, deliveries.front())) {
      FinishDelivered(route, items.front());
      return;
    }
    HandlerResult result = SafeHandle(route, deliveries);
    if (result.outcome == Outcome::kMessageFailure && !result.endpoint_gone && items.size() > 1) {
      // One bad member refuses the whole batch: halve it until the bad one
      // is alone, so that no good message goes dead with it.
      const std::size_t half = items.size() / 2;
      SendBatch(route, items.subspan(0, half));
      SendBatch(route, items.subspan(half));
      return;
    }
    if (result.outcome == Outcome::kDelivered) {
      FinishDelivered(route, items);
      return;
    }
    for (Loaded& item : items) Resolve(route, item, result);
  }

  // --- outcomes (docs/design.md "Outcomes" and "Runtime rules") --------------

  void Resolve(Route& route, Loaded& item, const HandlerResult& result) {
    switch (result.outcome) {
      case Outcome::kDelivered:
        FinishDelivered(route, item);
        return;
      case Outcome::kMessageFailure:
        if (result.endpoint_gone) {
          if (route.breaker->State().state != "gone") {
            log->error("endpoint {} answered 410 Gone: nothing more is sent there until a reload",
                       route.breaker->endpoint());
          }
          route.breaker->MarkGone();
          // The endpoint retired, the message did nothing wrong.
          Reschedule(route, item, false, result, "HTTP 410: endpoint gone");
          return;
        }
        metrics->AttemptFailed(item.row.topic, true);
        FinishDead(route, item, Describe(result), true);
        return;
      case Outcome::kEndpointFailure:
        EndpointFailure(route, item, result);
        return;
    }
  }

  static std::string Describe(const HandlerResult& result) {
    if (!result.error.empty()) return Truncate(result.error);
    if (result.http_status != 0) return "HTTP " + std::to_string(result.http_status);
    return "failed";
  }

  void EndpointFailure(Route& route, Loaded& item, const HandlerResult& result) {
    if (stopping.load()) {
      // Cut short by our own stop: not an attempt at all.
      Revert(item.claimed);
      return;
    }
    const bool was_closed = route.breaker->IsClosed();
    const bool configuration = IsConfigurationFailure(result.http_status);
    if (route.breaker->OnFailure(configuration)) {
      if (configuration) {
        log->error(
            "endpoint {} answered HTTP {}: check its URL and credentials; breaker open, the "
            "backlog waits",
            route.breaker->endpoint(), result.http_status);
      } else {
        log->warn("breaker open for endpoint {} after: {}", route.breaker->endpoint(),
                  Describe(result));
      }
    }
    // An attempt is the message's fault only if the endpoint acknowledged
    // some other message since this one's previous attempt; a probe, a 429
    // and a configuration failure never cost one.
    const std::int64_t since = item.row.last_attempt_at.value_or(item.row.created_at);
    const bool cost = was_closed && !configuration && result.http_status != 429 &&
                      route.breaker->last_ack_wall_ms() > since;
    Reschedule(route, item, cost, result, Describe(result));
  }

  void Reschedule(Route& route, Loaded& item, bool cost, const HandlerResult& result,
                  const std::string& error) {
    const std::int64_t now = clock->WallMs();
    const store::RetryPolicy policy = store::EffectivePolicy(route.options.retry, item.row.retry);
    const int failures = AttemptsPlus(item.row.attempts, cost ? 1 : 0);
    metrics->AttemptFailed(item.row.topic, cost);
    if (cost && (store::AttemptsExhausted(policy, failures) ||
                 store::AgeExhausted(policy, item.row.created_at, now))) {
      const std::string why = store::AttemptsExhausted(policy, failures)
                                  ? " (after " + std::to_string(failures) + " attempts)"
                                  : " (older than retry.max_age_ms)";
      FinishDead(route, item, error + why, /*count_attempt=*/true);
      return;
    }
    std::int64_t delay = store::RetryDelayMs(policy, std::max(1, failures), Unit());
    if (result.retry_after_ms) {
      // The endpoint's own wish is a minimum, within our cap.
      delay = std::max(delay, std::min(*result.retry_after_ms, policy.max_interval_ms));
    }
    const store::Lease lease = item.claimed.lease;
    writer->Submit({[lease, cost, next = now + delay, error = Truncate(error), now](store::Store& s) {
                      s.Reschedule(lease, cost, next, error, now);
                    },
                    {}});
    log->debug("retry topic={} id={} attempt={} cost={} delay_ms={} error={}", item.row.topic,
               item.row.id, failures, cost, delay, error);
  }

  void FinishDelivered(Route& route, Loaded& item) {
    FinishDelivered(route, std::span<Loaded>(&item, 1));
  }

  // One writer task completes a whole acknowledged batch: a task per row
  // cost the writer, the one thread every state change goes through, a
  // queue entry and a closure per row (benchmark figure 3, batch mode).
  void FinishDelivered(Route& route, std::span<Loaded> items) {
    const std::int64_t now = clock->WallMs();
    if (route.breaker->OnSuccess(now)) {
      log->info("breaker closed for endpoint {}: it answers again", route.breaker->endpoint());
      Wake();  // the backlog may go now, not at the next sweep
    }
    for (const Loaded& item : items) {
      // In doubles: created_at may hold anything another application wrote,
      // and INT64_MIN would overflow the subtraction.
      metrics->Delivered(item.row.topic,
                         std::max(0.0, static_cast<double>(now) -
                                           static_cast<double>(item.row.created_at)) /
                             1000.0);
      // One task per row: the writer still commits them together, but when a
      // group fails (a full disk: each completion rewrites its row, payload
      // included) it retries them one by one, and a small one still fits.
      const store::Lease lease = item.claimed.lease;
      writer->Submit({[lease, now](store::Store& s) { s.Complete(lease, now); },
                      {},
                      /*deferrable=*/true});
      log->debug("delivered topic={} id={}", item.row.topic, item.row.id);
    }
  }

  void FinishDead(Route& /*route*/, Loaded& item, const std::string& error, bool count_attempt) {
    const std::int64_t now = clock->WallMs();
    metrics->Dead(item.row.topic);
    const store::Lease lease = item.claimed.lease;
    writer->Submit({[lease, count_attempt, error = Truncate(error), now](store::Store& s) {
                      s.MarkDead(lease, count_attempt, error, now);
                    },
                    {}});
    log->warn("dead-lettered topic={} id={} key={} error={}", item.row.topic, item.row.id,
              item.row.key, error);
  }

  // --- sweeper -----------------------------------------------------------------

  // (route, topic) pairs the sweeper serves: configured topics, plus every
  // topic with pending rows that only "*" routes.
  std::vector<std::pair<Route*, std::string>> TopicsToServe() {
    std::vector<std::pair<Route*, std::string>> served;
    for (auto& [name, route] : routes) {
      if (route.get() != wildcard) served.emplace_back(route.get(), name);
    }
    // Topics with pending rows: those only "*" routes, and the unrouted ones.
    std::int64_t unrouted = 0;
    for (std::string& topic : reader->PendingTopics()) {
      if (routes.count(topic) != 0) continue;
      if (wildcard != nullptr) {
        served.emplace_back(wildcard, std::move(topic));
        continue;
      }
      ++unrouted;
      // Logged once per topic; the set is capped against applications that
      // invent topics without end.
      if (unrouted_logged.size() < 1000 && unrouted_logged.insert(topic).second) {
        log->warn("topic {} has pending rows but no route (no topics entry, no \"*\"): "
                  "they stay pending",
                  topic);
      }
    }
    unrouted_pending.store(unrouted);
    return served;
  }

  void FullPass() {
    std::vector<std::string> recycled;
    writer->Run([&](store::Store& s) {
      // Read the time inside the transaction: a `now` from before the queue
      // wait would make leases claimed meanwhile look absurdly long.
      recycled = s.RecycleExpired(clock->WallMs(), options.lease_timeout_ms, kRecycleBatch);
    });
    if (!recycled.empty()) {
      log->info("recycled {} rows whose lease expired", recycled.size());
      for (const auto& topic : recycled) metrics->Recycled(topic, 1);
    }
    TakeBackFromDeadOwners();
    const auto served = TopicsToServe();
    const std::int64_t now = clock->WallMs();
    writer->Run([&](store::Store& s) {
      for (const auto& [route, topic] : served) {
        s.MakeDueIfFarAhead(topic, now, route->options.retry.max_interval_ms);
      }
    });
    if (clock->Monotonic() >= next_retention) {
      Retention();
      next_retention = clock->Monotonic() + std::chrono::milliseconds(options.retention.interval_ms);
    }
  }

  void TakeBackFromDeadOwners() {
    for (const std::string& other : reader->LeaseOwners()) {
      if (other == owner || !OwnerIsGone(other)) continue;
      store::Store::TakeBack taken;
      writer->Run([&](store::Store& s) {
        taken = s.TakeBackOwner(other, options.crash_budget, clock->WallMs());
      });
      if (taken.quarantined > 0) {
        metrics->TakenBack(taken.quarantined);
        log->warn("took back {} rows leased by {}, which no longer runs; resending them one at "
                  "a time",
                  taken.quarantined, other);
      }
      for (const std::string& topic : taken.dead_topics) {
        metrics->Dead(topic, /*by_crash_budget=*/true);
        log->warn("dead-lettered topic={}: it crashed the agent {} times while alone in flight",
                  topic, options.crash_budget);
      }
    }
  }

  // Claims due rows for every served topic whose breaker and pool allow it.
  void PumpPass() {
    const std::int64_t now = clock->WallMs();
    for (auto& served : TopicsToServe()) {
      Route* route = served.first;
      const std::string& topic = served.second;  // clang 14 cannot capture bindings
      if (stopping.load()) return;
      for (;;) {
        if (!reader->HasDue(topic, now)) break;
        const int free = route->pool->FreeSlots();
        if (free == 0) {
          route->backlog.store(true);
          break;
        }
        const Breaker::Permit permit = route->breaker->Acquire();
        if (permit == Breaker::Permit::kDenied) break;
        // One transaction claims what the pool has room for, up to
        // kClaimRowsPerTransaction, in statements of claim_batch rows. A
        // transaction per statement made every claim_batch rows a round trip
        // through the writer, behind its group commits, while the workers
        // waited for rows (benchmark figure 3).
        int want = permit == Breaker::Permit::kProbe
                       ? 1
                       : std::min(free, std::max(options.claim_batch, kClaimRowsPerTransaction));
        std::vector<store::Claimed> claimed;
        for (;;) {
          try {
            writer->Run([&](store::Store& s) {
              claimed.clear();  // the transaction may be retried
              while (static_cast<int>(claimed.size()) < want) {
                const int limit =
                    std::min(options.claim_batch, want - static_cast<int>(claimed.size()));
                std::vector<store::Claimed> more =
                    s.ClaimDue(topic, owner, LeaseUntil(now), now, limit);
                claimed.insert(claimed.end(), more.begin(), more.end());
                if (static_cast<int>(more.size()) < limit) break;
              }
            });
            break;
          } catch (const store::StoreError& e) {
            // A claim rewrites each row, payload included, into the WAL: on
            // a nearly full disk a smaller transaction may still fit, and
            // delivering is what frees the space.
            if ((e.sqlite_code() & 0xff) != kSqliteFull || want == 1) throw;
            want = std::max(1, want / 4);
          }
        }
        if (claimed.empty() && permit == Breaker::Permit::kProbe) route->breaker->CancelProbe();
        DispatchAll(claimed);
        if (permit == Breaker::Permit::kProbe || static_cast<int>(claimed.size()) < want) break;
      }
    }
  }

  // Resends rows taken back from a crashed agent alone, so that a crash
  // during such a send can be blamed on that row. Returns false when there
  // is nothing in quarantine.
  bool ProbationStep() {
    if (reader->QuarantinedCount() == 0) {
      probation.store(false);
      return false;
    }
    probation.store(true);
    if (sending.load() > 0) return true;  // a worker's finish wakes us
    const std::int64_t now = clock->WallMs();
    for (auto& served : TopicsToServe()) {
      Route* route = served.first;
      const std::string& topic = served.second;
      if (!route->breaker->IsClosed()) continue;
      std::vector<store::Claimed> claimed;
      writer->Run([&](store::Store& s) {
        claimed = s.ClaimDue(topic, owner, LeaseUntil(now), now, 1, /*quarantined_only=*/true);
      });
      if (!claimed.empty()) {
        Dispatch(claimed.front());
        return true;
      }
    }
    return true;
  }

  void SweepLoop(std::stop_token stop) {
    auto next_full = std::chrono::steady_clock::now();
    auto last_error_log = std::chrono::steady_clock::time_point{};
    while (!stop.stop_requested()) {
      try {
        if (std::chrono::steady_clock::now() >= next_full) {
          FullPass();
          next_full = std::chrono::steady_clock::now() +
                      std::chrono::milliseconds(options.sweep_interval_ms);
        }
        if (!ProbationStep()) PumpPass();
        metrics->SweeperSucceeded();
      } catch (const std::exception& e) {
        metrics->SweeperFailed(e.what());
        // Rate-limited: a locked or full disk would otherwise flood the log.
        const auto now = std::chrono::steady_clock::now();
        if (now - last_error_log > std::chrono::seconds(10)) {
          log->error("sweeper: {}", e.what());
          last_error_log = now;
        }
        next_full = std::min(
            next_full, now + std::min<std::chrono::milliseconds>(
                                 std::chrono::seconds(1),
                                 std::chrono::milliseconds(options.sweep_interval_ms)));
      }
      std::unique_lock lock(wake_mutex);
      wake_cv.wait_until(lock, stop, next_full, [this] { return wake_flag; });
      wake_flag = false;
    }
  }

  // --- retention -----------------------------------------------------------------

  void Retention() {
    if (options.retention.delivered_ms <= 0) return;
    const std::int64_t cutoff = clock->WallMs() - options.retention.delivered_ms;
    int purged = 0;
    for (int i = 0; i < kRetentionBatchesPerPass && !stopping.load(); ++i) {
      const int batch = retention_batch;
      int n = 0;
      try {
        if (options.retention.archive_path.empty()) {
          writer->Run([&](store::Store& s) { n = s.PurgeDelivered(cutoff, batch); });
        } else {
          std::vector<store::Row> rows = reader->PeekDelivered(cutoff, batch);
          if (rows.empty()) break;
          Archive(rows);  // durable before anything is deleted
          std::vector<std::int64_t> ids;
          for (const auto& row : rows) ids.push_back(row.id);
          writer->Run([&](store::Store& s) { n = s.DeleteDelivered(ids); });
          n = static_cast<int>(rows.size());
        }
      } catch (const store::StoreError& e) {
        // On a full disk even a DELETE needs room: its pages go to the WAL
        // (all of them where SQLite zeroes deleted content, as Debian's
        // SECURE_DELETE build does). Empty the WAL into the database and
        // try smaller transactions, down to one row, so that purging can
        // free the disk it needs.
        if ((e.sqlite_code() & 0xff) != SQLITE_FULL || batch == 1) throw;
        retention_batch = std::max(1, batch / 8);
        log->warn("retention: disk full while purging {} rows; checkpointing and purging {} at a "
                  "time",
                  batch, retention_batch);
        try {
          writer->RunAlone(
              [](store::Store& s) { s.connection().exec("PRAGMA wal_checkpoint(TRUNCATE)"); });
        } catch (const std::exception&) {  // the smaller batch may still fit
        }
        continue;
      }
      purged += n;
      if (n < batch) break;
      retention_batch = std::min(kRetentionBatch, batch * 2);
    }
    if (purged == 0) return;
    log->info("retention purged {} delivered rows", purged);
    // Give the pages back on files that init created (auto_vacuum =
    // INCREMENTAL; a no-op elsewhere) and keep the -wal file small.
    writer->RunAlone([&](store::Store& s) {
      s.connection().exec("PRAGMA incremental_vacuum");
      if (sending.load() == 0) s.connection().exec("PRAGMA wal_checkpoint(TRUNCATE)");
    });
  }

  void Archive(const std::vector<store::Row>& rows) {
    const std::string& path = options.retention.archive_path;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && st.st_size >= options.retention.archive_max_bytes) {
      std::filesystem::rename(path, path + ".1");  // keep one previous file
    }
    rapidjson::StringBuffer buffer;
    for (const auto& row : rows) {
      rapidjson::Writer<rapidjson::StringBuffer> json(buffer);
      json.StartObject();
      json.Key("id");
      json.Int64(row.id);
      json.Key("topic");
      json.String(row.topic.c_str(), static_cast<rapidjson::SizeType>(row.topic.size()));
      json.Key("msg_key");
      json.String(row.key.c_str(), static_cast<rapidjson::SizeType>(row.key.size()));
      json.Key("message_id");
      const std::string id = transport::MessageId(database_id, row.topic, row.key);
      json.String(id.c_str(), static_cast<rapidjson::SizeType>(id.size()));
      json.Key("payload_base64");
      const std::string payload = cereal::base64::encode(
          reinterpret_cast<const unsigned char*>(row.payload.data()), row.payload.size());
      json.String(payload.c_str(), static_cast<rapidjson::SizeType>(payload.size()));
      if (row.headers_json) {
        json.Key("headers");
        json.String(row.headers_json->c_str(),
                    static_cast<rapidjson::SizeType>(row.headers_json->size()));
      }
      json.Key("attempts");
      json.Int(row.attempts);
      json.Key("created_at");
      json.Int64(row.created_at);
      json.Key("delivered_at");
      json.Int64(row.updated_at);
      json.EndObject();
      buffer.Put('\n');
    }
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd < 0) throw std::runtime_error("retention.archive_path: cannot open " + path);
    const char* data = buffer.GetString();
    std::size_t left = buffer.GetSize();
    bool ok = true;
    while (left > 0 && ok) {
      const ssize_t n = ::write(fd, data, left);
      if (n < 0 && errno == EINTR) continue;
      ok = n > 0;
      if (ok) {
        data += n;
        left -= static_cast<std::size_t>(n);
      }
    }
    ok = ok && ::fsync(fd) == 0;
    ::close(fd);
    if (!ok) throw std::runtime_error("retention.archive_path: cannot write " + path);
  }

  // --- lifecycle ---------------------------------------------------------------

  std::shared_ptr<Breaker> BreakerFor(const std::string& endpoint, const TopicOptions& topic) {
    std::lock_guard lock(breakers_mutex);
    auto& slot = breakers[endpoint];
    if (!slot) {
      // A probe that never reported (its worker stopped) is forgotten after
      // the longest a send can take.
      slot = std::make_shared<Breaker>(endpoint, topic.breaker, clock,
                                       2 * topic.endpoint.timeout_ms + 1000);
    }
    return slot;
  }

  void BuildRoutes() {
    std::map<std::string, TopicOptions, std::less<>> topics = options.topics;
    for (const auto& [name, handler] : custom_handlers) topics.try_emplace(name);
    std::vector<std::string> labels;
    for (auto& [name, topic] : topics) {
      auto route = std::make_unique<Route>();
      route->name = name;
      route->options = topic;
      std::string endpoint;
      if (auto custom = custom_handlers.find(name); custom != custom_handlers.end()) {
        route->handler = custom->second;
        endpoint = "handler:" + name;
      } else {
        if (topic.endpoint.url.empty()) {
          throw std::invalid_argument("topics.\"" + name + "\".url: required");
        }
        try {
          route->handler = std::make_shared<HttpHandler>(topic.endpoint);
        } catch (const std::invalid_argument& e) {
          throw std::invalid_argument("topics.\"" + name + "\"." + e.what());
        }
        endpoint = topic.endpoint.url.substr(0, topic.endpoint.url.find('?'));
      }
      route->breaker = BreakerFor(endpoint, topic);
      if (name == "*") wildcard = route.get();
      labels.push_back(name);
      routes.emplace(name, std::move(route));
    }
    metrics->SetLabels(std::move(labels));
  }

  void StartPools() {
    for (auto& [name, route] : routes) {
      Route* r = route.get();
      r->readers.resize(static_cast<std::size_t>(r->options.workers));
      const int batch_max = static_cast<int>(
          std::max<std::size_t>(1, r->options.endpoint.batch.max_messages));
      r->pool = std::make_unique<WorkerPool>(
          name, r->options.workers, r->options.queue_capacity, batch_max,
          [this, r](int index, std::vector<store::Claimed>& batch) { Work(*r, index, batch); },
          [this, r] {
            if (r->backlog.exchange(false)) Wake();
          });
    }
  }
};

Agent::Agent(Options options) : impl_(std::make_unique<Impl>()) {
  Validate(options);
  Impl& d = *impl_;
  d.options = std::move(options);
  d.clock = d.options.clock ? d.options.clock : SystemClock();
  d.log = d.options.logger;
  if (!d.log) {
    d.log = std::make_shared<spdlog::logger>("outbox",
                                             std::make_shared<spdlog::sinks::stderr_sink_mt>());
  }
  d.metrics = d.options.metrics ? d.options.metrics : std::make_shared<Metrics>();
  d.owner = d.options.owner.empty() ? NewOwnerId() : d.options.owner;
  d.store_options.path = d.options.db_path;
  d.store_options.create = true;
  d.store_options.synchronous = d.options.synchronous;
  d.store_options.boot_clock = [clock = d.clock] { return clock->Boot(); };
  // The writer's working set is the B-tree paths its transitions touch (the
  // claim index around pending and in-flight rows, the retention tail, the
  // table leaves of rows in flight, the counters): a few hundred KiB even at
  // 1 000 000 rows. The store's default 2 MiB only held pages it would not
  // read again, and outboxd's RSS (benchmark figure 6) grew by them.
  d.store_options.cache_kib = 512;
  d.writer = std::make_unique<Writer>(d.store_options, d.log);
  d.database_id = d.writer->database_id();
  if (d.options.limits) {
    const store::Limits limits = *d.options.limits;
    d.writer->Run([&](store::Store& s) { s.SetLimits(limits); });
  }
}

Agent::~Agent() { Stop(std::chrono::milliseconds(0)); }

void Agent::RegisterHandler(const std::string& topic, std::shared_ptr<Handler> handler) {
  if (impl_->running.load()) throw std::logic_error("RegisterHandler: the agent is running");
  if (topic.empty()) throw std::invalid_argument("topic: must not be empty");
  if (!handler) throw std::invalid_argument("handler: must not be null");
  impl_->custom_handlers[topic] = std::move(handler);
}

void Agent::Start() {
  Impl& d = *impl_;
  if (d.running.load()) return;
  d.BuildRoutes();
  store::Options read = d.store_options;
  read.create = false;
  read.cache_kib = 128;  // index seeks, and the stats' scans, which no cache helps
  d.reader = std::make_unique<store::Store>(read);
  d.stats_reader = std::make_unique<store::Store>(read);
  d.StartPools();
  d.stopping.store(false);
  d.TakeBackFromDeadOwners();
  {
    std::lock_guard lock(d.abort_mutex);
    for (const auto& [name, route] : d.routes) d.abortable.push_back(route->handler);
  }
  d.running.store(true);
  d.sweeper = std::jthread([&d](std::stop_token stop) { d.SweepLoop(std::move(stop)); });
  if (d.options.watch_external_commits) {
    CommitWatcher::Options watch;
    watch.db_path = d.options.db_path;
    watch.poll_ms = d.options.watch_poll_ms;
    watch.logger = d.log;
    d.watcher = std::make_unique<CommitWatcher>(std::move(watch), [&d] { d.Wake(); });
  }
  d.log->info("agent started: owner={} database={} routes={}", d.owner, d.options.db_path,
              d.routes.size());
}

void Agent::Stop(std::chrono::milliseconds grace) {
  Impl& d = *impl_;
  if (!d.running.exchange(false)) {
    // A stop is already running (or done): cut its grace period short by
    // aborting whatever is still being sent.
    std::lock_guard lock(d.abort_mutex);
    for (const auto& handler : d.abortable) handler->Abort();
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + grace;
  d.stopping.store(true);
  d.watcher.reset();
  d.sweeper.request_stop();
  d.Wake();
  if (d.sweeper.joinable()) d.sweeper.join();

  // Rows waiting in a queue never started: hand them back as they were.
  for (auto& [name, route] : d.routes) {
    for (const auto& claimed : route->pool->StopIntake()) {
      d.Revert(claimed);
      d.NoteSent(1);
    }
  }
  // Sends in flight may finish until the deadline; then they are cut.
  for (auto& [name, route] : d.routes) {
    if (!route->pool->WaitIdle(deadline)) route->handler->Abort();
  }
  for (auto& [name, route] : d.routes) route->pool->Join();
  // Whatever is still leased by us (a state change the writer gave up on)
  // goes back to pending now rather than after the lease timeout.
  try {
    d.writer->Run([&](store::Store& s) { s.ReleaseOwner(d.owner, d.clock->WallMs()); });
  } catch (const std::exception& e) {
    d.log->error("stop: could not release leases ({}); they expire after lease_timeout_ms",
                 e.what());
  }
  {
    std::lock_guard lock(d.abort_mutex);
    d.abortable.clear();
  }
  d.routes.clear();
  {
    std::lock_guard lock(d.breakers_mutex);
    d.breakers.clear();
  }
  d.wildcard = nullptr;
  d.reader.reset();
  {
    std::lock_guard lock(d.stats_mutex);
    d.stats_reader.reset();
  }
  d.log->info("agent stopped: owner={}", d.owner);
}

void Agent::NotifyCommitted(std::span<const std::int64_t> ids) {
  Impl& d = *impl_;
  if (ids.empty() || !d.running.load() || d.stopping.load() || d.probation.load()) return;
  d.ClaimCommitted(std::vector<std::int64_t>(ids.begin(), ids.end()));
}

void Agent::NotifyExternalCommit() { impl_->Wake(); }

bool Agent::Running() const { return impl_->running.load(); }
const std::string& Agent::database_id() const { return impl_->database_id; }
const std::string& Agent::owner() const { return impl_->owner; }
std::int64_t Agent::WriterTransactions() const { return impl_->writer->transactions(); }

MetricsSnapshot Agent::Snapshot() {
  Impl& d = *impl_;
  MetricsSnapshot snapshot = d.metrics->Snapshot();
  {
    std::lock_guard lock(d.breakers_mutex);
    for (const auto& [endpoint, breaker] : d.breakers) {
      snapshot.breakers.push_back(breaker->State());
    }
  }
  snapshot.unrouted_pending = d.unrouted_pending.load();
  std::lock_guard lock(d.stats_mutex);
  if (d.stats_reader) snapshot.db = d.stats_reader->GetStats();
  return snapshot;
}

// --- Transaction -------------------------------------------------------------

Transaction::Transaction(Agent* agent, store::Producer& producer)
    : agent_(agent), producer_(producer) {
  sqlite3* db = producer_.connection();
  if (sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) {
    throw store::StoreError(std::string("begin: ") + sqlite3_errmsg(db),
                            sqlite3_extended_errcode(db));
  }
  open_ = true;
}

Transaction::~Transaction() {
  if (open_) Rollback();
}

store::EnqueueResult Transaction::Enqueue(const store::NewMessage& message, bool idempotent) {
  if (!open_) throw std::logic_error("Enqueue: the transaction is finished");
  store::EnqueueOptions options;
  options.idempotent = idempotent;
  store::EnqueueResult result = producer_.Enqueue(message, options);
  if (result.inserted) ids_.push_back(result.id);
  return result;
}

void Transaction::Commit() {
  if (!open_) throw std::logic_error("Commit: the transaction is finished");
  sqlite3* db = producer_.connection();
  open_ = false;
  if (sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
    const int code = sqlite3_extended_errcode(db);
    const std::string message = sqlite3_errmsg(db);
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    ids_.clear();
    throw store::StoreError("commit: " + message, code);
  }
  // Only now is the message real: hand it to the eager path.
  if (agent_ != nullptr && !ids_.empty()) agent_->NotifyCommitted(ids_);
  ids_.clear();
}

void Transaction::Rollback() {
  if (!open_) return;
  open_ = false;
  ids_.clear();
  sqlite3_exec(producer_.connection(), "ROLLBACK", nullptr, nullptr, nullptr);
}

}  // namespace outbox::agent
