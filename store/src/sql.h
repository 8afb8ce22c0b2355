// Every SQL statement the store runs, in one place.
//
// Times are integer milliseconds since the Unix epoch. SQLite 3.40 has no
// unixepoch('subsec'), so "now" in defaults is derived from julianday('now').
#pragma once

namespace outbox::store::sql {

#define OUTBOX_NOW_MS "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"

// --- schema ------------------------------------------------------------------

inline constexpr char kHasOutboxMeta[] =
    "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'outbox_meta'";
inline constexpr char kHasOutboxTable[] =
    "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'outbox'";
inline constexpr char kGetMeta[] = "SELECT value FROM outbox_meta WHERE key = ?";
inline constexpr char kPutMeta[] =
    "INSERT INTO outbox_meta(key, value) VALUES(?, ?) "
    "ON CONFLICT(key) DO UPDATE SET value = excluded.value";
inline constexpr char kInitDatabaseId[] =
    "INSERT OR IGNORE INTO outbox_meta(key, value)"
    " VALUES('database_id', lower(hex(randomblob(16))))";

// Migration 1: the table of docs/design.md plus the store's own columns
// (lease_token fences late writers; lease_expires_at, last_attempt_at,
// crashes, quarantined and operator_retries serve resilience and audit),
// and the store's own small tables.
//
// Limits and field checks are BEFORE INSERT triggers rather than CHECK
// constraints so that they hold for plain-SQL writers too and can be changed
// by later migrations without rebuilding the application's table. RAISE
// messages start with "outbox:" and name the field; the Producer maps them to
// typed errors.
inline constexpr char kMigration1[] = R"sql(
CREATE TABLE outbox_meta(
  key   TEXT PRIMARY KEY,
  value ANY
) WITHOUT ROWID;

CREATE TABLE outbox(
  id                INTEGER PRIMARY KEY,
  topic             TEXT NOT NULL,
  msg_key           TEXT NOT NULL,
  payload           BLOB NOT NULL,
  headers           TEXT,
  status            INTEGER NOT NULL DEFAULT 0,
  attempts          INTEGER NOT NULL DEFAULT 0,
  max_attempts      INTEGER,
  backoff           TEXT,
  first_interval_ms INTEGER,
  next_attempt_at   INTEGER NOT NULL DEFAULT ()sql" OUTBOX_NOW_MS R"sql(),
  lease_owner       TEXT,
  last_error        TEXT,
  created_at        INTEGER NOT NULL DEFAULT ()sql" OUTBOX_NOW_MS R"sql(),
  updated_at        INTEGER NOT NULL DEFAULT ()sql" OUTBOX_NOW_MS R"sql(),
  lease_token       INTEGER NOT NULL DEFAULT 0,
  lease_expires_at  INTEGER,
  last_attempt_at   INTEGER,
  crashes           INTEGER NOT NULL DEFAULT 0,
  quarantined       INTEGER NOT NULL DEFAULT 0,
  operator_retries  INTEGER NOT NULL DEFAULT 0,
  UNIQUE(topic, msg_key)
);

-- The sweeper's claim per topic; rowid is the implicit last column, so
-- ORDER BY next_attempt_at, id is served by the index.
CREATE INDEX outbox_claim ON outbox(status, topic, next_attempt_at);
-- Retention and the recycling of expired leases.
CREATE INDEX outbox_retention ON outbox(status, updated_at);
-- Rows taken back from a crashed agent, resent one at a time.
CREATE INDEX outbox_quarantine ON outbox(topic, next_attempt_at)
  WHERE status = 0 AND quarantined = 1;

CREATE TABLE outbox_limits(
  one               INTEGER PRIMARY KEY CHECK (one = 1),
  max_payload_bytes INTEGER NOT NULL DEFAULT 1048576,
  max_pending       INTEGER NOT NULL DEFAULT 1000000,
  max_db_bytes      INTEGER NOT NULL DEFAULT 0
);
INSERT INTO outbox_limits(one) VALUES(1);

-- Rows not yet delivered, kept by triggers so that max_pending costs one
-- lookup per insert instead of a count(*).
CREATE TABLE outbox_counters(
  name  TEXT PRIMARY KEY,
  value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO outbox_counters VALUES('undelivered', 0);

-- Operator actions (retry, purge) for later questions.
CREATE TABLE outbox_audit(
  id      INTEGER PRIMARY KEY,
  at      INTEGER NOT NULL,
  actor   TEXT NOT NULL,
  action  TEXT NOT NULL,
  row_id  INTEGER,
  detail  TEXT
);

CREATE TRIGGER outbox_check_insert BEFORE INSERT ON outbox
BEGIN
  SELECT RAISE(ABORT, 'outbox: topic: must be a non-empty string')
   WHERE typeof(NEW.topic) <> 'text' OR length(NEW.topic) = 0;
  SELECT RAISE(ABORT, 'outbox: msg_key: must be a non-empty string of at most 255 bytes')
   WHERE typeof(NEW.msg_key) <> 'text' OR length(NEW.msg_key) = 0
      OR length(CAST(NEW.msg_key AS BLOB)) > 255;
  SELECT RAISE(ABORT, 'outbox: headers: must be a JSON object of string values without CR or LF')
   WHERE NEW.headers IS NOT NULL
     AND (json_valid(NEW.headers) = 0 OR json_type(NEW.headers) <> 'object'
          OR EXISTS(SELECT 1 FROM json_each(NEW.headers)
                     WHERE type <> 'text' OR key = ''
                        OR instr(key, char(13)) OR instr(key, char(10))
                        OR instr(value, char(13)) OR instr(value, char(10))));
  SELECT RAISE(ABORT, 'outbox: payload: larger than limits.max_payload_bytes')
    FROM outbox_limits
   WHERE max_payload_bytes > 0
     AND length(CAST(NEW.payload AS BLOB)) > max_payload_bytes;
  SELECT RAISE(ABORT, 'outbox: capacity: limits.max_pending reached')
    FROM outbox_limits, outbox_counters
   WHERE max_pending > 0 AND name = 'undelivered' AND value >= max_pending;
  SELECT RAISE(ABORT, 'outbox: capacity: limits.max_db_bytes reached')
    FROM outbox_limits
   WHERE max_db_bytes > 0
     AND ((SELECT page_count FROM pragma_page_count())
          - (SELECT freelist_count FROM pragma_freelist_count()))
         * (SELECT page_size FROM pragma_page_size()) >= max_db_bytes;
END;

CREATE TRIGGER outbox_count_insert AFTER INSERT ON outbox WHEN NEW.status <> 1
BEGIN
  UPDATE outbox_counters SET value = value + 1 WHERE name = 'undelivered';
END;
CREATE TRIGGER outbox_count_update AFTER UPDATE OF status ON outbox
  WHEN (OLD.status = 1) <> (NEW.status = 1)
BEGIN
  UPDATE outbox_counters SET value = value + (CASE WHEN NEW.status = 1 THEN -1 ELSE 1 END)
   WHERE name = 'undelivered';
END;
CREATE TRIGGER outbox_count_delete AFTER DELETE ON outbox WHEN OLD.status <> 1
BEGIN
  UPDATE outbox_counters SET value = value - 1 WHERE name = 'undelivered';
END;
)sql";

// Migration 2: outbox_retention holds delivered rows only. Retention is the
// only statement that needs it (status = 1 AND updated_at < cutoff, in
// updated_at order); rows in flight are found through outbox_claim's status
// prefix. As a full index it cost every enqueue one more B-tree page and
// every claim and completion a delete and an insert in it; now only a
// completion adds an entry (benchmark figures 1 to 3). The constant status
// column stays first so that, without statistics, SQLite still prefers this
// index (status = ? AND updated_at < ?) to outbox_claim (status = ?) for
// retention.
inline constexpr char kMigration2[] = R"sql(
DROP INDEX outbox_retention;
CREATE INDEX outbox_retention ON outbox(status, updated_at) WHERE status = 1;
)sql";

// Migration 3: leases on the host's boot clock (outbox/store.h, BootTime).
// lease_expires_at stays (wall time, for people and for leases written by
// older versions); a claim also writes the boot it ran in and the boot-clock
// ms at which its lease ends. Two ADD COLUMNs, which rewrite no row, inside
// the migration's one transaction: a kill leaves the file at version 2.
inline constexpr char kMigration3[] = R"sql(
ALTER TABLE outbox ADD COLUMN lease_boot_id TEXT;
ALTER TABLE outbox ADD COLUMN lease_boot_until INTEGER;
)sql";

// Migration 4: the message attributes of the contract (docs/design.md, "The
// outbox table"), added once: schema_version, ordering_key, deliver_at,
// expires_at and a structured dead_reason; and what the store needs to serve
// them: acked_at (the receiver acknowledged, the completion is still
// pending), the audit trail's row count and host, a table where agents
// publish their runtime state, the ordering mode each topic was started with,
// an index for the oldest undelivered message of an ordering key and one for
// expiry. ADD COLUMN rewrites no row; the check trigger is replaced, since
// triggers cannot be altered. One transaction, like every migration.
inline constexpr char kMigration4[] = R"sql(
ALTER TABLE outbox ADD COLUMN schema_version TEXT;
ALTER TABLE outbox ADD COLUMN ordering_key TEXT;
ALTER TABLE outbox ADD COLUMN deliver_at INTEGER;
ALTER TABLE outbox ADD COLUMN expires_at INTEGER;
ALTER TABLE outbox ADD COLUMN dead_reason TEXT;
ALTER TABLE outbox ADD COLUMN acked_at INTEGER;
ALTER TABLE outbox_audit ADD COLUMN rows INTEGER;
ALTER TABLE outbox_audit ADD COLUMN host TEXT;

CREATE TABLE outbox_runtime(
  agent      TEXT NOT NULL,
  name       TEXT NOT NULL,
  value      TEXT,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY(agent, name)
) WITHOUT ROWID;

CREATE TABLE outbox_topic_modes(
  topic      TEXT PRIMARY KEY,
  ordering   TEXT NOT NULL,
  dead_head  TEXT NOT NULL,
  updated_at INTEGER NOT NULL
) WITHOUT ROWID;

-- Only rows that have an ordering key and are not delivered: unordered
-- traffic pays nothing for it.
CREATE INDEX outbox_ordering ON outbox(topic, ordering_key, id)
  WHERE ordering_key IS NOT NULL AND status <> 1;
CREATE INDEX outbox_expiry ON outbox(expires_at)
  WHERE expires_at IS NOT NULL AND status = 0;

