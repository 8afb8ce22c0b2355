// outbox/agent.h: the runtime that delivers outbox rows.
//
// An Agent owns its threads and its own SQLite connections:
//  - a writer thread that applies every state change (claims, completions,
//    reschedules) in few transactions (group commit);
//  - a sweeper thread that recycles expired leases, takes back rows of dead
//    agents, parks rows behind dead heads, expires rows past their deadline
//    (expires_at, ttl_ms), runs retention and claims due rows of the topics
//    that can send now;
//  - per route, a pool of worker threads over a queue of claimed rows (the
//    claim returned them whole, so a worker reads nothing) bounded in rows
//    and bytes; a worker sends one row, a batch bounded by batch.max_messages
//    and batch.max_bytes, or a run of one ordering key, and hands the outcome
//    back to the writer;
//  - optionally a watcher that notices commits of other processes.
// Every thread is joined by Stop() (or the destructor). After a clean stop no
// row is left in flight by this agent.
//
// The application enqueues through Transaction, on its own connection; ids
// reach the agent (the eager path) only after COMMIT returned success.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "outbox/store.h"
#include "outbox/transport.h"

struct sqlite3;

namespace spdlog {
class logger;
}

namespace outbox::agent {

// ---------------------------------------------------------------------------
// Seams: time and delivery.

// Wall time feeds the database (next_attempt_at, created_at, retention);
// leases are measured on the host's boot clock (Boot), which wall-clock
// jumps do not move; monotonic time drives breakers and waits inside the
// process. Implementations must be thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::int64_t WallMs() = 0;
  virtual std::chrono::steady_clock::time_point Monotonic() = 0;
  // The host's boot clock and boot id (store::SystemBootTime by default).
  virtual store::BootTime Boot() { return store::SystemBootTime(); }
};
std::shared_ptr<Clock> SystemClock();

// One message as a handler sees it: the message as the transport sends it
// (transport::Message: message_id, the Idempotency-Key derived from the
// database identity, topic and key; topic, key, payload, the row's headers,
// created_at_ms, schema_version), plus what only the agent knows. A field
// of the message is added to transport::Message and reaches both. Views
// are valid during the call only.
struct Delivery : transport::Message {
  std::int64_t id = 0;  // the row's id
  int attempt = 1;      // 1 for the first try
};

// A handler's verdict: the transport's Result (the one classification of
// docs/design.md "Outcomes"; a field is added there and reaches both), except
// that a default one says delivered, so that `return {};` acknowledges.
// error goes to last_error (no secrets); configuration_failure (HTTP
// 401/403/404/407, a NATS authorization violation, MQTT "not authorized")
// opens the breaker at once instead of after a run of failures;
// response_body, cut to kMaxResponseBytes, is handed to on_delivered hooks
// (a batch's answer is every member's).
using Outcome = transport::Outcome;
struct HandlerResult : transport::Result {
  HandlerResult() { outcome = Outcome::kDelivered; }
  // Implicit: a sink's answer is a handler's.
  HandlerResult(transport::Result result)  // NOLINT(google-explicit-constructor)
      : transport::Result(std::move(result)) {}
  // {outcome, http_status, endpoint_gone, retry_after_ms, error}, in the
  // order handlers have always written them.
  HandlerResult(Outcome verdict, int status, bool gone = false,
                std::optional<std::int64_t> retry_after = std::nullopt, std::string why = {}) {
    outcome = verdict;
    http_status = status;
    endpoint_gone = gone;
    retry_after_ms = retry_after;
    error = std::move(why);
  }
};

// Delivers messages of one topic in the application's own way. Called
// concurrently from the topic's workers, so it must be thread-safe. Must not
// throw; an exception is caught and treated as an endpoint failure.
class Handler {
 public:
  virtual ~Handler() = default;
  // Optional pre-check: true means the effect already happened elsewhere and
  // the message is marked delivered without sending.
  virtual bool AlreadyDone(const Delivery& /*delivery*/) { return false; }
  virtual HandlerResult Handle(const Delivery& delivery) = 0;
  // Several messages at once (batch mode); one result for all of them.
  // The default sends them one by one and reports the first failure.
  virtual HandlerResult HandleBatch(std::span<const Delivery> deliveries);
  // Called from another thread at the stop deadline: abort what is in flight.
  virtual void Abort() {}
};

// ---------------------------------------------------------------------------
// Completion hooks: the application's own state changes in the transaction
// that marks the message delivered (or dead), so the two never disagree.

