// outbox/store.h: the outbox table in an application's own SQLite file.
//
// Three ways in:
//  - Producer: enqueue on the application's connection, inside the
//    application's open transaction. One Producer per connection; it caches
//    prepared statements, so keep it as long as the connection.
//  - Store: the agent's and the admin tool's own connection. Every state
//    transition of docs/design.md is one guarded statement here; several may share
//    one write transaction (group commit).
//  - Inbox: the receiving side. A receiver records each message's key
//    (its Idempotency-Key; with signatures, the signed webhook-id or a batch
//    member's id, see Inbox::Record) inside its own transaction, so that a
//    message delivered twice is applied once.
//
// None of these classes is thread-safe: like an SQLite connection, each
// belongs to one thread at a time. Open one per thread.
//
// Times are milliseconds since the Unix epoch, always passed in by the caller
// so that a test can inject its clock.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct sqlite3;
namespace SQLite {
class Database;
}

namespace outbox::store {

namespace c_api {
class RawTransaction;  // the store's transaction guard (internal)
}

// Bump with every migration in store/src/schema.cc.
inline constexpr int kSchemaVersion = 8;
// Keys longer than this are rejected (they end up in HTTP headers and logs).
inline constexpr std::size_t kMaxKeyBytes = 255;
// Topics longer than this are rejected (they name metric labels and log lines).
inline constexpr std::size_t kMaxTopicBytes = 255;
// A message's headers, as JSON text, are at most this long.
inline constexpr std::size_t kMaxHeadersBytes = 65536;
// A message's schema_version is at most this long.
inline constexpr std::size_t kMaxSchemaVersionBytes = 64;
// next_attempt_at of a row parked behind a dead head (Store::
// ParkBehindDeadHeads): 9999-12-31T23:59:59.999Z.
inline constexpr std::int64_t kParkedAt = 253'402'300'799'999;
// A message is scheduled at most this far ahead (366 days, in ms).
inline constexpr std::int64_t kMaxScheduleAheadMs = 31'622'400'000;

// Why a dead row is dead (the dead_reason column): a permanent failure, the
// attempts or the age budget spent, expired, cancelled by an operator, the
// crash budget spent, or its completion hook kept failing.
namespace dead_reason {
inline constexpr char kPermanent[] = "permanent";
inline constexpr char kAttempts[] = "attempts";
inline constexpr char kAge[] = "age";
inline constexpr char kExpired[] = "expired";
inline constexpr char kCancelled[] = "cancelled";
inline constexpr char kCrash[] = "crash";
inline constexpr char kHook[] = "hook";
}  // namespace dead_reason

enum class Status : int { kPending = 0, kDelivered = 1, kDead = 2, kInFlight = 3 };

// "pending", "delivered", "dead", "in_flight".
std::string_view StatusName(Status status);
// Inverse of StatusName; nullopt for anything else.
std::optional<Status> ParseStatus(std::string_view name);

// ---------------------------------------------------------------------------
// Errors. Bad input throws std::invalid_argument naming the field; everything
// the environment does wrong (disk full, corrupt file, locked too long) throws
// StoreError carrying SQLite's extended result code.

class StoreError : public std::runtime_error {
 public:
  StoreError(const std::string& what, int sqlite_code)
      : std::runtime_error(what), sqlite_code_(sqlite_code) {}
  // SQLite extended result code (SQLITE_FULL, SQLITE_BUSY, ...); 0 if none.
  int sqlite_code() const noexcept { return sqlite_code_; }

  // What a caller can do about it, without decoding SQLite's codes:
  // kBusy: another connection held the lock beyond the busy timeout (the
  // same change may succeed later); kFull: the disk or the file size limit
  // is reached (a smaller change may still fit); kOther: anything else.
  enum class Kind { kOther, kBusy, kFull };
  Kind kind() const noexcept;
  bool busy() const noexcept { return kind() == Kind::kBusy; }
  bool full() const noexcept { return kind() == Kind::kFull; }

