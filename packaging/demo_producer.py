#!/usr/bin/env python3
"""The demo's application: a shop that commits orders, written in Python with
nothing but the standard library, as "an application in any language" would.

Each order is ONE SQLite transaction on the shop's own file: the order row and
its outbox row commit together, or (a declined payment) roll back together.
outboxd, beside it, notices the commit and pushes the message to the receiver;
the shop never talks HTTP. Half-way through, the receiver goes down for a
moment (the outage file exists). With --nats-url the receiving end is a NATS
JetStream stream instead (demo.sh's DEMO_SINK=nats), read back at the end;
with --consumer-db it is a RabbitMQ queue whose consumer (demo_rabbitmq.py)
applies each message once by message_id into that SQLite file
(DEMO_SINK=rabbitmq).

Then it waits until everything committed has been applied by the receiver and
prints a summary. Exit status 0 when every committed order was delivered and
applied exactly once, no rolled-back order was sent and nothing is dead; 1
otherwise; 2 for bad arguments.

Latency is commit -> receipt: the time COMMIT returned here, to the time the
receiver applied the message (its orders_received.applied_at), both read from
this host's wall clock.
"""

import argparse
import json
import os
import random
import sqlite3
import sys
import time
import urllib.request

TOPIC = "order.created"
# confirmed_at: set by outboxd's on_delivered hook in the transaction that
# marks the order's message delivered ("confirmed by the receiver").
ORDERS_TABLE = """CREATE TABLE IF NOT EXISTS orders(
                    id INTEGER PRIMARY KEY, item TEXT NOT NULL, qty INTEGER NOT NULL,
                    total_cents INTEGER NOT NULL, placed_at INTEGER NOT NULL,
                    confirmed_at INTEGER)"""
ITEMS = ["coffee", "bagel", "croissant", "tea", "muffin", "juice"]


def now_ms():
    return time.time_ns() // 1_000_000


class Monitor:
    """Reads the progress: the outbox's states and the receiver's counters."""

    def __init__(self, db, receiver_url, jetstream=None, stream=None, consumer_db=None):
        # Read-only, so the monitor never takes a write lock from the shop or outboxd.
        self.db = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5, isolation_level=None)
        self.stats_url = (receiver_url or "").rstrip("/") + "/stats"
        self.jetstream = jetstream
        self.stream = stream
        self.consumer_db = consumer_db
        self.last_stats = {}

    def outbox_counts(self):
        counts = {0: 0, 1: 0, 2: 0, 3: 0}
        for status, count in self.db.execute("SELECT status, count(*) FROM outbox GROUP BY status"):
            counts[status] = count
        return {"pending": counts[0], "delivered": counts[1], "dead": counts[2],
                "in_flight": counts[3]}

    def receiver_stats(self):
        if self.jetstream is not None:
            self.last_stats = {"applied": self.jetstream.count(self.stream)}
            return self.last_stats
        if self.consumer_db is not None:
            try:
                consumer = sqlite3.connect(f"file:{self.consumer_db}?mode=ro", uri=True, timeout=5)
                applied = consumer.execute("SELECT count(*) FROM orders_received").fetchone()[0]
                duplicates = consumer.execute("SELECT count(*) FROM duplicates").fetchone()[0]
                consumer.close()
                self.last_stats = {"applied": applied, "duplicates": duplicates}
            except sqlite3.Error:
                pass  # the consumer has not created its tables yet
            return self.last_stats
        try:
            with urllib.request.urlopen(self.stats_url, timeout=2) as response:
                self.last_stats = json.load(response)
        except OSError:
            pass  # keep the last numbers; the summary says if they never came
        return self.last_stats


def progress_line(started, committed, rolled_back, counts, stats):
    receiver = "DOWN (outage)" if stats.get("outage") else "up"
    return (f"  {time.monotonic() - started:5.1f}s  committed {committed:4d}  "
            f"rolled back {rolled_back:3d}  delivered {counts['delivered']:4d}  "
            f"pending {counts['pending'] + counts['in_flight']:4d}  "
            f"applied {stats.get('applied', 0):4d}  "
            f"duplicates absorbed {stats.get('duplicates', 0):3d}  receiver {receiver}")


