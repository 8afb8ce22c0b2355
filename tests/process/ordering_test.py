#!/usr/bin/env python3
"""Per-key ordering through the real outboxd (docs/ordering.md): the order of
first arrival per key survives SIGKILLs, and an outboxd whose ordering
disagrees with the one the database records refuses to start.

    ordering_test.py --outboxd PATH --outboxctl PATH [unittest arguments]

Python 3 standard library only; the helpers are outboxd_test.py's.
"""

import os
import sqlite3
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import outboxd_test  # noqa: E402  (the process-test helpers)
from outboxd_test import OutboxdTestCase, wait_until  # noqa: E402

KEYS = 100
PER_KEY = 10
KILLS = 10


def first_arrivals(bodies):
    """{key: [seq, ...]} in order of first arrival; bodies are b"key#seq"."""
    seen = {}
    for body in bodies:
        key, seq = body.decode().rsplit("#", 1)
        order = seen.setdefault(key, [])
        if int(seq) not in order:
            order.append(int(seq))
    return seen


class OrderingTest(OutboxdTestCase):
    def ordered_config(self, url, dead_head="block", **top_level):
        return self.config(
            {"t": {"url": url, "workers": 8, "timeout_ms": 2000,
                   "retry": {"first_interval_ms": 10, "max_interval_ms": 50, "jitter": 0},
                   "ordering": {"by": "key", "dead_head": dead_head}}},
            **top_level)

    def enqueue_all(self):
        db = sqlite3.connect(self.db, timeout=10, isolation_level=None)
        try:
            db.execute("BEGIN IMMEDIATE")
            for seq in range(PER_KEY):
                for k in range(KEYS):
                    body = f"k{k}#{seq}".encode()
                    db.execute(
                        "INSERT INTO outbox(topic, msg_key, payload, ordering_key)"
                        " VALUES ('t', ?, ?, ?)", (body.decode(), body, f"k{k}"))
            db.execute("COMMIT")
        finally:
            db.close()

    def test_first_arrivals_keep_commit_order_across_ten_sigkills(self):
        receiver = self.receiver()
        config = self.ordered_config(receiver.url, sweep_interval_ms=50, lease_timeout_ms=5000)
        daemon = self.start(config)
        self.enqueue_all()
        total = KEYS * PER_KEY
        killed_while_sending = 0
        for kill in range(KILLS):
            # Kill while sends are under way: after some more arrivals.
            target = min(total, receiver.count() + total // (KILLS * 2))
            wait_until(lambda: receiver.count() >= target or self.count("status <> 1") == 0,
                       timeout=60, what=f"deliveries before kill {kill + 1}")
            if self.count("status <> 1") > 0:
                killed_while_sending += 1
            daemon.kill()
            daemon = self.start(config)
        wait_until(lambda: self.count("status <> 1") == 0, timeout=120, what="everything delivered")
        # Most kills must hit a daemon with work left, or the test proves little.
        self.assertGreaterEqual(killed_while_sending, KILLS // 2)
        print(f"kills with work left: {killed_while_sending}; requests {receiver.count()}"
              f" for {total} messages", file=sys.stderr)
        arrivals = first_arrivals(receiver.bodies())
        self.assertEqual(len(arrivals), KEYS)
        for key, order in arrivals.items():
            self.assertEqual(order, list(range(PER_KEY)), f"key {key}: first arrivals {order}")

    def test_outboxd_with_another_ordering_than_the_database_refuses_to_start(self):
        receiver = self.receiver()
        daemon = self.start(self.ordered_config(receiver.url))
        daemon.signal(outboxd_test.signal.SIGTERM)
        self.assertEqual(daemon.wait_exit(), 0)

        self.write_config(self.ordered_config(receiver.url, dead_head="skip"))
        other = outboxd_test.Daemon(self.db, self.config_path)
        self.daemons.append(other)
        self.assertEqual(other.wait_exit(), 2)  # a bad config, as at parse time
        refusal = [line for line in other.log() if 'topics."t".ordering' in line]
        self.assertEqual(len(refusal), 1, "\n".join(other.log()))
        self.assertIn("records ordering by key, dead_head block", refusal[0])

        forgot = self.outboxctl("ordering", "--forget", "t")
        self.assertEqual(forgot.returncode, 0, forgot.stderr)
        self.start(self.ordered_config(receiver.url, dead_head="skip"))
        listed = self.outboxctl("ordering")
        self.assertIn(b"by key, dead_head skip", listed.stdout)


if __name__ == "__main__":
    outboxd_test.main()  # runs this file's tests with outboxd_test's flags