// Bytes of the receiver's answer a hook sees.
inline constexpr std::size_t kMaxResponseBytes = 64 * 1024;

// What a hook sees (the store's type). Views are valid during the call only.
using Completion = store::Completion;

// Runs on the agent's writer thread, on the writer's connection, inside the
// transaction that changes the row's status and under a SAVEPOINT of its own.
// Throwing fails the hook: its writes and the status change are rolled back
// together (see CompletionHooks). It must not end the transaction (COMMIT,
// ROLLBACK, RELEASE of an outer savepoint); if it does, the writer redoes
// its group without this message and treats the hook as failed.
using CompletionHook = std::function<void(sqlite3* connection, const Completion& completion)>;

struct CompletionHooks {
  // After the receiver acknowledged the message. If it fails the message is
  // not sent again: it stays acknowledged with its completion pending, and
  // only the completion is retried on the topic's retry schedule; after
  // retry.max_attempts failed completions it is dead with dead_reason "hook"
  // (and on_dead does not run for it).
  CompletionHook on_delivered;
  // When the agent makes the message dead. If it fails the message is dead
  // anyway and last_error records the hook's error too.
  CompletionHook on_dead;
  // The sidecar's form: one INSERT, UPDATE, DELETE or REPLACE statement with
  // the named parameters :id :topic :key :payload :headers :attempts
  // :status_code :response :last_error :dead_reason :now, calling only the
  // functions of store::HookFunctions() (also in the triggers it fires).
  // Checked (prepared under an authorizer) when the agent starts; used when
  // the function of the same name is empty.
  std::string on_delivered_sql;
  std::string on_dead_sql;
};

// Prepares every topic's on_delivered_sql and on_dead_sql against the
// database at options.db_path, read-only, changing nothing. Returns false,
// checking nothing, when the file does not exist. Throws
// std::invalid_argument naming the key (`topics."t".on_delivered: ...`) for a
// syntax error, a missing table or column, more than one statement, a
// statement that is not one INSERT/UPDATE/DELETE/REPLACE, anything the
// authorizer refuses (naming it: a function outside store::HookFunctions(),
// a PRAGMA, ...), or an unknown parameter; store errors for a database
// that cannot be opened.
struct Options;
bool CheckHookSql(const Options& options);

// ---------------------------------------------------------------------------
// Options.

struct BreakerOptions {
  // Consecutive endpoint failures that open the breaker.
  int failure_threshold = 5;
  // First open period, ms; doubles on each failed probe up to max_open_ms.
  std::int64_t open_ms = 5000;
  std::int64_t max_open_ms = 300'000;
};

// A topic's sending rate on a metered link: token buckets shared by every
// worker and every Agent of the process that sends the topic. 0 = no limit
// in that dimension; both 0 (the default) = off.
struct RateLimit {
  double messages_per_s = 0;  // messages per second (burst: one second's worth)
  double bytes_per_s = 0;     // payload bytes per second (burst likewise)
};

struct TopicOptions {
  // The HTTP endpoint: URL, timeouts, headers, TLS, CloudEvents, signing,
  // batching. Ignored when a handler is registered for the topic.
  transport::EndpointOptions endpoint;
  // The URL is a secret (it came from "env:"/"file:", e.g. a webhook whose
  // path is the credential): the endpoint label, logs and --print show only
  // its scheme, host and port.
  bool url_is_secret = false;
  // Messages whose schema_version has an entry go to that URL instead of
  // endpoint.url, with every other endpoint option the same (one sink per
  // distinct URL, made at start). A batch is sent as one request per target
  // URL. The breaker stays the topic's (keyed by endpoint.url).
  std::map<std::string, std::string, std::less<>> url_by_schema_version;
  // Worker threads of this route, and its queue of claimed rows: at most
  // queue_capacity rows and queue_bytes bytes of payload and headers (one
  // row larger than that still goes alone).
  int workers = 2;
  int queue_capacity = 1000;
  std::int64_t queue_bytes = 4 * 1024 * 1024;
  store::RetryPolicy retry;
  BreakerOptions breaker;
  CompletionHooks hooks;
  // Messages of this topic not delivered within this long after created_at
  // are dead ("expired"), ms; 0 = never. A row's own expires_at wins.
  std::int64_t ttl_ms = 0;
  // Per-key FIFO (docs/ordering.md): messages of one ordering key go one at
  // a time, in commit order. Not on "*". Recorded in the database at
  // Start(); agents sharing a file must agree.
  store::TopicOrdering ordering;
  // Claim order among topics that share an endpoint: while a topic has due
  // rows it could not claim yet (its queue is full, its breaker denies),
  // topics of lower priority on the same endpoint wait, so that after an
  // outage the backlog of higher-priority topics goes out first. Equal
  // priorities share the link. The eager path of new commits is not held.
  int priority = 0;
  // Workers wait for tokens before each send (a stop ends the wait and the
  // rows go back to pending).
  RateLimit rate_limit;
};

