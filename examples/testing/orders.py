"""The orders application of docs/testing.md, in Python: placing an order
writes the order and its order.created message in one transaction."""

import json

import edge_outbox

SCHEMA = """
CREATE TABLE IF NOT EXISTS orders(id INTEGER PRIMARY KEY, customer TEXT NOT NULL,
                                  item TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'placed');
CREATE TABLE IF NOT EXISTS stock(item TEXT PRIMARY KEY, left INTEGER NOT NULL CHECK (left >= 0));
"""


def create_schema(conn):
    conn.executescript(SCHEMA)


def place_order(conn, customer, item):
    """Returns the order's id. An item out of stock raises
    sqlite3.IntegrityError and rolls back the order and its message."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        order_id = conn.execute("INSERT INTO orders(customer, item) VALUES(?, ?)",
                                (customer, item)).lastrowid
        payload = json.dumps({"order": order_id, "customer": customer, "item": item})
        edge_outbox.enqueue(conn, "order.created", f"order-{order_id}", payload,
                            headers={"X-Customer": customer})
        conn.execute("UPDATE stock SET left = left - 1 WHERE item = ?", (item,))
        conn.execute("COMMIT")
        return order_id
    except BaseException:
        conn.execute("ROLLBACK")
        raise
