#!/usr/bin/env python3
"""outboxctl against live processes. Reconciliation against a real receiver
database: outboxd delivers to the example receiver (outbox-receiver,
store::Inbox), differences are planted on both sides, and `outboxctl
reconcile` must find exactly them, repair them with its flags, and audit the
repairs. The operator actions, each leaving one audit row. Hostile rows
archived by outboxd's retention and restored byte for byte. `outboxctl top`
in a real 80x24 terminal (tmux), read off the screen.

    outboxctl_test.py --outboxd PATH --outboxctl PATH --receiver PATH [unittest arguments]
"""

import argparse
import glob
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import outboxd_test  # noqa: E402
from outboxd_test import DEADLINE_S, OutboxdTestCase, wait_until  # noqa: E402

RECEIVER = None


class ReceiverProcess:
    """outbox-receiver on 127.0.0.1, port 0, with its own SQLite file."""

    def __init__(self, db):
        self.db = db
        self.process = subprocess.Popen([RECEIVER, "--db", db, "--listen", "127.0.0.1:0"],
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.port = int(self.process.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}"

    def keys(self, query=""):
        with urllib.request.urlopen(f"{self.url}/keys{query}", timeout=DEADLINE_S) as response:
            return response.read().decode()

    def close(self):
        self.process.kill()
        self.process.wait()
        self.process.stdout.close()


class ReconcileTest(OutboxdTestCase):
    def setUp(self):
        super().setUp()
        self.receiving = ReceiverProcess(os.path.join(self.dir, "receiver.db"))

    def tearDown(self):
        self.receiving.close()
        super().tearDown()

    def receiver_sql(self, statement, params=()):
        import sqlite3
        db = sqlite3.connect(self.receiving.db, timeout=DEADLINE_S, isolation_level=None)
        try:
            return db.execute(statement, params).fetchall()
        finally:
            db.close()

    def reconcile(self, *extra):
        keys = os.path.join(self.dir, "keys.txt")
        with open(keys, "w") as f:
            f.write(self.receiving.keys())
        result = self.outboxctl("reconcile", "--receiver-keys", keys, "--settle-ms", "0",
                                "--json", *extra)
        self.assertIn(result.returncode, (0, 3), result.stderr)
        return result.returncode, json.loads(result.stdout)

    def test_finds_exactly_the_planted_differences_and_repairs_them(self):
        self.start(self.config({"orders": {"url": f"{self.receiving.url}/orders"}},
                               sweep_interval_ms=100))
        ids = [self.insert("orders", f"k{i}") for i in range(6)]
        wait_until(lambda: self.count("status = 1") == 6, what="all delivered")
        wait_until(lambda: self.receiver_sql("SELECT count(*) FROM outbox_inbox")[0][0] == 6,
                   what="all applied")
        code, report = self.reconcile()
        self.assertEqual(code, 0, report)
        self.assertEqual(report["agreeing"], 6)

        ack_lost = ids[4]
        # The receiver lost an applied message's key (purged too early):
        # the one that arrived first (which row that is depends on arrival
        # order, so the report names it).
        self.receiver_sql("DELETE FROM outbox_inbox WHERE key = (SELECT key FROM outbox_inbox"
                          " ORDER BY received_at, key LIMIT 1)")
        # An acknowledgement was lost: applied there, dead here.
        self.sql("UPDATE outbox SET status = 2, last_error = 'timeout' WHERE id = ?", (ack_lost,))
        # Another device shares the receiver.
        self.receiver_sql("INSERT INTO outbox_inbox(key, received_at)"
                          " VALUES('f' || hex(randomblob(8)), ?)", (int(time.time() * 1000),))

        code, report = self.reconcile()
        self.assertEqual(code, 3, report)
        self.assertEqual(len(report["missing_at_receiver"]), 1, report)
        self.assertEqual(report["applied_not_delivered"], [ack_lost])
        self.assertEqual(report["foreign_keys"], 1)
        lost = report["missing_at_receiver"][0]
        self.assertNotEqual(lost, ack_lost)

        code, report = self.reconcile("--requeue-missing", "--mark-applied")
        self.assertEqual(code, 3)
        self.assertEqual((report["requeued"], report["marked_delivered"]), (1, 1))
        self.assertEqual(self.status_of(ack_lost), 1)
        # outboxd sends the requeued message again; the receiver applies it.
        wait_until(lambda: self.status_of(lost) == 1 and len(self.receiving.keys().split()) == 7,
                   what="requeued message delivered again")
        code, report = self.reconcile()
        self.assertEqual(code, 0, report)
        self.assertEqual((report["agreeing"], report["foreign_keys"]), (6, 1))

        audit = json.loads(self.outboxctl("audit", "--json").stdout)
        actions = {(entry["action"], entry["rows"]) for entry in audit}
        self.assertEqual(actions, {("reconcile-requeue-missing", 1), ("reconcile-mark-applied", 1)})
        self.assertTrue(all(entry["actor"] and entry["host"] for entry in audit), audit)

    def test_receiver_exports_keys_by_window(self):
        # Recent times: the receiver's purge (30 days) must not take them.
        t = int(time.time() * 1000) - 60_000
        self.receiver_sql("INSERT INTO outbox_inbox(key, received_at, source) VALUES"
                          " ('a', ?, 'urn:one'), ('b', ?, 'urn:two'), ('c', ?, 'urn:one')",
                          (t + 100, t + 200, t + 300))
        self.assertEqual(self.receiving.keys("?source=urn:one").split(), ["a", "c"])
        self.assertEqual(self.receiving.keys(f"?since={t + 150}&until={t + 300}").split(), ["b"])
        with self.assertRaises(urllib.error.HTTPError) as refused:
            self.receiving.keys("?since=yesterday")
        self.assertEqual(refused.exception.code, 400)

    def test_since_older_than_the_retention_is_refused(self):
        self.assertEqual(self.outboxctl("init").returncode, 0)
        keys = os.path.join(self.dir, "empty.txt")
        open(keys, "w").close()
        result = self.outboxctl("reconcile", "--receiver-keys", keys, "--since", "-30d")
        self.assertEqual(result.returncode, 2)
        self.assertIn("--since:", result.stderr.decode())


class OperatorActionsTest(OutboxdTestCase):
    def ctl(self, *args, code=0):
        result = self.outboxctl(*args)
        self.assertEqual(result.returncode, code, (args, result.stderr))
        return result.stdout.decode() + result.stderr.decode()

    def test_every_action_and_purge_leaves_one_audit_row(self):
        self.ctl("init")
        a = self.insert("orders", "a")
        b = self.insert("orders", "b")
        c = self.insert("orders", "c")
        self.sql("UPDATE outbox SET created_at = created_at - 7200000 WHERE id = ?", (c,))
        self.assertIn("cancelled 1 row", self.ctl("cancel", "--id", str(a)))
        self.assertIn("marked delivered 1 row",
                      self.ctl("mark-delivered", "--topic", "orders", "--key", "b"))
        self.assertIn("cancelled 1 row", self.ctl("cancel", "--topic", "orders", "--status",
                                                  "pending", "--older-than", "1h"))
        self.assertIn("reset 1 dead row", self.ctl("retry", "--topic", "orders", "--key", "a"))
        self.assertIn("purged 1 delivered row", self.ctl("purge", "--older-than-ms", "0"))
        self.assertIn("purged 1 dead row", self.ctl("purge", "--dead", "--all"))
        shown = json.loads(self.ctl("list", "--topic", "orders", "--key", "a", "--json"))
        self.assertEqual([row["id"] for row in shown], [a])
        self.assertEqual(json.loads(self.ctl("show", "--topic", "orders", "--key", "a",
                                             "--json"))["status"], "pending")
        self.assertEqual(self.sql("SELECT dead_reason, last_error FROM outbox WHERE id = ?", (a,)),
                         [(None, "cancelled by operator")])
        audit = json.loads(self.ctl("audit", "--json"))
        self.assertEqual([(e["action"], e["rows"]) for e in audit],
                         [("cancel", 1), ("mark-delivered", 1), ("cancel", 1), ("retry", 1),
                          ("purge-delivered", 1), ("purge-dead", 1)])
        self.assertTrue(all(e["actor"] and e["host"] for e in audit), audit)
        self.assertEqual(json.loads(self.ctl("audit", "--since", "+1h", "--json")), [])
        self.assertIn("purge-dead", self.ctl("audit"))

    def test_cancel_and_mark_delivered_refuse_rows_in_flight(self):
        self.ctl("init")
        row = self.insert("orders", "busy")
        self.sql("UPDATE outbox SET status = 3, lease_owner = 'agent', lease_expires_at = ?"
                 " WHERE id = ?", (2**62, row))
        for action in ("cancel", "mark-delivered"):
            out = self.ctl(action, "--id", str(row), code=1)
            self.assertIn("in flight", out)
        self.assertEqual(self.status_of(row), 3)
        self.assertEqual(json.loads(self.ctl("audit", "--json")), [])


class ArchiveRestoreTest(OutboxdTestCase):
    HOSTILE = [
        (b"orders", b"plain", b'{"n":1}', None),
        (b"t\xff\xfe", b"k1", b"\x00\x01binary\xff", None),
        (b"orders", b"key \xc3(cut", b"payload", b'{"X-A":"v\xe9"}'),
        (b"orders", b"quote\"\nnewline", b"\xf0\x9f\x98", b'{"X-B":"ok"}'),
    ]

    def rows(self, db):
        conn = sqlite3.connect(db)
        try:
            return sorted(conn.execute(
                "SELECT CAST(topic AS BLOB), CAST(msg_key AS BLOB), CAST(payload AS BLOB),"
                " CAST(headers AS BLOB), schema_version, CAST(ordering_key AS BLOB)"
                " FROM outbox_message").fetchall())
        finally:
            conn.close()

    def test_hostile_rows_archive_as_valid_utf8_and_restore_byte_identical(self):
        self.assertEqual(self.outboxctl("init").returncode, 0)
        for topic, key, payload, headers in self.HOSTILE:
            # The attributes that shape a resend come back too (the ordering
            # key as raw as the message key).
            self.sql("INSERT INTO outbox(topic, msg_key, payload, headers, schema_version,"
                     " ordering_key) VALUES(CAST(? AS TEXT), CAST(? AS TEXT), ?,"
                     " CAST(? AS TEXT), '2', CAST(? AS TEXT))",
                     (topic, key, payload, headers, key))
        original = self.rows(self.db)
        archive = os.path.join(self.dir, "archive.jsonl")
        receiver = self.receiver()
        self.start(self.config({"*": {"url": receiver.url}}, sweep_interval_ms=100,
                               retention={"delivered_ms": 1, "interval_ms": 100,
                                          "archive_path": archive}))
        # A row the transport refuses (e.g. a header it will not send) goes
        # dead; the operator marks it delivered so that retention archives it.
        wait_until(lambda: self.count("status IN (0, 3)") == 0, what="every row sent or dead")
        for (row_id,) in self.sql("SELECT id FROM outbox WHERE status = 2"):
            self.assertEqual(self.outboxctl("mark-delivered", "--id", str(row_id)).returncode, 0)
        wait_until(lambda: self.count() == 0, what="every row archived and purged")
        files = sorted(glob.glob(archive + "*"))
        lines = []
        for path in files:
            with open(path, "rb") as f:
                data = f.read()
            if path.endswith(".gz"):
                import gzip
                data = gzip.decompress(data)
            for line in data.splitlines():
                lines.append(json.loads(line.decode("utf-8")))  # strict UTF-8
        self.assertEqual(len(lines), len(self.HOSTILE))

        restored_db = os.path.join(self.dir, "restored.db")
        subprocess.run([outboxd_test.OUTBOXCTL, "--db", restored_db, "init"], check=True,
                       capture_output=True)
        for path in files:
            result = subprocess.run([outboxd_test.OUTBOXCTL, "--db", restored_db,
                                     "archive-restore", path], capture_output=True)
            self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.rows(restored_db), original)
        # Again: every message is already there, nothing doubles.
        again = subprocess.run([outboxd_test.OUTBOXCTL, "--db", restored_db, "archive-restore",
                                files[0]], capture_output=True)
        self.assertIn(b"restored 0 rows", again.stdout)
        self.assertEqual(self.rows(restored_db), original)


