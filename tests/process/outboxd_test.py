#!/usr/bin/env python3
"""Process tests: the real outboxd and outboxctl binaries against a temporary
database and a local HTTP receiver on 127.0.0.1, port 0.

    outboxd_test.py --outboxd PATH --outboxctl PATH [unittest arguments]

Python 3 standard library only. Every wait polls with a deadline; nothing
sleeps to synchronise.
"""

import argparse
import glob
import http.server
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

OUTBOXD = None
OUTBOXCTL = None

# Generous for a loaded CI machine; a passing run takes milliseconds per wait.
DEADLINE_S = 10.0


def wait_until(predicate, timeout=DEADLINE_S, what="condition"):
    """Polls `predicate` until it returns a truthy value; fails at the deadline."""
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)


class Receiver:
    """An HTTP endpoint that records every POST and answers with `status`.

    With `hold` set, each request waits for release() (or the end of the
    test) before it is answered: the message stays in flight meanwhile.
    """

    def __init__(self, status=200, hold=False):
        self.status = status
        self.requests = []
        self._lock = threading.Lock()
        self._release = threading.Event()
        if not hold:
            self._release.set()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                with receiver._lock:
                    receiver.requests.append(
                        {
                            "path": self.path,
                            "headers": {k.lower(): v for k, v in self.headers.items()},
                            "body": body,
                        }
                    )
                receiver._release.wait(DEADLINE_S * 3)
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self._server.server_address[1]}/events"

    def count(self):
        with self._lock:
            return len(self.requests)

    def bodies(self):
        with self._lock:
            return [r["body"] for r in self.requests]

    def release(self):
        self._release.set()

    def close(self):
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


class Daemon:
    """outboxd as a child process, its stderr collected line by line."""

    def __init__(self, db, config_path, extra_env=None):
        env = dict(os.environ)
        env.update(extra_env or {})
        self.proc = subprocess.Popen(
            [OUTBOXD, "--db", db, "--config", config_path],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            # A hostile topic or key may reach the log as raw bytes.
            errors="backslashreplace",
            env=env,
        )
        self._lines = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.metrics_port = None

    def _read(self):
        for line in self.proc.stderr:
            with self._lock:
                self._lines.append(line.rstrip("\n"))

    def log(self):
        with self._lock:
            return list(self._lines)

    def wait_for_log(self, pattern, timeout=DEADLINE_S):
        regex = re.compile(pattern)

        def find():
            for line in self.log():
                match = regex.search(line)
                if match:
                    return match
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"outboxd exited ({self.proc.returncode}) before logging {pattern!r}:\n"
                    + "\n".join(self.log())
                )
            return None

        return wait_until(find, timeout, f"log line {pattern!r}")

    def wait_ready(self):
        """Waits for the metrics port in the log and /healthz answering 200."""
        match = self.wait_for_log(r"metrics listening on 127\.0\.0\.1:(\d+)")
        self.metrics_port = int(match.group(1))
        wait_until(lambda: self.get("/healthz")[0] == 200, what="/healthz 200")

    def get(self, path):
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.metrics_port}{path}", timeout=DEADLINE_S
            ) as response:
                return response.status, response.read().decode(), response.headers
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(), e.headers
        except (urllib.error.URLError, ConnectionError):
            return 0, "", {}

    def metrics(self):
        status, text, _ = self.get("/metrics")
        if status != 200:
            raise AssertionError(f"/metrics answered {status}")
        return parse_prometheus(text)

    def signal(self, signo):
        self.proc.send_signal(signo)

    def wait_exit(self, timeout=DEADLINE_S):
        try:
            return self.proc.wait(timeout)
        finally:
            self._reader.join(timeout)
            if not self._reader.is_alive():
                self.proc.stderr.close()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.wait_exit()


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def parse_prometheus(text):
    """{(name, ((label, value), ...)): float} of every sample."""
    samples = {}
    sample = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
    label = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = sample.match(line)
        if not match:
            raise AssertionError(f"not a sample line: {line!r}")
        labels = tuple(label.findall(match.group(2) or ""))
        samples[(match.group(1), labels)] = float(match.group(3))
    return samples


