// The agent's and the admin tool's connection: transitions, reads, limits.
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <limits>
#include <unordered_map>

#include <SQLiteCpp/Transaction.h>

#include "internal.h"
#include "util/safe_file.h"
#include "sql.h"

namespace outbox::store {

using internal::StatementUse;
using internal::Wrap;

std::string_view StatusName(Status status) {
  switch (status) {
    case Status::kPending:
      return "pending";
    case Status::kDelivered:
      return "delivered";
    case Status::kDead:
      return "dead";
    case Status::kInFlight:
      return "in_flight";
  }
  return "unknown";
}

std::optional<Status> ParseStatus(std::string_view name) {
  for (Status s : {Status::kPending, Status::kDelivered, Status::kDead, Status::kInFlight}) {
    if (StatusName(s) == name) return s;
  }
  return std::nullopt;
}

namespace {

const char* SecureDeletePragma(Options::SecureDelete mode) {
  switch (mode) {
    case Options::SecureDelete::kOff:
      return "PRAGMA secure_delete = OFF";
    case Options::SecureDelete::kFast:
      return "PRAGMA secure_delete = FAST";
    case Options::SecureDelete::kOn:
      return "PRAGMA secure_delete = ON";
  }
  return "PRAGMA secure_delete = ON";
}

// One line, rewritten in place, on a terminal only.
void PrintMigrationProgress(const std::string& path, std::int64_t done, std::int64_t total) {
  std::fprintf(stderr, "\r%s: migrating the outbox schema: %3d%%", path.c_str(),
               total > 0 ? static_cast<int>(done * 100 / total) : 100);
  if (done >= total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

const char* SynchronousPragma(Synchronous mode) {
  switch (mode) {
    case Synchronous::kOff:
      return "PRAGMA synchronous = OFF";
    case Synchronous::kNormal:
      return "PRAGMA synchronous = NORMAL";
    case Synchronous::kFull:
      return "PRAGMA synchronous = FULL";
  }
  return "PRAGMA synchronous = FULL";
}

bool IsMemoryPath(const std::string& path) { return IsInMemoryPath(path); }

template <typename T>
std::optional<T> OptionalColumn(const SQLite::Column& column) {
  if (column.isNull()) return std::nullopt;
  if constexpr (std::is_same_v<T, std::string>) {
    return column.getString();
  } else if constexpr (std::is_same_v<T, int>) {
    return column.getInt();
  } else {
    return column.getInt64();
  }
}

// Columns in the order of OUTBOX_ROW_COLUMNS. Values written by other
// applications may have any type; SQLite converts, and nonsense stays visible
// to the caller rather than crashing it.
Row ReadRow(SQLite::Statement& q) {
  Row row;
  row.id = q.getColumn(0).getInt64();
  row.topic = q.getColumn(1).getString();
  row.key = q.getColumn(2).getString();
  const SQLite::Column payload = q.getColumn(3);
  row.payload.assign(static_cast<const char*>(payload.getBlob()),
                     static_cast<std::size_t>(payload.getBytes()));
  row.headers_json = OptionalColumn<std::string>(q.getColumn(4));
  row.status = static_cast<Status>(q.getColumn(5).getInt());
  row.attempts = q.getColumn(6).getInt();
  row.retry.max_attempts = OptionalColumn<int>(q.getColumn(7));
  if (auto backoff = OptionalColumn<std::string>(q.getColumn(8))) {
    row.retry.backoff = ParseBackoff(*backoff);
  }
  row.retry.first_interval_ms = OptionalColumn<std::int64_t>(q.getColumn(9));
  row.next_attempt_at = q.getColumn(10).getInt64();
  row.lease_owner = OptionalColumn<std::string>(q.getColumn(11));
  row.lease_token = q.getColumn(12).getInt64();
  row.lease_expires_at = OptionalColumn<std::int64_t>(q.getColumn(13));
  row.last_error = OptionalColumn<std::string>(q.getColumn(14));
  row.created_at = q.getColumn(15).getInt64();
  row.updated_at = q.getColumn(16).getInt64();
  row.last_attempt_at = OptionalColumn<std::int64_t>(q.getColumn(17));
  row.crashes = q.getColumn(18).getInt();
  row.quarantined = q.getColumn(19).getInt() != 0;
  row.operator_retries = q.getColumn(20).getInt();
  row.schema_version = OptionalColumn<std::string>(q.getColumn(21));
  row.ordering_key = OptionalColumn<std::string>(q.getColumn(22));
  row.deliver_at = OptionalColumn<std::int64_t>(q.getColumn(23));
  row.expires_at = OptionalColumn<std::int64_t>(q.getColumn(24));
  row.dead_reason = OptionalColumn<std::string>(q.getColumn(25));
  row.acked_at = OptionalColumn<std::int64_t>(q.getColumn(26));
  return row;
}

void CheckBatch(int batch) {
  if (batch < 1) throw std::invalid_argument("batch: expected a positive integer");
}

}  // namespace

Row internal::ReadRowColumns(SQLite::Statement& q) { return ReadRow(q); }

struct Store::Impl {
  Options options;
  std::unique_ptr<SQLite::Database> db;
  std::string database_id;
  // Prepared once per connection, keyed by the statement's constant in sql.h.
  std::unordered_map<const char*, std::unique_ptr<SQLite::Statement>> statements;

  SQLite::Statement& Prepare(const char* text) {
    auto& slot = statements[text];
    if (!slot) slot = std::make_unique<SQLite::Statement>(*db, text);
    return *slot;
  }

  BootTime Boot() const { return options.boot_clock ? options.boot_clock() : SystemBootTime(); }

  // The lease every claim statement sets (OUTBOX_CLAIM_SET): ?2 owner, ?3 its
  // wall-clock expiry, ?4 now, and ?6/?7 the same lease on the boot clock
  // (NULLs, wall time only, when the boot id is unknown).
  // Returns the lease's end on the boot clock (Claimed::lease_boot_until).
  std::optional<std::int64_t> BindLease(SQLite::Statement& q, std::string_view owner,
                                        std::int64_t lease_expires_at, std::int64_t now) const {
    q.bind(2, std::string(owner));
    q.bind(3, lease_expires_at);
    q.bind(4, now);
    const BootTime boot = Boot();
    if (boot.boot_id.empty()) {
      q.bind(6);
      q.bind(7);
      return std::nullopt;
    }
    const std::int64_t until = boot.ms + std::max<std::int64_t>(lease_expires_at - now, 0);
    q.bind(6, boot.boot_id);
    q.bind(7, until);
    return until;
  }

  bool InTransaction() const { return sqlite3_get_autocommit(db->getHandle()) == 0; }

  // Set by a claim inside a write transaction; its commit makes the log durable.
  bool claimed_in_transaction = false;

  // Called after `claimed` rows were claimed: makes the claim, and every log
  // frame before it, durable now (outside a transaction) or at commit.
  void ClaimsMade(std::size_t claimed) {
    if (claimed == 0) return;
    if (InTransaction()) {
      claimed_in_transaction = true;
    } else {
      SyncLogForClaims();
    }
  }

  // The application may commit with synchronous=NORMAL, which writes its
  // frames to the WAL without fsync; a power cut can then take its last
  // commits back. The claim comes after those frames in the same log, so one
  // fsync of the log here covers them too: a claimed (hence sent) row exists
  // after any power cut. With FULL the COMMIT already did this; OFF asked for
  // no fsync at all.
  // False when this connection has no log file open (an in-memory database,
  // or a connection that has not read yet), true otherwise.
  bool SyncLogForClaims() {
    if (!options.durable_claims || options.synchronous != Synchronous::kNormal) return true;
    sqlite3_file* log = nullptr;
    // The pager's journal pointer is the WAL file in WAL mode.
    if (sqlite3_file_control(db->getHandle(), "main", SQLITE_FCNTL_JOURNAL_POINTER, &log) !=
            SQLITE_OK ||
        log == nullptr || log->pMethods == nullptr) {
      return false;
    }
    const int rc = log->pMethods->xSync(log, SQLITE_SYNC_NORMAL);
    if (rc != SQLITE_OK) {
      throw StoreError(options.path + ": fsync of the write-ahead log after a claim failed (" +
                           sqlite3_errstr(rc) + ")",
                       rc);
    }
    return true;
  }

  // Runs `body` in a write transaction of its own unless one is open.
  template <typename Body>
  auto Atomically(Body&& body) -> decltype(body()) {
    if (InTransaction()) return body();
    c_api::RawTransaction transaction(db->getHandle(), "");
    auto result = body();
    transaction.Commit();
    return result;
  }

  bool Transition(const char* text, const Lease& lease, std::int64_t now) {
    StatementUse q(Prepare(text));
    q->bind(1, lease.id);
    q->bind(2, lease.token);
    q->bind(3, now);
    return q->exec() == 1;
  }
};

namespace {

void CheckOpenOptions(const Options& options, bool memory) {
  if (!memory && !std::filesystem::exists(options.path) && !options.create) {
    throw NotAnOutboxError(options.path + ": no such file (create it with `outboxctl init`)",
                           SQLITE_CANTOPEN);
  }
  if (options.create && options.read_only) {
    throw std::invalid_argument("options: create and read_only exclude each other");
  }
  if (options.busy_timeout_ms < 0) {
    throw std::invalid_argument("busy_timeout_ms: expected 0 or a positive integer");
  }
  // Measured (docs/testing.md): a shared-cache database answers a read
  // during another connection's write with SQLITE_LOCKED at once, whatever
  // the busy timeout, so the agent's threads would fail where they wait.
  if (options.path.starts_with("file:") && options.path.find("mode=memory") != std::string::npos) {
    throw std::invalid_argument(
        "path: " + options.path +
        ": mode=memory databases are not supported (a private one per connection, or with "
        "cache=shared SQLITE_LOCKED errors); use file:/NAME?vfs=memdb (store::SharedMemoryPath)");
  }
}

// A database the store creates is made here first, so that it never
// follows a link planted in its place and gets the documented mode whatever
// the umask (SQLite gives the -wal and -shm files the database's mode).
void CreateDatabaseFile(const std::string& path) {
  std::error_code error;
  const auto link = std::filesystem::symlink_status(path, error);
  if (std::filesystem::is_symlink(link) && !std::filesystem::exists(path, error)) {
    throw StoreError(path + ": a symbolic link to a missing file; refusing to create a database"
                            " through it",
                     SQLITE_CANTOPEN);
  }
  if (std::filesystem::exists(link)) return;
  try {
    const util::Directory dir = util::Directory::Of(path);
    dir.Create(path.substr(path.rfind('/') + 1), internal::NewFileMode(path));
  } catch (const std::runtime_error& e) {
    // Another process made it meanwhile: SQLite opens theirs.
    if (!std::filesystem::exists(std::filesystem::symlink_status(path, error))) {
      throw StoreError(e.what(), SQLITE_CANTOPEN);
    }
  }
}

std::unique_ptr<SQLite::Database> OpenConnection(const Options& options, bool memory) {
  // A "file:" URI is SQLite's to interpret.
  if (options.create && !memory && !options.path.starts_with("file:")) {
    CreateDatabaseFile(options.path);
  }
  int flags = options.read_only ? SQLite::OPEN_READONLY : SQLite::OPEN_READWRITE;
  if (options.create) flags |= SQLite::OPEN_CREATE;
  const bool shared = IsSharedMemoryPath(options.path);
  if (memory && !shared) flags |= SQLite::OPEN_MEMORY;
  if (shared) flags |= SQLITE_OPEN_URI;
  flags |= SQLITE_OPEN_NOMUTEX;  // one thread per connection by contract
  auto db = std::make_unique<SQLite::Database>(memory && !shared ? ":memory:" : options.path,
                                               flags, options.busy_timeout_ms);
  internal::HardenConnection(db->getHandle());
  return db;
}

// Refuses what this build cannot open as it stands; says why in one line.
void CheckSchemaVersion(const Options& options, int version) {
  const std::string found = options.path + ": outbox schema version " + std::to_string(version);
  if (version > kSchemaVersion) {
    throw NotAnOutboxError(found + " is newer than this build supports (" +
                               std::to_string(kSchemaVersion) + "); upgrade edge-outbox",
                           0);
  }
  if (version == 0 && !options.create) {
    throw NotAnOutboxError(
        options.path + ": not an outbox database (no outbox schema; run `outboxctl init`)", 0);
  }
  if (version != kSchemaVersion && options.read_only) {
    throw NotAnOutboxError(found + " needs a migration; open it read-write once", 0);
  }
}

// Creates or migrates the schema: a backup copy first (unless turned off),
// and progress on a terminal.
internal::SchemaState Migrate(SQLite::Database& db, const Options& options, bool memory,
                              int version) {
  bool fresh = false;
  {
    SQLite::Statement pages(db, "PRAGMA page_count");
    pages.executeStep();
    fresh = pages.getColumn(0).getInt64() == 0;
  }
  if (version > 0 && !memory && options.backup_before_migration) {
    internal::BackUpBeforeMigration(db, options.path, version);
  }
  internal::MigrationProgress progress;
  if (options.migration_progress && !memory && ::isatty(STDERR_FILENO) == 1) {
    progress = [path = options.path](std::int64_t done, std::int64_t total) {
      PrintMigrationProgress(path, done, total);
    };
  }
  return internal::EnsureSchema(db, fresh, progress);
}

void ApplyConnectionSettings(SQLite::Database& db, const Options& options) {
  db.exec(SynchronousPragma(options.synchronous));
  db.exec("PRAGMA cache_size = -" + std::to_string(std::max(64, options.cache_kib)));
  // Bounds the -wal file after a checkpoint; the file is the application's
  // disk too.
  db.exec("PRAGMA journal_size_limit = 4194304");
}

// An error that does not name the file gets the file's name in front (a
// damaged file, a full disk or a lock: the operator needs to know which
// file); the caller rethrows one that does, as it is.
template <typename Error>
void ThrowNamingFileUnlessNamed(const Error& e, const std::string& path) {
  const std::string what = e.what();
  if (what.find(path) == std::string::npos) throw Error(path + ": " + what, e.sqlite_code());
}

}  // namespace

Store::Store(const Options& options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  const bool memory = IsMemoryPath(options.path);
  const char* context = "open database";
  CheckOpenOptions(options, memory);
  try {
    Wrap(context, [&] { impl_->db = OpenConnection(options, memory); });
    Wrap(context, [&] {
      SQLite::Database& db = *impl_->db;
      // Before any migration: moving payloads frees pages too.
      db.exec(SecureDeletePragma(options.secure_delete));
      internal::SchemaState state = internal::ReadSchema(db);
      CheckSchemaVersion(options, state.version);
      if (state.version != kSchemaVersion) {
        state = Migrate(db, options, memory, state.version);
      } else if (!options.read_only) {
        db.exec("PRAGMA journal_mode = WAL");
      }
      impl_->database_id = state.database_id;
      ApplyConnectionSettings(db, options);
    });
  } catch (const NotAnOutboxError& e) {
    ThrowNamingFileUnlessNamed(e, options.path);
    throw;
  } catch (const StoreError& e) {
    ThrowNamingFileUnlessNamed(e, options.path);
    throw;
  }
}

Store::~Store() = default;

const std::string& Store::database_id() const { return impl_->database_id; }
const std::string& Store::path() const { return impl_->options.path; }
SQLite::Database& Store::connection() { return *impl_->db; }

void Store::Checkpoint() {
  Wrap("checkpoint", [&] { impl_->db->exec(sql::kCheckpointTruncate); });
}

void Store::ReclaimFreePages() {
  Wrap("reclaim free pages", [&] {
    StatementUse count(impl_->Prepare(sql::kFreelistCount));
    std::int64_t free_pages = std::numeric_limits<std::int64_t>::max();
    for (;;) {
      count->executeStep();
      const std::int64_t left = count->getColumn(0).getInt64();
      count->reset();
      // Stops when nothing is left, or nothing moved (no auto-vacuum here).
      if (left == 0 || left >= free_pages) return;
      free_pages = left;
      impl_->db->exec(sql::kIncrementalVacuum);
    }
  });
}

StoreError::Kind StoreError::kind() const noexcept {
  switch (sqlite_code_ & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Kind::kBusy;
    case SQLITE_FULL:
      return Kind::kFull;
    default:
      return Kind::kOther;
  }
}

Store::WriteTransaction::WriteTransaction(Store& store)
    : store_(store),
      transaction_(
          std::make_unique<c_api::RawTransaction>(store.impl_->db->getHandle(), "write transaction")) {
  store_.impl_->claimed_in_transaction = false;
}

Store::WriteTransaction::~WriteTransaction() = default;

Store::ReadSnapshot::ReadSnapshot(Store& store)
    : transaction_(std::make_unique<c_api::RawTransaction>(
          store.impl_->db->getHandle(), "read snapshot", c_api::RawTransaction::Begin::kDeferred)) {}

Store::ReadSnapshot::~ReadSnapshot() = default;

void Store::WriteTransaction::Commit() {
  transaction_->Commit();
  if (store_.impl_->claimed_in_transaction) {
    store_.impl_->claimed_in_transaction = false;
    store_.impl_->SyncLogForClaims();
  }
}

std::optional<Claimed> Store::ClaimById(std::int64_t id, std::string_view owner,
                                        std::int64_t lease_expires_at, std::int64_t now) {
  return Wrap("claim by id", [&]() -> std::optional<Claimed> {
    StatementUse q(impl_->Prepare(sql::kClaimById));
    q->bind(1, id);
    const auto boot_until = impl_->BindLease(*q, owner, lease_expires_at, now);
    if (!q->executeStep()) return std::nullopt;
    Row row = ReadRow(*q);
    while (q->executeStep()) {
    }
    Claimed claimed{{id, row.lease_token}, row.topic, std::move(row), boot_until};
    // Stepped to the end: outside a transaction the claim is committed now.
    impl_->ClaimsMade(1);
    return claimed;
  });
}

std::vector<Claimed> Store::ClaimDue(std::string_view topic, std::string_view owner,
                                     std::int64_t lease_expires_at, std::int64_t now, int limit,
                                     bool quarantined_only, ClaimSync sync) {
  if (limit < 1) throw std::invalid_argument("limit: expected a positive integer");
  return Wrap("claim due rows", [&] {
    const std::string topic_text(topic);
    StatementUse q(impl_->Prepare(quarantined_only ? sql::kClaimQuarantined : sql::kClaimDue));
    q->bind(1, topic_text);
    q->bind(5, limit);
    const auto boot_until = impl_->BindLease(*q, owner, lease_expires_at, now);
    std::vector<Claimed> claimed;
    while (q->executeStep()) {
      Row row = ReadRow(*q);
      claimed.push_back({{row.id, row.lease_token}, topic_text, std::move(row), boot_until});
    }
    // RETURNING order is unspecified; ids grow with enqueue order, which is
    // the closest cheap approximation of (next_attempt_at, id).
    std::sort(claimed.begin(), claimed.end(),
              [](const Claimed& a, const Claimed& b) { return a.lease.id < b.lease.id; });
    if (sync == ClaimSync::kStore) impl_->ClaimsMade(claimed.size());
    return claimed;
  });
}

void Store::SyncLogForClaims() {
  Wrap("make claims durable", [&] {
    if (!impl_->SyncLogForClaims() && !IsMemoryPath(impl_->options.path)) {
      // A connection opens its handle of the log with its first read.
      impl_->db->exec("SELECT 1 FROM outbox_meta LIMIT 1");
      if (!impl_->SyncLogForClaims()) {
        throw StoreError(impl_->options.path +
                             ": no write-ahead log to fsync after a claim (not in WAL mode?)",
                         SQLITE_CANTOPEN);
      }
    }
  });
}

std::optional<Claimed> Store::ClaimNextOfKey(std::string_view topic, std::string_view ordering_key,
                                             std::string_view owner,
                                             std::int64_t lease_expires_at, std::int64_t now) {
  const std::string key(ordering_key);
  std::vector<Claimed> claimed =
      ClaimNextOfKeys(topic, std::span(&key, 1), owner, lease_expires_at, now);
  if (claimed.empty()) return std::nullopt;
  return std::move(claimed.front());
}

std::vector<Claimed> Store::ClaimNextOfKeys(std::string_view topic,
                                            std::span<const std::string> ordering_keys,
                                            std::string_view owner, std::int64_t lease_expires_at,
                                            std::int64_t now) {
  return Wrap("claim the next row of keys", [&] {
    // Statements for 1, 2, 4, ... 32 keys: the smallest that holds what is
    // left (at most 32), its spare slots bound to the last key again (the
    // IN list drops the repeats). One statement per 32 keys: splitting 31
    // keys into 16 + 8 + 4 + 2 + 1 cost 1.4x the padded statement.
    static constexpr std::pair<std::size_t, const char*> kSizes[] = {
        {1, sql::kClaimNextOfKeys1}, {2, sql::kClaimNextOfKeys2},   {4, sql::kClaimNextOfKeys4},
        {8, sql::kClaimNextOfKeys8}, {16, sql::kClaimNextOfKeys16}, {32, sql::kClaimNextOfKeys32}};
    constexpr int kFirstKey = 8;
    const std::string topic_text(topic);
    std::vector<Claimed> claimed;
    for (std::size_t at = 0; at < ordering_keys.size();) {
      const std::size_t keys = std::min<std::size_t>(ordering_keys.size() - at, 32);
      const auto& [slots, text] =
          *std::find_if(std::begin(kSizes), std::end(kSizes),
                        [keys](const auto& size) { return size.first >= keys; });
      StatementUse q(impl_->Prepare(text));
      q->bind(1, topic_text);
      const auto boot_until = impl_->BindLease(*q, owner, lease_expires_at, now);
      for (std::size_t i = 0; i < slots; ++i) {
        q->bind(kFirstKey + static_cast<int>(i), ordering_keys[at + std::min(i, keys - 1)]);
      }
      while (q->executeStep()) {
        Row row = ReadRow(*q);
        claimed.push_back({{row.id, row.lease_token}, topic_text, std::move(row), boot_until});
      }
      at += keys;
    }
    std::sort(claimed.begin(), claimed.end(),
              [](const Claimed& a, const Claimed& b) { return a.lease.id < b.lease.id; });
    impl_->ClaimsMade(claimed.size());
    return claimed;
  });
}

namespace {

// Outside a transaction a run is claimed in one of its own, made durable once
// it committed (as any claim outside a transaction).
template <typename Impl, typename Body>
std::vector<Claimed> ClaimRunAtomically(Impl& impl, Body&& body) {
  const bool own_transaction = !impl.InTransaction();
  std::vector<Claimed> claimed = impl.Atomically(body);
  if (own_transaction && impl.claimed_in_transaction) {
    impl.claimed_in_transaction = false;
    impl.SyncLogForClaims();
  }
  return claimed;
}

}  // namespace

Store::RunRange Store::RunAfter(std::int64_t after_id, const std::string& topic,
                                const std::string& ordering_key, std::int64_t now, int max_rows,
                                std::int64_t max_bytes) {
  RunRange range;
  StatementUse q(impl_->Prepare(sql::kRunAfterHead));
  q->bind(1, topic);
  q->bind(2, ordering_key);
  q->bind(3, after_id);
  q->bind(4, max_rows);
  q->bind(5, now);
  std::int64_t bytes = 0;
  while (q->executeStep()) {
    if (q->getColumn(1).getInt() == 0) break;
    bytes += q->getColumn(2).getInt64();
    if (bytes > max_bytes && range.first != 0) break;
    range.last = q->getColumn(0).getInt64();
    if (range.first == 0) range.first = range.last;
  }
  return range;
}

std::vector<Claimed> Store::ClaimRunRange(const RunRange& range, const std::string& topic,
                                          const std::string& ordering_key, std::string_view owner,
                                          std::int64_t lease_expires_at, std::int64_t now) {
  std::vector<Claimed> tail;
  StatementUse q(impl_->Prepare(sql::kClaimRunRange));
  q->bind(1, topic);
  q->bind(5, ordering_key);
  const auto boot_until = impl_->BindLease(*q, owner, lease_expires_at, now);
  q->bind(8, range.first);
  q->bind(9, range.last);
  while (q->executeStep()) {
    Row row = ReadRow(*q);
    tail.push_back({{row.id, row.lease_token}, topic, std::move(row), boot_until});
  }
  // RETURNING order is unspecified; a run goes in id order.
  std::sort(tail.begin(), tail.end(),
            [](const Claimed& a, const Claimed& b) { return a.lease.id < b.lease.id; });
  impl_->ClaimsMade(tail.size());
  return tail;
}

std::vector<Claimed> Store::ClaimRunAfter(const Lease& last, std::string_view topic,
                                          std::string_view ordering_key, std::string_view owner,
                                          std::int64_t lease_expires_at, std::int64_t now,
                                          int max_rows, std::int64_t max_bytes) {
  if (max_rows < 1) throw std::invalid_argument("max_rows: expected a positive integer");
  return Wrap("grow a run of a key", [&] {
    return ClaimRunAtomically(*impl_, [&] {
      const std::string topic_text(topic);
      const std::string key_text(ordering_key);
      // What may follow first: one seek when nothing does, which is what a
      // run that has claimed all of its key finds at every later growth.
      // kRunMayGrow walks every row of the run still in flight, so it runs
      // only when there is something to claim.
      const RunRange range = RunAfter(last.id, topic_text, key_text, now, max_rows, max_bytes);
      if (range.first == 0) return std::vector<Claimed>{};
      {
        StatementUse q(impl_->Prepare(sql::kRunMayGrow));
        q->bind(1, topic_text);
        q->bind(2, key_text);
        q->bind(3, last.id);
        q->bind(4, last.token);
        q->bind(5, std::string(owner));
        if (!q->executeStep() || q->getColumn(0).getInt() == 0) return std::vector<Claimed>{};
      }
      return ClaimRunRange(range, topic_text, key_text, owner, lease_expires_at, now);
    });
  });
}

int Store::MakeDueIfFarAhead(std::string_view topic, std::int64_t now,
                             std::int64_t max_interval_ms) {
  return Wrap("make far-ahead rows due", [&] {
    StatementUse q(impl_->Prepare(sql::kMakeDueIfFarAhead));
    q->bind(1, std::string(topic));
    q->bind(2, now);
    q->bind(3, now + std::max<std::int64_t>(max_interval_ms, 0));
    return q->exec();
  });
}

int Store::ParkBehindDeadHeads(std::string_view topic, std::int64_t now) {
  return Wrap("park rows behind dead heads", [&] {
    StatementUse q(impl_->Prepare(sql::kParkBehindDeadHeads));
    q->bind(1, std::string(topic));
    q->bind(2, now);
    return q->exec();
  });
}

namespace {

// The leases as the JSON object kCompleteMany reads: {"id": token, ...}.
std::string LeasesJson(std::span<const DeliveredLease> delivered) {
  std::string json;
  json.reserve(delivered.size() * 24 + 2);
  json += '{';
  for (const DeliveredLease& each : delivered) {
    if (json.size() > 1) json += ',';
    json += '"';
    json += std::to_string(each.lease.id);
    json += "\":";
    json += std::to_string(each.lease.token);
  }
  json += '}';
  return json;
}

// More rows than the largest VALUES chunk, all at one time (an acknowledged
// batch): one JSON statement instead of several chunks.
bool OneTimeBeyondChunks(std::span<const DeliveredLease> delivered) {
  return delivered.size() > 32 &&
         std::all_of(delivered.begin(), delivered.end(),
                     [&](const DeliveredLease& each) { return each.now == delivered.front().now; });
}

}  // namespace

int Store::Complete(std::span<const DeliveredLease> delivered) {
  if (delivered.empty()) return 0;
  if (delivered.size() == 1) {
    return Wrap("complete", [&] {
      return impl_->Transition(sql::kComplete, delivered[0].lease, delivered[0].now) ? 1 : 0;
    });
  }
  if (OneTimeBeyondChunks(delivered)) {
    const std::string json = LeasesJson(delivered);
    return Wrap("complete", [&] {
      StatementUse q(impl_->Prepare(sql::kCompleteMany));
      q->bind(1, json);
      q->bind(2, delivered.front().now);
      return q->exec();
    });
  }
  return Wrap("complete", [&] {
    return impl_->Atomically([&] {
      // Chunks of 32, 16, ... rows: a handful of prepared statements serve
      // any count.
      static constexpr std::pair<std::size_t, const char*> kChunks[] = {
          {32, sql::kCompleteEach32}, {16, sql::kCompleteEach16}, {8, sql::kCompleteEach8},
          {4, sql::kCompleteEach4},   {2, sql::kCompleteEach2}};
      int changed = 0;
      std::size_t at = 0;
      while (at < delivered.size()) {
        const std::size_t left = delivered.size() - at;
        if (left == 1) {
          changed +=
              impl_->Transition(sql::kComplete, delivered[at].lease, delivered[at].now) ? 1 : 0;
          break;
        }
        const auto& [rows, text] =
            *std::find_if(std::begin(kChunks), std::end(kChunks),
                          [left](const auto& chunk) { return chunk.first <= left; });
        StatementUse q(impl_->Prepare(text));
        int column = 0;
        for (std::size_t i = at; i < at + rows; ++i) {
          q->bind(++column, delivered[i].lease.id);
          q->bind(++column, delivered[i].lease.token);
          q->bind(++column, delivered[i].now);
        }
        changed += q->exec();
        at += rows;
      }
      return changed;
    });
  });
}

bool Store::Complete(const Lease& lease, std::int64_t now) {
  const DeliveredLease one{lease, now};
  return Complete(std::span<const DeliveredLease>(&one, 1)) == 1;
}

bool Store::Reschedule(const Lease& lease, bool count_attempt, std::int64_t next_attempt_at,
                       std::string_view error, std::int64_t now) {
  return Wrap("reschedule", [&] {
    StatementUse q(impl_->Prepare(sql::kReschedule));
    q->bind(1, lease.id);
    q->bind(2, lease.token);
    q->bind(3, now);
    q->bind(4, count_attempt ? 1 : 0);
    q->bind(5, next_attempt_at);
    q->bind(6, std::string(error));
    return q->exec() == 1;
  });
}

bool Store::MarkDead(const Lease& lease, bool count_attempt, std::string_view error,
                     std::string_view dead_reason, std::int64_t now) {
  return Wrap("mark dead", [&] {
    StatementUse q(impl_->Prepare(sql::kMarkDead));
    q->bind(1, lease.id);
    q->bind(2, lease.token);
    q->bind(3, now);
    q->bind(4, count_attempt ? 1 : 0);
    q->bind(5, std::string(error));
    q->bind(6, std::string(dead_reason));
    return q->exec() == 1;
  });
}

bool Store::Acknowledge(const Lease& lease, int attempts, std::int64_t next_attempt_at,
                        std::string_view error, std::int64_t now, bool dead) {
  return Wrap("acknowledge", [&] {
    StatementUse q(impl_->Prepare(sql::kAcknowledge));
    q->bind(1, lease.id);
    q->bind(2, lease.token);
    q->bind(3, now);
    q->bind(4, attempts);
    q->bind(5, next_attempt_at);
    q->bind(6, std::string(error));
    q->bind(7, static_cast<int>(dead ? Status::kDead : Status::kPending));
    return q->exec() == 1;
  });
}

std::vector<Row> Store::ExpiredPending(std::string_view topic, std::int64_t now,
                                       std::int64_t ttl_ms, int limit) {
  CheckBatch(limit);
  if (now < kSaneWallFloorMs) return {};
  return Wrap("find expired rows", [&] {
    std::vector<Row> rows;
    const auto read = [&](const char* statement) {
      StatementUse q(impl_->Prepare(statement));
      q->bind(1, std::string(topic));
      q->bind(2, now);
      q->bind(3, kSaneWallFloorMs);
      q->bind(4, limit - static_cast<int>(rows.size()));
      if (statement == sql::kExpiredByTtl) q->bind(5, ttl_ms);
      while (q->executeStep()) rows.push_back(ReadRow(*q));
    };
    read(sql::kExpiredByDeadline);
    if (ttl_ms > 0 && static_cast<int>(rows.size()) < limit) read(sql::kExpiredByTtl);
    return rows;
  });
}

bool Store::Expire(std::int64_t id, std::int64_t now, std::string_view error) {
  return Wrap("expire", [&] {
    StatementUse q(impl_->Prepare(sql::kExpire));
    q->bind(1, id);
    q->bind(2, now);
    q->bind(3, std::string(error));
    return q->exec() == 1;
  });
}

bool Store::Revert(const Lease& lease, std::int64_t now) {
  return Wrap("revert", [&] { return impl_->Transition(sql::kRevert, lease, now); });
}

std::vector<std::string> Store::RecycleExpired(std::int64_t now, std::int64_t max_lease_ms,
                                               int limit) {
  CheckBatch(limit);
  return Wrap("recycle expired leases", [&] {
    StatementUse q(impl_->Prepare(sql::kRecycleExpired));
    q->bind(1, now);
    q->bind(2, limit);
    const std::int64_t slack = 2 * std::max<std::int64_t>(max_lease_ms, 0);
    q->bind(3, now + slack);
    const BootTime boot = impl_->Boot();
    if (boot.boot_id.empty()) {
      q->bind(4);  // NULL: every lease on wall time
    } else {
      q->bind(4, boot.boot_id);
    }
    q->bind(5, boot.ms);
    q->bind(6, boot.ms + slack);
    std::vector<std::string> topics;
    while (q->executeStep()) topics.push_back(q->getColumn(0).getString());
    return topics;
  });
}

int Store::ReleaseOwner(std::string_view owner, std::int64_t now) {
  return Wrap("release leases", [&] {
    StatementUse q(impl_->Prepare(sql::kReleaseOwner));
    q->bind(1, std::string(owner));
    q->bind(2, now);
    return q->exec();
  });
}

std::vector<std::string> Store::LeaseOwners() {
  return Wrap("list lease owners", [&] {
    StatementUse q(impl_->Prepare(sql::kLeaseOwners));
    std::vector<std::string> owners;
    while (q->executeStep()) owners.push_back(q->getColumn(0).getString());
    return owners;
  });
}

Store::TakeBack Store::TakeBackOwner(std::string_view owner, int crash_budget,
                                    std::int64_t now) {
  if (crash_budget < 1) throw std::invalid_argument("crash_budget: expected a positive integer");
  return Wrap("take back leases", [&] {
    return impl_->Atomically([&] {
      const std::string owner_text(owner);
      std::int64_t held = 0;
      {
        StatementUse count(impl_->Prepare(sql::kCountOwnedBy));
        count->bind(1, owner_text);
        count->executeStep();
        held = count->getColumn(0).getInt64();
      }
      const int alone = held == 1 ? 1 : 0;
      TakeBack result;
      std::vector<std::int64_t> dead_ids;
      {
        StatementUse dead(impl_->Prepare(sql::kTakeBackToDead));
        dead->bind(1, owner_text);
        dead->bind(2, now);
        dead->bind(3, alone);
        dead->bind(4, crash_budget);
        while (dead->executeStep()) {
          dead_ids.push_back(dead->getColumn(0).getInt64());
          result.dead_topics.push_back(dead->getColumn(1).getString());
        }
      }
      // Read whole, for the agent's on_dead hooks in this same transaction.
      for (const std::int64_t id : dead_ids) {
        StatementUse q(impl_->Prepare(sql::kGetRow));
        q->bind(1, id);
        if (q->executeStep()) result.dead_rows.push_back(ReadRow(*q));
      }
      StatementUse pending(impl_->Prepare(sql::kTakeBackToPending));
      pending->bind(1, owner_text);
      pending->bind(2, now);
      pending->bind(3, alone);
      result.quarantined = pending->exec();
      return result;
    });
  });
}

bool Store::RecordCrashError(std::int64_t id, std::string_view error) {
  return Wrap("record crash error", [&] {
    StatementUse q(impl_->Prepare(sql::kRecordCrashError));
    q->bind(1, id);
    q->bind(2, std::string(error));
    return q->exec() > 0;
  });
}

std::vector<Row> Store::PeekDelivered(std::int64_t cutoff, int batch) {
  CheckBatch(batch);
  return Wrap("read delivered rows", [&] {
    StatementUse q(impl_->Prepare(sql::kPeekDelivered));
    q->bind(1, cutoff);
    q->bind(2, batch);
    std::vector<Row> rows;
    while (q->executeStep()) rows.push_back(ReadRow(*q));
    return rows;
  });
}

namespace {

// Gives every free page back inside a purge's own transaction when they fit
// in one step of incremental vacuum (sql::kIncrementalVacuum, 128 pages): a
// page the delete emptied and the vacuum cuts off the file's end is then
// never written to the WAL (a commit leaves out pages past the end), and one
// the vacuum fills with a page moved from the end is written once, not by
// the delete and again by the move. In a transaction of its own, the delete
// wrote every page it emptied: 453 of a 256 B message's 482 purge bytes
// (figure 7). More free pages than a step (large payloads, whose overflow
// pages a delete frees without writing them) are left to ReclaimFreePages:
// a step would move pages from the file's end that the next batch may free.
// A no-op without auto-vacuum.
void GiveBackFreePagesIfOneStep(SQLite::Database& db) {
  constexpr std::int64_t kStep = 128;
  SQLite::Statement count(db, sql::kFreelistCount);
  if (count.executeStep() && count.getColumn(0).getInt64() <= kStep) {
    db.exec(sql::kIncrementalVacuum);
  }
}

}  // namespace

int Store::PurgeDelivered(std::int64_t cutoff, int batch) {
  CheckBatch(batch);
  return Wrap("purge delivered rows", [&] {
    return impl_->Atomically([&] {
      StatementUse q(impl_->Prepare(sql::kPurgeDelivered));
      q->bind(1, cutoff);
      q->bind(2, batch);
      const int deleted = q->exec();
      if (deleted > 0) GiveBackFreePagesIfOneStep(*impl_->db);
      return deleted;
    });
  });
}

int Store::DeleteDelivered(const std::vector<std::int64_t>& ids) {
  return Wrap("delete delivered rows", [&] {
    return impl_->Atomically([&] {
      StatementUse q(impl_->Prepare(sql::kDeleteDelivered));
      int deleted = 0;
      for (std::int64_t id : ids) {
        q->bind(1, id);
        deleted += q->exec();
        q->reset();
      }
      if (deleted > 0) GiveBackFreePagesIfOneStep(*impl_->db);
      return deleted;
    });
  });
}

namespace {

constexpr char kOrderingKey[] = "key";
constexpr char kOrderingNone[] = "none";

const char* DeadHeadName(DeadHead dead_head) {
  return dead_head == DeadHead::kSkip ? "skip" : "block";
}

// Values another tool may have written: anything but "key" orders nothing,
// anything but "skip" blocks (the safe reading of both).
TopicOrdering ReadOrdering(const SQLite::Column& ordering, const SQLite::Column& dead_head) {
  TopicOrdering mode;
  mode.by_key = ordering.getString() == kOrderingKey;
  mode.dead_head = dead_head.getString() == "skip" ? DeadHead::kSkip : DeadHead::kBlock;
  return mode;
}

}  // namespace

std::string Describe(const TopicOrdering& ordering) {
  if (!ordering.by_key) return kOrderingNone;
  return std::string("by key, dead_head ") + DeadHeadName(ordering.dead_head);
}

TopicOrdering Store::AgreeOrdering(std::string_view topic, const TopicOrdering& wanted,
                                   std::int64_t now) {
  return Wrap("record the topic's ordering", [&] {
    return impl_->Atomically([&] {
      const std::string topic_text(topic);
      if (wanted.by_key) {
        StatementUse q(impl_->Prepare(sql::kRecordTopicMode));
        q->bind(1, topic_text);
        q->bind(2, kOrderingKey);
        q->bind(3, DeadHeadName(wanted.dead_head));
        q->bind(4, now);
        q->exec();
      }
      StatementUse q(impl_->Prepare(sql::kGetTopicMode));
      q->bind(1, topic_text);
      if (!q->executeStep()) return TopicOrdering{};
      return ReadOrdering(q->getColumn(0), q->getColumn(1));
    });
  });
}

std::vector<std::pair<std::string, TopicOrdering>> Store::RecordedOrderings() {
  return Wrap("read the topics' ordering", [&] {
    StatementUse q(impl_->Prepare(sql::kTopicModes));
    std::vector<std::pair<std::string, TopicOrdering>> modes;
    while (q->executeStep()) {
      modes.emplace_back(q->getColumn(0).getString(), ReadOrdering(q->getColumn(1), q->getColumn(2)));
    }
    return modes;
  });
}

bool Store::ForgetOrdering(std::string_view topic) {
  return Wrap("forget the topic's ordering", [&] {
    StatementUse q(impl_->Prepare(sql::kClearTopicMode));
    q->bind(1, std::string(topic));
    return q->exec() > 0;
  });
}

std::vector<Row> Store::BlockedHeads(std::int64_t now, std::int64_t after_id, int limit) {
  if (limit < 1) throw std::invalid_argument("limit: expected a positive integer");
  return Wrap("list blocked keys", [&] {
    StatementUse q(impl_->Prepare(sql::kBlockedHeads));
    q->bind(1, now);
    q->bind(2, after_id);
    q->bind(3, limit);
    std::vector<Row> rows;
    while (q->executeStep()) rows.push_back(ReadRow(*q));
    return rows;
  });
}

std::int64_t Store::BlockedKeyCount(std::int64_t now) {
  return Wrap("count blocked keys", [&] {
    StatementUse q(impl_->Prepare(sql::kBlockedKeyCount));
    q->bind(1, now);
    q->executeStep();
    return q->getColumn(0).getInt64();
  });
}

std::optional<Row> Store::WaitsFor(std::int64_t id) {
  return Wrap("read what a row waits for", [&]() -> std::optional<Row> {
    StatementUse q(impl_->Prepare(sql::kWaitsFor));
    q->bind(1, id);
    if (!q->executeStep()) return std::nullopt;
    return ReadRow(*q);
  });
}

std::optional<Row> Store::Get(std::int64_t id) {
  return Wrap("read row", [&]() -> std::optional<Row> {
    StatementUse q(impl_->Prepare(sql::kGetRow));
    q->bind(1, id);
    if (!q->executeStep()) return std::nullopt;
    return ReadRow(*q);
  });
}

std::vector<Row> Store::List(const ListFilter& filter) {
  if (filter.limit < 1) throw std::invalid_argument("limit: expected a positive integer");
  return Wrap("list rows", [&] {
    StatementUse q(impl_->Prepare(sql::kList));
    if (filter.status) {
      q->bind(1, static_cast<int>(*filter.status));
    } else {
      q->bind(1);
    }
    if (filter.topic) {
      q->bind(2, *filter.topic);
    } else {
      q->bind(2);
    }
    q->bind(3, filter.after_id);
    q->bind(4, filter.limit);
    std::vector<Row> rows;
    while (q->executeStep()) rows.push_back(ReadRow(*q));
    return rows;
  });
}

Stats Store::GetStats(std::optional<std::int64_t> now) {
  Stats stats;
  Wrap("read stats", [&] {
    // One read transaction, so the numbers agree with each other.
    c_api::RawTransaction read(impl_->db->getHandle(), "read stats",
                               c_api::RawTransaction::Begin::kDeferred);
    {
      StatementUse q(impl_->Prepare(sql::kStatsByTopic));
      if (now) {
        q->bind(1, *now);
      } else {
        q->bind(1);
      }
      while (q->executeStep()) {
        stats.counts.push_back({q->getColumn(0).getString(),
                                static_cast<Status>(q->getColumn(1).getInt()),
                                q->getColumn(2).getInt64(), q->getColumn(3).getInt64(),
                                OptionalColumn<std::int64_t>(q->getColumn(4))});
      }
    }
    {
      StatementUse q(impl_->Prepare(sql::kUndelivered));
      if (q->executeStep()) stats.undelivered = q->getColumn(0).getInt64();
    }
    {
      StatementUse q(impl_->Prepare(sql::kUsedBytes));
      if (q->executeStep()) stats.db_bytes = q->getColumn(0).getInt64();
    }
    stats.limits = GetLimits();
    read.Commit();
  });
  struct stat wal {};
  if (!IsMemoryPath(impl_->options.path) &&
      ::stat((impl_->options.path + "-wal").c_str(), &wal) == 0) {
    stats.wal_bytes = static_cast<std::int64_t>(wal.st_size);
  }
  return stats;
}

std::vector<std::string> Store::PendingTopics() {
  return Wrap("list pending topics", [&] {
    StatementUse q(impl_->Prepare(sql::kPendingTopics));
    std::vector<std::string> topics;
    while (q->executeStep()) topics.push_back(q->getColumn(0).getString());
    return topics;
  });
}

bool Store::HasDue(std::string_view topic, std::int64_t now) {
  return Wrap("look for due rows", [&] {
    StatementUse q(impl_->Prepare(sql::kHasDue));
    q->bind(1, std::string(topic));
    q->bind(2, now);
    q->executeStep();
    return q->getColumn(0).getInt() != 0;
  });
}

std::int64_t Store::QuarantinedCount() {
  return Wrap("count quarantined rows", [&] {
    StatementUse q(impl_->Prepare(sql::kQuarantinedCount));
    q->executeStep();
    return q->getColumn(0).getInt64();
  });
}

std::vector<std::pair<std::string, std::int64_t>> Store::QuarantinedTopics() {
  return Wrap("count quarantined rows per topic", [&] {
    StatementUse q(impl_->Prepare(sql::kQuarantinedTopics));
    std::vector<std::pair<std::string, std::int64_t>> topics;
    while (q->executeStep()) {
      topics.emplace_back(q->getColumn(0).getString(), q->getColumn(1).getInt64());
    }
    return topics;
  });
}

std::int64_t Store::DataVersion() {
  return Wrap("read data_version", [&] {
    StatementUse q(impl_->Prepare(sql::kDataVersion));
    q->executeStep();
    return q->getColumn(0).getInt64();
  });
}

Limits Store::GetLimits() {
  return Wrap("read limits", [&] {
    StatementUse q(impl_->Prepare(sql::kGetLimits));
    Limits limits;
    if (q->executeStep()) {
      limits.max_payload_bytes = q->getColumn(0).getInt64();
      limits.max_pending = q->getColumn(1).getInt64();
      limits.max_db_bytes = q->getColumn(2).getInt64();
    }
    return limits;
  });
}

void Store::SetLimits(const Limits& limits) {
  if (limits.max_payload_bytes < 0) {
    throw std::invalid_argument("limits.max_payload_bytes: expected 0 (no limit) or more");
  }
  if (limits.max_pending < 0) {
    throw std::invalid_argument("limits.max_pending: expected 0 (no limit) or more");
  }
  if (limits.max_db_bytes < 0) {
    throw std::invalid_argument("limits.max_db_bytes: expected 0 (no limit) or more");
  }
  Wrap("write limits", [&] {
    StatementUse q(impl_->Prepare(sql::kSetLimits));
    q->bind(1, limits.max_payload_bytes);
    q->bind(2, limits.max_pending);
    q->bind(3, limits.max_db_bytes);
    q->exec();
  });
}

}  // namespace outbox::store
