#!/usr/bin/env python3
"""Reconciliation against a real receiver database: outboxd delivers to the
example receiver (outbox-receiver, store::Inbox), differences are planted on
both sides, and `outboxctl reconcile` must find exactly them, repair them
with its flags, and audit the repairs. Also the operator actions through the
command line, each leaving one audit row.

    reconcile_test.py --outboxd PATH --outboxctl PATH --receiver PATH [unittest arguments]
"""

import argparse
import json
import os
import subprocess
import sys
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
        self.receiver_sql("INSERT INTO outbox_inbox(key, received_at) VALUES('f' || hex(randomblob(8)), 1)")

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
        self.receiver_sql("INSERT INTO outbox_inbox(key, received_at, source) VALUES"
                          " ('a', 100, 'urn:one'), ('b', 200, 'urn:two'), ('c', 300, 'urn:one')")
        self.assertEqual(self.receiving.keys("?source=urn:one").split(), ["a", "c"])
        self.assertEqual(self.receiving.keys("?since=150&until=300").split(), ["b"])
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
