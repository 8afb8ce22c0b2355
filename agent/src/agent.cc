// The Agent front: construction, Start/Stop, the eager path's entry and
// Snapshot. The work is done by its parts:
//   route_table  routes, breakers, which topics can send now
//   dispatcher   claimed rows into their route's pool; the eager claims
//   delivery_worker + outcome  sending and what a result does to the row
//   sweeper      recycling, take-back, due claims, probation, retention
//   writer       the one write connection (group commit)
#include "outbox/agent.h"

#include <SQLiteCpp/Database.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <thread>

#include "commit_watcher.h"
#include "delivery_worker.h"
#include "dispatcher.h"
#include "in_memory.h"
#include "ordering_modes.h"
#include "owner.h"
#include "route_table.h"
#include "runtime.h"
#include "sql_hook.h"
#include "sweeper.h"

namespace outbox::agent {

struct Agent::Impl {
  Runtime rt;
  // Fixed between Start and Stop; Build and Clear run under stats_mutex,
  // which Snapshot (any thread, any time) holds while it looks routes up.
  RouteTable routes;
  Dispatcher dispatcher{rt, routes};
  DeliveryWorker worker{rt, &dispatcher};
  std::map<std::string, std::shared_ptr<Handler>, std::less<>> custom_handlers;
  std::unique_ptr<Sweeper> sweeper;
  std::unique_ptr<CommitWatcher> watcher;  // outboxd: commits of other processes
  std::atomic<bool> running{false};

  std::mutex stats_mutex;
  std::unique_ptr<store::Store> stats_reader;  // guarded by stats_mutex; set while routes are

  // Handlers a second Stop() call aborts to cut the first one's grace short.
  std::mutex abort_mutex;
  std::vector<std::shared_ptr<Handler>> abortable;  // guarded by abort_mutex

  explicit Impl(std::shared_ptr<Clock> clock) : routes(std::move(clock)) {}

  void StartPools() {
    for (const auto& [name, route] : routes.routes()) {
      Route* r = route.get();
      const int batch_max =
          static_cast<int>(std::max<std::size_t>(1, r->options.endpoint.batch.max_messages));
      r->pool = std::make_unique<WorkerPool>(
          name, r->options.workers,
          WorkerPool::Capacity{
              r->options.queue_capacity, r->options.queue_bytes, rt.options.claim_batch,
              static_cast<std::int64_t>(std::min<std::uint64_t>(
                  r->options.endpoint.batch.max_bytes, std::numeric_limits<std::int64_t>::max()))},
          batch_max,
          [this, r](int index, std::vector<store::Claimed>& batch, bool run) {
            worker.Work(*r, index, batch, run);
          },
          [this, r] {
            if (r->backlog.exchange(false)) rt.wakeup.Notify();
          });
    }
  }

  // RunDue's test: a row in flight, or a due row that a route with a closed
  // breaker would claim now. One read transaction: in two snapshots a row
  // claimed between the reads would be in neither.
  bool HasWorkDue() {
    std::lock_guard lock(stats_mutex);
    if (!stats_reader) return false;
    const store::Store::ReadSnapshot snapshot(*stats_reader);
    store::ListFilter in_flight;
    in_flight.status = store::Status::kInFlight;
    in_flight.limit = 1;
    if (!stats_reader->List(in_flight).empty()) return true;
    const std::int64_t now = rt.clock->WallMs();
    for (const std::string& topic : stats_reader->PendingTopics()) {
      const Route* route = routes.For(topic);
      if (route != nullptr && route->breaker->IsClosed() && stats_reader->HasDue(topic, now)) {
        return true;
      }
    }
    return false;
  }