 private:
  int sqlite_code_;
};

// The file is missing, is not an SQLite database, has no outbox schema where
// one is required, or has a schema newer than this build. The file is left
// untouched.
class NotAnOutboxError : public StoreError {
 public:
  using StoreError::StoreError;
};

// (topic, msg_key) already exists and the caller did not ask for idempotent
// enqueue.
class DuplicateError : public StoreError {
 public:
  using StoreError::StoreError;
};

// A configured limit (max_pending, max_db_bytes) refuses the insert. The
// caller's transaction is intact; only the INSERT was undone.
class CapacityError : public StoreError {
 public:
  using StoreError::StoreError;
};

// ---------------------------------------------------------------------------
// Retry policy maths: pure functions, no I/O.

enum class Backoff { kFixed, kExponential };
std::string_view BackoffName(Backoff backoff);  // "fixed" / "exponential"
std::optional<Backoff> ParseBackoff(std::string_view name);

struct RetryPolicy {
  Backoff backoff = Backoff::kExponential;
  // Delay after the first failure, ms. EXPONENTIAL doubles it per failure.
  std::int64_t first_interval_ms = 1000;
  // Cap on any single delay, ms (24 h).
  std::int64_t max_interval_ms = 86'400'000;
  // Failed attempts after which the row is dead. >= 1.
  int max_attempts = 8;
  // Delay is multiplied by (1 ± jitter·U), U uniform in [0, 1). In [0, 1].
  double jitter = 0.2;
  // Age budget, ms since created_at; 0 = off.
  std::int64_t max_age_ms = 0;
};

// Throws std::invalid_argument naming the field if the policy is unusable.
void Validate(const RetryPolicy& policy);

// Per-row overrides of the topic's policy; nullopt means "topic default"
// (a NULL column).
struct RetryOverride {
  std::optional<int> max_attempts;
  std::optional<Backoff> backoff;
  std::optional<std::int64_t> first_interval_ms;
};

RetryPolicy EffectivePolicy(const RetryPolicy& topic_default,
                            const RetryOverride& row);

// Delay before the next attempt after `failures` failed attempts (>= 1):
// FIXED: first; EXPONENTIAL: first × 2^(failures−1); capped at
// max_interval_ms, then jittered by (1 + jitter·(2·unit_random − 1)) and
// capped again. `unit_random` is in [0, 1).
std::int64_t RetryDelayMs(const RetryPolicy& policy, int failures,
                          double unit_random);

// True once `failures` has reached the policy's max_attempts.
bool AttemptsExhausted(const RetryPolicy& policy, int failures);

// True if the age budget is on and `created_at_ms` is older than it. An age
// is unknown, hence never exhausted, when `created_at_ms` or `now_ms` lies
// before kSaneWallFloorMs (written or read before the clock was set): such
// a row keeps its attempts budget but is not killed by a clock that jumped
// from 1970 to today.
bool AgeExhausted(const RetryPolicy& policy, std::int64_t created_at_ms,
                  std::int64_t now_ms);

// A row is due when next_attempt_at has passed, or when it lies further ahead
// than any delay the policy could have produced (the wall clock jumped back).
bool IsDue(std::int64_t next_attempt_at_ms, std::int64_t now_ms,
           std::int64_t max_interval_ms);

// ---------------------------------------------------------------------------
// Enqueue on the application's connection.

struct NewMessage {
  std::string topic;    // non-empty; routes to an endpoint
  std::string key;      // msg_key: non-empty, <= kMaxKeyBytes, unique per topic
  std::string payload;  // bytes, sent as the HTTP body
  // Optional JSON object of string values (extra HTTP headers); "" = none.
  std::string headers_json;
  RetryOverride retry;  // per-row policy; empty = the topic's defaults
  // Version of the payload's schema: 1..kMaxSchemaVersionBytes token
  // characters (letters, digits, !#$%&'*+-.^_`|~), sent as Schema-Version.
  std::optional<std::string> schema_version = std::nullopt;
  // With a topic's ordering, messages of one ordering key go in commit
  // order; 1..kMaxKeyBytes bytes. Unrelated to `key` (deduplication).
  std::optional<std::string> ordering_key = std::nullopt;
  // Not sent before this time (ms since the epoch); at most a year ahead.
  std::optional<std::int64_t> deliver_at = std::nullopt;
  // Not sent after this time (ms since the epoch): then dead, "expired".
  std::optional<std::int64_t> expires_at = std::nullopt;
  // W3C Trace Context, merged into headers_json as the `traceparent` and
  // `tracestate` headers (sent as such, and with CloudEvents as the
  // distributed-tracing extension). A headers_json that already holds a
  // different value for either is refused (std::invalid_argument).
  std::optional<std::string> traceparent = std::nullopt;
  std::optional<std::string> tracestate = std::nullopt;
};

struct EnqueueOptions {
  // Open and commit a transaction of its own when the connection has none.
  // Without it, enqueue outside a transaction is refused.
  bool standalone = false;
  // On a duplicate (topic, key), return the existing row's id instead of
  // throwing DuplicateError.
  bool idempotent = false;
};

struct EnqueueResult {
  std::int64_t id = 0;
  bool inserted = false;  // false: an existing row (idempotent enqueue)
};

class Producer {
 public:
  // The connection must outlive the Producer. The outbox schema must exist
  // (see Store with Options::create, or `outboxctl init`); otherwise throws
  // NotAnOutboxError.
  explicit Producer(sqlite3* connection);
  explicit Producer(SQLite::Database& connection);
  ~Producer();
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;

  // Writes one pending row due now, inside the connection's open transaction.
  // Throws std::invalid_argument (bad field, payload over the limit, or no
  // open transaction without `standalone`), DuplicateError, CapacityError or
  // StoreError. On any throw nothing was written and the caller's transaction
  // is still open and usable.
  EnqueueResult Enqueue(const NewMessage& message,
                        const EnqueueOptions& options = {});

  // The connection this Producer writes through.
  sqlite3* connection() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A row a ProducerTransaction inserted.
struct EnqueuedRow {
  std::int64_t id = 0;
  std::string topic;
};

// A write transaction (BEGIN IMMEDIATE) on a Producer's connection that
// remembers the rows it inserted, so that they can be handed to an agent once
// COMMIT has succeeded. Rolls back if destroyed uncommitted. Like the
// connection, used by one thread at a time.
class ProducerTransaction {
 public:
  // Throws StoreError if BEGIN fails (busy() when another connection holds
  // the write lock; also when a transaction is already open).
  explicit ProducerTransaction(Producer& producer);
  ~ProducerTransaction();
  ProducerTransaction(const ProducerTransaction&) = delete;
  ProducerTransaction& operator=(const ProducerTransaction&) = delete;

  // Producer::Enqueue inside this transaction (the same errors);
  // std::logic_error once finished.
  EnqueueResult Enqueue(const NewMessage& message, const EnqueueOptions& options = {});
  // COMMIT; returns the rows inserted (not those an idempotent enqueue found),
  // in order. If COMMIT fails the transaction is rolled back and StoreError
  // thrown. std::logic_error once finished.
  std::vector<EnqueuedRow> Commit();
  // Undoes everything; does nothing once finished.
  void Rollback();
  bool open() const;