DROP TRIGGER IF EXISTS outbox_check_insert;
CREATE TRIGGER outbox_check_insert BEFORE INSERT ON outbox
BEGIN
  SELECT RAISE(ABORT, 'outbox: topic: must be a non-empty string')
   WHERE typeof(NEW.topic) <> 'text' OR length(NEW.topic) = 0;
  SELECT RAISE(ABORT, 'outbox: msg_key: must be a non-empty string of at most 255 bytes')
   WHERE typeof(NEW.msg_key) <> 'text' OR length(NEW.msg_key) = 0
      OR length(CAST(NEW.msg_key AS BLOB)) > 255;
  SELECT RAISE(ABORT, 'outbox: headers: must be a JSON object of string values without CR or LF')
   WHERE NEW.headers IS NOT NULL
     AND (json_valid(NEW.headers) = 0 OR json_type(NEW.headers) <> 'object'
          OR EXISTS(SELECT 1 FROM json_each(NEW.headers)
                     WHERE type <> 'text' OR key = ''
                        OR instr(key, char(13)) OR instr(key, char(10))
                        OR instr(value, char(13)) OR instr(value, char(10))));
  SELECT RAISE(ABORT, 'outbox: schema_version: must be 1 to 64 token characters (letters, digits, !#$%&''*+-.^_`|~)')
   WHERE NEW.schema_version IS NOT NULL
     AND (typeof(NEW.schema_version) <> 'text'
          OR length(CAST(NEW.schema_version AS BLOB)) NOT BETWEEN 1 AND 64
          OR NEW.schema_version GLOB '*[^-!#$%&''*+.^_`|~0-9A-Za-z]*');
  SELECT RAISE(ABORT, 'outbox: ordering_key: must be a non-empty string of at most 255 bytes')
   WHERE NEW.ordering_key IS NOT NULL
     AND (typeof(NEW.ordering_key) <> 'text' OR length(NEW.ordering_key) = 0
          OR length(CAST(NEW.ordering_key AS BLOB)) > 255);
  SELECT RAISE(ABORT, 'outbox: deliver_at: must be an integer (ms since the epoch)')
   WHERE NEW.deliver_at IS NOT NULL AND typeof(NEW.deliver_at) <> 'integer';
  SELECT RAISE(ABORT, 'outbox: deliver_at: more than a year ahead')
   WHERE NEW.deliver_at > )sql" OUTBOX_NOW_MS R"sql( + 31622400000;
  SELECT RAISE(ABORT, 'outbox: expires_at: must be an integer (ms since the epoch)')
   WHERE NEW.expires_at IS NOT NULL AND typeof(NEW.expires_at) <> 'integer';
  SELECT RAISE(ABORT, 'outbox: dead_reason: must be one of permanent, attempts, age, expired, cancelled, crash, hook')
   WHERE NEW.dead_reason IS NOT NULL
     AND NEW.dead_reason NOT IN ('permanent', 'attempts', 'age', 'expired', 'cancelled', 'crash', 'hook');
  SELECT RAISE(ABORT, 'outbox: payload: larger than limits.max_payload_bytes')
    FROM outbox_limits
   WHERE max_payload_bytes > 0
     AND length(CAST(NEW.payload AS BLOB)) > max_payload_bytes;
  SELECT RAISE(ABORT, 'outbox: capacity: limits.max_pending reached')
    FROM outbox_limits, outbox_counters
   WHERE max_pending > 0 AND name = 'undelivered' AND value >= max_pending;
  SELECT RAISE(ABORT, 'outbox: capacity: limits.max_db_bytes reached')
    FROM outbox_limits
   WHERE max_db_bytes > 0
     AND ((SELECT page_count FROM pragma_page_count())
          - (SELECT freelist_count FROM pragma_freelist_count()))
         * (SELECT page_size FROM pragma_page_size()) >= max_db_bytes;
END;

-- A scheduled message is due at deliver_at. The Producer writes
-- next_attempt_at itself, so this fires only for plain-SQL writers.
CREATE TRIGGER outbox_schedule AFTER INSERT ON outbox
  WHEN NEW.deliver_at > NEW.next_attempt_at
BEGIN
  UPDATE outbox SET next_attempt_at = NEW.deliver_at WHERE id = NEW.id;
END;
)sql";

// Migration 5: a message's payload is written once. The application keeps
// inserting into `outbox` (plain SQL included: INSERT OR IGNORE, ON CONFLICT
// DO NOTHING, last_insert_rowid() and RETURNING id all still name the outbox
// row), but the payload and headers live in outbox_payload, keyed by the same
// id. `outbox` then holds state only: a claim or a completion rewrites a
// small record, never the payload and its overflow pages again.
//
// Plain-SQL inserts are moved by the AFTER INSERT trigger outbox_move_payload
// in the inserting statement's own transaction; the library's Producer writes
// both tables itself and leaves the trigger nothing to do. The payload and
// headers checks stay in outbox_check_insert, on the values plain SQL wrote
// into outbox; the Producer writes an empty payload and no headers there
// (those checks cost it nothing) and checks its own in the statements it
// runs (kCheckHeaders, kInsertState), so outbox_payload needs no trigger. Reading the payload goes through the view
// outbox_message (outbox.payload reads as an empty blob). A later migration
// that adds a column to outbox recreates the view.
//
// Three steps in the migration's one transaction: the table, then the rows
// (MovePayloads in schema.cc, in batches for progress), then the triggers and
// the view (created after the move so that rows written long ago by other
// applications are not judged again by today's checks).
inline constexpr char kMigration5Table[] = R"sql(
CREATE TABLE outbox_payload(
  id      INTEGER PRIMARY KEY,
  payload BLOB NOT NULL,
  headers TEXT
);
)sql";

// ?1 first id (exclusive), ?2 last id (inclusive)
inline constexpr char kMovePayloadsCopy[] =
    "INSERT OR REPLACE INTO outbox_payload(id, payload, headers)"
    " SELECT id, payload, headers FROM outbox"
    " WHERE id > ?1 AND id <= ?2 AND (length(payload) > 0 OR headers IS NOT NULL)";
inline constexpr char kMovePayloadsClear[] =
    "UPDATE outbox SET payload = X'', headers = NULL"
    " WHERE id > ?1 AND id <= ?2 AND (length(payload) > 0 OR headers IS NOT NULL)";
inline constexpr char kOutboxIdRange[] =
    "SELECT coalesce(min(id), 0), coalesce(max(id), 0), count(*) FROM outbox";

inline constexpr char kMigration5Triggers[] = R"sql(
DROP TRIGGER outbox_check_insert;
CREATE TRIGGER outbox_check_insert BEFORE INSERT ON outbox
BEGIN
  SELECT RAISE(ABORT, 'outbox: topic: must be a non-empty string')
   WHERE typeof(NEW.topic) <> 'text' OR length(NEW.topic) = 0;
  SELECT RAISE(ABORT, 'outbox: msg_key: must be a non-empty string of at most 255 bytes')
   WHERE typeof(NEW.msg_key) <> 'text' OR length(NEW.msg_key) = 0
      OR length(CAST(NEW.msg_key AS BLOB)) > 255;
  SELECT RAISE(ABORT, 'outbox: schema_version: must be 1 to 64 token characters (letters, digits, !#$%&''*+-.^_`|~)')
   WHERE NEW.schema_version IS NOT NULL
     AND (typeof(NEW.schema_version) <> 'text'
          OR length(CAST(NEW.schema_version AS BLOB)) NOT BETWEEN 1 AND 64
          OR NEW.schema_version GLOB '*[^-!#$%&''*+.^_`|~0-9A-Za-z]*');
  SELECT RAISE(ABORT, 'outbox: ordering_key: must be a non-empty string of at most 255 bytes')
   WHERE NEW.ordering_key IS NOT NULL
     AND (typeof(NEW.ordering_key) <> 'text' OR length(NEW.ordering_key) = 0
          OR length(CAST(NEW.ordering_key AS BLOB)) > 255);
  SELECT RAISE(ABORT, 'outbox: deliver_at: must be an integer (ms since the epoch)')
   WHERE NEW.deliver_at IS NOT NULL AND typeof(NEW.deliver_at) <> 'integer';
  -- IS NOT NULL first: the clock is read only for a scheduled message.
  SELECT RAISE(ABORT, 'outbox: deliver_at: more than a year ahead')
   WHERE NEW.deliver_at IS NOT NULL AND NEW.deliver_at > )sql" OUTBOX_NOW_MS R"sql( + 31622400000;
  SELECT RAISE(ABORT, 'outbox: expires_at: must be an integer (ms since the epoch)')
   WHERE NEW.expires_at IS NOT NULL AND typeof(NEW.expires_at) <> 'integer';
  SELECT RAISE(ABORT, 'outbox: dead_reason: must be one of permanent, attempts, age, expired, cancelled, crash, hook')
   WHERE NEW.dead_reason IS NOT NULL
     AND NEW.dead_reason NOT IN ('permanent', 'attempts', 'age', 'expired', 'cancelled', 'crash', 'hook');
  -- Before capacity, so that plain SQL hears that the message itself is
  -- too large, not that the outbox is full. The Producer writes NULL
  -- headers and an empty payload here (and checks its own), so its rows
  -- skip both checks at the cost of a test on NEW.
  SELECT RAISE(ABORT, 'outbox: headers: must be a JSON object of string values without CR or LF')
   WHERE NEW.headers IS NOT NULL
     AND (json_valid(NEW.headers) = 0 OR json_type(NEW.headers) <> 'object'
          OR EXISTS(SELECT 1 FROM json_each(NEW.headers)
                     WHERE type <> 'text' OR key = ''
                        OR instr(key, char(13)) OR instr(key, char(10))
                        OR instr(value, char(13)) OR instr(value, char(10))));
  -- The limits in one pass over outbox_limits, in this order: a payload
  -- over max_payload_bytes (skipped for the Producer's empty one), then
  -- capacity. One statement rather than three: each costs a scan.
  SELECT CASE
    WHEN length(CAST(NEW.payload AS BLOB)) > 0 AND max_payload_bytes > 0
         AND length(CAST(NEW.payload AS BLOB)) > max_payload_bytes
      THEN RAISE(ABORT, 'outbox: payload: larger than limits.max_payload_bytes')
    WHEN max_pending > 0
         AND (SELECT value FROM outbox_counters WHERE name = 'undelivered') >= max_pending
      THEN RAISE(ABORT, 'outbox: capacity: limits.max_pending reached')
    WHEN max_db_bytes > 0
         AND ((SELECT page_count FROM pragma_page_count())
              - (SELECT freelist_count FROM pragma_freelist_count()))
             * (SELECT page_size FROM pragma_page_size()) >= max_db_bytes
      THEN RAISE(ABORT, 'outbox: capacity: limits.max_db_bytes reached')
  END
    FROM outbox_limits;
END;

-- Plain SQL wrote the payload into outbox: move it. An empty payload without
-- headers stays where it is (the view reads it from outbox).
CREATE TRIGGER outbox_move_payload AFTER INSERT ON outbox
  WHEN length(NEW.payload) > 0 OR NEW.headers IS NOT NULL
BEGIN
  INSERT OR REPLACE INTO outbox_payload(id, payload, headers)
    VALUES(NEW.id, NEW.payload, NEW.headers);
  UPDATE outbox SET payload = X'', headers = NULL WHERE id = NEW.id;
END;

-- Any delete (purges, an application's own DELETE) takes the payload along.
CREATE TRIGGER outbox_drop_payload AFTER DELETE ON outbox
BEGIN
  DELETE FROM outbox_payload WHERE id = OLD.id;
END;

-- The documented way to read messages with their payload: outbox's columns,
-- payload and headers from outbox_payload (or from outbox for a row that
-- never had any to move).
CREATE VIEW outbox_message AS
SELECT o.id AS id, o.topic AS topic, o.msg_key AS msg_key,
       coalesce(p.payload, o.payload) AS payload,
       coalesce(p.headers, o.headers) AS headers,
       o.status AS status, o.attempts AS attempts, o.max_attempts AS max_attempts,
       o.backoff AS backoff, o.first_interval_ms AS first_interval_ms,
       o.next_attempt_at AS next_attempt_at, o.lease_owner AS lease_owner,
       o.last_error AS last_error, o.created_at AS created_at, o.updated_at AS updated_at,
       o.lease_token AS lease_token, o.lease_expires_at AS lease_expires_at,
       o.last_attempt_at AS last_attempt_at, o.crashes AS crashes,
       o.quarantined AS quarantined, o.operator_retries AS operator_retries,
       o.lease_boot_id AS lease_boot_id, o.lease_boot_until AS lease_boot_until,
       o.schema_version AS schema_version, o.ordering_key AS ordering_key,
       o.deliver_at AS deliver_at, o.expires_at AS expires_at,
       o.dead_reason AS dead_reason, o.acked_at AS acked_at
  FROM outbox AS o LEFT JOIN outbox_payload AS p ON p.id = o.id;
)sql";

// Parking (docs/ordering.md, "Dead heads"): a pending row behind a dead
// head under dead_head "block" cannot go until an operator acts, yet it is
// due, so every claim pass would walk it in the claim index and reject it.
// The sweeper parks such rows (kParkBehindDeadHeads): next_attempt_at is
// set to this value (9999-12-31T23:59:59.999Z), past the end of any due
// range, and updated_at to the time of parking. Parking never decides what
// may go (the claims still test OUTBOX_ORDER_READY); it only keeps rows
// that cannot go out of the walk. Whatever lets the key go gives them back
// their place (next_attempt_at = updated_at, when they were already due):
// the triggers below, on every path, plain SQL included.
#define OUTBOX_PARKED "253402300799999"
// The rows parked behind the dead row OLD, if GATE (a test on OLD/NEW).
#define OUTBOX_UNPARK_BEHIND(GATE)                                             \
  "UPDATE outbox SET next_attempt_at = updated_at"                             \
  " WHERE " GATE " AND OLD.ordering_key IS NOT NULL"                           \
  "   AND topic = OLD.topic AND ordering_key = OLD.ordering_key"               \
  "   AND ordering_key IS NOT NULL AND delivered_at IS NULL AND id > OLD.id"   \
  "   AND status = 0 AND next_attempt_at = " OUTBOX_PARKED ";"

// Migration 6: a claim no longer rewrites outbox_ordering. Its WHERE named
// status, so every claim (0 -> 3) of a keyed row deleted and re-inserted
// its entry, one index page per key touched: at 1 000 000 pending over
// 10 000 keys those pages no longer fit the page cache and a claim pass of
// 100 rows cost 2.6x the pass at 1 000 pending (benchmark figure 8c). The
// index now names delivered_at, which only the transition into or out of
// delivered writes: a claim leaves it alone, a completion still takes the
// row out. The rule itself is unchanged (OUTBOX_ORDER_READY still tests
// status); older binaries refuse the file (schema 6), so no agent claims by
// the old index. The statements that deliver set delivered_at themselves;
// outbox_count_update, which fires exactly on transitions into or out of
// delivered, keeps it right for any other writer (plain SQL, a requeue;
// outbox_delivered_at does since schema 7).
// Keyed rows delivered before the migration get it, so they leave the
// index; unkeyed ones keep NULL (the column reads "not recorded" there).
// Also the parking of rows behind dead heads (OUTBOX_PARKED): the index of
// dead rows that can block, and the triggers that unpark.
// One transaction: a kill leaves the file at schema 5.
inline constexpr char kMigration6[] = R"sql(
ALTER TABLE outbox ADD COLUMN delivered_at INTEGER;
UPDATE outbox SET delivered_at = updated_at WHERE status = 1 AND ordering_key IS NOT NULL;
DROP INDEX outbox_ordering;
CREATE INDEX outbox_ordering ON outbox(topic, ordering_key, id)
  WHERE ordering_key IS NOT NULL AND delivered_at IS NULL;

-- Dead rows that can block their key (kParkBehindDeadHeads): usually none.
CREATE INDEX outbox_dead_keyed ON outbox(topic, ordering_key, id)
  WHERE status = 2 AND ordering_key IS NOT NULL
    AND coalesce(dead_reason, '') NOT IN ('expired', 'cancelled');

-- Fires on the transitions into and out of delivered (as since schema 1)
-- and now also out of dead, which may unblock a key. Each statement opens
-- with a test on OLD/NEW only, evaluated once before any seek, so the
-- store's own completions (which set delivered_at themselves) pay nothing
-- more than before; a claim does not get past the WHEN.
DROP TRIGGER outbox_count_update;
CREATE TRIGGER outbox_count_update AFTER UPDATE OF status, dead_reason ON outbox
  WHEN (OLD.status = 1) <> (NEW.status = 1) OR OLD.status = 2
BEGIN
  UPDATE outbox_counters SET value = value + (CASE WHEN NEW.status = 1 THEN -1 ELSE 1 END)
   WHERE (OLD.status = 1) <> (NEW.status = 1) AND name = 'undelivered';
  UPDATE outbox SET delivered_at = CASE WHEN NEW.status = 1 THEN NEW.updated_at END
   WHERE (NEW.status = 1) <> (NEW.delivered_at IS NOT NULL) AND id = NEW.id;
  -- A dead row that stops blocking (retried, marked delivered, cancelled)
  -- gives the rows parked behind it their place back.
  )sql" OUTBOX_UNPARK_BEHIND("OLD.status = 2 AND (NEW.status <> 2"
                             " OR coalesce(NEW.dead_reason, '') IN ('expired', 'cancelled'))") R"sql(
END;

-- A purged dead row, likewise.
DROP TRIGGER outbox_count_delete;
CREATE TRIGGER outbox_count_delete AFTER DELETE ON outbox WHEN OLD.status <> 1
BEGIN
  UPDATE outbox_counters SET value = value - 1 WHERE name = 'undelivered';
  )sql" OUTBOX_UNPARK_BEHIND("OLD.status = 2") R"sql(
END;

-- A topic whose recorded mode is forgotten or changed: nothing it parked
-- stays parked.
CREATE TRIGGER outbox_unpark_topic_delete AFTER DELETE ON outbox_topic_modes
BEGIN
  UPDATE outbox SET next_attempt_at = updated_at
   WHERE status = 0 AND topic = OLD.topic AND next_attempt_at = )sql" OUTBOX_PARKED R"sql(;
END;
CREATE TRIGGER outbox_unpark_topic_update AFTER UPDATE ON outbox_topic_modes
BEGIN
  UPDATE outbox SET next_attempt_at = updated_at
   WHERE status = 0 AND topic = OLD.topic AND next_attempt_at = )sql" OUTBOX_PARKED R"sql(;
END;

DROP VIEW outbox_message;
CREATE VIEW outbox_message AS
SELECT o.id AS id, o.topic AS topic, o.msg_key AS msg_key,
       coalesce(p.payload, o.payload) AS payload,
       coalesce(p.headers, o.headers) AS headers,
       o.status AS status, o.attempts AS attempts, o.max_attempts AS max_attempts,
       o.backoff AS backoff, o.first_interval_ms AS first_interval_ms,
       o.next_attempt_at AS next_attempt_at, o.lease_owner AS lease_owner,
       o.last_error AS last_error, o.created_at AS created_at, o.updated_at AS updated_at,
       o.lease_token AS lease_token, o.lease_expires_at AS lease_expires_at,
       o.last_attempt_at AS last_attempt_at, o.crashes AS crashes,
       o.quarantined AS quarantined, o.operator_retries AS operator_retries,
       o.lease_boot_id AS lease_boot_id, o.lease_boot_until AS lease_boot_until,
       o.schema_version AS schema_version, o.ordering_key AS ordering_key,
       o.deliver_at AS deliver_at, o.expires_at AS expires_at,
       o.dead_reason AS dead_reason, o.acked_at AS acked_at,
       o.delivered_at AS delivered_at
  FROM outbox AS o LEFT JOIN outbox_payload AS p ON p.id = o.id;
)sql";

