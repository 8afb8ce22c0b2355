#!/usr/bin/env python3
"""edge_outbox.testing (packaging/python): in-memory databases with the
schema of the outboxctl under test, and what its assertions say.

    testing_module_test.py --outboxctl PATH [unittest arguments]
"""

import argparse
import os
import re
import sqlite3
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "packaging", "python"))

import edge_outbox  # noqa: E402
from edge_outbox import testing  # noqa: E402


class ConnectTest(unittest.TestCase):
    def test_each_connection_is_a_fresh_database_with_the_schema(self):
        a, b = testing.connect(), testing.connect()
        edge_outbox.enqueue(a, "t", "k", b"{}", standalone=True)
        self.assertEqual(len(testing.enqueued(a)), 1)
        self.assertEqual(testing.enqueued(b), [])
        version = a.execute("SELECT value FROM outbox_meta WHERE key = 'schema_version'")
        self.assertGreaterEqual(int(version.fetchone()[0]), 7)

    def test_the_schemas_checks_apply(self):
        conn = testing.connect()
        with self.assertRaises(edge_outbox.ValidationError):
            edge_outbox.enqueue(conn, "", "k", b"{}", standalone=True)

    def test_a_missing_outboxctl_is_named(self):
        saved, testing._template = testing._template, None
        old = os.environ.get("EDGE_OUTBOX_OUTBOXCTL")
        os.environ["EDGE_OUTBOX_OUTBOXCTL"] = "/nonexistent/outboxctl"
        try:
            with self.assertRaises((RuntimeError, OSError)) as raised:
                testing.connect()
            self.assertIn("outboxctl", str(raised.exception))
        finally:
            testing._template = saved
            if old is None:
                del os.environ["EDGE_OUTBOX_OUTBOXCTL"]
            else:
                os.environ["EDGE_OUTBOX_OUTBOXCTL"] = old


class AssertionsTest(unittest.TestCase):
    def setUp(self):
        self.conn = testing.connect()
        self.conn.execute("BEGIN IMMEDIATE")
        edge_outbox.enqueue(self.conn, "order.created", "order-1", '{"order": 1}',
                            headers={"X-Tenant": "acme"})
        edge_outbox.enqueue(self.conn, "order.created", "order-2", b'{"order":2}')
        self.conn.execute("COMMIT")
        self.conn.execute("BEGIN IMMEDIATE")
        edge_outbox.enqueue(self.conn, "order.created", "rolled-back", b"{}")
        self.conn.execute("ROLLBACK")

    def test_enqueued_lists_committed_messages_in_commit_order(self):
        messages = testing.enqueued(self.conn, "order.created")
        self.assertEqual([m.key for m in messages], ["order-1", "order-2"])
        self.assertEqual(messages[0].payload, b'{"order": 1}')
        self.assertEqual(messages[0].headers, {"X-Tenant": "acme"})
        self.assertEqual(messages[0].status, "pending")
        self.assertEqual(testing.enqueued(self.conn, "order.paid"), [])

    def test_payloads_compare_as_bytes_or_as_json(self):
        testing.assert_enqueued(self.conn, "order.created", payload=b'{"order": 1}')
        testing.assert_enqueued(self.conn, "order.created", payload={"order": 2})
        testing.assert_enqueued(self.conn, "order.created", key="order-1",
                                headers={"X-Tenant": "acme"}, count=1)
        testing.assert_enqueued(self.conn, "order.created", count=2)

    def test_a_failed_assertion_lists_what_the_outbox_holds(self):
        with self.assertRaises(AssertionError) as raised:
            testing.assert_enqueued(self.conn, "order.created", key="order-3")
        self.assertIn("key=order-1", str(raised.exception))
        self.assertIn("found 0", str(raised.exception))
        with self.assertRaises(AssertionError):
            testing.assert_enqueued(self.conn, "order.created", count=1)
        with self.assertRaises(AssertionError):
            testing.assert_nothing_enqueued(self.conn, "order.created")
        testing.assert_nothing_enqueued(self.conn, "order.paid")

    def test_bad_arguments_are_named(self):
        with self.assertRaisesRegex(ValueError, "topic"):
            testing.assert_enqueued(self.conn, "")
        with self.assertRaisesRegex(ValueError, "count"):
            testing.assert_enqueued(self.conn, "order.created", count=-1)


class DocsTest(unittest.TestCase):
    """docs/testing.md quotes the example tests as they are."""

    def test_the_pages_examples_are_the_tested_files(self):
        with open(os.path.join(ROOT, "docs", "testing.md"), encoding="utf-8") as f:
            page = f.read()
        quoted = {"cpp": "orders_test.cc", "python": "test_orders.py"}
        blocks = re.findall(r"```(cpp|python)\n(.*?)```", page, re.S)
        checked = 0
        for language, block in blocks:
            if not block.startswith(("// Story", "class OrdersTest")):
                continue  # a fragment, not a quoted test
            path = os.path.join(ROOT, "examples", "testing", quoted[language])
            with open(path, encoding="utf-8") as f:
                self.assertIn(block, f.read(), f"docs/testing.md differs from {path}")
            checked += 1
        self.assertEqual(checked, 2)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--outboxctl", required=True)
    args, rest = parser.parse_known_args()
    os.environ["EDGE_OUTBOX_OUTBOXCTL"] = args.outboxctl
    unittest.main(argv=[sys.argv[0]] + rest)