class OutboxdTestCase(unittest.TestCase):
    """A temp directory with a database path, a receiver, and helpers."""

    def setUp(self):
        self._dir = tempfile.TemporaryDirectory(prefix="outboxd-test-")
        self.dir = self._dir.name
        self.db = os.path.join(self.dir, "app.db")
        self.config_path = os.path.join(self.dir, "outboxd.json")
        self.daemons = []
        self.receivers = []

    def tearDown(self):
        for daemon in self.daemons:
            daemon.kill()
        for receiver in self.receivers:
            receiver.close()
        self._dir.cleanup()

    def receiver(self, **kwargs):
        receiver = Receiver(**kwargs)
        self.receivers.append(receiver)
        return receiver

    def config(self, topics, **top_level):
        """A config with metrics on a free port and `topics` as given."""
        config = {
            "sweep_interval_ms": 60000,
            "metrics": {"listen": "127.0.0.1:0"},
            "log": {"level": "debug"},
            "topics": topics,
        }
        config.update(top_level)
        return config

    def write_config(self, config):
        with open(self.config_path, "w") as f:
            if isinstance(config, str):
                f.write(config)
            else:
                json.dump(config, f)

    def start(self, config, **kwargs):
        self.write_config(config)
        daemon = Daemon(self.db, self.config_path, **kwargs)
        self.daemons.append(daemon)
        daemon.wait_ready()
        return daemon

    def sql(self, statement, params=()):
        """One statement in its own transaction on a connection of this process."""
        db = sqlite3.connect(self.db, timeout=DEADLINE_S, isolation_level=None)
        try:
            return db.execute(statement, params).fetchall()
        finally:
            db.close()

    def insert(self, topic, key, payload=b'{"n":1}'):
        return self.sql(
            "INSERT INTO outbox(topic, msg_key, payload) VALUES (?, ?, ?) RETURNING id",
            (topic, key, payload),
        )[0][0]

    def status_of(self, row_id):
        return self.sql("SELECT status FROM outbox WHERE id = ?", (row_id,))[0][0]

    def count(self, where="1"):
        return self.sql(f"SELECT count(*) FROM outbox WHERE {where}")[0][0]

    def outboxctl(self, *args, stdin=None):
        return subprocess.run(
            [OUTBOXCTL, "--db", self.db, *args],
            input=stdin,
            capture_output=True,
            timeout=DEADLINE_S,
        )


class DeliveryTest(OutboxdTestCase):
    def test_row_inserted_by_another_process_is_sent_long_before_the_sweep(self):
        receiver = self.receiver()
        self.start(self.config({"orders": {"url": receiver.url}}))  # sweep every 60 s
        first = self.insert("orders", "k1")
        wait_until(lambda: self.status_of(first) == 1, what="first row delivered")
        # The sweeper's first pass is over: only the watcher can be this quick.
        started = time.monotonic()
        second = self.insert("orders", "k2", b'{"n":2}')
        wait_until(lambda: self.status_of(second) == 1, what="second row delivered")
        self.assertLess(time.monotonic() - started, 3.0)
        self.assertEqual(receiver.bodies(), [b'{"n":1}', b'{"n":2}'])
        key = receiver.requests[1]["headers"].get("idempotency-key", "")
        self.assertRegex(key, r"^[0-9a-f]{64}$")

    def test_database_that_is_not_sqlite_exits_1_with_one_line(self):
        with open(self.db, "wb") as f:
            f.write(b"this is not a database" * 100)
        before = read_bytes(self.db)
        self.write_config(self.config({"*": {"url": "http://127.0.0.1:1/"}}))
        result = subprocess.run(
            [OUTBOXD, "--db", self.db, "--config", self.config_path],
            capture_output=True,
            text=True,
            timeout=DEADLINE_S,
        )
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        self.assertIn(self.db, result.stderr)
        self.assertEqual(read_bytes(self.db), before)

    def test_json_log_format_writes_one_json_object_per_line(self):
        receiver = self.receiver()
        config = self.config({"orders": {"url": receiver.url}})
        config["log"] = {"level": "debug", "format": "json"}
        daemon = self.start(config)
        row = self.insert("orders", "k1")
        wait_until(lambda: self.status_of(row) == 1, what="row delivered")
        daemon.signal(signal.SIGTERM)
        self.assertEqual(daemon.wait_exit(), 0)
        lines = daemon.log()
        self.assertTrue(lines)
        for line in lines:
            entry = json.loads(line)
            self.assertEqual(set(entry), {"time", "level", "logger", "message"})