// Migration 7: each job of the update trigger in a trigger of its own, with
// its test in the WHEN. SQLite compiles a trigger's statements into one
// program and each UPDATE opens its cursors before its WHERE is tested, so
// a gate inside a statement is not free: in schema 6 every completion (3 -> 1)
// ran all three statements of outbox_count_update, two of them for nothing.
// Now a completion by the store runs the counter only and stops at the WHEN
// of the other two: Store::Complete went from 75 k to 58 k instructions
// (docs/performance.md, "Schema 7"). A trigger that stops at its WHEN still
// costs its frame, so a claim (0 -> 3), which ran one such trigger, now runs
// three: 2 % more. Same behaviour for every writer: each WHEN holds wherever
// the schema 6 statement changed something.
// - outbox_count_update: the undelivered counter, as in schema 1.
// - outbox_delivered_at: keeps delivered_at set exactly on delivered rows
//   for writers that do not (plain SQL, a requeue). Also on UPDATE OF
//   delivered_at, so that a plain-SQL write of that column alone cannot take
//   an undelivered keyed row out of outbox_ordering (and out of the order).
// - outbox_unpark_update: a dead row that stops blocking (retried, delivered,
//   cancelled, expired) gives the rows parked behind it their place back.
// - outbox_count_delete / outbox_unpark_delete: the delete trigger, split
//   the same way (a pending row deleted by plain SQL paid the unpark too).
// Triggers only, no row rewritten; one transaction: a kill leaves schema 6.
inline constexpr char kMigration7[] = R"sql(
DROP TRIGGER outbox_count_update;
CREATE TRIGGER outbox_count_update AFTER UPDATE OF status ON outbox
  WHEN (OLD.status = 1) <> (NEW.status = 1)
BEGIN
  UPDATE outbox_counters SET value = value + (CASE WHEN NEW.status = 1 THEN -1 ELSE 1 END)
   WHERE name = 'undelivered';
END;
CREATE TRIGGER outbox_delivered_at AFTER UPDATE OF status, dead_reason, delivered_at ON outbox
  WHEN (NEW.status = 1) <> (NEW.delivered_at IS NOT NULL)
BEGIN
  UPDATE outbox SET delivered_at = CASE WHEN NEW.status = 1 THEN NEW.updated_at END
   WHERE id = NEW.id;
END;
CREATE TRIGGER outbox_unpark_update AFTER UPDATE OF status, dead_reason ON outbox
  WHEN OLD.status = 2 AND OLD.ordering_key IS NOT NULL
   AND (NEW.status <> 2 OR coalesce(NEW.dead_reason, '') IN ('expired', 'cancelled'))
BEGIN
  )sql" OUTBOX_UNPARK_BEHIND("OLD.status = 2") R"sql(
END;

DROP TRIGGER outbox_count_delete;
CREATE TRIGGER outbox_count_delete AFTER DELETE ON outbox WHEN OLD.status <> 1
BEGIN
  UPDATE outbox_counters SET value = value - 1 WHERE name = 'undelivered';
END;
CREATE TRIGGER outbox_unpark_delete AFTER DELETE ON outbox
  WHEN OLD.status = 2 AND OLD.ordering_key IS NOT NULL
BEGIN
  )sql" OUTBOX_UNPARK_BEHIND("OLD.status = 2") R"sql(
END;
)sql";

// Counts the undelivered rows into outbox_counters' 'undelivered' row, up
// to the highest id, if COUNTING (a test on NEW); else clears it (schema 8).
#define OUTBOX_RECOUNT(COUNTING)                                               \
  "UPDATE outbox_counters SET"                                                 \
  " value = CASE WHEN " COUNTING                                               \
  "   THEN (SELECT count(*) FROM outbox WHERE status <> 1) ELSE 0 END,"        \
  " upto = CASE WHEN " COUNTING " THEN (SELECT coalesce(max(id), 0) FROM outbox) END" \
  " WHERE name = 'undelivered';"

