#!/usr/bin/env python3
"""docs/testing.md's Python example: the orders application's tests with
edge_outbox.testing, in memory, nothing sent.

    EDGE_OUTBOX_OUTBOXCTL=build/agent/outboxctl python3 -m unittest test_orders
"""

import os
import sqlite3
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "packaging", "python"))

import orders  # noqa: E402
from edge_outbox import testing  # noqa: E402


class OrdersTest(unittest.TestCase):
    def setUp(self):
        self.conn = testing.connect()
        orders.create_schema(self.conn)
        self.conn.execute("INSERT INTO stock VALUES('book', 10), ('lamp', 0)")

    def tearDown(self):
        self.conn.close()

    def test_placing_an_order_enqueues_order_created_with_its_payload(self):
        order_id = orders.place_order(self.conn, "c-7", "book")
        testing.assert_enqueued(self.conn, "order.created", key=f"order-{order_id}",
                                payload={"order": order_id, "customer": "c-7", "item": "book"},
                                headers={"X-Customer": "c-7"}, count=1)

    def test_an_order_rolled_back_sends_nothing(self):
        with self.assertRaises(sqlite3.IntegrityError):
            orders.place_order(self.conn, "c-7", "lamp")  # out of stock
        testing.assert_nothing_enqueued(self.conn)

    def test_orders_are_enqueued_in_the_order_they_were_placed(self):
        for _ in range(3):
            orders.place_order(self.conn, "c-7", "book")
        keys = [m.key for m in testing.enqueued(self.conn, "order.created")]
        self.assertEqual(keys, ["order-1", "order-2", "order-3"])


if __name__ == "__main__":
    unittest.main()