class SignalTest(OutboxdTestCase):
    def test_sigterm_leaves_nothing_in_flight_and_exits_0(self):
        receiver = self.receiver(hold=True)
        daemon = self.start(self.config({"orders": {"url": receiver.url, "workers": 2}}))
        ids = [self.insert("orders", f"k{i}") for i in range(5)]
        wait_until(lambda: receiver.count() >= 1, what="a request in flight")
        self.assertGreaterEqual(self.count("status = 3"), 1)
        daemon.signal(signal.SIGTERM)
        daemon.wait_for_log(r"stopping")
        receiver.release()  # the sends in flight finish within the grace period
        self.assertEqual(daemon.wait_exit(), 0)
        self.assertEqual(self.count("status = 3"), 0)
        statuses = {self.status_of(i) for i in ids}
        self.assertLessEqual(statuses, {0, 1})

    def test_second_sigterm_cuts_the_grace_period(self):
        receiver = self.receiver(hold=True)  # never answers in time
        daemon = self.start(self.config({"orders": {"url": receiver.url, "timeout_ms": 30000}}))
        self.insert("orders", "k1")
        wait_until(lambda: receiver.count() >= 1, what="a request in flight")
        started = time.monotonic()
        daemon.signal(signal.SIGTERM)
        daemon.wait_for_log(r"stopping")
        daemon.signal(signal.SIGTERM)
        self.assertEqual(daemon.wait_exit(), 0)
        # Far below the 10 s grace period.
        self.assertLess(time.monotonic() - started, 5.0)
        self.assertEqual(self.count("status = 3"), 0)

    def test_sigint_stops_like_sigterm(self):
        daemon = self.start(self.config({"*": {"url": self.receiver().url}}))
        daemon.signal(signal.SIGINT)
        self.assertEqual(daemon.wait_exit(), 0)


class ReloadTest(OutboxdTestCase):
    def test_sighup_with_a_bad_config_keeps_the_running_one(self):
        receiver = self.receiver()
        daemon = self.start(self.config({"orders": {"url": receiver.url}}))
        self.write_config('{"topics": {"orders": {"url": "http://h/", "workers": 0}}}')
        daemon.signal(signal.SIGHUP)
        match = daemon.wait_for_log(r"reload failed.*")
        self.assertIn('topics."orders".workers', match.group(0))
        self.assertEqual(daemon.get("/healthz")[0], 200)
        row = self.insert("orders", "after-bad-reload")
        wait_until(lambda: self.status_of(row) == 1, what="delivery on the old config")
        self.assertEqual(receiver.count(), 1)

    def test_sighup_applies_a_good_config(self):
        old = self.receiver()
        new = self.receiver()
        daemon = self.start(self.config({"orders": {"url": old.url}}))
        self.write_config(self.config({"orders": {"url": new.url}}))
        daemon.signal(signal.SIGHUP)
        daemon.wait_for_log(r"reloaded")
        wait_until(lambda: daemon.get("/healthz")[0] == 200, what="/healthz after reload")
        row = self.insert("orders", "after-reload")
        wait_until(lambda: self.status_of(row) == 1, what="delivery on the new config")
        self.assertEqual((old.count(), new.count()), (0, 1))

    def test_sighup_warns_that_the_metrics_address_needs_a_restart(self):
        receiver = self.receiver()
        daemon = self.start(self.config({"orders": {"url": receiver.url}}))
        config = self.config({"orders": {"url": receiver.url}})
        config["metrics"] = {"listen": "127.0.0.1:1"}
        self.write_config(config)
        daemon.signal(signal.SIGHUP)
        daemon.wait_for_log(r"metrics\.listen changed")
        daemon.wait_for_log(r"reloaded")
        wait_until(lambda: daemon.get("/healthz")[0] == 200, what="same metrics port")