// Migration 8, two jobs.
// The insert trigger refuses what the store's and the language modules' own
// checks refuse, so that plain SQL meets the same contract:
// - topic: at most kMaxTopicBytes (255) bytes, as msg_key (it names metric
//   labels, log lines and URLs; four 100 KB topics made /metrics 14 MB);
// - headers: at most kMaxHeadersBytes (65536) bytes of JSON text, judged
//   before the JSON is parsed;
// - max_attempts and first_interval_ms: NULL or a positive integer; backoff:
//   NULL, 'fixed' or 'exponential' ('linear', 0 and -5 were accepted).
// Rows already in the file are not judged again (insert trigger only).
// An index for a message's audit entries (outbox_audit_row).
// And a one-message transaction writes fewer pages (docs/performance.md,
// "Where a one-message transaction's pages go"): no counter page per insert
// (while max_pending is set the counter holds the rows up to a mark and
// the few above it are counted when the limit is checked, one insert in 64
// folding them in; while it is 0 nothing is counted), and a plain-SQL
// payload's overflow pages are freed before its copy is written, so that
// the copy takes the same pages again instead of new ones (at 16 KiB: 4
// pages and 3 pointer-map pages less per transaction).
// Triggers, an index and a counter column, no row of outbox rewritten; one
// transaction: a kill at any point leaves schema 7.
inline constexpr char kMigration8[] = R"sql(
DROP TRIGGER outbox_check_insert;
CREATE TRIGGER outbox_check_insert BEFORE INSERT ON outbox
BEGIN
  SELECT RAISE(ABORT, 'outbox: topic: must be a non-empty string of at most 255 bytes')
   WHERE typeof(NEW.topic) <> 'text' OR length(NEW.topic) = 0
      OR length(CAST(NEW.topic AS BLOB)) > 255;
  SELECT RAISE(ABORT, 'outbox: msg_key: must be a non-empty string of at most 255 bytes')
   WHERE typeof(NEW.msg_key) <> 'text' OR length(NEW.msg_key) = 0
      OR length(CAST(NEW.msg_key AS BLOB)) > 255;
  -- The retry columns in one statement (each statement costs its frame),
  -- and nothing but a test on NEW when all three are NULL.
  SELECT CASE
    WHEN NEW.max_attempts IS NOT NULL
         AND (typeof(NEW.max_attempts) <> 'integer' OR NEW.max_attempts < 1)
      THEN RAISE(ABORT, 'outbox: max_attempts: expected a positive integer')
    WHEN NEW.backoff IS NOT NULL
         AND (typeof(NEW.backoff) <> 'text' OR NEW.backoff NOT IN ('fixed', 'exponential'))
      THEN RAISE(ABORT, 'outbox: backoff: expected ''fixed'' or ''exponential''')
    WHEN NEW.first_interval_ms IS NOT NULL
         AND (typeof(NEW.first_interval_ms) <> 'integer' OR NEW.first_interval_ms < 1)
      THEN RAISE(ABORT, 'outbox: first_interval_ms: expected a positive integer')
  END
   WHERE NEW.max_attempts IS NOT NULL OR NEW.backoff IS NOT NULL
      OR NEW.first_interval_ms IS NOT NULL;
  SELECT RAISE(ABORT, 'outbox: schema_version: must be 1 to 64 token characters (letters, digits, !#$%&''*+-.^_`|~)')
   WHERE NEW.schema_version IS NOT NULL
     AND (typeof(NEW.schema_version) <> 'text'
          OR length(CAST(NEW.schema_version AS BLOB)) NOT BETWEEN 1 AND 64
          OR NEW.schema_version GLOB '*[^-!#$%&''*+.^_`|~0-9A-Za-z]*');
  SELECT RAISE(ABORT, 'outbox: ordering_key: must be a non-empty string of at most 255 bytes')
   WHERE NEW.ordering_key IS NOT NULL
     AND (typeof(NEW.ordering_key) <> 'text' OR length(NEW.ordering_key) = 0
          OR length(CAST(NEW.ordering_key AS BLOB)) > 255);
  SELECT RAISE(ABORT, 'outbox: deliver_at: must be an integer (ms since the epoch)')
   WHERE NEW.deliver_at IS NOT NULL AND typeof(NEW.deliver_at) <> 'integer';
  -- IS NOT NULL first: the clock is read only for a scheduled message.
  SELECT RAISE(ABORT, 'outbox: deliver_at: more than a year ahead')
   WHERE NEW.deliver_at IS NOT NULL AND NEW.deliver_at > )sql" OUTBOX_NOW_MS R"sql( + 31622400000;
  SELECT RAISE(ABORT, 'outbox: expires_at: must be an integer (ms since the epoch)')
   WHERE NEW.expires_at IS NOT NULL AND typeof(NEW.expires_at) <> 'integer';
  SELECT RAISE(ABORT, 'outbox: dead_reason: must be one of permanent, attempts, age, expired, cancelled, crash, hook')
   WHERE NEW.dead_reason IS NOT NULL
     AND NEW.dead_reason NOT IN ('permanent', 'attempts', 'age', 'expired', 'cancelled', 'crash', 'hook');
  -- Before capacity, so that plain SQL hears that the message itself is
  -- wrong, not that the outbox is full; the size before the JSON is parsed.
  -- The Producer writes NULL headers here (and checks its own).
  SELECT CASE WHEN length(CAST(NEW.headers AS BLOB)) > 65536
    THEN RAISE(ABORT, 'outbox: headers: longer than 65536 bytes')
    ELSE RAISE(ABORT, 'outbox: headers: must be a JSON object of string values without CR or LF')
  END
   WHERE NEW.headers IS NOT NULL
     AND (length(CAST(NEW.headers AS BLOB)) > 65536
          OR json_valid(NEW.headers) = 0 OR json_type(NEW.headers) <> 'object'
          OR EXISTS(SELECT 1 FROM json_each(NEW.headers)
                     WHERE type <> 'text' OR key = ''
                        OR instr(key, char(13)) OR instr(key, char(10))
                        OR instr(value, char(13)) OR instr(value, char(10))));
  -- The limits in one pass over outbox_limits, in this order: a payload
  -- over max_payload_bytes (skipped for the Producer's empty one), then
  -- capacity. One statement rather than three: each costs a scan. The
  -- rows above the counter's mark are counted only when there could be
  -- enough of them: outbox_count_insert keeps every id above the mark
  -- below upto + 64, so there are at most 63.
  SELECT CASE
    WHEN length(CAST(NEW.payload AS BLOB)) > 0 AND max_payload_bytes > 0
         AND length(CAST(NEW.payload AS BLOB)) > max_payload_bytes
      THEN RAISE(ABORT, 'outbox: payload: larger than limits.max_payload_bytes')
    WHEN max_pending > 0
         AND (SELECT CASE WHEN value + 63 < max_pending
                          THEN value
                          ELSE value + (SELECT count(*) FROM outbox
                                         WHERE status <> 1 AND id > upto) END
                FROM outbox_counters WHERE name = 'undelivered') >= max_pending
      THEN RAISE(ABORT, 'outbox: capacity: limits.max_pending reached')
    WHEN max_db_bytes > 0
         AND ((SELECT page_count FROM pragma_page_count())
              - (SELECT freelist_count FROM pragma_freelist_count()))
             * (SELECT page_size FROM pragma_page_size()) >= max_db_bytes
      THEN RAISE(ABORT, 'outbox: capacity: limits.max_db_bytes reached')
  END
    FROM outbox_limits;
END;

-- Plain SQL wrote the payload into outbox: move it. The row's copy is
-- cleared first, so that its overflow pages, freed, are the ones the copy
-- in outbox_payload takes again: a large payload's pages are written once
-- per transaction, not allocated twice (schema 5 copied, then cleared).
DROP TRIGGER outbox_move_payload;
CREATE TRIGGER outbox_move_payload AFTER INSERT ON outbox
  WHEN length(NEW.payload) > 0 OR NEW.headers IS NOT NULL
BEGIN
  UPDATE outbox SET payload = X'', headers = NULL WHERE id = NEW.id;
  INSERT OR REPLACE INTO outbox_payload(id, payload, headers)
    VALUES(NEW.id, NEW.payload, NEW.headers);
END;

-- The undelivered count without a write per insert. While max_pending is
-- set, the 'undelivered' row's value counts the undelivered rows with an
-- id up to its upto; the rows above are counted when an insert checks the
-- limit (about 64 rowids: an insert 64 ids above the mark folds the rows
-- below it into the value and moves the mark). While max_pending is 0,
-- upto is NULL and no insert, completion or delete touches the row; setting
-- the limit counts every row once (outbox_count_limit). Nothing that
-- exists only for a limit costs a write without it.
ALTER TABLE outbox_counters ADD COLUMN upto INTEGER;
UPDATE outbox_counters
   SET value = CASE WHEN (SELECT max_pending FROM outbox_limits) > 0 THEN value ELSE 0 END,
       upto = CASE WHEN (SELECT max_pending FROM outbox_limits) > 0
                   THEN (SELECT coalesce(max(id), 0) FROM outbox) END
 WHERE name = 'undelivered';

-- One trigger, one read of the mark: rare work behind it (an explicit id
-- below the mark, or one insert in 64).
DROP TRIGGER outbox_count_insert;
CREATE TRIGGER outbox_count_insert AFTER INSERT ON outbox
  WHEN (SELECT NEW.id <= upto OR NEW.id >= upto + 64
          FROM outbox_counters WHERE name = 'undelivered')
BEGIN
  UPDATE outbox_counters SET value = value + 1
   WHERE name = 'undelivered' AND NEW.status <> 1 AND NEW.id <= upto;
  -- The mark stops below NEW, which stays above it, counted when asked.
  UPDATE outbox_counters
     SET value = value + (SELECT count(*) FROM outbox
                           WHERE status <> 1 AND id > outbox_counters.upto AND id < NEW.id),
         upto = NEW.id - 1
   WHERE name = 'undelivered' AND NEW.id >= upto + 64;
END;
DROP TRIGGER outbox_count_update;
CREATE TRIGGER outbox_count_update AFTER UPDATE OF status ON outbox
  WHEN (OLD.status = 1) <> (NEW.status = 1)
   AND NEW.id <= (SELECT upto FROM outbox_counters WHERE name = 'undelivered')
BEGIN
  UPDATE outbox_counters SET value = value + (CASE WHEN NEW.status = 1 THEN -1 ELSE 1 END)
   WHERE name = 'undelivered';
END;
DROP TRIGGER outbox_count_delete;
CREATE TRIGGER outbox_count_delete AFTER DELETE ON outbox
  WHEN OLD.status <> 1
   AND OLD.id <= (SELECT upto FROM outbox_counters WHERE name = 'undelivered')
BEGIN
  UPDATE outbox_counters SET value = value - 1 WHERE name = 'undelivered';
END;
-- Counts again from the rows themselves: when the limit is set or cleared,
-- and when plain SQL gives a row another id (it may cross the mark).
CREATE TRIGGER outbox_count_limit AFTER UPDATE OF max_pending ON outbox_limits
  WHEN (coalesce(OLD.max_pending, 0) > 0) <> (coalesce(NEW.max_pending, 0) > 0)
BEGIN
  )sql" OUTBOX_RECOUNT("coalesce(NEW.max_pending, 0) > 0") R"sql(
END;
CREATE TRIGGER outbox_count_renumber AFTER UPDATE OF id ON outbox
  WHEN OLD.id <> NEW.id
   AND (SELECT upto FROM outbox_counters WHERE name = 'undelivered') IS NOT NULL
BEGIN
  )sql" OUTBOX_RECOUNT("1") R"sql(
END;

-- A message's audit entries (the console's history of one row): an
-- operator action writes this index, no enqueue, claim or completion does.
CREATE INDEX outbox_audit_row ON outbox_audit(row_id, id) WHERE row_id IS NOT NULL;
)sql";

// --- enqueue -------------------------------------------------------------------

// ?1 topic, ?2 msg_key, ?3 payload, ?4 headers, ?5 max_attempts, ?6 backoff,
// ?7 first_interval_ms, ?8 schema_version, ?9 ordering_key, ?10 deliver_at,
// ?11 expires_at. A scheduled message is due at deliver_at (so the schedule
// trigger has nothing to do). Before migration 5 (a Producer on a file the
// agent has not migrated yet): the payload goes into outbox.
inline constexpr char kInsert[] =
    "INSERT INTO outbox(topic, msg_key, payload, headers, max_attempts, backoff,"
    " first_interval_ms, schema_version, ordering_key, deliver_at, expires_at,"
    " next_attempt_at, created_at, updated_at)"
    " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11,"
    " max(coalesce(?10, 0), " OUTBOX_NOW_MS "), " OUTBOX_NOW_MS ", " OUTBOX_NOW_MS ")";