 private:
  Producer& producer_;
  std::vector<EnqueuedRow> inserted_;
  std::unique_ptr<c_api::RawTransaction> transaction_;
};

// Checks the fields that need no database: topic, key and the per-row policy.
// Throws std::invalid_argument naming the field.
void ValidateMessage(const NewMessage& message);

// ---------------------------------------------------------------------------
// The agent's / admin tool's connection.

enum class Synchronous { kOff, kNormal, kFull };

// A point on the host's boot clock: CLOCK_BOOTTIME in ms (it counts time
// suspended and never moves when the wall clock is set) and the boot it
// belongs to (/proc/sys/kernel/random/boot_id). Leases are measured on it:
// a wall-clock jump, forward or back, changes no lease, and a lease taken in
// another boot is over. Every agent sharing a file runs on one host (local
// filesystems only), so they share this clock.
struct BootTime {
  std::string boot_id;  // "" when unknown; leases then fall back to wall time
  std::int64_t ms = 0;
};
// This host's boot clock now. Thread-safe; does not throw (boot_id "" when
// /proc cannot be read).
BootTime SystemBootTime();

// In-memory databases (docs/testing.md). SharedMemoryPath("NAME") is the
// URI "file:/NAME?vfs=memdb": every connection of this process opened with
// it (Store, the application's, an Agent's db_path) sees one database, which
// lives while at least one of them is open. It has no write-ahead log: a
// write transaction keeps readers out until it ends, and they wait up to
// their busy timeout. Nothing of it survives the process. Throws
// std::invalid_argument naming "name" unless it is 1 to 128 characters of
// [A-Za-z0-9._-].
std::string SharedMemoryPath(std::string_view name);
// True for a path that opens no file: "", ":memory:", "file::memory:..."
// (private to one connection) and SharedMemoryPath URIs.
bool IsInMemoryPath(std::string_view path);
// True for a SharedMemoryPath URI ("file:/...?...vfs=memdb").
bool IsSharedMemoryPath(std::string_view path);

// Wall-clock times before this (2025-01-01T00:00:00Z, before this code
// existed) are not real dates: a device without a battery-backed clock
// boots near 1970 and jumps forward when NTP syncs. An age computed from or
// at such a time is unknown (see AgeExhausted).
inline constexpr std::int64_t kSaneWallFloorMs = 1'735'689'600'000;

struct Options {
  // The database file, or an in-memory database (SharedMemoryPath);
  // a file is never created unless `create`.
  std::string path;
  // Create the file if missing and install or migrate the outbox schema
  // (`outboxctl init`). Otherwise the file must already hold the schema; an
  // older schema is migrated forward unless `read_only`.
  bool create = false;
  bool read_only = false;
  // How long a statement waits for another connection's write lock, ms.
  int busy_timeout_ms = 5000;
  // PRAGMA synchronous on this connection. NORMAL is safe for the agent's
  // connections in WAL mode: a power cut can only cause a resend.
  Synchronous synchronous = Synchronous::kNormal;
  // With NORMAL: a transaction that claimed rows fsyncs the write-ahead log
  // before its commit returns. The claimed rows' inserts are earlier frames
  // of that log, so a row is never sent while the application's commit that
  // created it can still be lost to a power cut (an application on NORMAL
  // does not fsync its commits). One fsync per claiming transaction. Turn it
  // off only if every producer commits with synchronous=FULL.
  bool durable_claims = true;
  // Page cache of this connection, KiB.
  int cache_kib = 2048;
  // Before migrating a file of an older schema, copy it to
  // PATH.bak-schemaN (N: the file's schema version) next to it. The copy
  // needs as much free disk as the file's used pages.
  bool backup_before_migration = true;
  // While a migration moves many rows, report progress on stderr when
  // stderr is a terminal.
  bool migration_progress = true;
  // PRAGMA secure_delete on this connection (SQLite as Debian builds it
  // zeroes all deleted content by default). kFast zeroes deleted records
  // inside the B-tree pages a delete writes anyway, but not whole freed
  // overflow pages: purging a large payload then writes no page just to
  // zero it. Its bytes stay on free pages until they are reused or given
  // back (incremental vacuum). kOn: zero everything, at a write per freed
  // page (docs/reliability.md, "Deleted payloads").
  enum class SecureDelete { kOff, kFast, kOn };
  SecureDelete secure_delete = SecureDelete::kFast;
  // Where claims and RecycleExpired read the boot clock. Null = the
  // system's (SystemBootTime); tests inject one. Must be thread-safe if
  // shared between stores.
  std::function<BootTime()> boot_clock;
};

// Limits stored in the database, enforced by triggers on every INSERT into
// outbox (also by other applications' plain SQL). 0 = no limit.
struct Limits {
  std::int64_t max_payload_bytes = 1'048'576;
  // Rows not yet delivered (pending + in flight + dead).
  std::int64_t max_pending = 1'000'000;
  // Bytes of used pages in the database file.
  std::int64_t max_db_bytes = 0;
};

// A row's identity while it is leased: transitions from in-flight apply only
// while `token` still matches (fencing against late or duplicate writers).
struct Lease {
  std::int64_t id = 0;
  std::int64_t token = 0;
};

struct Row {
  std::int64_t id = 0;
  std::string topic;
  std::string key;
  std::string payload;
  std::optional<std::string> headers_json;
  Status status = Status::kPending;
  int attempts = 0;
  RetryOverride retry;
  std::int64_t next_attempt_at = 0;
  std::optional<std::string> lease_owner;
  std::int64_t lease_token = 0;
  std::optional<std::int64_t> lease_expires_at;
  std::optional<std::string> last_error;
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
  // When the previous attempt failed; nullopt before the first failure.
  std::optional<std::int64_t> last_attempt_at;
  // Crashes of the agent while this row was alone in flight.
  int crashes = 0;
  // Taken back from a dead agent; resend alone.
  bool quarantined = false;
  // Times an operator reset it from dead.
  int operator_retries = 0;
  std::optional<std::string> schema_version;
  std::optional<std::string> ordering_key;
  std::optional<std::int64_t> deliver_at;
  std::optional<std::int64_t> expires_at;
  // Why a dead row is dead (a dead_reason:: name); nullopt for other rows.
  std::optional<std::string> dead_reason;
  // The receiver acknowledged it while its completion is still pending.
  std::optional<std::int64_t> acked_at;
};

// A claimed row: its lease, and the row as the claim left it (in flight,
// payload and headers included), so that a send needs no read of its own.
struct Claimed {
  Lease lease;
  std::string topic;
  Row row{};
  // Where the lease ends on the boot clock (Options::boot_clock), as the
  // claim recorded it; nullopt when the boot id is unknown, and the lease
  // then ends at row.lease_expires_at on wall time. A sender judges a lapse
  // by this, not by the wall clock, which may jump either way.
  std::optional<std::int64_t> lease_boot_until{};
};

// Rows of one topic in one status.
struct TopicStatusCount {
  std::string topic;
  Status status = Status::kPending;
  std::int64_t count = 0;
  // Oldest created_at among them.
  std::int64_t oldest_created_at = 0;
  // Among them, those due at the time GetStats was given (deliver_at passed,
  // or none): the earliest time one became due, max(created_at, deliver_at).
  // nullopt when none is due (a message scheduled hours ahead is not late).
  std::optional<std::int64_t> oldest_due_at{};
};

struct Stats {
  std::vector<TopicStatusCount> counts;  // ordered by topic, status
  std::int64_t undelivered = 0;          // the counter max_pending checks
  std::int64_t db_bytes = 0;             // used pages × page size
  std::int64_t wal_bytes = 0;            // size of the -wal file, 0 if none
  Limits limits;
};

struct ListFilter {
  std::optional<Status> status;
  std::optional<std::string> topic;
  int limit = 100;
  std::int64_t after_id = 0;  // for paging: rows with id > after_id
};

// Per-key ordering of one topic (docs/ordering.md). The database records it
// per topic (outbox_topic_modes) and every claim obeys the recorded mode, so
// that all agents sharing a file apply one rule.
enum class DeadHead {
  kBlock,  // a dead message holds its key until an operator retries or purges it
  kSkip,   // the next message of the key goes
};
struct TopicOrdering {
  bool by_key = false;  // false: no ordering (the default)
  DeadHead dead_head = DeadHead::kBlock;
  bool operator==(const TopicOrdering&) const = default;
};
// "none", or "by key, dead_head block" / "by key, dead_head skip".
std::string Describe(const TopicOrdering& ordering);

// A completion to record (Store::Complete): the row under `lease` was
// delivered at `now` (ms since the epoch).
struct DeliveredLease {
  Lease lease;
  std::int64_t now = 0;
};

class Store {
 public:
  // Opens (and with `create`, initialises) the database. Throws
  // NotAnOutboxError for a missing file, a file that is not SQLite, a file
  // without the schema (unless `create`), or a newer schema; StoreError for
  // anything else. A refused file is left byte-identical.
  explicit Store(const Options& options);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Identity written once by the first init: hex, 32 chars. Feeds message ids.
  const std::string& database_id() const;
  const std::string& path() const;