def percentile(sorted_values, p):
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return 0
    rank = max(1, -(-len(sorted_values) * p // 100))  # ceil(n * p / 100)
    return sorted_values[int(rank) - 1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="the shop's SQLite file (outbox schema in it)")
    parser.add_argument("--receiver-db", help="the receiver's SQLite file")
    parser.add_argument("--receiver-url", help="http://HOST:PORT of the receiver")
    parser.add_argument("--outage-file", help="exists while the receiver is down")
    parser.add_argument("--nats-url", help="nats://HOST:PORT: the receiving end is JetStream")
    parser.add_argument("--stream", default="ORDERS", help="the JetStream stream (with --nats-url)")
    parser.add_argument("--consumer-db",
                        help="the RabbitMQ consumer's SQLite file: the receiving end is a queue")
    parser.add_argument("--orders", type=int, default=300, help="orders to attempt")
    parser.add_argument("--rate", type=float, default=40, help="orders per second")
    parser.add_argument("--rollback-ratio", type=float, default=0.1,
                        help="share of orders whose transaction rolls back")
    parser.add_argument("--outage-s", type=float, default=1.5,
                        help="how long the receiver is down, half-way through (0: not at all)")
    parser.add_argument("--timeout-s", type=float, default=40,
                        help="give up waiting for delivery after this long")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    if args.orders < 1 or args.rate <= 0 or not 0 <= args.rollback_ratio < 1:
        parser.error("--orders, --rate and --rollback-ratio must be positive (ratio below 1)")
    brokered = args.nats_url is not None or args.consumer_db is not None
    if not brokered and None in (args.receiver_db, args.receiver_url, args.outage_file):
        parser.error("give --receiver-db, --receiver-url and --outage-file, --nats-url or "
                     "--consumer-db")
    if brokered:
        args.outage_s = 0  # a broker has no outage switch here
    rng = random.Random(args.seed)

    # isolation_level=None: the transactions below are exactly the SQL written.
    shop = sqlite3.connect(args.db, timeout=5, isolation_level=None)
    shop.execute(ORDERS_TABLE)
    jetstream = None
    if args.nats_url is not None:
        from demo_jetstream import JetStream  # beside this file
        jetstream = JetStream(args.nats_url)
    monitor = Monitor(args.db, args.receiver_url, jetstream, args.stream, args.consumer_db)

    committed = {}  # msg_key -> ms when COMMIT returned
    rolled_back = set()
    started = time.monotonic()
    next_progress = started
    outage_at = args.orders // 2
    outage_ends = None
    print(f"committing {args.orders} orders at {args.rate:g}/s "
          f"(about {args.rollback_ratio:.0%} roll back); the receiver goes down for "
          f"{args.outage_s:g}s after order {outage_at}", flush=True)

    for number in range(1, args.orders + 1):
        # Pace the orders; never sleep past the end of the outage.
        due = started + (number - 1) / args.rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        if number == outage_at and args.outage_s > 0:
            open(args.outage_file, "w").close()
            outage_ends = time.monotonic() + args.outage_s
            print(f"  {time.monotonic() - started:5.1f}s  -- receiver outage begins", flush=True)
        if outage_ends is not None and time.monotonic() >= outage_ends:
            os.remove(args.outage_file)
            outage_ends = None
            print(f"  {time.monotonic() - started:5.1f}s  -- receiver outage ends", flush=True)

        key = f"order-{number}"
        item, qty = rng.choice(ITEMS), rng.randint(1, 4)
        payload = json.dumps({"order": number, "key": key, "item": item, "qty": qty})
        # The pattern: the business row and the outbox row, one transaction.
        shop.execute("BEGIN IMMEDIATE")
        shop.execute("INSERT INTO orders(id, item, qty, total_cents, placed_at) VALUES(?,?,?,?,?)",
                     (number, item, qty, qty * 350, now_ms()))
        shop.execute("INSERT INTO outbox(topic, msg_key, payload) VALUES(?, ?, ?)",
                     (TOPIC, key, payload))
        if rng.random() < args.rollback_ratio:
            shop.execute("ROLLBACK")  # payment declined: neither row exists, nothing is sent
            rolled_back.add(key)
        else:
            shop.execute("COMMIT")
            committed[key] = now_ms()

        if time.monotonic() >= next_progress:
            print(progress_line(started, len(committed), len(rolled_back),
                                monitor.outbox_counts(), monitor.receiver_stats()), flush=True)
            next_progress += 0.5

    if outage_ends is not None:  # more orders than the outage lasted
        time.sleep(max(0.0, outage_ends - time.monotonic()))
        os.remove(args.outage_file)
        print(f"  {time.monotonic() - started:5.1f}s  -- receiver outage ends", flush=True)

    print("all orders placed; waiting for delivery", flush=True)
    deadline = time.monotonic() + args.timeout_s
    while True:
        counts = monitor.outbox_counts()
        stats = monitor.receiver_stats()
        done = (counts["delivered"] + counts["dead"] == len(committed)
                and stats.get("applied", 0) >= len(committed))
        if done or time.monotonic() >= deadline:
            break
        if time.monotonic() >= next_progress:
            print(progress_line(started, len(committed), len(rolled_back), counts, stats),
                  flush=True)
            next_progress += 0.5
        time.sleep(0.05)
    print(progress_line(started, len(committed), len(rolled_back), counts, stats), flush=True)
    if not done:
        print(f"gave up after waiting {args.timeout_s:g}s", flush=True)

    if jetstream is not None:
        # The stream says what landed (by Nats-Msg-Id), and when it was stored.
        landed = jetstream.messages(args.stream)
        applied_rows = [(body, stored_at) for _, body, stored_at in landed]
        applied_ids = (len(landed), len({msg_id for msg_id, _, _ in landed}))
    else:
        # The receiver's (or the queue consumer's) own table says what was
        # applied, and when.
        applied_db = args.consumer_db or args.receiver_db
        receiver = sqlite3.connect(f"file:{applied_db}?mode=ro", uri=True, timeout=5)
        applied_rows = receiver.execute("SELECT body, applied_at FROM orders_received").fetchall()
        applied_ids = receiver.execute(
            "SELECT count(*), count(DISTINCT message_id) FROM orders_received").fetchone()
    applied_keys = {}
    for body, applied_at in applied_rows:
        key = json.loads(body)["key"]
        applied_keys.setdefault(key, applied_at)
    latencies = sorted(applied_keys[k] - committed[k] for k in committed if k in applied_keys)
    applied_twice = applied_ids[0] - applied_ids[1]
    rolled_back_sent = len(rolled_back & applied_keys.keys())
    missing = len(committed.keys() - applied_keys.keys())

    # The completion hook: an order is confirmed exactly when delivered.
    confirmed, disagreeing = shop.execute(
        "SELECT count(confirmed_at), "
        "       count(*) FILTER (WHERE (confirmed_at IS NOT NULL) <>"
        "         (SELECT status = 1 FROM outbox WHERE topic = ? AND msg_key = 'order-' || orders.id))"
        " FROM orders", (TOPIC,)).fetchone()

    ok = (counts["delivered"] == len(committed) and missing == 0 and applied_twice == 0
          and rolled_back_sent == 0 and counts["dead"] == 0 and confirmed == len(committed)
          and disagreeing == 0)
    width = 34
    print()
    print("== summary")
    print(f"{'committed (order + outbox row)':{width}} {len(committed):6d}")
    print(f"{'rolled back (never sent)':{width}} {len(rolled_back):6d}"
          f"   reached the receiver: {rolled_back_sent}")
    print(f"{'delivered':{width}} {counts['delivered']:6d}"
          f"   applied by the receiver: {len(applied_keys)}, missing: {missing}")
    print(f"{'applied twice':{width}} {applied_twice:6d}")
    print(f"{'confirmed by the receiver':{width}} {confirmed:6d}"
          f"   (on_delivered; disagreeing with the outbox: {disagreeing})")
    print(f"{'duplicates absorbed by the inbox':{width}} {stats.get('duplicates', 0):6d}"
          f"   (answers lost on purpose: {stats.get('lost_acks', 0)})")
    print(f"{'refused by the receiver':{width}} "
          f"{stats.get('outage_refusals', 0) + stats.get('injected_failures', 0):6d}"
          f"   (outage: {stats.get('outage_refusals', 0)}, "
          f"injected 5xx: {stats.get('injected_failures', 0)})")
    print(f"{'dead':{width}} {counts['dead']:6d}")
    if latencies:
        print(f"{'commit -> receipt latency':{width}} "
              f"p50 {percentile(latencies, 50)} ms, p99 {percentile(latencies, 99)} ms, "
              f"max {latencies[-1]} ms (over {len(latencies)} orders)")
    print("result: " + ("OK, every committed order was applied exactly once" if ok else "FAILED"),
          flush=True)
    return 0 if ok else 1


def create_orders_table(db):
    """For demo.sh: the table must exist before outboxd checks its hook."""
    connection = sqlite3.connect(db, timeout=5, isolation_level=None)
    connection.execute(ORDERS_TABLE)
    connection.close()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--create-orders-table":
        create_orders_table(sys.argv[2])
        sys.exit(0)
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