// Migration 5 on: the state row with an empty payload and no headers
// (outbox_move_payload has nothing to move, outbox_check_insert no payload
// to judge; ?3 and ?4 are not used), then the payload row under the same id.
// ?12 is the payload's length. A payload over limits.max_payload_bytes
// stands in as zeroblob(?12), which outbox_check_insert refuses before it
// checks capacity, as it would the payload itself; so the limit costs a
// lookup inside the insert and no statement of its own. (VALUES, not
// INSERT ... SELECT: with triggers on the table the latter goes through a
// temporary table.)
inline constexpr char kInsertState[] =
    "INSERT INTO outbox(topic, msg_key, payload, max_attempts, backoff,"
    " first_interval_ms, schema_version, ordering_key, deliver_at, expires_at,"
    " next_attempt_at, created_at, updated_at)"
    " VALUES(?1, ?2,"
    " coalesce((SELECT zeroblob(?12) FROM outbox_limits"
    "            WHERE max_payload_bytes > 0 AND ?12 > max_payload_bytes), X''),"
    " ?5, ?6, ?7, ?8, ?9, ?10, ?11,"
    " max(coalesce(?10, 0), " OUTBOX_NOW_MS "), " OUTBOX_NOW_MS ", " OUTBOX_NOW_MS ")";
// ?1 headers: a row if outbox_check_insert would refuse them (the same
// terms, in a WHERE so that they stop at the first that holds). The
// Producer runs it only for messages that have headers, after its own
// check of their size (kMaxHeadersBytes).
inline constexpr char kCheckHeaders[] =
    "SELECT 1 WHERE json_valid(?1) = 0 OR json_type(?1) <> 'object'"
    " OR EXISTS(SELECT 1 FROM json_each(?1)"
    "            WHERE type <> 'text' OR key = ''"
    "               OR instr(key, char(13)) OR instr(key, char(10))"
    "               OR instr(value, char(13)) OR instr(value, char(10)))";
// ?1 id, ?2 payload, ?3 headers or NULL (checked by the Producer: the table
// has no trigger of its own).
inline constexpr char kInsertPayload[] =
    "INSERT OR REPLACE INTO outbox_payload(id, payload, headers) VALUES(?1, ?2, ?3)";
// Undoes kInsertState when the payload row cannot be written.
inline constexpr char kDeleteInserted[] = "DELETE FROM outbox WHERE id = ?1";
inline constexpr char kHasPayloadTable[] =
    "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'outbox_payload'";
inline constexpr char kFindByKey[] = "SELECT id FROM outbox WHERE topic = ? AND msg_key = ?";
inline constexpr char kGetLimits[] =
    "SELECT max_payload_bytes, max_pending, max_db_bytes FROM outbox_limits";
inline constexpr char kSetLimits[] =
    "UPDATE outbox_limits SET max_payload_bytes = ?, max_pending = ?, max_db_bytes = ?";

// --- transitions (each guarded by id, expected status and, in flight, token) --

// A Row's columns (store.cc ReadRow), with the payload and headers taken
// from the given expressions.
#define OUTBOX_ROW_COLUMNS_WITH(PAYLOAD, HEADERS)                              \
  "id, topic, msg_key, " PAYLOAD ", " HEADERS ", status, attempts, max_attempts," \
  " backoff, first_interval_ms, next_attempt_at, lease_owner, lease_token,"    \
  " lease_expires_at, last_error, created_at, updated_at, last_attempt_at,"    \
  " crashes, quarantined, operator_retries, schema_version, ordering_key,"   \
  " deliver_at, expires_at, dead_reason, acked_at"
// Read FROM outbox_message, the view that joins the payload back in.
#define OUTBOX_ROW_COLUMNS OUTBOX_ROW_COLUMNS_WITH("payload", "headers")

// What a claim hands the send: the whole row as the claim left it, the
// payload looked up by rowid in outbox_payload (RETURNING may not name a
// join, but may hold a subquery). The worker then needs no read of its own.
#define OUTBOX_CLAIM_RETURNING                                                 \
  " RETURNING " OUTBOX_ROW_COLUMNS_WITH(                                       \
      "coalesce((SELECT p.payload FROM outbox_payload AS p WHERE p.id = outbox.id), payload)", \
      "coalesce((SELECT p.headers FROM outbox_payload AS p WHERE p.id = outbox.id), headers)")

// lease_token counts claims. Another application may have written anything
// there: a token that cannot grow as an integer (INT64_MAX would turn into a
// REAL that never equals the token handed out) starts again at 1.
#define OUTBOX_CLAIM_SET                                                       \
  "UPDATE outbox SET status = 3, lease_owner = ?2,"                            \
  " lease_token = CASE WHEN typeof(lease_token) = 'integer'"                   \
  "   AND lease_token BETWEEN 0 AND 9223372036854775806 THEN lease_token + 1 ELSE 1 END," \
  " lease_expires_at = ?3, updated_at = ?4, lease_boot_id = ?6, lease_boot_until = ?7"

// Per-key ordering (docs/ordering.md). A row R of a topic that
// outbox_topic_modes orders by key, with an ordering key, may be claimed only
// when no older row of its topic and key is undelivered: pending (due or
// not: a future deliver_at holds the key), in flight, or dead, unless the
// topic skips dead heads or that dead row expired or was cancelled. Since
// the older row is itself undelivered while R waits, at most one row per key
// is ever in flight, and every claim runs inside BEGIN IMMEDIATE, so this
// holds across every agent sharing the file. The mode comes from the table,
// not from a parameter, so that agents started with different builds or
// configs still claim by the same rule. One seek of outbox_ordering per
// keyed candidate row; rows without a key or of unordered topics pay a
// NULL test or one lookup in the (tiny) modes table.
#define OUTBOX_ORDER_READY(R)                                                  \
  " (" R ".ordering_key IS NULL OR NOT EXISTS(SELECT 1 FROM outbox_topic_modes m" \
  "   WHERE m.topic = " R ".topic AND m.ordering = 'key' AND EXISTS("          \
  "   SELECT 1 FROM outbox p INDEXED BY outbox_ordering"                       \
  "    WHERE p.topic = " R ".topic AND p.ordering_key = " R ".ordering_key"   \
  "      AND p.ordering_key IS NOT NULL AND p.delivered_at IS NULL"            \
  "      AND p.status <> 1 AND p.id < " R ".id"                               \
  "      AND (p.status <> 2 OR (m.dead_head = 'block'"                         \
  "           AND coalesce(p.dead_reason, '') NOT IN ('expired', 'cancelled'))))))"

// ?1 id, ?2 owner, ?3 lease_expires_at, ?4 now, ?6 boot id or NULL, ?7 boot-clock end
// A row scheduled ahead (deliver_at) is not taken eagerly: the sweeper
// claims it when due (and, under ordering, it holds its key until then).
inline constexpr char kClaimById[] =
    OUTBOX_CLAIM_SET " WHERE id = ?1 AND status = 0 AND quarantined <> 1"
    " AND (deliver_at IS NULL OR deliver_at <= ?4) AND"
    OUTBOX_ORDER_READY("outbox") OUTBOX_CLAIM_RETURNING;

// The eager path behind completions: for each key, its oldest pending row,
// if it may go now (due, not quarantined, nothing undelivered ahead of it).
// One statement for all the keys whose rows a writer transaction completed:
// the statement's own cost (journal, trigger frames, cursors) is paid once,
// not once per key (benchmark figure 8a). Keys as a VALUES list of bound
// parameters, so that a key needs no quoting.
// ?1 topic, ?8... the keys, the rest as kClaimById
// "+status": the row is found by its id; without it the planner walked
// outbox_claim's range of every pending row instead.
#define OUTBOX_CLAIM_NEXT_OF_KEYS(KEYS)                                        \
  OUTBOX_CLAIM_SET " WHERE id IN (SELECT (SELECT min(o.id) FROM outbox AS o"   \
  "   INDEXED BY outbox_ordering WHERE o.topic = ?1"                           \
  "     AND o.ordering_key = k.column1 AND o.ordering_key IS NOT NULL"         \
  "     AND o.delivered_at IS NULL AND o.status = 0)"                          \
  "   FROM (VALUES " KEYS ") AS k)"                                            \
  " AND +status = 0 AND next_attempt_at <= ?4 AND quarantined <> 1 AND"        \
  OUTBOX_ORDER_READY("outbox") OUTBOX_CLAIM_RETURNING
#define OUTBOX_KEYS_1 "(?8)"
#define OUTBOX_KEYS_2 OUTBOX_KEYS_1 ",(?)"
#define OUTBOX_KEYS_4 OUTBOX_KEYS_2 ",(?),(?)"
#define OUTBOX_KEYS_8 OUTBOX_KEYS_4 ",(?),(?),(?),(?)"
#define OUTBOX_KEYS_16 OUTBOX_KEYS_8 ",(?),(?),(?),(?),(?),(?),(?),(?)"
#define OUTBOX_KEYS_32 \
  OUTBOX_KEYS_16 ",(?),(?),(?),(?),(?),(?),(?),(?),(?),(?),(?),(?),(?),(?),(?),(?)"
inline constexpr char kClaimNextOfKeys1[] = OUTBOX_CLAIM_NEXT_OF_KEYS(OUTBOX_KEYS_1);
inline constexpr char kClaimNextOfKeys2[] = OUTBOX_CLAIM_NEXT_OF_KEYS(OUTBOX_KEYS_2);
inline constexpr char kClaimNextOfKeys4[] = OUTBOX_CLAIM_NEXT_OF_KEYS(OUTBOX_KEYS_4);
inline constexpr char kClaimNextOfKeys8[] = OUTBOX_CLAIM_NEXT_OF_KEYS(OUTBOX_KEYS_8);
inline constexpr char kClaimNextOfKeys16[] = OUTBOX_CLAIM_NEXT_OF_KEYS(OUTBOX_KEYS_16);
inline constexpr char kClaimNextOfKeys32[] = OUTBOX_CLAIM_NEXT_OF_KEYS(OUTBOX_KEYS_32);

// A run (docs/ordering.md): after the run's last row ?3, the key's next
// undelivered rows in id order, with
// what decides whether each may join the run and its size in bytes. The
// caller keeps the unbroken prefix of rows that are pending, due, not
// quarantined and not scheduled ahead: each of them would be ready the moment
// the rows before it are delivered, and nothing else of the key lies between.
// ?1 topic, ?2 ordering key, ?3 the run's last id, ?4 limit, ?5 now
inline constexpr char kRunAfterHead[] =
    "SELECT o.id, o.status = 0 AND o.next_attempt_at <= ?5 AND o.quarantined <> 1"
    "   AND (o.deliver_at IS NULL OR o.deliver_at <= ?5),"
    " coalesce((SELECT length(p.payload) + coalesce(length(p.headers), 0)"
    "   FROM outbox_payload AS p WHERE p.id = o.id), 0)"
    "   + coalesce(length(o.payload), 0) + coalesce(length(o.headers), 0)"
    " FROM outbox AS o INDEXED BY outbox_ordering"
    " WHERE o.topic = ?1 AND o.ordering_key = ?2 AND o.ordering_key IS NOT NULL"
    "   AND o.delivered_at IS NULL AND o.id > ?3"
    " ORDER BY o.id LIMIT ?4";
// Whether a run may grow after its last row ?3 (leased with token ?4 by ?5):
// that row is still in flight under this lease, and every older undelivered
// row of the key is in flight by the same owner (the run itself) or dead.
// ?1 topic, ?2 ordering key, ?3 id, ?4 token, ?5 owner
inline constexpr char kRunMayGrow[] =
    "SELECT EXISTS(SELECT 1 FROM outbox WHERE id = ?3 AND status = 3 AND lease_token = ?4"
    "   AND lease_owner = ?5 AND topic = ?1 AND ordering_key = ?2)"
    " AND NOT EXISTS(SELECT 1 FROM outbox INDEXED BY outbox_ordering"
    "   WHERE topic = ?1 AND ordering_key = ?2 AND ordering_key IS NOT NULL"
    "     AND delivered_at IS NULL AND id < ?3 AND status NOT IN (1, 2)"
    "     AND (status <> 3 OR lease_owner IS NOT ?5))";