  // The underlying connection, for tests and for code that runs its own SQL.
  SQLite::Database& connection();

  // Copies the WAL into the database and truncates the -wal file (PRAGMA
  // wal_checkpoint(TRUNCATE)); outside any transaction. On a full disk this
  // is what frees the space the WAL held. Throws StoreError.
  void Checkpoint();
  // Gives free pages back to the file system on databases created with
  // auto_vacuum = INCREMENTAL (what `create` sets up); a no-op elsewhere.
  // Outside any transaction. Throws StoreError.
  void ReclaimFreePages();

  // A write transaction (BEGIN IMMEDIATE). Rolls back in the destructor
  // unless committed. Transitions called while it is open join it; called
  // without one, each transition runs in its own.
  class WriteTransaction {
   public:
    explicit WriteTransaction(Store& store);
    ~WriteTransaction();
    WriteTransaction(const WriteTransaction&) = delete;
    WriteTransaction& operator=(const WriteTransaction&) = delete;
    // Throws StoreError (rolled back) if COMMIT fails.
    void Commit();

   private:
    Store& store_;
    std::unique_ptr<c_api::RawTransaction> transaction_;
  };

  // A read transaction (BEGIN DEFERRED): the reads made while it is open
  // see one snapshot of the file. Ends in the destructor.
  class ReadSnapshot {
   public:
    explicit ReadSnapshot(Store& store);
    ~ReadSnapshot();
    ReadSnapshot(const ReadSnapshot&) = delete;
    ReadSnapshot& operator=(const ReadSnapshot&) = delete;

   private:
    std::unique_ptr<c_api::RawTransaction> transaction_;
  };

  // --- transitions: each returns how many rows it changed -----------------

  // Claims are durable before they return (see Options::durable_claims):
  // inside a WriteTransaction, once its Commit() returns; otherwise once the
  // claim returns. A failed fsync throws StoreError (the claim may be
  // committed then: its lease expires and the row is sent later).
  // ClaimDue may leave that fsync to its caller (ClaimSync::kByCaller).
  //
  // pending → in flight for one row, if it is still pending (eager path).
  // Returns the lease, or nullopt if the row is gone or no longer pending.
  std::optional<Claimed> ClaimById(std::int64_t id, std::string_view owner,
                                   std::int64_t lease_expires_at,
                                   std::int64_t now);

  // Who makes a claim durable. kStore: as said above. kByCaller: neither the
  // claim nor its commit does; the caller calls SyncLogForClaims() after the
  // commit and before it sends any claimed row, on this or another
  // connection to the file (from that connection's thread), so that the
  // fsync does not hold this connection (the agent's writer) meanwhile.
  enum class ClaimSync { kStore, kByCaller };
  // Claims up to `limit` due rows of one topic, oldest next_attempt_at first
  // (ties by id). Quarantined rows (taken back from a crashed agent) are
  // claimed only with `quarantined_only`, which claims nothing else.
  std::vector<Claimed> ClaimDue(std::string_view topic, std::string_view owner,
                                std::int64_t lease_expires_at, std::int64_t now, int limit,
                                bool quarantined_only = false,
                                ClaimSync sync = ClaimSync::kStore);
  // Makes every claim committed on this file so far durable: the fsync of
  // the write-ahead log that a claim's commit makes itself with kStore
  // (Options::durable_claims under synchronous = NORMAL; nothing otherwise),
  // through this connection's own handle of the log. For claims made with
  // ClaimSync::kByCaller on any connection to the file. Throws StoreError
  // when the fsync fails or the log cannot be opened.
  void SyncLogForClaims();
  // The eager path behind a completion: claims the oldest pending row of
  // (`topic`, `ordering_key`) if it may go now (due, not quarantined, and no
  // older row of the key undelivered under the topic's recorded ordering).
  std::optional<Claimed> ClaimNextOfKey(std::string_view topic, std::string_view ordering_key,
                                        std::string_view owner, std::int64_t lease_expires_at,
                                        std::int64_t now);
  // ClaimNextOfKey for each of `ordering_keys` of `topic`, in one statement
  // per 32 keys; the rows claimed, in id order.
  std::vector<Claimed> ClaimNextOfKeys(std::string_view topic,
                                       std::span<const std::string> ordering_keys,
                                       std::string_view owner, std::int64_t lease_expires_at,
                                       std::int64_t now);
  // A run of one key (docs/ordering.md): claims the key's rows after `last`
  // (the last row of the run, which `owner` must still hold in flight under
  // that lease; a run starts with one claimed row) in id order, as long as
  // each is pending, due, not quarantined and not scheduled ahead, and
  // nothing else of the key lies between (a dead row, one in flight, one
  // waiting for a retry or its deliver_at ends it). At most `max_rows` rows
  // and `max_bytes` of payload and headers (at least one row). The caller
  // must send them one after another, each only after the one before was
  // acknowledged, and hand back unsent the ones after a failure.
  // Empty when `last` is no longer ours or an older row of the key is
  // undelivered and not part of the run (an operator's retry, another
  // agent's claim). Claiming while the run's earlier rows are still in
  // flight lets the claim's commit overlap their sends; they stay in id
  // order because one worker sends the whole run.
  std::vector<Claimed> ClaimRunAfter(const Lease& last, std::string_view topic,
                                     std::string_view ordering_key, std::string_view owner,
                                     std::int64_t lease_expires_at, std::int64_t now,
                                     int max_rows, std::int64_t max_bytes);
  // Makes pending rows of `topic` due now whose next_attempt_at lies more
  // than `max_interval_ms` ahead: the wall clock jumped back after they were
  // scheduled.
  int MakeDueIfFarAhead(std::string_view topic, std::int64_t now,
                        std::int64_t max_interval_ms);
  // Parks the due pending rows of `topic` that wait behind a dead message
  // blocking their ordering key (dead_head "block"): their next_attempt_at
  // becomes kParkedAt, so that claim passes no longer walk them. Retrying,
  // purging, cancelling or marking that dead message delivered, or
  // forgetting the topic's ordering, makes them due again at once (triggers,
  // whoever does it). Costs the dead messages that block plus the rows added
  // behind them since the last call. Returns how many rows it parked.
  int ParkBehindDeadHeads(std::string_view topic, std::int64_t now);