struct RetentionOptions {
  // Delivered rows older than this are purged, ms. 0 = keep forever.
  std::int64_t delivered_ms = 604'800'000;
  // If set, purged rows are appended to this file as JSON lines (fsynced
  // before the delete); at archive_max_bytes it is compressed to PATH.1.gz
  // and older ones shift to PATH.2.gz ...; archive_keep of them are kept.
  std::string archive_path;
  std::int64_t archive_max_bytes = 64 * 1024 * 1024;
  int archive_keep = 7;
  // How often the purge runs, ms.
  std::int64_t interval_ms = 60'000;
};

class Metrics;

struct Options {
  // The application's SQLite file; the schema is created or migrated at start.
  std::string db_path;
  // Lease owner written into claimed rows. Default: host/pid/process start
  // time/instance, which lets a later agent on this host see that the owner
  // is gone and take its rows back at once.
  std::string owner;
  // Routes by topic; "*" routes every topic without its own entry. A topic
  // with neither stays pending (counted and logged once).
  std::map<std::string, TopicOptions, std::less<>> topics;
  // Pause between sweeper passes, ms.
  std::int64_t sweep_interval_ms = 1000;
  // A claim lasts this long, ms; then another agent may take the row.
  std::int64_t lease_timeout_ms = 180'000;
  // Rows per claim statement of the sweeper.
  int claim_batch = 50;
  // Crashes while alone in flight after which a row is dead.
  int crash_budget = 3;
  // Written to the database at start when set (they bind every writer).
  std::optional<store::Limits> limits;
  RetentionOptions retention;
  // Watch the database for commits of other processes (inotify on the
  // directory, PRAGMA data_version to confirm; polling where inotify fails).
  bool watch_external_commits = false;
  // Poll interval of the watcher's fallback, ms.
  std::int64_t watch_poll_ms = 10;
  // PRAGMA synchronous on the agent's own connections.
  store::Synchronous synchronous = store::Synchronous::kNormal;
  // Seams. Null means the system clock / a logger writing to stderr.
  std::shared_ptr<Clock> clock;
  std::shared_ptr<spdlog::logger> logger;
  // Counters that outlive an Agent (outboxd keeps them across reloads).
  std::shared_ptr<Metrics> metrics;
  // With a "*" route: the first this many distinct topics it serves get a
  // metrics label of their own; later ones count as "other".
  int metrics_max_topics = 100;
};

// Throws std::invalid_argument naming the field.
void Validate(const Options& options);

// ---------------------------------------------------------------------------
// Metrics: counters and a latency histogram per topic label. Configured
// topics get their own label; with a "*" route, so do the first
// `max_dynamic` other topics seen; every other topic counts as "other".

struct TopicCounters {
  std::int64_t enqueued = 0;
  std::int64_t delivered = 0;
  std::int64_t attempt_failures = 0;
  // The same failures by kind of sink ("http", "nats", "mqtt", "handler");
  // failures counted without a kind appear only in attempt_failures.
  std::map<std::string, std::int64_t> attempt_failures_by_sink;
  std::int64_t dead = 0;
  std::int64_t recycled = 0;
  std::int64_t pool_rejections = 0;
  // Endpoint failures that did not cost the message an attempt (outage).
  std::int64_t attempts_saved = 0;
  std::int64_t crash_budget_deaths = 0;
  // Dead because expires_at or the topic's ttl_ms passed (also in dead).
  std::int64_t expired = 0;
  std::int64_t taken_back = 0;
  // Commit → acknowledgement, seconds: counts per bucket (not cumulative),
  // bucket i holding latencies in (bound[i-1], bound[i]]; latencies above
  // the last bound appear only in latency_count.
  std::vector<std::int64_t> latency_buckets;
  double latency_sum_seconds = 0;
  std::int64_t latency_count = 0;
};

struct BreakerState {
  std::string endpoint;  // URL without credentials or query
  std::string state;     // "closed", "open", "half_open", "gone"
  int consecutive_failures = 0;
};