// Claims the rows kRunAfterHead chose: every undelivered row of the key from
// ?8 to ?9 (delivered ones in between are not in the index).
// ?1 topic, ?5 ordering key, ?8 first id, ?9 last id, the rest as kClaimById
inline constexpr char kClaimRunRange[] =
    OUTBOX_CLAIM_SET " WHERE id IN (SELECT id FROM outbox INDEXED BY outbox_ordering"
    "   WHERE topic = ?1 AND ordering_key = ?5 AND ordering_key IS NOT NULL"
    "     AND delivered_at IS NULL AND id BETWEEN ?8 AND ?9) AND status = 0"
    OUTBOX_CLAIM_RETURNING;

// A wall clock that jumped back leaves next_attempt_at absurdly far ahead;
// such rows are made due now (an index range, usually empty).
// ?1 topic, ?2 now, ?3 now + max interval
// A scheduled row waiting for its deliver_at is not absurdly far ahead: it
// waits for that wall-clock time, however far the clock went back. Nor is a
// parked row (OUTBOX_PARKED).
inline constexpr char kMakeDueIfFarAhead[] =
    "UPDATE outbox SET next_attempt_at = ?2"
    " WHERE status = 0 AND topic = ?1 AND next_attempt_at > ?3"
    " AND (deliver_at IS NULL OR next_attempt_at > deliver_at)"
    " AND next_attempt_at <> " OUTBOX_PARKED;

// Parks the due rows behind each dead head of `topic` that blocks its key
// (OUTBOX_PARKED). Only rows never tried (their place is the time they
// became due) and not quarantined. Per dead head it looks at the rows added
// since its last parking only: max(id) of the parked ones walks the key
// downwards from its newest row and stops at the first parked one. So a
// pass costs the dead heads that block (outbox_dead_keyed: usually none)
// plus the rows that arrived behind them, not the backlog.
// ?1 topic, ?2 now
inline constexpr char kParkBehindDeadHeads[] =
    "UPDATE outbox SET next_attempt_at = " OUTBOX_PARKED ", updated_at = ?2"
    " WHERE id IN (SELECT s.id FROM outbox_topic_modes m,"
    "   outbox h INDEXED BY outbox_dead_keyed, outbox s INDEXED BY outbox_ordering"
    "  WHERE m.topic = ?1 AND m.ordering = 'key' AND m.dead_head = 'block'"
    "    AND h.topic = ?1 AND h.status = 2 AND h.ordering_key IS NOT NULL"
    "    AND coalesce(h.dead_reason, '') NOT IN ('expired', 'cancelled')"
    "    AND s.topic = ?1 AND s.ordering_key = h.ordering_key AND s.ordering_key IS NOT NULL"
    "    AND s.delivered_at IS NULL"
    "    AND s.id > max(h.id, coalesce((SELECT max(q.id) FROM outbox q INDEXED BY outbox_ordering"
    "      WHERE q.topic = ?1 AND q.ordering_key = h.ordering_key AND q.ordering_key IS NOT NULL"
    "        AND q.delivered_at IS NULL AND q.status = 0"
    "        AND q.next_attempt_at = " OUTBOX_PARKED "), 0))"
    "    AND s.status = 0 AND s.next_attempt_at <= ?2 AND s.quarantined = 0"
    "    AND s.attempts = 0 AND s.last_attempt_at IS NULL AND s.acked_at IS NULL)";

// The subquery walks the claim index in (next_attempt_at, id) order; RETURNING
// order is unspecified, so callers that care sort the result.
// Quarantined rows (taken back from a crashed agent) are left to
// kClaimQuarantined, which sends them one at a time. "<> 1" rather than
// "= 0": a value another application wrote (2, 'yes') must not leave a row
// that no claim ever matches.
// ?1 topic, ?2 owner, ?3 lease_expires_at, ?4 now, ?5 limit, ?6 ?7 as kClaimById
inline constexpr char kClaimDue[] =
    OUTBOX_CLAIM_SET
    " WHERE id IN (SELECT id FROM outbox AS c"
    "  WHERE status = 0 AND topic = ?1 AND next_attempt_at <= ?4 AND quarantined <> 1 AND"
    OUTBOX_ORDER_READY("c") "  ORDER BY next_attempt_at, id LIMIT ?5)" OUTBOX_CLAIM_RETURNING;
// ?1 topic, ?2 now
inline constexpr char kHasDue[] =
    "SELECT EXISTS(SELECT 1 FROM outbox AS c"
    " WHERE status = 0 AND topic = ?1 AND next_attempt_at <= ?2 AND quarantined <> 1 AND"
    OUTBOX_ORDER_READY("c") ")";
// Served by the partial index outbox_quarantine, named because SQLite
// without statistics prefers outbox_claim's (status, topic) range, which
// walks every pending row of the topic to find the few quarantined ones.
inline constexpr char kClaimQuarantined[] =
    OUTBOX_CLAIM_SET
    " WHERE id IN (SELECT id FROM outbox AS c INDEXED BY outbox_quarantine"
    "  WHERE status = 0 AND quarantined = 1 AND topic = ?1 AND next_attempt_at <= ?4 AND"
    OUTBOX_ORDER_READY("c") "  ORDER BY next_attempt_at, id LIMIT ?5)" OUTBOX_CLAIM_RETURNING;

// ?1 id, ?2 token, ?3 now
inline constexpr char kComplete[] =
    "UPDATE outbox SET status = 1, delivered_at = ?3, lease_owner = NULL, lease_expires_at = NULL,"
    " quarantined = 0, last_error = NULL, updated_at = ?3"
    " WHERE id = ?1 AND status = 3 AND lease_token = ?2";
// The completion statements (Store::Complete, the one entry that picks
// among them): kComplete for one row, kCompleteEachN for up to 32 rows each
// at its own time, kCompleteMany for more than 32 rows at one time.
//
// kCompleteMany serves alone the acknowledged batch beyond the largest
// chunk: 100 rows at one time cost 0.89x the time per row of the VALUES
// chunks (32 + 32 + 32 + 4: four statements), the same at 32 rows or fewer
// (a store micro-benchmark, statement time only, docs/performance.md). ?1 is
// a JSON object {"id": token, ...}. "+status" keeps the planner off
// outbox_claim's (status = 3) range, which would walk every row in flight:
// each lease is one rowid seek.
// ?1 leases, ?2 now
inline constexpr char kCompleteMany[] =
    "UPDATE outbox SET status = 1, delivered_at = ?2, lease_owner = NULL, lease_expires_at = NULL,"
    " quarantined = 0, last_error = NULL, updated_at = ?2"
    " FROM (SELECT CAST(key AS INTEGER) AS id, value AS token FROM json_each(?1)) AS l"
    " WHERE outbox.id = l.id AND +outbox.status = 3 AND outbox.lease_token = l.token";

// ?1 id, ?2 token, ?3 now, ?4 attempts increment, ?5 next_attempt_at, ?6 error
inline constexpr char kReschedule[] =
    "UPDATE outbox SET status = 0, attempts = attempts + ?4, next_attempt_at = ?5,"
    " last_error = ?6, lease_owner = NULL, lease_expires_at = NULL,"
    " quarantined = 0, last_attempt_at = ?3, updated_at = ?3"
    " WHERE id = ?1 AND status = 3 AND lease_token = ?2";

// kComplete for N leases in one statement (Store::Complete): each row
// is guarded and changed exactly as by kComplete, with its own time. The
// statement's own cost (about a third of a single completion's
// instructions: a statement journal, the trigger program's frames, the
// cursors on every index) is paid once. A VALUES list rather than JSON:
// extracting three fields per row from JSON cost as much as it saved.
// "+status" keeps the planner off outbox_claim's (status = 3) range, which
// would walk every row in flight: each row is one rowid seek.
// (id, token, now) per row, N rows
#define OUTBOX_COMPLETE_EACH(ROWS)                                             \
  "UPDATE outbox SET status = 1, delivered_at = l.column3, lease_owner = NULL," \
  " lease_expires_at = NULL, quarantined = 0, last_error = NULL, updated_at = l.column3" \
  " FROM (VALUES " ROWS ") AS l"                                               \
  " WHERE outbox.id = l.column1 AND +outbox.status = 3 AND outbox.lease_token = l.column2"
#define OUTBOX_VALUES_2 "(?,?,?),(?,?,?)"
#define OUTBOX_VALUES_4 OUTBOX_VALUES_2 "," OUTBOX_VALUES_2
#define OUTBOX_VALUES_8 OUTBOX_VALUES_4 "," OUTBOX_VALUES_4
#define OUTBOX_VALUES_16 OUTBOX_VALUES_8 "," OUTBOX_VALUES_8
#define OUTBOX_VALUES_32 OUTBOX_VALUES_16 "," OUTBOX_VALUES_16
inline constexpr char kCompleteEach2[] = OUTBOX_COMPLETE_EACH(OUTBOX_VALUES_2);
inline constexpr char kCompleteEach4[] = OUTBOX_COMPLETE_EACH(OUTBOX_VALUES_4);
inline constexpr char kCompleteEach8[] = OUTBOX_COMPLETE_EACH(OUTBOX_VALUES_8);
inline constexpr char kCompleteEach16[] = OUTBOX_COMPLETE_EACH(OUTBOX_VALUES_16);
inline constexpr char kCompleteEach32[] = OUTBOX_COMPLETE_EACH(OUTBOX_VALUES_32);

// ?1 id, ?2 token, ?3 now, ?4 attempts increment, ?5 error, ?6 dead_reason
inline constexpr char kMarkDead[] =
    "UPDATE outbox SET status = 2, attempts = attempts + ?4, last_error = ?5, dead_reason = ?6,"
    " lease_owner = NULL, lease_expires_at = NULL, quarantined = 0,"
    " last_attempt_at = ?3, updated_at = ?3"
    " WHERE id = ?1 AND status = 3 AND lease_token = ?2";

// A completion hook failed after the receiver acknowledged the row: in
// flight → pending (?7 = 0) with acked_at kept from the first
// acknowledgement, so that only the completion is retried (never the send),
// due at ?5; or, its completions spent, dead (?7 = 2) with dead_reason
// 'hook'. attempts counts the failed completions (?4).
// ?1 id, ?2 token, ?3 now, ?4 attempts, ?5 next_attempt_at, ?6 error, ?7 status
inline constexpr char kAcknowledge[] =
    "UPDATE outbox SET status = ?7, acked_at = coalesce(acked_at, ?3), attempts = ?4,"
    " dead_reason = CASE WHEN ?7 = 2 THEN 'hook' ELSE dead_reason END,"
    " next_attempt_at = ?5, last_error = ?6, lease_owner = NULL, lease_expires_at = NULL,"
    " quarantined = 0, last_attempt_at = ?3, updated_at = ?3"
    " WHERE id = ?1 AND status = 3 AND lease_token = ?2";

// Pending rows past their own expires_at, found through outbox_expiry (named:
// one statement with an OR arm for the TTL walked every pending row of the
// topic through outbox_claim on every sweeper pass, 57 ms at 300 000
// pending). Times before the clock floor (?3) are unknown, never past.
// ?1 topic, ?2 now, ?3 clock floor, ?4 limit
inline constexpr char kExpiredByDeadline[] =
    "SELECT " OUTBOX_ROW_COLUMNS " FROM outbox_message WHERE id IN ("
    " SELECT id FROM outbox INDEXED BY outbox_expiry"
    "  WHERE expires_at IS NOT NULL AND status = 0 AND topic = ?1"
    "    AND expires_at >= ?3 AND expires_at <= ?2 LIMIT ?4)";
