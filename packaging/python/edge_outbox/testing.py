"""Testing an application that enqueues with edge_outbox, in memory.

    import unittest
    import edge_outbox
    from edge_outbox import testing

    class PlaceOrderTest(unittest.TestCase):
        def test_enqueues_order_created(self):
            conn = testing.connect()          # fresh, in memory, outbox schema
            place_order(conn, 42)             # the application's own code
            testing.assert_enqueued(conn, "order.created", key="order-42",
                                    payload={"order": 42})

Nothing is sent: these read what the application's transactions committed
(rolled-back messages were never there). The schema is the one this
installation's `outboxctl init` creates, made once per process in a
temporary file and copied into each new in-memory database; set
EDGE_OUTBOX_OUTBOXCTL to use another outboxctl than the one on PATH.
Standard library only.
"""

import collections
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import threading

__all__ = ["connect", "enqueued", "assert_enqueued", "assert_nothing_enqueued", "Message"]

Message = collections.namedtuple(
    "Message", "id topic key payload headers status attempts schema_version ordering_key")
Message.__doc__ = ("One committed outbox row: payload as bytes, headers as a dict, "
                   "status as 'pending', 'delivered', 'dead' or 'in_flight'.")

_STATUS = {0: "pending", 1: "delivered", 2: "dead", 3: "in_flight"}
_template = None
_template_lock = threading.Lock()


def _outboxctl():
    path = os.environ.get("EDGE_OUTBOX_OUTBOXCTL") or shutil.which("outboxctl")
    if not path:
        raise RuntimeError("edge_outbox.testing: no outboxctl on PATH (install edge-outbox, "
                           "or set EDGE_OUTBOX_OUTBOXCTL to its path)")
    return path


def _schema_template():
    """An in-memory database holding a fresh schema, made once per process."""
    global _template
    with _template_lock:
        if _template is None:
            with tempfile.TemporaryDirectory(prefix="edge-outbox-") as tmp:
                path = os.path.join(tmp, "schema.db")
                done = subprocess.run([_outboxctl(), "--db", path, "init"],
                                      capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    raise RuntimeError("edge_outbox.testing: outboxctl init failed: "
                                       + (done.stderr.strip() or done.stdout.strip()))
                file_db = sqlite3.connect(path)
                template = sqlite3.connect(":memory:", check_same_thread=False)
                file_db.backup(template)
                file_db.close()
                _template = template
        return _template


def connect(**kwargs):
    """A new in-memory database with the outbox schema, as an sqlite3.Connection.

    kwargs go to sqlite3.connect (isolation_level=None by default, so that
    the application's own BEGIN/COMMIT decide, as with edge_outbox.enqueue).
    Each call is a separate, empty database that lives as long as the
    connection.
    """
    kwargs.setdefault("isolation_level", None)
    conn = sqlite3.connect(":memory:", **kwargs)
    template = _schema_template()
    with _template_lock:
        template.backup(conn)
    return conn


def _as_bytes(payload):
    if isinstance(payload, (bytes, bytearray)):
        return bytes(payload)
    if isinstance(payload, str):
        return payload.encode("utf-8")
    return None


def enqueued(conn, topic=None, key=None):
    """Committed messages in commit order, of `topic` (None: every topic)
    and `key` (None: any), as Message tuples."""
    rows = conn.execute(
        "SELECT id, topic, msg_key, payload, headers, status, attempts, schema_version,"
        " ordering_key FROM outbox_message"
        " WHERE (?1 IS NULL OR topic = ?1) AND (?2 IS NULL OR msg_key = ?2) ORDER BY id",
        (topic, key)).fetchall()
    messages = []
    for row in rows:
        payload = row[3] if isinstance(row[3], bytes) else str(row[3]).encode("utf-8")
        headers = json.loads(row[4]) if row[4] else {}
        messages.append(Message(row[0], row[1], row[2], payload, headers,
                                _STATUS.get(row[5], str(row[5])), row[6], row[7], row[8]))
    return messages


def _matches(message, key, payload, headers, count_fields):
    if key is not None and message.key != key:
        return False
    if payload is not None:
        wanted = _as_bytes(payload)
        if wanted is not None:
            if message.payload != wanted:
                return False
        else:
            # A dict or list: compare as JSON, whatever the spacing.
            try:
                if json.loads(message.payload) != payload:
                    return False
            except ValueError:
                return False
    for name, value in (headers or {}).items():
        if message.headers.get(name) != value:
            return False
    for field, value in count_fields.items():
        if value is not None and getattr(message, field) != value:
            return False
    return True


def _show(messages):
    if not messages:
        return "  (nothing)"
    lines = []
    for m in messages:
        payload = m.payload[:200].decode("utf-8", "replace")
        lines.append(f"  id {m.id} {m.topic} key={m.key} {m.status} payload={payload}"
                     + "".join(f" {k}={v}" for k, v in sorted(m.headers.items())))
    return "\n".join(lines)


def assert_enqueued(conn, topic, key=None, payload=None, headers=None, *, count=None,
                    status=None, schema_version=None, ordering_key=None):
    """Raises AssertionError unless `topic` has a committed message matching
    every given field (exactly `count` of them when count is given).

    payload: bytes or str compare byte for byte; a dict or list compares as
    JSON. headers: each given header with this value (others may be there).
    The error lists what the outbox holds instead. Returns the matches.
    """
    if not topic:
        raise ValueError("topic: must not be empty")
    if count is not None and (not isinstance(count, int) or count < 0):
        raise ValueError("count: expected a non-negative integer")
    everything = enqueued(conn)
    fields = {"status": status, "schema_version": schema_version, "ordering_key": ordering_key}
    found = [m for m in everything
             if m.topic == topic and _matches(m, key, payload, headers, fields)]
    if (count is None and found) or (count is not None and len(found) == count):
        return found
    wanted = ", ".join(f"{name}={value!r}" for name, value in (
        ("key", key), ("payload", payload), ("headers", headers), ("status", status),
        ("schema_version", schema_version), ("ordering_key", ordering_key)) if value is not None)
    expected = "a message" if count is None else f"{count} message(s)"
    raise AssertionError(f"expected {expected} of {topic}" + (f" with {wanted}" if wanted else "")
                         + f", found {len(found)}; the outbox holds:\n" + _show(everything))


def assert_nothing_enqueued(conn, topic=None):
    """Raises AssertionError if `topic` (None: any topic) has a committed message."""
    found = enqueued(conn, topic)
    if found:
        raise AssertionError(f"expected no message{' of ' + topic if topic else ''}, found "
                             f"{len(found)}:\n" + _show(found))