class ConfigTest(OutboxdTestCase):
    # (config text, the key path the one-line error must name)
    MALFORMED = [
        ("{", "config: JSON syntax error at line 1"),
        ("[]", "config: expected an object"),
        ("{}", "topics: required key is missing"),
        ('{"topics": {"a": {}}}', 'topics."a".url: required key is missing'),
        ('{"topics": {"a": {"url": "ftp://h/"}}}', 'topics."a".url: scheme must be one of http, https, nats, tls, mqtt, mqtts'),
        ('{"claim_batch": 0, "topics": {"a": {"url": "http://h/"}}}', "claim_batch:"),
        ('{"sweep_interval_ms": 1.5, "topics": {"a": {"url": "http://h/"}}}',
         "sweep_interval_ms: expected a positive integer"),
        ('{"topics": {"a": {"url": "http://h/", "retry": {"jitter": 2}}}}',
         'topics."a".retry.jitter:'),
        ('{"topics": {"a": {"url": "http://h/", "retry": {"strategy": "linear"}}}}',
         'topics."a".retry.strategy:'),
        ('{"topics": {"a": {"url": "http://h/", "cloudevents": "xml"}}}',
         'topics."a".cloudevents:'),
        ('{"log": {"level": "loud"}, "topics": {"a": {"url": "http://h/"}}}', "log.level:"),
        ('{"metrics": {"listen": "nowhere"}, "topics": {"a": {"url": "http://h/"}}}',
         "metrics.listen:"),
        ('{"topics": {"a": {"url": "http://h/", "headers": {"Authorization": "env:OUTBOX_UNSET_X"}}}}',
         'topics."a".headers."Authorization": environment variable OUTBOX_UNSET_X is not set'),
    ]

    def test_each_malformed_config_exits_2_with_one_line_naming_the_key(self):
        for text, expected in self.MALFORMED:
            with self.subTest(config=text):
                self.write_config(text)
                for extra in ([], ["--check-config"]):
                    result = subprocess.run(
                        [OUTBOXD, "--db", self.db, "--config", self.config_path, *extra],
                        capture_output=True,
                        text=True,
                        timeout=DEADLINE_S,
                    )
                    self.assertEqual(result.returncode, 2, result.stderr)
                    lines = result.stderr.strip().splitlines()
                    self.assertEqual(len(lines), 1, result.stderr)
                    self.assertIn(expected, lines[0])
                    self.assertFalse(os.path.exists(self.db))

    def test_unreadable_config_file_exits_2(self):
        for path, reason in ((os.path.join(self.dir, "absent.json"), "No such file"),
                             (self.dir, "Is a directory")):
            with self.subTest(path=path):
                result = subprocess.run(
                    [OUTBOXD, "--db", self.db, "--config", path],
                    capture_output=True,
                    text=True,
                    timeout=DEADLINE_S,
                )
                self.assertEqual(result.returncode, 2)
                self.assertTrue(
                    result.stderr.startswith(f"outboxd: {path}: cannot read ({reason}"),
                    result.stderr)
                self.assertEqual(len(result.stderr.splitlines()), 1)

    def test_check_config_creates_and_changes_nothing(self):
        config = self.config(
            {"a": {"url": "http://127.0.0.1:1/"}},
            retention={"delivered_ms": 1, "archive_path": os.path.join(self.dir, "archive.jsonl")},
        )
        config["unknown_key"] = True
        self.write_config(config)
        before = sorted(os.listdir(self.dir))
        result = subprocess.run(
            [OUTBOXD, "--db", self.db, "--config", self.config_path, "--check-config"],
            capture_output=True,
            text=True,
            timeout=DEADLINE_S,
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("unknown_key: unknown key", result.stderr)
        self.assertEqual(sorted(os.listdir(self.dir)), before)

        # An existing database is not touched either (no -wal, no -shm, same bytes).
        subprocess.run([OUTBOXCTL, "--db", self.db, "init"], check=True, capture_output=True)
        before = {name: read_bytes(os.path.join(self.dir, name)) for name in os.listdir(self.dir)}
        result = subprocess.run(
            [OUTBOXD, "--db", self.db, "--config", self.config_path, "--check-config"],
            capture_output=True,
            timeout=DEADLINE_S,
        )
        self.assertEqual(result.returncode, 0)
        after = {name: read_bytes(os.path.join(self.dir, name)) for name in os.listdir(self.dir)}
        self.assertEqual(after, before)


    def test_check_config_adapts_a_default_and_prints_the_effective_config(self):
        # Only lease_timeout_ms written: the default timeout_ms (5000) must
        # not make the config fail; it becomes smaller and is shown.
        os.environ["OUTBOX_TEST_CHECK_TOKEN"] = "Bearer t0ps3cret"
        self.write_config({"lease_timeout_ms": 2000, "topics": {"*": {
            "url": "http://127.0.0.1:1/in",
            "headers": {"Authorization": "env:OUTBOX_TEST_CHECK_TOKEN"}}}})
        run = lambda *extra: subprocess.run(
            [OUTBOXD, "--db", self.db, "--config", self.config_path, "--check-config", *extra],
            capture_output=True, text=True, timeout=DEADLINE_S)
        result = run()
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn('topics."*".timeout_ms: 1000 (default 5000', result.stderr)
        printed = run("--print")
        self.assertEqual(printed.returncode, 0, printed.stderr)
        effective = json.loads(printed.stdout)
        self.assertEqual(effective["lease_timeout_ms"], 2000)
        self.assertEqual(effective["topics"]["*"]["timeout_ms"], 1000)
        self.assertEqual(effective["metrics"]["max_topics"], 100)
        self.assertEqual(effective["topics"]["*"]["headers"]["Authorization"], "<redacted>")
        self.assertNotIn("t0ps3cret", printed.stdout + printed.stderr)
        self.assertFalse(os.path.exists(self.db))


class MetricsTest(OutboxdTestCase):
    def test_every_family_is_in_the_documented_table(self):
        daemon = self.start(self.config({"orders": {"url": "http://127.0.0.1:9/"}}))
        status, text, _ = daemon.get("/metrics")
        self.assertEqual(status, 200)
        served = set(re.findall(r"^# TYPE (outbox_[a-z_]+) ", text, re.M))
        page = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))), "docs", "operations.md")
        with open(page, encoding="utf-8") as f:
            documented = set(re.findall(r"^\| `(outbox_[a-z_]+)` \|", f.read(), re.M))
        self.assertGreater(len(served), 10)
        self.assertEqual(served - documented, set(),
                         "families /metrics serves that docs/operations.md's table lacks")
        self.assertEqual(documented - served, set(),
                         "families docs/operations.md lists that /metrics does not serve")

    def test_metrics_agree_with_the_database(self):
        good = self.receiver(status=200)
        bad = self.receiver(status=400)  # permanent: dead at once
        daemon = self.start(self.config({"orders": {"url": good.url},
                                         "refunds": {"url": bad.url}}))
        delivered = [self.insert("orders", f"o{i}") for i in range(3)]
        dead = [self.insert("refunds", f"r{i}") for i in range(2)]
        # No route; three rows in two topics: the gauge counts rows.
        stray = [self.insert("stray.a", "s1"), self.insert("stray.a", "s2"),
                 self.insert("stray.b", "s3")]
        wait_until(lambda: all(self.status_of(i) == 1 for i in delivered), what="delivered")
        wait_until(lambda: all(self.status_of(i) == 2 for i in dead), what="dead")

        def consistent():
            samples = daemon.metrics()
            return samples if samples.get(("outbox_unrouted_pending", ())) == 3 else None

        samples = wait_until(consistent, what="unrouted rows counted")
        self.assertEqual(samples[("outbox_delivered_total", (("topic", "orders"),))], 3)
        self.assertEqual(samples[("outbox_dead_total", (("topic", "refunds"),))], 2)
        for topic in ("orders", "refunds", "other"):
            where = ("topic NOT IN ('orders', 'refunds')" if topic == "other"
                     else f"topic = '{topic}'")
            for name, status in (("outbox_pending", 0), ("outbox_dead", 2),
                                 ("outbox_in_flight", 3)):
                self.assertEqual(samples[(name, (("topic", topic),))],
                                 self.count(f"{where} AND status = {status}"), (name, topic))
        self.assertEqual(samples[("outbox_pending", (("topic", "other"),))], len(stray))
        self.assertGreater(samples[("outbox_db_bytes", ())], 0)
        bucket = ("outbox_delivery_latency_seconds_bucket", (("topic", "orders"), ("le", "+Inf")))
        self.assertEqual(samples[bucket], 3)
        self.assertFalse([key for key in samples if ("topic", "stray.a") in key[1]])

    def test_metrics_port_in_use_exits_1_with_one_line(self):
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            config = self.config({"*": {"url": "http://127.0.0.1:1/"}})
            config["metrics"] = {"listen": f"127.0.0.1:{port}"}
            self.write_config(config)
            result = subprocess.run(
                [OUTBOXD, "--db", self.db, "--config", self.config_path],
                capture_output=True,
                text=True,
                timeout=DEADLINE_S,
            )
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        self.assertIn(f"metrics.listen: cannot listen on 127.0.0.1:{port}", result.stderr)

    def test_healthz_and_metrics_content_types(self):
        daemon = self.start(self.config({"*": {"url": self.receiver().url}}))
        status, body, _ = daemon.get("/healthz")
        self.assertEqual((status, body), (200, "ok\n"))
        status, _, headers = daemon.get("/metrics")
        self.assertEqual(status, 200)
        self.assertTrue(headers["Content-Type"].startswith("text/plain; version=0.0.4"))
        self.assertEqual(daemon.get("/nothing")[0], 404)

    def test_healthz_is_503_with_a_reason_while_the_sweeper_keeps_failing(self):
        # A real fault: the outbox table renamed away under the running daemon.
        daemon = self.start(self.config({"*": {"url": self.receiver().url}},
                                        sweep_interval_ms=10))
        self.sql("ALTER TABLE outbox RENAME TO outbox_hidden")
        status, body, _ = wait_until(
            lambda: (lambda r: r if r[0] == 503 else None)(daemon.get("/healthz")),
            what="/healthz 503")
        self.assertRegex(body, r"^sweeper failing: \d+ consecutive passes failed, last: .*"
                               r"no such table: outbox\n$")
        self.sql("ALTER TABLE outbox_hidden RENAME TO outbox")
        wait_until(lambda: daemon.get("/healthz")[0] == 200, what="/healthz 200 again")
        errors = daemon.metrics()[("outbox_sweeper_errors_total", ())]
        self.assertGreaterEqual(errors, 3)


