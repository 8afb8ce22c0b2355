#!/usr/bin/env python3
"""Issue #10 crash test: outboxd killed with SIGKILL while a foreign-language
producer commits.

    crash_test.py --outboxd PATH --outboxctl PATH [--messages N] [--kills K] [--seed S]

A Python producer (stdlib sqlite3, plain SQL, one application row beside each
batch of outbox rows) commits N messages and rolls back about one
transaction in ten. Meanwhile outboxd is killed with SIGKILL K times, at
random moments drawn from the seed (sometimes while it is still starting),
and started again at once. A receiver on 127.0.0.1, port 0, counts requests
per Idempotency-Key.

Checked at the end:
  - every committed message arrived at least once, no rolled-back one ever;
  - the database holds exactly the committed rows, all delivered, none dead;
  - every duplicate is explained: its arrivals straddle a kill, and there are
    no more duplicates than rows the killed daemons left in flight.

crash_budget is set to 1000: a kill of the agent is not the message's fault,
but the agent counts a crash against a row that was alone in flight (as
rows taken back from a killed daemon are, while they are resent one by one),
and with the default budget of 3 a row unlucky enough to be alone in flight
at three kills would be dead-lettered. The test reports the crashes counted.

Python 3 standard library only. Waits poll with a deadline; the only sleeps
are the random intervals between kills, which are the scenario itself.
"""

import argparse
import http.server
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

# Emulated runs (packaging/dev.sh cross) are 5-20x slower: deadlines scale.
DEADLINE_S = 90.0 * float(os.environ.get("OUTBOX_TEST_SLOWDOWN", "1"))


class Receiver:
    """Answers 200 to every POST and records when each message arrived."""

    def __init__(self):
        self.lock = threading.Lock()
        self.arrivals = {}  # X-Msg-Key -> [monotonic time, ...]
        self.ids = {}  # X-Msg-Key -> Idempotency-Key
        self.inconsistent = []  # keys seen with two different idempotency keys
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                self.rfile.read(length)
                key = self.headers.get("X-Msg-Key", "")
                idempotency_key = self.headers.get("Idempotency-Key", "")
                now = time.monotonic()
                with receiver.lock:
                    receiver.arrivals.setdefault(key, []).append(now)
                    if receiver.ids.setdefault(key, idempotency_key) != idempotency_key:
                        receiver.inconsistent.append(key)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                # A killed daemon resets its kept-alive connections: expected.
                if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
                    super().handle_error(request, client_address)

        self.server = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}/events"

    def snapshot(self):
        with self.lock:
            return {k: list(v) for k, v in self.arrivals.items()}, dict(self.ids), list(
                self.inconsistent)

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


class Producer(threading.Thread):
    """Commits `target` messages in transactions of 1..20, rolling back about
    one in ten. Keys: m-<n> for committed messages, r-<n> for rolled-back ones."""

    def __init__(self, db, target, seed):
        super().__init__(daemon=True)
        self.db = db
        self.target = target
        self.random = random.Random(seed)
        self.committed = []
        self.rolled_back = []
        self.error = None
        self.done = threading.Event()

    def run(self):
        try:
            conn = sqlite3.connect(self.db, timeout=30, isolation_level=None)
            conn.execute("CREATE TABLE IF NOT EXISTS orders(id INTEGER PRIMARY KEY, note TEXT)")
            sequence = 0
            while len(self.committed) < self.target:
                size = min(self.random.randint(1, 20), self.target - len(self.committed))
                roll_back = self.random.random() < 0.1
                prefix = "r" if roll_back else "m"
                keys = [f"{prefix}-{sequence + i}" for i in range(size)]
                sequence += size
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("INSERT INTO orders(note) VALUES (?)", (keys[0],))
                conn.executemany(
                    "INSERT INTO outbox(topic, msg_key, payload, headers) VALUES ('t', ?, ?, ?)",
                    [(k, json.dumps({"key": k}).encode(), json.dumps({"X-Msg-Key": k}))
                     for k in keys])
                if roll_back:
                    conn.execute("ROLLBACK")
                    self.rolled_back.extend(keys)
                else:
                    conn.execute("COMMIT")
                    self.committed.extend(keys)
                # About 2000 messages a second, so that the kills land while
                # the producer is still committing.
                time.sleep(size / 2000.0)
            conn.close()
        except Exception as e:  # reported by the main thread
            self.error = e
        finally:
            self.done.set()