  // in flight → delivered, each lease's row at its own time; a lease no
  // longer held is skipped. In as few statements as possible: up to 32 rows
  // a statement (with 8 or more a row costs up to a quarter less than alone),
  // or one statement for any number at one time (an acknowledged batch).
  // All or nothing: outside a transaction it opens its own, and a failure
  // throws and changes none. Returns how many rows it delivered.
  int Complete(std::span<const DeliveredLease> delivered);
  // The same for one lease: whether it was still held.
  bool Complete(const Lease& lease, std::int64_t now);
  // in flight → pending, due at `next_attempt_at`; attempts + 1 when
  // `count_attempt`. Records `error` as last_error and `now` as
  // last_attempt_at (as MarkDead does).
  bool Reschedule(const Lease& lease, bool count_attempt,
                  std::int64_t next_attempt_at, std::string_view error,
                  std::int64_t now);
  // in flight → dead with `error` and `dead_reason` (a dead_reason:: name);
  // attempts + 1 when `count_attempt`.
  bool MarkDead(const Lease& lease, bool count_attempt, std::string_view error,
                std::string_view dead_reason, std::int64_t now);
  // in flight → pending, acknowledged by the receiver but its completion
  // (a hook) failed: acked_at is set (kept if already set), attempts becomes
  // `attempts` (failed completions), the row is due again at
  // `next_attempt_at` and is never sent again, only completed. With `dead`,
  // the completions are spent: dead with dead_reason "hook" instead (an
  // operator retry then retries the completion, not the send).
  bool Acknowledge(const Lease& lease, int attempts, std::int64_t next_attempt_at,
                   std::string_view error, std::int64_t now, bool dead = false);
  // Up to `limit` pending rows of `topic` past their deadline at `now`:
  // expires_at, else created_at + `ttl_ms` (0 = no default). A time before
  // kSaneWallFloorMs is unknown and never past; nothing is past while `now`
  // itself lies before it.
  std::vector<Row> ExpiredPending(std::string_view topic, std::int64_t now, std::int64_t ttl_ms,
                                  int limit);
  // pending → dead with dead_reason "expired" and `error` as last_error; no
  // attempt counted. False if the row is no longer pending.
  bool Expire(std::int64_t id, std::int64_t now, std::string_view error = "expired");
  // in flight → pending at once, no attempt counted (pool full, clean stop).
  bool Revert(const Lease& lease, std::int64_t now);

  // In-flight rows whose lease expired → pending, due now. Up to `limit`.
  // A claim records its lease on the boot clock too (Options::boot_clock;
  // the lease lasts lease_expires_at - now there): such a lease is over when
  // it was taken in another boot, or when the boot clock passed it (or it
  // lies more than 2 × `max_lease_ms` ahead, which no claim wrote). The wall
  // clock plays no part then. Leases without boot time (written by older
  // versions, or where the boot id is unknown) use wall time `now`: expired,
  // or further ahead than 2 × `max_lease_ms` (the clock jumped back).
  // Returns the topic of each recycled row.
  std::vector<std::string> RecycleExpired(std::int64_t now, std::int64_t max_lease_ms,
                                          int limit);
  // Every row leased by `owner` (a process known to be dead) → pending and
  // quarantined. A row that was alone in flight gets a crash counted; at
  // `crash_budget` crashes it goes dead instead.
  struct TakeBack {
    int quarantined = 0;                   // rows back to pending
    std::vector<std::string> dead_topics;  // one entry per row the budget killed
    std::vector<Row> dead_rows;            // those rows as they are now, for on_dead
  };
  TakeBack TakeBackOwner(std::string_view owner, int crash_budget, std::int64_t now);
  // A row the crash budget killed: last_error := `error` (its on_dead hook's
  // failure added). False if it is no longer such a row.
  bool RecordCrashError(std::int64_t id, std::string_view error);
  // Every row leased by `owner` (this agent, stopping) → pending at once,
  // nothing counted.
  int ReleaseOwner(std::string_view owner, std::int64_t now);
  // Distinct lease owners of in-flight rows.
  std::vector<std::string> LeaseOwners();

  // Deletes up to `batch` delivered rows with updated_at < cutoff. Call
  // repeatedly until it returns less than `batch`; each call is one short
  // write transaction (or joins the caller's). When the file's free pages
  // then fit in one step of ReclaimFreePages (128), it gives them back in
  // the same transaction, so that the pages the delete empties are not
  // written to the WAL only to be freed; call ReclaimFreePages after the
  // last batch for the rest.
  int PurgeDelivered(std::int64_t cutoff, int batch);
  // Rows that PurgeDelivered(cutoff, batch) would delete, for archiving
  // before deletion.
  std::vector<Row> PeekDelivered(std::int64_t cutoff, int batch);
  // Deletes these rows if they are still delivered (after archiving them);
  // gives back free pages as PurgeDelivered does.
  int DeleteDelivered(const std::vector<std::int64_t>& ids);

  // --- per-key ordering ------------------------------------------------------

  // Records `wanted` as the topic's ordering if the database has none yet
  // (a topic without ordering records nothing) and returns what the
  // database holds afterwards; the caller compares. One write transaction
  // unless one is open.
  TopicOrdering AgreeOrdering(std::string_view topic, const TopicOrdering& wanted,
                              std::int64_t now);
  // Every topic with a recorded ordering.
  std::vector<std::pair<std::string, TopicOrdering>> RecordedOrderings();
  // Forgets the topic's recorded ordering (with every agent stopped: one
  // still running keeps its own config). Returns whether there was one.
  bool ForgetOrdering(std::string_view topic);

  // Heads of blocked keys, by id: the oldest undelivered row of a key that
  // blocks it, which is dead (dead_head block) or not yet due (a retry's
  // backoff, a future deliver_at), while later rows of the key wait.
  std::vector<Row> BlockedHeads(std::int64_t now, std::int64_t after_id, int limit);
  // How many keys are blocked so (the outbox_blocked_keys gauge).
  std::int64_t BlockedKeyCount(std::int64_t now);
  // The row that row `id` waits for under its topic's ordering; nullopt
  // when nothing holds it back (or the row or ordering does not exist).
  std::optional<Row> WaitsFor(std::int64_t id);

  // --- reads ---------------------------------------------------------------