class LimitsTest(OutboxdTestCase):
    def test_plain_sql_insert_over_a_limit_fails(self):
        config = self.config({"orders": {"url": self.receiver(hold=True).url}},
                             limits={"max_pending": 2, "max_payload_bytes": 16})
        self.start(config)
        # A topic without a route stays pending and counts against max_pending.
        self.insert("unrouted", "k1")
        self.insert("unrouted", "k2")
        with self.assertRaises(sqlite3.DatabaseError) as raised:
            self.insert("unrouted", "k3")
        self.assertIn("max_pending", str(raised.exception))
        with self.assertRaises(sqlite3.DatabaseError) as raised:
            self.insert("orders", "big", b"x" * 17)
        self.assertIn("max_payload_bytes", str(raised.exception))
        self.assertEqual(self.count(), 2)

    def test_outboxctl_enqueue_over_a_limit_fails(self):
        self.start(self.config({"orders": {"url": self.receiver(hold=True).url}},
                               limits={"max_payload_bytes": 16}))
        result = self.outboxctl("enqueue", "--topic", "orders", "--key", "big",
                                "--payload-file", "-", stdin=b"x" * 17)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn(b"max_payload_bytes", result.stderr)
        self.assertEqual(self.count(), 0)


class OutboxctlTest(OutboxdTestCase):
    def test_every_subcommand_works_against_a_live_daemon(self):
        good = self.receiver()
        bad = self.receiver(status=422)
        self.start(self.config({"orders": {"url": good.url}, "refunds": {"url": bad.url}}))

        def ctl(*args, stdin=None):
            result = self.outboxctl(*args, stdin=stdin)
            self.assertEqual(result.returncode, 0, (args, result.stderr))
            return result.stdout.decode()

        ctl("init")  # idempotent on a live database
        self.assertIn("enqueued id", ctl("enqueue", "--topic", "orders", "--key", "c1",
                                         "--payload-file", "-", stdin=b'{"via":"ctl"}'))
        ctl("enqueue", "--topic", "refunds", "--key", "r1", "--payload-file", "-", stdin=b"{}")
        wait_until(lambda: self.count("status = 1") == 1 and self.count("status = 2") == 1,
                   what="one delivered, one dead")
        self.assertEqual(good.bodies(), [b'{"via":"ctl"}'])
        stats = json.loads(ctl("stats", "--json"))
        self.assertEqual(stats["undelivered"], 1)
        self.assertIn("orders", ctl("stats"))
        rows = json.loads(ctl("list", "--json", "--status", "dead"))
        self.assertEqual([r["msg_key"] for r in rows], ["r1"])
        dead_id = rows[0]["id"]
        self.assertIn("r1", ctl("list", "--topic", "refunds"))
        self.assertEqual(json.loads(ctl("show", str(dead_id), "--json"))["status"], "dead")
        self.assertIn("HTTP 422", ctl("show", str(dead_id)))
        self.assertIn("reset 1 dead row", ctl("retry", "--id", str(dead_id)))
        # The daemon picks the reset row up and the receiver refuses it again.
        wait_until(lambda: bad.count() == 2 and self.status_of(dead_id) == 2,
                   what="retried row dead again")
        self.assertIn("reset 1", ctl("retry", "--topic", "refunds"))
        wait_until(lambda: bad.count() == 3 and self.status_of(dead_id) == 2, what="dead again")
        self.assertIn("reset 1", ctl("retry", "--all-dead"))
        wait_until(lambda: bad.count() == 4 and self.status_of(dead_id) == 2, what="dead again")
        self.assertIn("purged 1 delivered row", ctl("purge", "--older-than-ms", "0"))
        self.assertIn("purged 1 dead row", ctl("purge", "--dead", "--all"))
        self.assertEqual(self.count(), 0)

    def test_times_before_1970_print_as_rfc3339(self):
        # Another application may write any time; -1 once printed as
        # "1969-12-31T23:59:59.-01Z".
        self.assertEqual(self.outboxctl("init").returncode, 0)
        row_id = self.insert("orders", "old")
        self.sql("UPDATE outbox SET next_attempt_at = -1, created_at = -86400001 WHERE id = ?",
                 (row_id,))
        result = self.outboxctl("show", str(row_id))
        self.assertEqual(result.returncode, 0, result.stderr)
        shown = result.stdout.decode()
        self.assertIn("next_attempt_at:  1969-12-31T23:59:59.999Z", shown)
        self.assertIn("created_at:       1969-12-30T23:59:59.999Z", shown)
        listed = self.outboxctl("list").stdout.decode()
        self.assertIn("1969-12-31T23:59:59.999Z", listed)
        self.assertNotIn(".-", listed)