def wait_until(predicate, timeout, what):
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def query(db, sql):
    conn = sqlite3.connect(db, timeout=30, isolation_level=None)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--outboxd", required=True)
    parser.add_argument("--outboxctl", required=True)
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=int(os.environ.get("OUTBOX_CRASH_SEED", "10")))
    args = parser.parse_args()
    started = time.monotonic()
    failures = []

    with tempfile.TemporaryDirectory(prefix="outbox-crash-") as tmp:
        db = os.path.join(tmp, "app.db")
        config_path = os.path.join(tmp, "outboxd.json")
        log_path = os.path.join(tmp, "outboxd.log")
        subprocess.run([args.outboxctl, "--db", db, "init"], check=True, capture_output=True)
        receiver = Receiver()
        with open(config_path, "w") as f:
            json.dump({
                "sweep_interval_ms": 200,
                "crash_budget": 1000,
                "metrics": {"listen": ""},
                "log": {"level": "info"},
                "topics": {"t": {"url": receiver.url, "workers": 4, "timeout_ms": 10000,
                                 "retry": {"first_interval_ms": 50, "max_interval_ms": 1000}}},
            }, f)
        log = open(log_path, "ab")

        def start():
            return subprocess.Popen([args.outboxd, "--db", db, "--config", config_path],
                                    stdout=subprocess.DEVNULL, stderr=log)

        rng = random.Random(args.seed)
        producer = Producer(db, args.messages, args.seed + 1)
        daemon = start()
        producer.start()
        kill_times = []
        restart_times = []
        left_in_flight = []
        try:
            for _ in range(args.kills):
                # A random moment: sometimes during start-up and take-back,
                # mostly while delivering.
                time.sleep(rng.uniform(0.05, 0.9))
                if daemon.poll() is not None:
                    failures.append(f"outboxd exited by itself with {daemon.returncode}")
                    daemon = start()
                    continue
                kill_times.append(time.monotonic())
                daemon.send_signal(signal.SIGKILL)
                daemon.wait()
                left_in_flight.append(query(db, "SELECT count(*) FROM outbox WHERE status = 3")[0][0])
                restart_times.append(time.monotonic())
                daemon = start()

            producer.done.wait(DEADLINE_S)
            if producer.error:
                raise producer.error
            committed = len(producer.committed)
            wait_until(lambda: query(db, "SELECT count(*) FROM outbox WHERE status <> 1")[0][0] == 0,
                       DEADLINE_S, "every row delivered")
            daemon.send_signal(signal.SIGTERM)
            status = daemon.wait(30)
            if status != 0:
                failures.append(f"outboxd exited {status} after SIGTERM")
        finally:
            if daemon.poll() is None:
                daemon.kill()
                daemon.wait()
            log.close()
            receiver.close()

        arrivals, ids, inconsistent = receiver.snapshot()
        rows = dict(query(db, "SELECT status, count(*) FROM outbox GROUP BY status"))
        total_rows = query(db, "SELECT count(*) FROM outbox")[0][0]
        crashes, max_crashes = query(db, "SELECT coalesce(sum(crashes), 0), coalesce(max(crashes), 0) FROM outbox")[0]

        committed_set = set(producer.committed)
        missing = [k for k in producer.committed if k not in arrivals]
        leaked = [k for k in producer.rolled_back if k in arrivals]
        unknown = [k for k in arrivals if k not in committed_set]
        duplicates = sum(len(v) - 1 for k, v in arrivals.items() if k in committed_set)
        # Every repeat of a message must straddle a kill: it arrived before
        # the next daemon started (a request of the dying one may still be
        # read after the SIGKILL), the daemon died before recording the
        # acknowledgement, and a later one sent it again.
        unexplained = []
        for key, times in arrivals.items():
            for earlier, later in zip(times, times[1:]):
                if not any(earlier <= restart and later >= kill
                           for kill, restart in zip(kill_times, restart_times)):
                    unexplained.append(key)
        if missing:
            failures.append(f"{len(missing)} committed messages never arrived, e.g. {missing[:5]}")
        if leaked:
            failures.append(f"{len(leaked)} rolled-back messages arrived, e.g. {leaked[:5]}")
        if unknown:
            failures.append(f"{len(unknown)} unknown keys arrived, e.g. {unknown[:5]}")
        if inconsistent:
            failures.append(f"idempotency key changed between deliveries of {inconsistent[:5]}")
        if len(set(ids.values())) != len(ids):
            failures.append("two messages shared an idempotency key")
        if total_rows != committed or rows.get(1, 0) != committed:
            failures.append(f"database: {total_rows} rows, by status {rows}, expected "
                            f"{committed} delivered")
        if rows.get(2, 0):
            failures.append(f"{rows[2]} rows dead")
        if unexplained:
            failures.append(f"{len(unexplained)} repeats not straddling a kill, e.g. "
                            f"{unexplained[:5]}")
        if duplicates > sum(left_in_flight):
            failures.append(f"{duplicates} duplicates but only {sum(left_in_flight)} rows were "
                            "in flight at the kills")

        print(f"crash test (seed {args.seed}): {committed} messages committed by a Python "
              f"producer, {len(producer.rolled_back)} rolled back (never sent); outboxd "
              f"SIGKILLed {len(kill_times)} times, leaving {sum(left_in_flight)} rows in flight; "
              f"{sum(len(v) for v in arrivals.values())} requests, {duplicates} duplicates (every "
              f"one straddling a kill); {rows.get(1, 0)} delivered, {rows.get(2, 0)} dead; "
              f"crashes counted against rows: {crashes} (max {max_crashes} on one row); "
              f"{time.monotonic() - started:.1f} s")
        if failures:
            with open(log_path, "rb") as f:
                tail = f.read().decode(errors="replace").splitlines()[-40:]
            print("outboxd log (last lines):\n  " + "\n  ".join(tail), file=sys.stderr)
            for failure in failures:
                print("FAIL: " + failure, file=sys.stderr)
            return 1
        return 0


if __name__ == "__main__":
    sys.exit(main())