struct MetricsSnapshot {
  std::map<std::string, TopicCounters> topics;  // by label
  std::vector<double> latency_bounds_seconds;   // histogram upper bounds
  std::vector<BreakerState> breakers;
  // From the database at snapshot time.
  store::Stats db;
  std::int64_t taken_back_leases = 0;
  // Pending rows whose topic has no route (no entry, no "*").
  std::int64_t unrouted_pending = 0;
  // Of them, rows taken back from a crashed agent (quarantined): they wait
  // for a route and hold no other topic up. As of the sweeper's last pass.
  std::int64_t quarantined_unrouted = 0;
  // Ordering keys whose head is dead or not yet due while later messages
  // of the key wait (store::Store::BlockedKeyCount).
  std::int64_t blocked_keys = 0;
  // Sweeper passes that failed (threw) since the Metrics were made, the
  // failures since the last pass that succeeded, and the last error text.
  std::int64_t sweeper_errors = 0;
  int sweeper_consecutive_failures = 0;
  std::string sweeper_last_error;
  // Admin API requests refused with 401 and with 403.
  std::int64_t admin_unauthorized = 0;
  std::int64_t admin_forbidden = 0;
};

// Consecutive failed sweeper passes after which an agent is in trouble: one
// failure is a busy database or a disk briefly full; three in a row (at least
// a few seconds apart at the default sweep interval) need a person.
inline constexpr int kSweeperFailuresForTrouble = 3;

class Metrics {
 public:
  Metrics();
  ~Metrics();
  // Topics that get their own label. When `topics` holds "*", each further
  // topic seen gets a label of its own too, up to `max_dynamic` of them
  // (valid UTF-8 only); everything else is "other".
  void SetLabels(std::vector<std::string> topics, int max_dynamic = 100);

  void Enqueued(std::string_view topic, std::int64_t n = 1);
  void Delivered(std::string_view topic, double latency_seconds);
  // `sink`: the kind of sink that failed (SinkKindName, or "handler"); "" =
  // not known.
  void AttemptFailed(std::string_view topic, bool cost_attempt, std::string_view sink = "");
  void Dead(std::string_view topic, bool by_crash_budget = false);
  // Counts in dead too.
  void Expired(std::string_view topic);
  void Recycled(std::string_view topic, std::int64_t n);
  void PoolRejected(std::string_view topic);
  void TakenBack(std::int64_t n);
  // A sweeper pass threw `error` / finished without error.
  void SweeperFailed(std::string_view error);
  void SweeperSucceeded();
  // The admin API refused a request: 401 or 403.
  void AdminRefused(int status);

  // Counters only; never touches the database, so it answers even when the
  // database is what is broken.
  MetricsSnapshot Snapshot() const;
  // Nullopt while healthy; else one line saying why not (for /healthz):
  // kSweeperFailuresForTrouble or more consecutive sweeper failures, until a
  // pass succeeds.
  std::optional<std::string> Trouble() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Prometheus text exposition (version 0.0.4) of a snapshot.
std::string RenderPrometheus(const MetricsSnapshot& snapshot);

// ---------------------------------------------------------------------------
// The agent.

// Steady-clock times of an agent's last signs of progress; both start at
// Agent::Start().
struct Liveness {
  std::chrono::steady_clock::time_point writer;   // last committed transaction
  std::chrono::steady_clock::time_point sweeper;  // last sweeper pass that ended
};

class Agent {
 public:
  // Validates the options and opens the database (creating or migrating the
  // schema). Throws std::invalid_argument or store errors. Starts nothing.
  explicit Agent(Options options);
  // Stops with a zero grace period if still running.
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Delivers the topic's messages through `handler` instead of HTTP. The
  // topic needs no URL then. Only before Start().
  void RegisterHandler(const std::string& topic, std::shared_ptr<Handler> handler);

  // Records each configured topic's ordering in the database, takes back
  // leases of dead agents on this host, then starts the threads. Throws
  // std::invalid_argument naming the topic when the database records another
  // ordering for it (set by another agent sharing the file).
  void Start();
  // Stops intake, lets sends in flight finish until `grace` has passed,
  // aborts the rest, reverts everything still leased to pending and joins
  // every thread. A second call from another thread while a stop runs cuts
  // that stop's grace period short (aborts the sends in flight) and returns
  // at once; a call after the stop finished does nothing.
  void Stop(std::chrono::milliseconds grace = std::chrono::seconds(10));