class FirstMessagesTest(OutboxdTestCase):
    """The messages a newcomer meets first name the problem, and the
    inspecting commands work on a database the user may read but not write."""

    def fails_with(self, args, status, *wanted):
        result = self.outboxctl(*args)
        err = result.stderr.decode()
        self.assertEqual(result.returncode, status, (args, err))
        for text in wanted:
            self.assertIn(text, err, args)
        self.assertLess(len(err), 300, f"{args}: a one-line error, got {err!r}")
        return err

    def test_flag_and_command_errors_name_the_problem(self):
        self.assertEqual(self.outboxctl("init").returncode, 0)
        self.fails_with(["list", "--limit", "0"], 2, "--limit", "1000000")
        self.fails_with(["frobnicate"], 2, "unknown command 'frobnicate'", "stats")
        err = self.fails_with(["retry"], 2, "--id", "--all-dead")
        self.assertNotIn("--status", err, "retry has no --status flag")

    def test_init_in_a_missing_directory_names_the_directory(self):
        missing = os.path.join(self.dir, "no", "such")
        result = subprocess.run([OUTBOXCTL, "--db", os.path.join(missing, "x.db"), "init"],
                                capture_output=True, timeout=DEADLINE_S)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn(f"directory {missing} does not exist", result.stderr.decode())

    def test_stats_shows_the_database_id_and_the_stored_limits(self):
        self.assertEqual(self.outboxctl("init").returncode, 0)
        database_id = self.sql("SELECT value FROM outbox_meta WHERE key = 'database_id'")[0][0]
        out = self.outboxctl("stats").stdout.decode()
        self.assertIn(f"database id {database_id}", out)
        self.assertIn("max_payload_bytes 1048576", out)

    def test_inspection_works_on_a_database_the_user_cannot_write(self):
        self.assertEqual(self.outboxctl("init").returncode, 0)
        row_id = self.insert("orders", "k1")
        # A running agent keeps the -wal and -shm files (what a reader of a
        # WAL database needs); this connection stands in for it.
        holder = sqlite3.connect(self.db)
        holder.execute("SELECT count(*) FROM outbox").fetchall()
        self.addCleanup(holder.close)
        for path in (self.db, self.db + "-wal", self.db + "-shm"):
            os.chmod(path, 0o644)
        os.chmod(self.dir, 0o755)
        if os.geteuid() == 0:
            # root writes anything: read as nobody instead.
            prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        else:
            os.chmod(self.dir, 0o555)
            self.addCleanup(os.chmod, self.dir, 0o755)
            for path in (self.db, self.db + "-wal", self.db + "-shm"):
                os.chmod(path, 0o444)
            prefix = []
        for args in (["stats"], ["list"], ["show", str(row_id)], ["audit"], ["top", "--once"],
                     ["ordering"]):
            result = subprocess.run(prefix + [OUTBOXCTL, "--db", self.db, *args],
                                    capture_output=True, timeout=DEADLINE_S)
            self.assertEqual(result.returncode, 0, (args, result.stderr))
        result = subprocess.run(prefix + [OUTBOXCTL, "--db", self.db, "retry", "--all-dead"],
                                capture_output=True, timeout=DEADLINE_S)
        self.assertEqual(result.returncode, 1, "a change still needs write access")
        # A file of an older or newer schema: one line, and no migration tried.
        version = int(self.sql("SELECT value FROM outbox_meta WHERE key = 'schema_version'")[0][0])
        for other, wanted in ((version - 1, "needs a migration"), (version + 1, "newer than")):
            self.sql("UPDATE outbox_meta SET value = ? WHERE key = 'schema_version'", (str(other),))
            result = subprocess.run(prefix + [OUTBOXCTL, "--db", self.db, "stats"],
                                    capture_output=True, timeout=DEADLINE_S)
            self.assertEqual(result.returncode, 1, result.stderr)
            self.assertIn(wanted, result.stderr.decode())
            self.assertEqual(result.stderr.count(b"\n"), 1, result.stderr)
        self.assertEqual(glob.glob(self.db + ".bak*"), [], "no backup: nothing was migrated")