class TopTest(OutboxdTestCase):
    def test_top_shows_topics_and_breakers_on_80x24_and_quits_with_q(self):
        if shutil.which("tmux") is None:
            self.skipTest("tmux is not installed")
        good = self.receiver()
        self.start(self.config({"orders": {"url": good.url},
                                "refunds": {"url": "http://127.0.0.1:1/down"}},
                               sweep_interval_ms=100))
        for i in range(3):
            self.insert("orders", f"o{i}")
        self.insert("refunds", "r0")
        wait_until(lambda: self.count("status = 1") == 3, what="orders delivered")
        socket_name = f"outbox-top-{os.getpid()}"
        tmux = ["tmux", "-L", socket_name]
        subprocess.run([*tmux, "new-session", "-d", "-s", "top", "-x", "80", "-y", "24",
                        f"{outboxd_test.OUTBOXCTL} --db {self.db} top"], check=True)
        self.addCleanup(subprocess.run, [*tmux, "kill-server"], capture_output=True)

        def screen():
            shown = subprocess.run([*tmux, "capture-pane", "-p", "-t", "top"],
                                   capture_output=True, text=True).stdout
            return shown if "refunds" in shown and "BREAKER" in shown else None

        shown = wait_until(screen, what="top showing topics and breakers")
        lines = shown.splitlines()
        self.assertLessEqual(len(lines), 24)
        self.assertTrue(all(len(line) <= 80 for line in lines), shown)
        self.assertIn("agents 1", shown)
        self.assertRegex(shown, r"refunds\s+[01]\s")  # pending or in flight, never dead
        subprocess.run([*tmux, "send-keys", "-t", "top", "q"], check=True)
        wait_until(lambda: subprocess.run([*tmux, "has-session", "-t", "top"],
                                          capture_output=True).returncode != 0,
                   what="top quit on q")


def main():
    global RECEIVER
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--outboxd", required=True)
    parser.add_argument("--outboxctl", required=True)
    parser.add_argument("--receiver", required=True)
    args, rest = parser.parse_known_args()
    outboxd_test.OUTBOXD = os.path.abspath(args.outboxd)
    outboxd_test.OUTBOXCTL = os.path.abspath(args.outboxctl)
    RECEIVER = os.path.abspath(args.receiver)
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)


if __name__ == "__main__":
    main()