  std::optional<Row> Get(std::int64_t id);
  std::vector<Row> List(const ListFilter& filter);
  // `now` (wall ms) decides which rows are due (TopicStatusCount::
  // oldest_due_at); without it only rows without deliver_at are.
  Stats GetStats(std::optional<std::int64_t> now = std::nullopt);
  // Topics with at least one pending row (an index seek per topic).
  std::vector<std::string> PendingTopics();
  // Whether `topic` has a pending, due, unquarantined row (a cheap read).
  bool HasDue(std::string_view topic, std::int64_t now);
  // Rows pending and quarantined.
  std::int64_t QuarantinedCount();
  // The same per topic, in topic order: (topic, rows).
  std::vector<std::pair<std::string, std::int64_t>> QuarantinedTopics();
  // PRAGMA data_version: changes when another connection commits.
  std::int64_t DataVersion();

  Limits GetLimits();
  // Throws std::invalid_argument for a negative limit.
  void SetLimits(const Limits& limits);

 private:
  // The parts of ClaimRunAfter, inside the caller's transaction: the ids of
  // the rows that may follow `after_id` (first = 0: none), then their claim.
  struct RunRange {
    std::int64_t first = 0;
    std::int64_t last = 0;
  };
  RunRange RunAfter(std::int64_t after_id, const std::string& topic,
                    const std::string& ordering_key, std::int64_t now, int max_rows,
                    std::int64_t max_bytes);
  std::vector<Claimed> ClaimRunRange(const RunRange& range, const std::string& topic,
                                     const std::string& ordering_key, std::string_view owner,
                                     std::int64_t lease_expires_at, std::int64_t now);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------
// Operator actions (outboxctl): each one is one write transaction that
// changes the rows it selects and writes ONE outbox_audit row saying who
// (user and host), what, how many rows and when.

// Who acts: the login name and the host it acted from.
struct Actor {
  std::string user;
  std::string host;
};

// Which rows an action touches. Exactly one of: `id`; `topic` (optionally
// narrowed by `key`, `status` and `created_before`); `all` (optionally
// narrowed by `status` and `created_before`).
struct RowSelector {
  std::optional<std::int64_t> id;
  std::optional<std::string> topic;
  std::optional<std::string> key;             // with topic: that one message
  std::optional<Status> status;               // with topic or all
  std::optional<std::int64_t> created_before;  // ms; with topic or all
  bool all = false;
  // "id=7", "topic=orders key=k1", "topic=orders status=dead created_before=...":
  // for the audit row's detail and for messages.
  std::string Describe() const;
};

// The action would change a row that an agent is sending right now; nothing
// was changed. Try again once the send has finished or its lease expired.
class InFlightError : public StoreError {
 public:
  using StoreError::StoreError;
};

struct AuditEntry {
  std::int64_t id = 0;
  std::int64_t at = 0;
  std::string actor;
  std::string host;
  std::string action;
  std::int64_t rows = 0;
  std::optional<std::int64_t> row_id;
  std::string detail;
};

// --- the operator's console (outboxctl list and bulk actions, the admin API)
//
// A filter over messages. Every field is optional; set fields combine with
// AND. Three filters are served by an index and answer any page at once:
// status, topic, topic with a key prefix (and status with topic). The rest
// (time ranges, dead_reason, text in last_error, a key prefix without a
// topic, combinations beyond those) are checked row by row over a bounded
// walk: a page may come back short, with a cursor to continue.
struct MessageQuery {
  std::optional<Status> status;
  std::optional<std::string> topic;
  std::optional<std::string> key;         // exact msg_key
  std::optional<std::string> key_prefix;  // msg_key starts with these bytes
  std::optional<std::int64_t> created_from;   // ms, inclusive
  std::optional<std::int64_t> created_until;  // ms, exclusive
  std::optional<std::int64_t> updated_from;
  std::optional<std::int64_t> updated_until;
  // Only dead rows with this dead_reason (a dead_reason:: name).
  std::optional<std::string> dead_reason;
  // last_error contains this text (ASCII letters compared without case).
  std::optional<std::string> error_text;
  // "status=dead topic=orders key_prefix=eu-": for audit rows and messages.
  // Throws std::invalid_argument for an empty string field or an empty range.
  std::string Describe() const;
  // Throws std::invalid_argument naming the first field that makes no sense
  // (empty strings, a range whose end is not after its start, an unknown
  // dead_reason).
  void Validate() const;
};

// One page of a message list. Rows carry no payload and no headers.
struct MessagePage {
  std::vector<Row> rows;
  // Opaque; pass back for the next page. Empty: nothing more to read.
  std::string next_cursor;
  // Rows the walk looked at; equal to the bound when the page came back
  // short because the bound was reached.
  std::int64_t scanned = 0;
  bool scan_bounded = false;
};

struct PageRequest {
  int limit = 50;         // rows per page, 1..1000
  std::string cursor;     // "" for the first page
  int max_scan = 20'000;  // rows a walk may look at per request, >= limit
};

// Operator actions that take a filter.
enum class BulkAction { kRetry, kCancel, kMarkDelivered };
// "retry", "cancel", "mark-delivered"; and back (nullopt for other names).
std::string_view BulkActionName(BulkAction action);
std::optional<BulkAction> ParseBulkAction(std::string_view name);

// What a bulk action would touch or did touch.
struct BulkCount {
  // Rows the action changes: retry takes dead rows, cancel and
  // mark-delivered pending and dead ones. Rows in flight never.
  std::int64_t matched = 0;
  // Rows that match the filter but are in flight (left alone).
  std::int64_t in_flight = 0;
};

// The confirmation of a previewed bulk action: the count the preview
// showed, and by how many rows the count may differ now.
struct BulkConfirmation {
  std::int64_t expected = 0;
  std::int64_t tolerance = 0;
};

struct BulkResult {
  bool applied = false;    // false: the count moved by more than allowed
  BulkCount count;         // as found inside the action's transaction
  std::int64_t changed = 0;
};

// One topic on the overview: counts of rows not delivered, how late the
// most overdue row is, deliveries over the last minute and blocked keys.
struct TopicOverview {
  std::string topic;
  std::int64_t pending = 0;    // status pending (due + scheduled)
  std::int64_t due = 0;        // pending with next_attempt_at <= now
  std::int64_t scheduled = 0;  // pending, not yet due (deliver_at or a backoff)
  std::int64_t in_flight = 0;
  std::int64_t dead = 0;
  // now - the smallest next_attempt_at among due rows; 0 when none is due.
  std::int64_t oldest_due_age_ms = 0;
  // Rows delivered (updated_at) in [now - 60 s, now].
  std::int64_t delivered_last_minute = 0;
  // Heads of blocked ordering keys (counted up to kOverviewBlockedCap).
  std::int64_t blocked_keys = 0;
};
inline constexpr int kOverviewBlockedCap = 1000;

// Works on a Store's connection (which must outlive it). Not thread-safe,
// like the Store. Every method throws std::invalid_argument for a selector
// that is not exactly one of its three forms, StoreError otherwise.
class Operator {
 public:
  explicit Operator(Store& store);
  ~Operator();
  Operator(const Operator&) = delete;
  Operator& operator=(const Operator&) = delete;