// Pending rows without expires_at older than the topic's ttl_ms (?5 > 0):
// only topics with a TTL pay for this walk.
// ?1 topic, ?2 now, ?3 clock floor, ?4 limit, ?5 ttl_ms
inline constexpr char kExpiredByTtl[] =
    "SELECT " OUTBOX_ROW_COLUMNS " FROM outbox_message"
    " WHERE status = 0 AND topic = ?1 AND expires_at IS NULL"
    "   AND created_at >= ?3 AND created_at <= ?2 - ?5"
    " LIMIT ?4";
// pending → dead, "expired"; no attempt counted.
// ?1 id, ?2 now, ?3 last_error
inline constexpr char kExpire[] =
    "UPDATE outbox SET status = 2, dead_reason = 'expired', last_error = ?3,"
    " lease_owner = NULL, lease_expires_at = NULL, quarantined = 0, updated_at = ?2"
    " WHERE id = ?1 AND status = 0";

// A revert hands the row back as it was before the claim: due now, nothing
// counted, last_attempt_at untouched (the send never started).
// ?1 id, ?2 token, ?3 now
inline constexpr char kRevert[] =
    "UPDATE outbox SET status = 0, next_attempt_at = ?3, lease_owner = NULL,"
    " lease_expires_at = NULL, updated_at = ?3"
    " WHERE id = ?1 AND status = 3 AND lease_token = ?2";

// A lease with a boot id is judged on the boot clock only: over if taken in
// another boot (?4 is this boot's id), or if the boot clock passed its end
// (?5) or its end lies beyond any lease a claim writes (?6 = boot now + 2 ×
// max lease: a value some other writer left). A lease without one (older
// versions, or this host's boot id unknown) on wall time: over, or further ahead than twice
// the longest lease (?3 = now + 2 × max lease; the slack covers claims
// racing with this statement), stamped before the wall clock jumped back.
// ?1 now, ?2 limit, ?3 now + 2 × max lease, ?4 boot id or NULL, ?5 boot now,
// ?6 boot now + 2 × max lease
inline constexpr char kRecycleExpired[] =
    "UPDATE outbox SET status = 0, next_attempt_at = ?1, lease_owner = NULL,"
    " lease_expires_at = NULL, updated_at = ?1"
    " WHERE id IN (SELECT id FROM outbox WHERE status = 3 AND"
    "   CASE WHEN ?4 IS NULL OR typeof(lease_boot_id) <> 'text'"
    "     OR typeof(lease_boot_until) <> 'integer'"
    "     THEN lease_expires_at IS NULL OR lease_expires_at <= ?1 OR lease_expires_at > ?3"
    "   WHEN lease_boot_id <> ?4 THEN 1"
    "   ELSE lease_boot_until <= ?5 OR lease_boot_until > ?6 END"
    " LIMIT ?2) RETURNING topic";

// ?1 owner, ?2 now
inline constexpr char kReleaseOwner[] =
    "UPDATE outbox SET status = 0, next_attempt_at = ?2, lease_owner = NULL,"
    " lease_expires_at = NULL, updated_at = ?2"
    " WHERE status = 3 AND lease_owner = ?1";
inline constexpr char kLeaseOwners[] =
    "SELECT DISTINCT lease_owner FROM outbox WHERE status = 3 AND lease_owner IS NOT NULL";
inline constexpr char kCountOwnedBy[] =
    "SELECT count(*) FROM outbox WHERE status = 3 AND lease_owner = ?";

// A crash is counted against a row only when it was alone in flight (?3 = 1).
// ?1 owner, ?2 now, ?3 alone (0/1), ?4 crash budget
inline constexpr char kTakeBackToDead[] =
    "UPDATE outbox SET status = 2, crashes = crashes + 1, dead_reason = 'crash', lease_owner = NULL,"
    " lease_expires_at = NULL, quarantined = 0, updated_at = ?2,"
    " last_error = 'crashed the agent ' || (crashes + 1) ||"
    "   ' times while alone in flight (crash budget ' || ?4 || ')'"
    " WHERE status = 3 AND lease_owner = ?1 AND ?3 = 1 AND crashes + 1 >= ?4"
    " RETURNING id, topic";
// A crash-budget death's last_error, with its on_dead hook's failure added.
inline constexpr char kRecordCrashError[] =
    "UPDATE outbox SET last_error = ?2 WHERE id = ?1 AND status = 2 AND dead_reason = 'crash'";
inline constexpr char kTakeBackToPending[] =
    "UPDATE outbox SET status = 0, crashes = crashes + ?3, quarantined = 1,"
    " next_attempt_at = ?2, lease_owner = NULL, lease_expires_at = NULL, updated_at = ?2"
    " WHERE status = 3 AND lease_owner = ?1";

// --- per-key ordering (docs/ordering.md) ---------------------------------------

inline constexpr char kGetTopicMode[] =
    "SELECT ordering, dead_head FROM outbox_topic_modes WHERE topic = ?";
// ?1 topic, ?2 ordering, ?3 dead_head, ?4 now. The first agent records the
// mode; later ones compare (the caller reads it back).
inline constexpr char kRecordTopicMode[] =
    "INSERT INTO outbox_topic_modes(topic, ordering, dead_head, updated_at)"
    " VALUES(?1, ?2, ?3, ?4) ON CONFLICT(topic) DO NOTHING";
inline constexpr char kTopicModes[] =
    "SELECT topic, ordering, dead_head FROM outbox_topic_modes ORDER BY topic";
inline constexpr char kClearTopicMode[] = "DELETE FROM outbox_topic_modes WHERE topic = ?";

// A blocked key: its head (the oldest undelivered row that blocks, see
// OUTBOX_ORDER_READY) cannot go now, being dead or not yet due (a retry's
// backoff, a future deliver_at), and later rows of the key wait behind it.
// Candidates come from the claim index (status 2, or status 0 not yet
// due), so the cost follows the rows in trouble, not the backlog: CROSS
// JOIN keeps the (tiny) modes table outside and each kind of head is its
// own SELECT, so that each topic's candidates are index ranges (one
// statement with an OR walked every pending row of every topic by status
// alone). Rows parked behind a dead head (OUTBOX_PARKED) are never heads
// and are left out of the range.
// ?1 now
// One SELECT per kind of head, each a range of outbox_claim per ordered topic.
#define OUTBOX_BLOCKED_HEADS_WHERE(WHICH)                                      \
  "SELECT h.id FROM outbox_topic_modes m CROSS JOIN outbox AS h INDEXED BY outbox_claim" \
  " WHERE m.ordering = 'key' AND h.topic = m.topic AND " WHICH                 \
  "   AND h.ordering_key IS NOT NULL AND"                                      \
  OUTBOX_ORDER_READY("h")                                                      \
  "   AND EXISTS(SELECT 1 FROM outbox s INDEXED BY outbox_ordering"            \
  "     WHERE s.topic = h.topic AND s.ordering_key = h.ordering_key"           \
  "       AND s.ordering_key IS NOT NULL AND s.delivered_at IS NULL"           \
  "       AND s.status <> 1 AND s.id > h.id)"
#define OUTBOX_BLOCKED_HEAD_IDS                                                \
  OUTBOX_BLOCKED_HEADS_WHERE(                                                  \
      "h.status = 2 AND m.dead_head = 'block'"                                 \
      " AND coalesce(h.dead_reason, '') NOT IN ('expired', 'cancelled')")      \
  " UNION ALL "                                                                \
  OUTBOX_BLOCKED_HEADS_WHERE(                                                  \
      "h.status = 0 AND h.next_attempt_at > ?1 AND h.next_attempt_at < " OUTBOX_PARKED)
// ?1 now, ?2 after id, ?3 limit
inline constexpr char kBlockedHeads[] =
    "SELECT " OUTBOX_ROW_COLUMNS " FROM outbox_message WHERE id IN (" OUTBOX_BLOCKED_HEAD_IDS ")"
    " AND id > ?2 ORDER BY id LIMIT ?3";
inline constexpr char kBlockedKeyCount[] = "SELECT count(*) FROM (" OUTBOX_BLOCKED_HEAD_IDS ")";
// The row that row ?1 waits for: the oldest undelivered row of its key that
// blocks it; none if it may go (or its topic is not ordered).
inline constexpr char kWaitsFor[] =
    "SELECT " OUTBOX_ROW_COLUMNS " FROM outbox_message WHERE id = (SELECT p.id"
    " FROM outbox r JOIN outbox_topic_modes m ON m.topic = r.topic AND m.ordering = 'key',"
    "   outbox p INDEXED BY outbox_ordering"
    " WHERE r.id = ?1 AND r.ordering_key IS NOT NULL AND p.topic = r.topic"
    "   AND p.ordering_key = r.ordering_key AND p.ordering_key IS NOT NULL"
    "   AND p.delivered_at IS NULL AND p.status <> 1 AND p.id < r.id"
    "   AND (p.status <> 2 OR (m.dead_head = 'block'"
    "        AND coalesce(p.dead_reason, '') NOT IN ('expired', 'cancelled')))"
    " ORDER BY p.id LIMIT 1)";

// ?1 cutoff, ?2 batch
inline constexpr char kPeekDelivered[] =
    "SELECT " OUTBOX_ROW_COLUMNS " FROM outbox_message"
    " WHERE status = 1 AND updated_at < ?1 ORDER BY updated_at, id LIMIT ?2";
inline constexpr char kPurgeDelivered[] =
    "DELETE FROM outbox WHERE id IN (SELECT id FROM outbox"
    " WHERE status = 1 AND updated_at < ?1 ORDER BY updated_at, id LIMIT ?2)";
inline constexpr char kDeleteDelivered[] = "DELETE FROM outbox WHERE id = ? AND status = 1";

// --- reads -------------------------------------------------------------------

inline constexpr char kGetRow[] =
    "SELECT " OUTBOX_ROW_COLUMNS " FROM outbox_message WHERE id = ?";
// ?1 status or NULL, ?2 topic or NULL, ?3 after id, ?4 limit
inline constexpr char kList[] =
    "SELECT " OUTBOX_ROW_COLUMNS " FROM outbox_message"
    " WHERE (?1 IS NULL OR status = ?1) AND (?2 IS NULL OR topic = ?2) AND id > ?3"
    " ORDER BY id LIMIT ?4";
// ?1 now or NULL: column 4 is the earliest time a row became due, among
// rows whose deliver_at has passed at ?1 (or that have none).
inline constexpr char kStatsByTopic[] =
    "SELECT topic, status, count(*), min(created_at),"
    " min(CASE WHEN deliver_at IS NULL THEN created_at"
    "     WHEN deliver_at <= ?1 THEN max(created_at, deliver_at) END)"
    " FROM outbox GROUP BY topic, status ORDER BY topic, status";
// The counter and the rows above its mark (schema 8; all of them while
// max_pending is 0).
inline constexpr char kUndelivered[] =
    "SELECT value + (SELECT count(*) FROM outbox WHERE status <> 1"
    "   AND (upto IS NULL OR id > upto))"
    " FROM outbox_counters WHERE name = 'undelivered'";
inline constexpr char kUsedBytes[] =
    "SELECT ((SELECT page_count FROM pragma_page_count())"
    " - (SELECT freelist_count FROM pragma_freelist_count()))"
    " * (SELECT page_size FROM pragma_page_size())";
// A loose index scan: one seek per distinct topic instead of a walk over
// every pending row.
inline constexpr char kPendingTopics[] =
    "WITH RECURSIVE t(topic) AS ("
    "  SELECT (SELECT min(topic) FROM outbox WHERE status = 0)"
    "  UNION ALL"
    "  SELECT (SELECT min(topic) FROM outbox WHERE status = 0 AND topic > t.topic)"
    "    FROM t WHERE t.topic IS NOT NULL)"
    " SELECT topic FROM t WHERE topic IS NOT NULL";
inline constexpr char kDataVersion[] = "PRAGMA data_version";
// The sweeper runs this on every wake-up. Without INDEXED BY, SQLite (no
// statistics) counted through another index's status = 0 range, i.e. every
// pending row: 0.3 s per wake-up at 1 000 000 pending (benchmark figure 5).
inline constexpr char kQuarantinedCount[] =
    "SELECT count(*) FROM outbox INDEXED BY outbox_quarantine"
    " WHERE status = 0 AND quarantined = 1";