  // Stop() after the sweeper: queued rows go back, sends in flight get until
  // `deadline`, then every pool is joined.
  void DrainPools(std::chrono::steady_clock::time_point deadline) {
    // Rows waiting in a queue never started: hand them back as they were.
    for (const auto& [name, route] : routes.routes()) {
      for (const auto& claimed : route->pool->StopIntake()) {
        rt.Revert(claimed.lease);
        rt.NoteSent(1);
      }
    }
    // Sends in flight may finish until the deadline; then they are cut.
    for (const auto& [name, route] : routes.routes()) {
      if (!route->pool->WaitIdle(deadline)) route->handler->Abort();
    }
    for (const auto& [name, route] : routes.routes()) route->pool->Join();
  }
};

Agent::Agent(Options options) {
  Validate(options);
  std::shared_ptr<Clock> clock = options.clock ? options.clock : SystemClock();
  impl_ = std::make_unique<Impl>(clock);
  Runtime& rt = impl_->rt;
  rt.options = std::move(options);
  rt.clock = std::move(clock);
  rt.log = rt.options.logger;
  if (!rt.log) {
    rt.log = std::make_shared<spdlog::logger>("outbox",
                                              std::make_shared<spdlog::sinks::stderr_sink_mt>());
  }
  LimitToMemory(rt.options, *rt.log);
  rt.metrics = rt.options.metrics ? rt.options.metrics : std::make_shared<Metrics>();
  rt.owner = rt.options.owner.empty() ? NewOwnerId() : rt.options.owner;
  rt.store_options.path = rt.options.db_path;
  rt.store_options.create = true;
  rt.store_options.synchronous = rt.options.synchronous;
  rt.store_options.boot_clock = [clock = rt.clock] { return clock->Boot(); };
  // The writer's working set is the B-tree paths its transitions touch (the
  // claim index around pending and in-flight rows, the retention tail, the
  // table leaves of rows in flight, the counters): a few hundred KiB even at
  // 1 000 000 rows. The store's default 2 MiB only held pages it would not
  // read again, and outboxd's RSS (benchmark figure 6) grew by them.
  rt.store_options.cache_kib = 512;
  rt.writer = std::make_unique<Writer>(rt.store_options, rt.log);
  rt.database_id = rt.writer->database_id();
  // The hooks' SQL against the schema as it is now (created or migrated just
  // above): a bad statement stops the start, not the first delivery.
  rt.writer->RunAlone([&](store::Store& s) { CheckTopicHooks(s.connection().getHandle(), rt.options); });
  if (rt.options.limits) {
    const store::Limits limits = *rt.options.limits;
    rt.writer->Run([&](store::Store& s) { s.SetLimits(limits); });
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
  Runtime& rt = d.rt;
  if (d.running.load()) return;
  AgreeOrderings(rt);
  store::Options read = rt.store_options;
  read.create = false;
  read.cache_kib = 128;  // the stats' scans, which no cache helps
  {
    std::lock_guard lock(d.stats_mutex);
    d.stats_reader.reset();
    d.routes.Build(rt.options.topics, d.custom_handlers);
    d.stats_reader = std::make_unique<store::Store>(read);
  }
  rt.metrics->SetLabels(d.routes.Names(), rt.options.metrics_max_topics);
  d.sweeper = std::make_unique<Sweeper>(rt, d.routes, d.dispatcher);
  d.StartPools();
  rt.stopping.store(false);
  d.sweeper->TakeBackFromDeadOwners();
  {
    std::lock_guard lock(d.abort_mutex);
    for (const auto& [name, route] : d.routes.routes()) d.abortable.push_back(route->handler);
  }
  const std::int64_t started_ns = std::chrono::steady_clock::now().time_since_epoch().count();
  rt.sweeper_pass_ns.store(started_ns);
  rt.writer_commit_ns.store(started_ns);
  d.running.store(true);
  d.sweeper->Start();
  if (rt.options.watch_external_commits) {
    CommitWatcher::Options watch;
    watch.db_path = rt.options.db_path;
    watch.poll_ms = rt.options.watch_poll_ms;
    watch.logger = rt.log;
    d.watcher = std::make_unique<CommitWatcher>(std::move(watch), [&rt] { rt.wakeup.Notify(); });
  }
  rt.log->info("agent started: owner={} database={} routes={}", rt.owner, rt.options.db_path,
               d.routes.size());
}

void Agent::Stop(std::chrono::milliseconds grace) {
  Impl& d = *impl_;
  Runtime& rt = d.rt;
  if (!d.running.exchange(false)) {
    // A stop is already running (or done): cut its grace period short by
    // aborting whatever is still being sent.
    std::lock_guard lock(d.abort_mutex);
    for (const auto& handler : d.abortable) handler->Abort();
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + grace;
  rt.stopping.store(true);
  rt.EndPauses();
  d.watcher.reset();
  d.sweeper.reset();  // stops and joins its thread
  d.DrainPools(deadline);
  // Whatever is still leased by us (a state change the writer gave up on)
  // goes back to pending now rather than after the lease timeout.
  try {
    rt.writer->Run([&](store::Store& s) { s.ReleaseOwner(rt.owner, rt.clock->WallMs()); });
  } catch (const std::exception& e) {
    rt.log->error("stop: could not release leases ({}); they expire after lease_timeout_ms",
                  e.what());
  }
  {
    std::lock_guard lock(d.abort_mutex);
    d.abortable.clear();
  }
  {
    std::lock_guard lock(d.stats_mutex);
    d.routes.Clear();
    d.stats_reader.reset();
  }
  rt.log->info("agent stopped: owner={}", rt.owner);
}

void Agent::NotifyCommitted(std::span<const std::int64_t> ids) {
  Impl& d = *impl_;
  if (ids.empty() || !d.running.load() || d.rt.stopping.load() || d.rt.probation.load()) return;
  std::vector<store::EnqueuedRow> rows;
  rows.reserve(ids.size());
  for (std::int64_t id : ids) rows.push_back({id, {}});
  d.dispatcher.ClaimCommitted(std::move(rows));
}

void Agent::NotifyCommitted(std::span<const store::EnqueuedRow> rows) {
  Impl& d = *impl_;
  if (rows.empty() || !d.running.load() || d.rt.stopping.load() || d.rt.probation.load()) return;
  d.dispatcher.ClaimCommitted(std::vector<store::EnqueuedRow>(rows.begin(), rows.end()));
}

void Agent::NotifyExternalCommit() { impl_->rt.wakeup.Notify(); }

bool Agent::Running() const { return impl_->running.load(); }
const std::string& Agent::database_id() const { return impl_->rt.database_id; }
const std::string& Agent::owner() const { return impl_->rt.owner; }
std::int64_t Agent::WriterTransactions() const { return impl_->rt.writer->transactions(); }

std::vector<BreakerState> Agent::Breakers() const { return impl_->routes.BreakerStates(); }

Liveness Agent::CheckLiveness() {
  Runtime& rt = impl_->rt;
  if (impl_->running.load() && !rt.writer_probe_queued.exchange(true)) {
    // An empty transaction: BEGIN IMMEDIATE and COMMIT, nothing written. It
    // stays queued while another connection holds the write lock.
    Writer::Task probe;
    probe.apply = [](store::Store&) {};
    probe.after_commit = [&rt] {
      rt.writer_commit_ns.store(std::chrono::steady_clock::now().time_since_epoch().count());
      rt.writer_probe_queued.store(false);
    };
    rt.writer->Submit(std::move(probe));
  }
  using Steady = std::chrono::steady_clock;
  return {Steady::time_point(Steady::duration(rt.writer_commit_ns.load())),
          Steady::time_point(Steady::duration(rt.sweeper_pass_ns.load()))};
}

bool Agent::RunDue(std::chrono::milliseconds timeout) {
  Impl& d = *impl_;
  if (!d.running.load()) throw std::logic_error("RunDue: the agent is not running");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    d.rt.wakeup.Notify();
    if (d.rt.sending.load() == 0 && !d.HasWorkDue()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    // Polls: the outcome of a send is written by the writer thread, which
    // signals nobody; a millisecond is far below a send's own cost.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

MetricsSnapshot Agent::Snapshot() {
  Impl& d = *impl_;
  MetricsSnapshot snapshot = d.rt.metrics->Snapshot();
  snapshot.breakers = d.routes.BreakerStates();
  std::lock_guard lock(d.stats_mutex);
  snapshot.quarantined_unrouted = d.rt.quarantined_unrouted.load();
  if (!d.stats_reader) return snapshot;  // stopped (or never started): no routes to ask
  snapshot.db = d.stats_reader->GetStats(d.rt.clock->WallMs());
  snapshot.blocked_keys = d.stats_reader->BlockedKeyCount(d.rt.clock->WallMs());
  // Rows, not topics: one forgotten topic with a million rows is a million.
  for (const store::TopicStatusCount& count : snapshot.db.counts) {
    if (count.status == store::Status::kPending && d.routes.For(count.topic) == nullptr) {
      snapshot.unrouted_pending += count.count;
    }
  }
  return snapshot;
}

}  // namespace outbox::agent