class RetentionTest(OutboxdTestCase):
    def test_archive_holds_exactly_the_purged_rows(self):
        archive = os.path.join(self.dir, "archive.jsonl")
        receiver = self.receiver()
        self.start(self.config(
            {"orders": {"url": receiver.url}},
            sweep_interval_ms=100,
            retention={"delivered_ms": 1, "interval_ms": 100, "archive_path": archive}))
        ids = [self.insert("orders", f"k{i}", f'{{"n":{i}}}'.encode()) for i in range(5)]
        kept = self.insert("unrouted", "stays")  # pending: never purged
        wait_until(lambda: self.count("status = 1") == 0 and self.count() == 1,
                   what="delivered rows purged")
        with open(archive) as f:
            entries = [json.loads(line) for line in f]
        self.assertEqual(sorted(e["id"] for e in entries), ids)
        self.assertEqual({e["msg_key"] for e in entries}, {f"k{i}" for i in range(5)})
        self.assertEqual(self.sql("SELECT id FROM outbox"), [(kept,)])


def main():
    global OUTBOXD, OUTBOXCTL
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--outboxd", required=True)
    parser.add_argument("--outboxctl", required=True)
    args, rest = parser.parse_known_args()
    OUTBOXD, OUTBOXCTL = os.path.abspath(args.outboxd), os.path.abspath(args.outboxctl)
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)


if __name__ == "__main__":
    main()