  // Pending or dead → delivered (without sending). Throws InFlightError if
  // a selected row is in flight. Returns how many rows changed.
  int MarkDelivered(const RowSelector& selector, const Actor& actor, std::int64_t now);
  // Pending or dead → dead with dead_reason "cancelled" and last_error
  // "cancelled by operator". Throws InFlightError as MarkDelivered.
  int Cancel(const RowSelector& selector, const Actor& actor, std::int64_t now);
  // Dead → pending with a fresh budget (attempts 0, due now).
  int Retry(const RowSelector& selector, const Actor& actor, std::int64_t now);
  // Deletes up to `batch` dead rows chosen by `selector`, one short write
  // transaction, no audit row: call until it returns less than `batch`,
  // then RecordAudit once with the total.
  int PurgeDeadBatch(const RowSelector& selector, int batch);
  // Delivered → pending with a fresh budget, for each id still delivered
  // (the receiver lost them). One audit row. Returns how many changed.
  int Requeue(std::span<const std::int64_t> ids, const Actor& actor, std::string_view action,
              std::int64_t now);
  // Pending or dead → delivered for each id not in flight (the receiver
  // applied them). One audit row. Returns how many changed.
  int MarkDeliveredIds(std::span<const std::int64_t> ids, const Actor& actor,
                       std::string_view action, std::int64_t now);

  // Puts an archived message back as a new pending row (due now, fresh
  // budget), bytes exactly as given; "" headers_json stores NULL. False if
  // (topic, key) already exists (nothing written). The insert triggers still
  // apply: a message they refuse throws StoreError and
  // leaves an open transaction usable.
  bool Restore(const NewMessage& message);

  // Ids of the selected rows, ascending, at most `limit`, ids > after_id.
  std::vector<std::int64_t> SelectIds(const RowSelector& selector, int limit,
                                      std::int64_t after_id = 0);

  // What reconciliation needs of each row, no payload: rows with id >
  // after_id, ascending, at most `limit`.
  struct RowState {
    std::int64_t id = 0;
    std::string topic;
    std::string key;
    Status status = Status::kPending;
    std::int64_t created_at = 0;
    std::int64_t updated_at = 0;
  };
  std::vector<RowState> States(std::int64_t after_id, int limit);

  // An agent's state, name by name, into outbox_runtime (one transaction
  // unless one is open); replaces what `agent` published before.
  void PublishRuntime(std::string_view agent,
                      std::span<const std::pair<std::string, std::string>> values,
                      std::int64_t now);
  // Everything agents published: (agent, name, value, updated_at).
  struct RuntimeEntry {
    std::string agent;
    std::string name;
    std::string value;
    std::int64_t updated_at = 0;
  };
  std::vector<RuntimeEntry> Runtime();

  // The most recent value any agent published under `name` in
  // outbox_runtime (e.g. "lease_timeout_ms"), or nullopt.
  std::optional<std::string> RuntimeValue(std::string_view name);

  // Writes one audit row (for actions done in several transactions).
  void RecordAudit(const Actor& actor, std::string_view action, std::int64_t rows,
                   std::optional<std::int64_t> row_id, std::string_view detail, std::int64_t now);
  // Audit rows with at >= since, oldest first, at most `limit`.
  std::vector<AuditEntry> Audit(std::int64_t since, int limit);

  // --- the console (MessageQuery above) -----------------------------------
  // A page of the rows `query` selects. Order: by topic, then due time when
  // the query has a status and no key prefix; by msg_key within a topic
  // when it has a topic; newest first otherwise. A cursor stays valid while
  // rows are inserted: no row is skipped or shown twice because of them.
  // Throws std::invalid_argument for a bad query, limit or cursor (also a
  // cursor of another query's order).
  MessagePage ListMessages(const MessageQuery& query, const PageRequest& page);
  // The dry run: what `action` on `query` would change now.
  BulkCount CountForAction(BulkAction action, const MessageQuery& query);
  // The action on every row `query` selects that it may change, in one
  // write transaction (or the caller's), only if the count found there is
  // within `confirm.tolerance` of `confirm.expected`; otherwise nothing
  // changes and applied is false. One audit row per changed message
  // (action name, row id, the query's Describe()) with `actor`.
  BulkResult ApplyToMatching(BulkAction action, const MessageQuery& query,
                             const BulkConfirmation& confirm, const Actor& actor,
                             std::int64_t now);
  // Per topic with rows not delivered or delivered in the last minute,
  // ordered by topic.
  std::vector<TopicOverview> Overview(std::int64_t now);
  // Audit rows newest first: ids < before_id (0: from the newest), at most
  // `limit`; with `row_id`, only the entries naming that row.
  std::vector<AuditEntry> AuditPage(std::int64_t before_id, int limit,
                                    std::optional<std::int64_t> row_id = std::nullopt);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------
// Completion hooks' SQL (the sidecar's on_delivered / on_dead statements) and
// the savepoint each completion runs under. The statements come from a config
// file, so they run in a closed room: an authorizer allows reading, one
// INSERT/UPDATE/DELETE/REPLACE and the functions of kHookFunctions only, also
// inside the triggers the statement fires. Every Store connection (and the
// read-only one that checks hooks) has SQLITE_DBCONFIG_DEFENSIVE on and
// SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER off (docs/reliability.md, "Threat
// model").

// What a hook sees. Views are valid during the call only.
struct Completion {
  std::int64_t id = 0;
  std::string_view topic;
  std::string_view key;
  std::string_view payload;
  std::string_view headers_json;  // the row's headers column; "" if none
  int attempts = 0;               // the row's attempts column
  // The receiver's answer: HTTP status (0 when none, e.g. a retried
  // completion or another sink) and the start of its body, UTF-8 (invalid
  // bytes replaced).
  int status_code = 0;
  std::string_view response;
  std::string_view last_error;   // on_dead: why the message is dead
  std::string_view dead_reason;  // on_dead: permanent, attempts, age, expired, crash
  std::int64_t now_ms = 0;
};

// The SQL functions a hook statement (and any trigger it fires) may call:
// core scalar, aggregate, window, date and JSON functions. Not
// load_extension, fts3_tokenizer, readfile/writefile, sqlite_* or any
// function an extension adds.
std::span<const std::string_view> HookFunctions();

// Prepares `sql` on `connection` under the hook authorizer and checks that it
// is exactly one statement that writes and that every parameter is one of
// :id :topic :key :payload :headers :attempts :status_code :response
// :last_error :dead_reason :now. Changes nothing. Throws
// std::invalid_argument with the reason (a refused function is named:
// "function fts3_tokenizer is not allowed in a hook"); the caller prefixes
// the config key.
void CheckHookSql(sqlite3* connection, std::string_view sql);

// Prepares `sql` the same way (a schema change since the check is caught
// again), binds `completion` and steps it to the end. Throws
// std::runtime_error carrying the reason or SQLite's message.
void RunHookSql(sqlite3* connection, std::string_view sql, const Completion& completion);

// --check-config's form: opens `db_path` read-only with the settings of every
// Store connection and checks each (key, sql) with CheckHookSql. Returns
// false, checking nothing, when the file does not exist. Throws
// std::invalid_argument "<key>: <reason>" for the first refused statement,
// StoreError when the file cannot be opened.
bool CheckHookSqlInFile(const std::string& db_path,
                        std::span<const std::pair<std::string, std::string>> key_and_sql);

// The savepoint a completion and its hook share, on the agent's writer
// connection inside its write transaction. Not thread-safe.
class CompletionSavepoint {
 public:
  // SAVEPOINT; throws StoreError.
  explicit CompletionSavepoint(sqlite3* connection);
  CompletionSavepoint(const CompletionSavepoint&) = delete;
  CompletionSavepoint& operator=(const CompletionSavepoint&) = delete;
  // True when a statement since (RAISE(ROLLBACK), a COMMIT in a library
  // hook) ended the enclosing transaction: nothing is left to roll back to.
  bool TransactionEnded() const;
  // Keeps the changes (nothing to do when a hook released the savepoint).
  void Release() noexcept;
  // Undoes everything since the savepoint and releases it; throws StoreError.
  void RollBack();
  // After a failure: rolls back and releases if a transaction is still open.
  void Abandon() noexcept;