// Per topic: probation is decided per topic (a topic without a route holds
// nothing up). Same index, read in its topic order.
inline constexpr char kQuarantinedTopics[] =
    "SELECT topic, count(*) FROM outbox INDEXED BY outbox_quarantine"
    " WHERE status = 0 AND quarantined = 1 GROUP BY topic";

// --- operator actions (store/src/operator.cc) ------------------------------
//
// One statement per action and selector form: ?1 id | ?2 topic, ?3 key or
// NULL | ?4 status or NULL, ?5 created_before or NULL (topic and all forms);
// ?6 now. Separate forms so that a topic uses the (topic, msg_key) index and
// an id the primary key.
#define OUTBOX_SELECT_ID " id = ?1"
#define OUTBOX_SELECT_TOPIC                                                    \
  " topic = ?2 AND (?3 IS NULL OR msg_key = ?3) AND (?4 IS NULL OR status = ?4)" \
  " AND (?5 IS NULL OR created_at < ?5)"
#define OUTBOX_SELECT_ALL " (?4 IS NULL OR status = ?4) AND (?5 IS NULL OR created_at < ?5)"
#define OUTBOX_OPERATOR_STATEMENTS(Form, WHERE)                                         \
  inline constexpr char kInFlight##Form[] =                                             \
      "SELECT id FROM outbox WHERE status = 3 AND" WHERE " LIMIT 1";                    \
  inline constexpr char kMarkDelivered##Form[] =                                        \
      "UPDATE outbox SET status = 1, delivered_at = ?6, dead_reason = NULL, updated_at = ?6," \
      " lease_owner = NULL, lease_expires_at = NULL WHERE status IN (0, 2) AND" WHERE;  \
  inline constexpr char kCancel##Form[] =                                               \
      "UPDATE outbox SET status = 2, dead_reason = 'cancelled',"                        \
      " last_error = 'cancelled by operator', updated_at = ?6,"                         \
      " lease_owner = NULL, lease_expires_at = NULL WHERE status IN (0, 2) AND" WHERE;  \
  inline constexpr char kRetry##Form[] =                                                \
      "UPDATE outbox SET status = 0, attempts = 0, crashes = 0, quarantined = 0,"       \
      " dead_reason = NULL, next_attempt_at = ?6, updated_at = ?6,"                     \
      " operator_retries = operator_retries + 1 WHERE status = 2 AND" WHERE;            \
  inline constexpr char kPurgeDead##Form[] =                                            \
      "DELETE FROM outbox WHERE id IN (SELECT id FROM outbox WHERE status = 2 AND"      \
      WHERE " LIMIT ?7)";                                                               \
  inline constexpr char kSelectIds##Form[] =                                            \
      "SELECT id FROM outbox WHERE id > ?8 AND" WHERE " ORDER BY id LIMIT ?7";
OUTBOX_OPERATOR_STATEMENTS(ById, OUTBOX_SELECT_ID)
OUTBOX_OPERATOR_STATEMENTS(ByTopic, OUTBOX_SELECT_TOPIC)
OUTBOX_OPERATOR_STATEMENTS(All, OUTBOX_SELECT_ALL)
#undef OUTBOX_OPERATOR_STATEMENTS
// ?1 id, ?2 now
inline constexpr char kRequeueDelivered[] =
    "UPDATE outbox SET status = 0, attempts = 0, crashes = 0, quarantined = 0,"
    " dead_reason = NULL, delivered_at = NULL, next_attempt_at = ?2, updated_at = ?2,"
    " operator_retries = operator_retries + 1 WHERE id = ?1 AND status = 1";
inline constexpr char kMarkDeliveredId[] =
    "UPDATE outbox SET status = 1, delivered_at = ?2, dead_reason = NULL, updated_at = ?2"
    " WHERE id = ?1 AND status IN (0, 2)";
// ?1 after id, ?2 limit
inline constexpr char kRowStates[] =
    "SELECT id, topic, msg_key, status, created_at, updated_at FROM outbox"
    " WHERE id > ?1 ORDER BY id LIMIT ?2";
inline constexpr char kPublishRuntime[] =
    "INSERT INTO outbox_runtime(agent, name, value, updated_at) VALUES(?, ?, ?, ?)"
    " ON CONFLICT(agent, name) DO UPDATE SET value = excluded.value,"
    " updated_at = excluded.updated_at";
inline constexpr char kListRuntime[] =
    "SELECT agent, name, value, updated_at FROM outbox_runtime ORDER BY agent, name";
inline constexpr char kRuntimeValue[] =
    "SELECT value FROM outbox_runtime WHERE name = ? ORDER BY updated_at DESC LIMIT 1";
inline constexpr char kRestoreMessage[] =
    "INSERT INTO outbox(topic, msg_key, payload, headers, schema_version, ordering_key)"
    " VALUES(?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(topic, msg_key) DO NOTHING";
inline constexpr char kAuditAction[] =
    "INSERT INTO outbox_audit(at, actor, host, action, rows, row_id, detail)"
    " VALUES(?, ?, ?, ?, ?, ?, ?)";
// ?1 since, ?2 limit
inline constexpr char kListAudit[] =
    "SELECT id, at, actor, host, action, rows, row_id, detail FROM outbox_audit"
    " WHERE at >= ?1 ORDER BY at, id LIMIT ?2";

// --- the operator's console (store/src/console.cc) ----------------------------
//
// Walks over outbox in one index's order, each bounded by a LIMIT; the
// console checks the rest of a filter row by row (console.cc says why). The
// rows carry no payload and no headers. Each walk seeks past a cursor made
// of its order's columns, so a page costs a seek plus the rows it reads.
#define OUTBOX_CONSOLE_COLUMNS "SELECT " OUTBOX_ROW_COLUMNS_WITH("X''", "NULL") " FROM outbox"
// Newest first. ?1 ids below, ?2 limit
inline constexpr char kWalkById[] =
    OUTBOX_CONSOLE_COLUMNS " WHERE id < ?1 ORDER BY id DESC LIMIT ?2";
// One status in outbox_claim's order. ?1 status, ?2..?4 (topic,
// next_attempt_at, id) after, ?5 limit
inline constexpr char kWalkByStatus[] =
    OUTBOX_CONSOLE_COLUMNS " WHERE status = ?1 AND (topic, next_attempt_at, id) > (?2, ?3, ?4)"
    " ORDER BY topic, next_attempt_at, id LIMIT ?5";
// One status of one topic. ?1 status, ?2 topic, ?3..?4 (next_attempt_at, id)
// after, ?5 limit
inline constexpr char kWalkByStatusTopic[] =
    OUTBOX_CONSOLE_COLUMNS " WHERE status = ?1 AND topic = ?2 AND (next_attempt_at, id) > (?3, ?4)"
    " ORDER BY next_attempt_at, id LIMIT ?5";
// One topic in msg_key order (the UNIQUE(topic, msg_key) index). ?1 topic,
// ?2 the first key (From: inclusive, After: exclusive), ?3 the end of the
// range (exclusive; a BLOB sorts after every text, so X'' means none),
// ?4 limit
inline constexpr char kWalkByKeyFrom[] =
    OUTBOX_CONSOLE_COLUMNS " WHERE topic = ?1 AND msg_key >= ?2 AND msg_key < ?3"
    " ORDER BY msg_key LIMIT ?4";
inline constexpr char kWalkByKeyAfter[] =
    OUTBOX_CONSOLE_COLUMNS " WHERE topic = ?1 AND msg_key > ?2 AND msg_key < ?3"
    " ORDER BY msg_key LIMIT ?4";
#undef OUTBOX_CONSOLE_COLUMNS
// The overview's counts of undelivered rows per topic. ?1 now
inline constexpr char kOverviewCounts[] =
    "SELECT topic, sum(status = 0), sum(status = 0 AND next_attempt_at <= ?1), sum(status = 3),"
    " sum(status = 2), min(CASE WHEN status = 0 AND next_attempt_at <= ?1 THEN next_attempt_at END)"
    " FROM outbox WHERE status IN (0, 2, 3) GROUP BY topic ORDER BY topic";
// Deliveries since ?1, per topic (outbox_retention).
inline constexpr char kOverviewDelivered[] =
    "SELECT topic, count(*) FROM outbox WHERE status = 1 AND updated_at >= ?1 GROUP BY topic";
#define OUTBOX_AUDIT_COLUMNS "SELECT id, at, actor, host, action, rows, row_id, detail FROM outbox_audit"
// Newest first. ?1 ids below, ?2 limit
inline constexpr char kAuditPage[] =
    OUTBOX_AUDIT_COLUMNS " WHERE id < ?1 ORDER BY id DESC LIMIT ?2";
// The entries naming row ?3.
inline constexpr char kAuditOfRow[] =
    OUTBOX_AUDIT_COLUMNS " WHERE row_id = ?3 AND id < ?1 ORDER BY id DESC LIMIT ?2";
#undef OUTBOX_AUDIT_COLUMNS

// --- inbox (the receiving side) -------------------------------------------------
//
// Installed by Inbox itself, not by a migration of the outbox schema: a
// receiver's database usually holds no outbox at all. WITHOUT ROWID: the key
// is the row; received_at serves the purge.
inline constexpr char kHasInboxTable[] =
    "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'outbox_inbox'";
// `source`: which sender the key came from, when the receiver knows it (a
// CloudEvents source, a header); NULL otherwise. Export by window and source
// serves reconciliation with each sender.
inline constexpr char kInstallInbox[] = R"sql(
CREATE TABLE IF NOT EXISTS outbox_inbox(
  key         TEXT PRIMARY KEY,
  received_at INTEGER NOT NULL,
  source      TEXT
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS outbox_inbox_received ON outbox_inbox(received_at);
)sql";
// Tables created before `source` existed gain it (a cheap ALTER: no rewrite).
inline constexpr char kInboxHasSource[] =
    "SELECT count(*) FROM pragma_table_info('outbox_inbox') WHERE name = 'source'";
inline constexpr char kInboxAddSource[] = "ALTER TABLE outbox_inbox ADD COLUMN source TEXT";
// ?1 source or NULL (every source), ?2 since, ?3 until (received_at)
inline constexpr char kInboxExport[] =
    "SELECT key FROM outbox_inbox WHERE received_at >= ?2 AND received_at < ?3"
    " AND (?1 IS NULL OR source = ?1) ORDER BY received_at, key";
// The unique key decides, never a prior SELECT: two deliveries racing each
// other cannot both insert (docs/receiving.md). sqlite3_changes() tells which.
// ?1 key, ?2 received_at
// ?3 source or NULL
inline constexpr char kInboxRecord[] =
    "INSERT INTO outbox_inbox(key, received_at, source) VALUES(?1, ?2, ?3)"
    " ON CONFLICT(key) DO NOTHING";
// ?1 cutoff, ?2 batch
inline constexpr char kInboxPurge[] =
    "DELETE FROM outbox_inbox WHERE key IN (SELECT key FROM outbox_inbox"
    " WHERE received_at < ?1 ORDER BY received_at LIMIT ?2)";

// Maintenance, run outside any transaction (Store::Checkpoint and
// Store::ReclaimFreePages).
inline constexpr char kCheckpointTruncate[] = "PRAGMA wal_checkpoint(TRUNCATE)";
// In steps of 128 pages, each its own transaction: a commit leaves the pages
// cut off the end of the file out of the WAL, but a transaction larger than
// the page cache spills them into it first, i.e. one whole step of
// incremental vacuum rewrote every purged payload page (figure 7).
inline constexpr char kIncrementalVacuum[] = "PRAGMA incremental_vacuum(128)";
inline constexpr char kFreelistCount[] = "PRAGMA freelist_count";

}  // namespace outbox::store::sql
