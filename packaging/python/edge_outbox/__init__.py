"""Enqueue edge-outbox messages from Python, in the caller's own transaction.

The outbox row commits or rolls back together with the application's rows;
outboxd, beside the application, delivers it after the commit. Standard
library only (sqlite3); the database needs the outbox schema
(`outboxctl --db FILE init`).

    import sqlite3
    import edge_outbox

    db = sqlite3.connect("shop.db", isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT INTO orders(id, item) VALUES(?, ?)", (42, "tea"))
    edge_outbox.enqueue(db, "order.created", "order-42", b'{"order": 42}',
                        headers={"X-Tenant": "shop-1"})
    db.execute("COMMIT")

The checks are the schema's own (its insert trigger and UNIQUE(topic,
msg_key)), so the errors say what the C++ Producer says: ValidationError
(a ValueError) for a bad field or a payload over limits.max_payload_bytes,
DuplicateError, CapacityError, NotAnOutboxError. After any of them nothing
was written and the caller's transaction is still open.
"""

import collections
import json
import sqlite3

__all__ = [
    "enqueue",
    "Enqueued",
    "OutboxError",
    "ValidationError",
    "DuplicateError",
    "CapacityError",
    "NotAnOutboxError",
]

MAX_KEY_BYTES = 255

Enqueued = collections.namedtuple("Enqueued", "id inserted")
Enqueued.__doc__ = "The row's id; inserted is False when if_absent found an existing row."


class OutboxError(Exception):
    """Base of every error this module raises on purpose."""


class ValidationError(OutboxError, ValueError):
    """A field the schema refuses, or a payload over limits.max_payload_bytes."""


class DuplicateError(OutboxError):
    """A message with the same topic and key exists (see if_absent)."""


class CapacityError(OutboxError):
    """limits.max_pending or limits.max_db_bytes is reached."""


class NotAnOutboxError(OutboxError):
    """The database has no outbox schema."""


_NOW_MS = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"
_INSERT = (
    "INSERT INTO outbox(topic, msg_key, payload, headers, max_attempts, backoff,"
    " first_interval_ms, next_attempt_at, created_at, updated_at)"
    f" VALUES(?, ?, ?, ?, ?, ?, ?, {_NOW_MS}, {_NOW_MS}, {_NOW_MS})"
)


def enqueue(conn, topic, key, payload, headers=None, *, max_attempts=None, backoff=None,
            first_interval_ms=None, if_absent=False, standalone=False):
    """Writes one pending message, due now, inside conn's open transaction.

    conn: a sqlite3.Connection on the application's database.
    topic, key: non-empty strings; the key is unique per topic, at most 255 bytes.
    payload: bytes, or str (sent as UTF-8): the HTTP body.
    headers: None, a dict of str to str, or that dict as JSON text: extra
        HTTP headers (no CR or LF).
    max_attempts, backoff ("fixed" or "exponential"), first_interval_ms:
        this message's retry policy; None keeps the topic's.
    if_absent: on a duplicate (topic, key), return the existing row
        (inserted=False) instead of raising DuplicateError.
    standalone: with no transaction open, run in one of its own
        (BEGIN IMMEDIATE ... COMMIT) instead of raising ValidationError.

    Returns Enqueued(id, inserted).
    """
    if isinstance(payload, str):
        payload = payload.encode("utf-8")
    elif isinstance(payload, (bytearray, memoryview)):
        payload = bytes(payload)
    elif not isinstance(payload, bytes):
        raise ValidationError(f"payload: expected bytes or str, not {type(payload).__name__}")
    if isinstance(headers, dict):
        headers = json.dumps(headers, ensure_ascii=False, separators=(",", ":"))
    if headers is not None and "\0" in str(headers):
        raise ValidationError("headers: holds a NUL byte")
    if max_attempts is not None and (not _is_int(max_attempts) or max_attempts < 1):
        raise ValidationError("max_attempts: expected a positive integer")
    if first_interval_ms is not None and (not _is_int(first_interval_ms)
                                          or first_interval_ms <= 0):
        raise ValidationError("first_interval_ms: expected a positive integer")
    if backoff is not None and backoff not in ("fixed", "exponential"):
        raise ValidationError("backoff: expected \"fixed\" or \"exponential\"")

    own_transaction = not conn.in_transaction
    if own_transaction and not standalone:
        raise ValidationError(
            "enqueue: no transaction is open on this connection; begin one so that the "
            "message commits with your own rows, or pass standalone=True")
    if own_transaction:
        conn.execute("BEGIN IMMEDIATE")
    try:
        result = _insert(conn, topic, key, payload, headers,
                         (max_attempts, backoff, first_interval_ms), if_absent)
    except BaseException:
        if own_transaction:
            conn.execute("ROLLBACK")
        raise
    if own_transaction:
        conn.execute("COMMIT")
    return result


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _insert(conn, topic, key, payload, headers, retry, if_absent):
    params = (topic, key, payload, headers, *retry)
    try:
        cursor = conn.execute(_INSERT, params)
        return Enqueued(cursor.lastrowid, True)
    except sqlite3.IntegrityError as error:
        # A unique-key conflict, or a trigger's RAISE(ABORT, 'outbox: ...').
        text = str(error)
        if not text.startswith("UNIQUE constraint failed"):
            raise _from_trigger(text, payload) from None
        if not if_absent:
            raise DuplicateError(f"enqueue: a message with topic '{topic}' and key '{key}' "
                                 "already exists") from None
        row = conn.execute("SELECT id FROM outbox WHERE topic = ? AND msg_key = ?",
                           (topic, key)).fetchone()
        return Enqueued(row[0], False)
    except sqlite3.OperationalError as error:
        if "no such table: outbox" in str(error):
            raise NotAnOutboxError(
                "enqueue: the database has no outbox table; create the schema with "
                "`outboxctl --db FILE init`") from None
        raise


def _from_trigger(text, payload):
    """The schema's "outbox: <field>: <reason>" as the C++ Producer words it."""
    prefix = "outbox: "
    if not text.startswith(prefix):
        return OutboxError(text)
    reason = text[len(prefix):]
    if reason.startswith("capacity: "):
        return CapacityError("enqueue refused: " + reason[len("capacity: "):])
    if reason.startswith("payload: "):
        return ValidationError(
            f"payload: {len(payload)} bytes is larger than limits.max_payload_bytes")
    return ValidationError(reason)