 private:
  sqlite3* connection_;
};

// ---------------------------------------------------------------------------
// The receiving side (docs/receiving.md): delivery is at-least-once, so a
// receiver applies a message and records its Idempotency-Key in ONE
// transaction of its own. The key's PRIMARY KEY decides whether it is new
// (never a SELECT before the INSERT: two deliveries racing each other would
// both pass it), so a duplicate is answered 2xx without being applied again.
//
// The keys live in the receiver's own SQLite file, in a table of their own,
// `outbox_inbox(key TEXT PRIMARY KEY, received_at INTEGER NOT NULL, source
// TEXT)`, which the Inbox creates when missing (and adds `source` to when an
// older version made it). The file needs no outbox schema; a plain-SQL
// receiver can do the same with
//   INSERT INTO outbox_inbox(key, received_at, source) VALUES(?, ?, ?) ON CONFLICT DO NOTHING
// and `changes()` (1: new, 0: duplicate).
//
// Retention: a key purged too early lets a late retry be applied twice. Keep
// keys longer than the sender's longest retry horizon plus the longest time a
// device may stay offline (an edge-outbox sender keeps retrying through an
// outage: a device offline for a week sends its messages a week late).

struct InboxOptions {
  // Longest Idempotency-Key accepted, bytes. edge-outbox's message ids are
  // 64 hex characters; other senders' keys (UUIDs, ...) are shorter.
  std::size_t max_key_bytes = 255;
};

enum class Receipt {
  kNew,        // first delivery: apply the message in this same transaction
  kDuplicate,  // already recorded by a committed transaction: apply nothing
};

// Like Producer, works on the application's connection and caches prepared
// statements: keep one per connection, as long as the connection. Not
// thread-safe; each thread that receives needs its own connection and Inbox.
class Inbox {
 public:
  // The connection must outlive the Inbox and must have no open transaction
  // here: the Inbox creates its table and index if they are missing (a short
  // write transaction of its own; nothing if they exist). Throws
  // std::invalid_argument (null connection, open transaction, bad options) or
  // StoreError.
  explicit Inbox(sqlite3* connection, const InboxOptions& options = {});
  explicit Inbox(SQLite::Database& connection, const InboxOptions& options = {});
  ~Inbox();
  Inbox(const Inbox&) = delete;
  Inbox& operator=(const Inbox&) = delete;

  // Which key: one the sender vouches for. With Standard Webhooks
  // signatures, the signed `webhook-id` of a single message (refuse a request
  // whose Idempotency-Key differs from it) and each batch member's `id`; the
  // unsigned Idempotency-Key only without signatures (docs/receiving.md, "What
  // to key on"): keyed on it, a signed request replayed under fresh keys
  // would be applied again.
  //
  // Records `key` with `now_ms` as its time of receipt, inside the
  // connection's open transaction (begin it with BEGIN IMMEDIATE, so that the
  // INSERT never has to upgrade a stale read snapshot). kNew: apply the
  // message now, then COMMIT; if the transaction rolls back, so does the key,
  // and the next delivery is new again. kDuplicate: nothing was written and the
  // transaction is as it was, still open and usable.
  // Throws std::invalid_argument ("idempotency_key: ..." for an empty or too
  // long key; no open transaction) before any I/O, or StoreError (then roll
  // back).
  Receipt Record(std::string_view key, std::int64_t now_ms);
  // The same, also recording which sender the key came from (`source`, e.g.
  // the CloudEvents source or a header), so that ExportKeys can answer one
  // sender's reconciliation. nullopt stores NULL.
  Receipt Record(std::string_view key, std::int64_t now_ms,
                 std::optional<std::string_view> source);

  // Calls `each` with every key received in [since_ms, until_ms) from
  // `source` (nullopt: from every source, NULL ones included), oldest
  // first; returns how many. What a sender's `outboxctl reconcile
  // --receiver-keys` reads, one key per line. Reads in the connection's
  // transaction if one is open. Throws StoreError.
  std::int64_t ExportKeys(std::optional<std::string_view> source, std::int64_t since_ms,
                          std::int64_t until_ms,
                          const std::function<void(std::string_view key)>& each);

  // Deletes up to `batch` keys received before `cutoff_ms` (oldest first) and
  // returns how many; call until it returns less than `batch`. Inside an open
  // transaction it joins it; otherwise it is one short write transaction.
  // Throws std::invalid_argument for batch < 1, StoreError.
  int Purge(std::int64_t cutoff_ms, int batch = 1000);

  // The connection this Inbox writes through.
  sqlite3* connection() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace outbox::store