  // The eager path: these rows were committed just now. Never blocks on a
  // pool and never sends on the caller's thread. Thread-safe.
  void NotifyCommitted(std::span<const std::int64_t> ids);
  // The same with each row's topic known (what Transaction hands on): rows
  // of a topic without a route are left pending, not claimed.
  void NotifyCommitted(std::span<const store::EnqueuedRow> rows);
  // Another process may have committed rows: look for new due rows now.
  void NotifyExternalCommit();

  // For tests (docs/testing.md): wakes the sweeper, then waits until no row
  // is in flight and no row is due at the clock's WallMs() on a route whose
  // breaker is closed: every such delivery and retry has been sent and its
  // outcome written (delivered, rescheduled or dead), retries that came due
  // meanwhile included. The sends run on the agent's workers; the caller
  // only waits (polling every millisecond). Returns false if work is still
  // due after `timeout`. Throws std::logic_error unless the agent runs.
  bool RunDue(std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // True once the database is open and the threads run.
  bool Running() const;
  const std::string& database_id() const;
  const std::string& owner() const;
  // Counters plus a fresh read of the database numbers. Thread-safe, also
  // while Start() or Stop() runs on another thread (a scrape during a stop
  // sees the counters without the database numbers once the stop is done).
  MetricsSnapshot Snapshot();
  // The circuit breakers alone (no database read). Thread-safe.
  std::vector<BreakerState> Breakers() const;
  // Write transactions the writer committed (for tests of group commit).
  std::int64_t WriterTransactions() const;
  // For a service manager's watchdog (docs/operations.md, "Watchdog"): when
  // the writer last committed and the sweeper last ended a pass. Also queues
  // an empty write transaction on the writer when none is queued, so that a
  // writer with nothing to do still shows that it can take the write lock.
  // Thread-safe; cheap (no database access on the caller's thread).
  Liveness CheckLiveness();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A write transaction on the application's own connection that hands its new
// messages to the agent once COMMIT has succeeded (not from a commit hook,
// which fires before the commit is durable). Rolls back if destroyed
// uncommitted. Like the connection, used by one thread at a time.
class Transaction {
 public:
  // BEGIN IMMEDIATE on the producer's connection. `agent` may be null (the
  // sidecar's sweeper/watcher will find the rows).
  Transaction(Agent* agent, store::Producer& producer);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  // Enqueues inside this transaction; errors as store::Producer::Enqueue.
  store::EnqueueResult Enqueue(const store::NewMessage& message, bool idempotent = false);
  // COMMIT; then the new ids go to the agent's eager path. Throws
  // store::StoreError if COMMIT fails (the transaction is rolled back).
  void Commit();
  void Rollback();

 private:
  Agent* agent_;
  store::ProducerTransaction transaction_;
};

// ---------------------------------------------------------------------------
// Configuration file (docs/configuration.md).

// The operator's API and console (docs/operations.md, "Console"): off
// unless the config has an "admin" section.
struct AdminToken {
  enum class Role { kRead, kOperate };
  std::string name;    // the audit's actor for what this token does
  std::string secret;  // resolved from env:/file:; never logged or printed
  Role role = Role::kRead;
};
struct AdminConfig {
  // "" = off. HOST:PORT (loopback by default) or an absolute Unix socket path.
  std::string listen;
  std::vector<AdminToken> tokens;
};

struct Config {
  Options options;
  AdminConfig admin;
  // Where /metrics and /healthz listen ("" disables), e.g. "127.0.0.1:9464".
  std::string metrics_listen = "127.0.0.1:9464";
  std::string log_level = "info";   // trace, debug, info, warn, error
  std::string log_format = "text";  // text or json
  // Unknown keys, for the caller to warn about.
  std::vector<std::string> warnings;
  // Defaults that were moved to fit a value the user wrote, one line each:
  // `topics."*".timeout_ms: 1000 (default 5000 lowered to half of
  // lease_timeout_ms)`. For `outboxd --check-config` to show.
  std::vector<std::string> adjustments;
  // The files that "file:PATH" secrets were read from, for the daemon to
  // refuse ones every user may read.
  std::vector<std::string> secret_files;
};

// Parses and validates the JSON config. Throws std::invalid_argument with one
// line naming the key path, e.g.
// `topics."order.created".retry.max_attempts: expected a positive integer`.
// Resolves env:/file: secret references.
Config ParseConfig(std::string_view json);

// The whole effective configuration as indented JSON, defaults filled in, in
// the config file's own keys. Secrets (header values, signing secrets, broker
// passwords, tokens, seeds, credentials, passwords in URLs) read "<redacted>".
std::string EffectiveConfigJson(const Config& config);

}  // namespace outbox::agent
