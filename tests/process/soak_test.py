#!/usr/bin/env python3
"""Soak: outboxd for OUTBOX_SOAK_MINUTES (default 30) under a steady producer,
a receiver that fails 10 % of requests and goes away for 60 s every 5
minutes, with retention on.

    OUTBOX_SOAK=1 soak_test.py --outboxd PATH --outboxctl PATH

Without OUTBOX_SOAK=1 it exits 77 (skipped) at once, so that neither the
default test run nor a bare `ctest` pays half an hour for it. A shorter run
scales every period with the duration (the outage is 1/30 of the run, every
1/6 of it; "minute 10" is a third of the run).

Judged over the last two thirds of the run (the last 20 of 30 minutes):
outboxd's RSS grows by less than 1 MiB, its threads and open descriptors
stay within what they were before, the -wal file stays under twice its size
at the start of that window (floored at one automatic checkpoint's worth of
pages, which the WAL may always reach), and the delivered rows kept stay
under the retention bound. At the end every produced message was received
(possibly twice), none is dead, /healthz was 200 and the sweeper never
failed. Figures, slopes included, go to stdout as one JSON object.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import outboxd_test  # noqa: E402  (Daemon, wait_until, parse_prometheus)

SKIP = 77
RATE_PER_S = 20           # messages the producer commits per second
FAIL_RATIO = 0.10         # requests the receiver answers 500
AUTOCHECKPOINT_PAGES = 1000  # SQLite's default wal_autocheckpoint


class FlakyReceiver:
    """Answers 500 to FAIL_RATIO of requests (seeded), 200 to the rest, and
    records every key it acknowledged. Down() closes the listening socket
    (connections are refused, as when the receiver's host is away); Up()
    listens again on the same port."""

    def __init__(self, seed):
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self.acknowledged = {}  # key -> times acknowledged
        self.requests = 0
        self.failed = 0
        self.port = 0
        self._server = None
        self._thread = None
        self.up()

    def _handler(self):
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                key = json.loads(body)["k"]
                with receiver._lock:
                    receiver.requests += 1
                    fail = receiver._random.random() < FAIL_RATIO
                    if fail:
                        receiver.failed += 1
                    else:
                        receiver.acknowledged[key] = receiver.acknowledged.get(key, 0) + 1
                self.send_response(500 if fail else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        return Handler

    def up(self):
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever)
        self._thread.start()

    def down(self):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/events"

    def keys(self):
        with self._lock:
            return dict(self.acknowledged)


class Producer:
    """Commits RATE_PER_S messages a second, in batches every 100 ms, with
    plain SQL on its own connection as an application would."""

    def __init__(self, db):
        self._db = db
        self._stop = threading.Event()
        self.produced = []
        self._thread = threading.Thread(target=self._run)
        self._thread.start()

    def _run(self):
        db = sqlite3.connect(self._db, timeout=30, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        per_batch = max(1, RATE_PER_S // 10)
        n = 0
        next_batch = time.monotonic()
        while not self._stop.is_set():
            db.execute("BEGIN IMMEDIATE")
            keys = [f"m{n + i}" for i in range(per_batch)]
            for key in keys:
                db.execute("INSERT INTO outbox(topic, msg_key, payload) VALUES ('soak', ?, ?)",
                           (key, json.dumps({"k": key, "pad": "x" * 200})))
            db.execute("COMMIT")
            self.produced.extend(keys)
            n += per_batch
            next_batch += 0.1
            # Paces the producer; nothing waits on it for correctness.
            self._stop.wait(max(0.0, next_batch - time.monotonic()))
        db.close()

    def stop(self):
        self._stop.set()
        self._thread.join()


def proc_status(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            fields[name] = value.split()
    return int(fields["VmRSS"][0]) * 1024, int(fields["Threads"][0])


def file_size(path):
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0


def slope_per_minute(samples, field):
    """Least-squares slope of samples[field] against minutes."""
    xs = [s["t"] / 60 for s in samples]
    ys = [s[field] for s in samples]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    return 0.0 if var == 0 else sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--outboxd", required=True)
    parser.add_argument("--outboxctl", required=True)
    args = parser.parse_args()
    if os.environ.get("OUTBOX_SOAK") != "1":
        print("soak skipped: set OUTBOX_SOAK=1 to run it (packaging/dev.sh soak)")
        return SKIP
    outboxd_test.OUTBOXD = args.outboxd
    minutes = float(os.environ.get("OUTBOX_SOAK_MINUTES", "30"))
    if minutes <= 0:
        raise SystemExit(f"OUTBOX_SOAK_MINUTES: expected a positive number, got {minutes}")
    total_s = minutes * 60
    outage_every_s = total_s / 6     # 5 min of 30
    outage_s = total_s / 30          # 60 s of 30 min
    window_start_s = total_s / 3     # minute 10 of 30
    sample_every_s = max(1.0, total_s / 360)
    retention_ms = int(max(10.0, total_s / 30) * 1000)
    retention_interval_ms = max(1000, retention_ms // 6)

    work = tempfile.TemporaryDirectory(prefix="outbox-soak-")
    db = os.path.join(work.name, "app.db")
    subprocess_ok = subprocess.run(
        [args.outboxctl, "--db", db, "init"], capture_output=True, text=True)
    if subprocess_ok.returncode != 0:
        raise SystemExit("outboxctl init failed: " + subprocess_ok.stderr)
    receiver = FlakyReceiver(seed=20)
    config = {
        "sweep_interval_ms": 500,
        "metrics": {"listen": "127.0.0.1:0"},
        "log": {"level": "info"},  # wait_ready reads the listening line
        "retention": {"delivered_ms": retention_ms, "interval_ms": retention_interval_ms},
        "topics": {"soak": {
            "url": receiver.url,
            "workers": 2,
            "retry": {"first_interval_ms": 200, "max_interval_ms": 5000,
                      "max_attempts": 1000000, "jitter": 0.2},
            "breaker": {"failure_threshold": 5, "open_ms": 1000, "max_open_ms": 5000},
        }},
    }
    config_path = os.path.join(work.name, "outboxd.json")
    with open(config_path, "w") as f:
        json.dump(config, f)
    daemon = outboxd_test.Daemon(db, config_path)
    daemon.wait_ready()
    pid = daemon.proc.pid
    producer = Producer(db)
    samples, failures = [], []
    started = time.monotonic()
    next_outage = outage_every_s
    outage_ends = None
    outages = 0
    try:
        while True:
            t = time.monotonic() - started
            if t >= total_s:
                break
            if outage_ends is None and t >= next_outage:
                receiver.down()
                outages += 1
                outage_ends = t + outage_s
            elif outage_ends is not None and t >= outage_ends:
                receiver.up()
                outage_ends = None
                next_outage += outage_every_s
            rss, threads = proc_status(pid)
            health = daemon.get("/healthz")[0]
            metrics = daemon.metrics()
            delivered_kept = sqlite3.connect(db, timeout=30).execute(
                "SELECT count(*) FROM outbox WHERE status = 1").fetchone()[0]
            samples.append({
                "t": t, "rss": rss, "threads": threads,
                "fds": len(os.listdir(f"/proc/{pid}/fd")),
                "wal": file_size(db + "-wal"), "db": file_size(db),
                "delivered_kept": delivered_kept,
                "sweeper_errors": metrics.get(("outbox_sweeper_errors_total", ()), 0),
                "health": health,
            })
            time.sleep(sample_every_s)  # the sampling period, not a synchronisation
    finally:
        if outage_ends is not None:
            receiver.up()
        producer.stop()

    # Drain: everything produced reaches the receiver, then outboxd stops.
    produced = set(producer.produced)

    def drained():
        return produced <= set(receiver.keys())

    try:
        outboxd_test.wait_until(drained, timeout=max(120.0, outage_s * 3), what="drain")
    except AssertionError:
        failures.append(f"lost: {len(produced - set(receiver.keys()))} of {len(produced)} "
                        "messages never acknowledged")
    dead = sqlite3.connect(db, timeout=30).execute(
        "SELECT count(*) FROM outbox WHERE status = 2").fetchone()[0]
    daemon.signal(signal.SIGTERM)
    exit_code = daemon.wait_exit(30)
    receiver.down()

    window = [s for s in samples if s["t"] >= window_start_s]
    before = [s for s in samples if s["t"] < window_start_s]
    if len(window) < 3 or not before:
        raise SystemExit("too few samples; run longer")
    page_size = sqlite3.connect(db).execute("PRAGMA page_size").fetchone()[0]
    wal_reference = max(window[0]["wal"], AUTOCHECKPOINT_PAGES * page_size)
    # Delivered rows live retention_ms, plus up to one purge interval, plus
    # what a sweep pass and a batch of sends add meanwhile.
    kept_bound = RATE_PER_S * (retention_ms + retention_interval_ms + 2000) / 1000
    acknowledged = receiver.keys()
    figures = {
        "minutes": minutes,
        "samples": len(samples),
        "produced": len(produced),
        "requests": receiver.requests,
        "failed_requests": receiver.failed,
        "outages": outages,
        "duplicates": sum(n - 1 for n in acknowledged.values()),
        "dead": dead,
        "exit_code": exit_code,
        "rss_window_start_kib": window[0]["rss"] // 1024,
        "rss_growth_kib": (window[-1]["rss"] - window[0]["rss"]) // 1024,
        "rss_slope_kib_per_min": round(slope_per_minute(window, "rss") / 1024, 1),
        "threads": sorted({s["threads"] for s in samples}),
        "fds_before_window": [min(s["fds"] for s in before), max(s["fds"] for s in before)],
        "fds_window": [min(s["fds"] for s in window), max(s["fds"] for s in window)],
        "wal_reference_bytes": wal_reference,
        "wal_max_window_bytes": max(s["wal"] for s in window),
        "wal_slope_bytes_per_min": round(slope_per_minute(window, "wal")),
        "db_window_bytes": [min(s["db"] for s in window), max(s["db"] for s in window)],
        "db_slope_bytes_per_min": round(slope_per_minute(window, "db")),
        "delivered_kept_max": max(s["delivered_kept"] for s in window),
        "delivered_kept_bound": int(kept_bound),
        "delivered_kept_slope_per_min": round(slope_per_minute(window, "delivered_kept"), 1),
    }
    print(json.dumps(figures))
    if figures["rss_growth_kib"] >= 1024:
        failures.append(f"RSS grew {figures['rss_growth_kib']} KiB over the window")
    if len({s["threads"] for s in window}) != 1 or window[0]["threads"] != before[-1]["threads"]:
        failures.append(f"thread count changed: {figures['threads']}")
    if figures["fds_window"][1] > figures["fds_before_window"][1]:
        failures.append(f"open descriptors grew: {figures['fds_before_window']} -> "
                        f"{figures['fds_window']}")
    if figures["wal_max_window_bytes"] >= 2 * wal_reference:
        failures.append(f"WAL reached {figures['wal_max_window_bytes']} bytes, "
                        f"reference {wal_reference}")
    if figures["delivered_kept_max"] > kept_bound:
        failures.append(f"{figures['delivered_kept_max']} delivered rows kept, "
                        f"retention bound {int(kept_bound)}")
    # The file only grows while pages are in use: twice its size at the window
    # start would mean retention does not keep up.
    if figures["db_window_bytes"][1] >= 2 * window[0]["db"]:
        failures.append(f"database grew from {window[0]['db']} to "
                        f"{figures['db_window_bytes'][1]} bytes")
    if dead:
        failures.append(f"{dead} messages dead")
    if any(s["health"] != 200 for s in samples):
        failures.append("/healthz was not always 200")
    if any(s["sweeper_errors"] for s in samples):
        failures.append("the sweeper failed")
    if exit_code != 0:
        failures.append(f"outboxd exited {exit_code}")
    work.cleanup()
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
