#!/usr/bin/env python3
"""Issue #10: hostile configuration files and flag sets for outboxd and
outboxctl. Each one must end the program with a non-zero status and exactly
one line on standard error that names the offending key or flag; never a
crash, never a database created or changed by a refused start.

    hostile_cli_test.py --outboxd PATH --outboxctl PATH [unittest arguments]

Python 3 standard library only. (tests/process/outboxd_test.py has the first
dozen malformed configs; this table adds the rest.)
"""

import argparse
import base64
import http.server
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

OUTBOXD = None
OUTBOXCTL = None
TIMEOUT_S = 30


def topic(**fields):
    """A config whose one topic "a" has `fields` beside a good URL."""
    entry = {"url": "http://127.0.0.1:9/events"}
    entry.update(fields)
    return json.dumps({"metrics": {"listen": ""}, "topics": {"a": entry}})


def top(**fields):
    """A config with `fields` at the top level beside one good topic."""
    config = {"metrics": {"listen": ""}, "topics": {"a": {"url": "http://127.0.0.1:9/events"}}}
    config.update(fields)
    return json.dumps(config)


# (name, config text, what the one line must contain)
MALFORMED_CONFIGS = [
    ("empty file", "", "config:"),
    ("a JSON string", '"topics"', "config: expected an object"),
    ("NUL byte", '{"topics": {"a\x00": {"url": "http://h/"}}}', "config"),
    ("nesting 100 000 deep", "[" * 100000 + "]" * 100000, "config:"),
    ("topics an array", json.dumps({"topics": []}), "topics:"),
    ("url a number", topic(url=42), 'topics."a".url:'),
    ("url with credentials", topic(url="http://user:hunter2@h/"), 'topics."a".url:'),
    ("url with a newline", topic(url="http://h/\r\nX: y"), 'topics."a".url:'),
    ("workers 0", topic(workers=0), 'topics."a".workers:'),
    ("workers -1", topic(workers=-1), 'topics."a".workers:'),
    ("workers a string", topic(workers="4"), 'topics."a".workers:'),
    ("workers 2.5", topic(workers=2.5), 'topics."a".workers:'),
    ("workers 1e10", topic(workers=1e10), 'topics."a".workers:'),
    ("queue_capacity 0", topic(queue_capacity=0), 'topics."a".queue_capacity:'),
    ("timeout_ms -1", topic(timeout_ms=-1), 'topics."a".timeout_ms:'),
    ("retry.max_attempts 0", topic(retry={"max_attempts": 0}), 'topics."a".retry.max_attempts:'),
    ("retry.first_interval_ms 0", topic(retry={"first_interval_ms": 0}),
     'topics."a".retry.first_interval_ms:'),
    ("retry interval above its cap", topic(retry={"first_interval_ms": 5000, "max_interval_ms": 10}),
     'topics."a".retry.max_interval_ms:'),
    ("retry.jitter -0.1", topic(retry={"jitter": -0.1}), 'topics."a".retry.jitter:'),
    ("retry not an object", topic(retry=3), 'topics."a".retry:'),
    ("breaker.failure_threshold 0", topic(breaker={"failure_threshold": 0}),
     'topics."a".breaker.failure_threshold:'),
    ("breaker.open_ms 0", topic(breaker={"open_ms": 0}), 'topics."a".breaker.open_ms:'),
    ("header value a number", topic(headers={"X-A": 1}), 'topics."a".headers."X-A":'),
    ("header value with CR LF", topic(headers={"X-A": "a\r\nInjected: 1"}),
     'topics."a".headers."X-A":'),
    ("header name with a space", topic(headers={"bad name": "x"}), 'topics."a".headers'),
    ("header Idempotency-Key", topic(headers={"Idempotency-Key": "x"}),
     'topics."a".headers."Idempotency-Key":'),
    ("header Content-Length", topic(headers={"Content-Length": "1"}),
     'topics."a".headers."Content-Length":'),
    ("secret from an empty env: name", topic(headers={"Authorization": "env:"}),
     'topics."a".headers."Authorization":'),
    ("secret from /dev/zero", topic(headers={"Authorization": "file:/dev/zero"}),
     'topics."a".headers."Authorization": file /dev/zero is larger than 64 KiB'),
    ("secret from a directory", topic(headers={"Authorization": "file:/"}),
     'topics."a".headers."Authorization":'),
    ("signing_secret not base64", topic(signing_secret="whsec_!!!"), 'topics."a".signing_secret:'),
    ("signing_secret a number", topic(signing_secret=7), 'topics."a".signing_secret:'),
    ("cloudevents true", topic(cloudevents=True), 'topics."a".cloudevents:'),
    ("batch.max_messages 0", topic(batch={"max_messages": 0}), 'topics."a".batch.max_messages:'),
    ("batch.format csv", topic(batch={"format": "csv"}), 'topics."a".batch.format:'),
    ("sweep_interval_ms -1", top(sweep_interval_ms=-1), "sweep_interval_ms:"),
    # The parser stops at the number: the position names the key.
    ("sweep_interval_ms 1e400", '{"sweep_interval_ms": 1e400, "topics": {"a": {"url": "http://h/"}}}',
     "line 1, column 23: Number too big"),
    ("lease_timeout_ms 0", top(lease_timeout_ms=0), "lease_timeout_ms:"),
    ("lease_timeout_ms 2^63", '{"lease_timeout_ms": 9223372036854775808, "topics": {"a": {"url": "http://h/"}}}',
     "lease_timeout_ms:"),
    ("crash_budget 0", top(crash_budget=0), "crash_budget:"),
    ("claim_batch null", top(claim_batch=None), "claim_batch:"),
    ("retention.delivered_ms -5", top(retention={"delivered_ms": -5}), "retention.delivered_ms:"),
    ("retention.archive_path in a missing directory",
     top(retention={"archive_path": "/nonexistent-outbox-dir/archive.jsonl"}),
     "retention.archive_path:"),
    ("limits.max_payload_bytes -1", top(limits={"max_payload_bytes": -1}),
     "limits.max_payload_bytes:"),
    ("limits.max_db_bytes a string", top(limits={"max_db_bytes": "big"}), "limits.max_db_bytes:"),
    ("metrics.listen port 99999", top(metrics={"listen": "127.0.0.1:99999"}), "metrics.listen:"),
    ("metrics.listen a number", top(metrics={"listen": 9464}), "metrics.listen:"),
    ("log.format xml", top(log={"format": "xml"}), "log.format:"),
    ("log a string", top(log="debug"), "log:"),
]

# (name, outboxctl arguments after --db DB, what the one line must contain)
BAD_OUTBOXCTL_FLAGS = [
    ("no subcommand", [], "subcommand"),
    ("unknown subcommand", ["frobnicate"], "unknown command 'frobnicate'"),
    ("unknown flag", ["stats", "--bogus"], "--bogus"),
    ("list --status bogus", ["list", "--status", "bogus"], "--status"),
    ("list --limit 0", ["list", "--limit", "0"], "--limit"),
    ("list --limit abc", ["list", "--limit", "abc"], "--limit"),
    ("list --limit 2^70", ["list", "--limit", "1180591620717411303424"], "--limit"),
    ("show without an id", ["show"], "ID"),
    ("show abc", ["show", "abc"], "ID"),
    ("retry without a selector", ["retry"], "retry: choose one of --id"),
    ("retry --key without --topic", ["retry", "--key", "k"], "--key"),
    ("cancel without a selector", ["cancel"], "cancel: choose one of --id"),
    ("cancel a whole topic without filters", ["cancel", "--topic", "t"],
     "needs --status and --older-than"),
    ("cancel --status delivered", ["cancel", "--topic", "t", "--status", "delivered",
                                   "--older-than", "1h"], "--status: expected pending or dead"),
    ("mark-delivered --older-than 5y", ["mark-delivered", "--topic", "t", "--status", "dead",
                                        "--older-than", "5y"], "--older-than: '5y'"),
    ("audit --since yesterday", ["audit", "--since", "yesterday"], "--since:"),
    ("list --key without --topic", ["list", "--key", "k"], "--key"),
    ("reconcile without --receiver-keys", ["reconcile"], "--receiver-keys"),
    ("reconcile from a missing file", ["reconcile", "--receiver-keys", "/nonexistent/keys"],
     "--receiver-keys"),
    ("retry --id and --topic", ["retry", "--id", "1", "--topic", "t"], "--id"),
    ("purge --older-than-ms -1", ["purge", "--older-than-ms", "-1"], "--older-than-ms"),
    ("purge --id without --dead", ["purge", "--id", "1"], "--id"),
    ("purge --dead without a selector", ["purge", "--dead"], "purge --dead"),
    ("purge --dead with --older-than-ms", ["purge", "--dead", "--all", "--older-than-ms", "5"],
     "--older-than-ms"),
    ("enqueue without --topic", ["enqueue", "--key", "k"], "--topic"),
    ("enqueue without --key", ["enqueue", "--topic", "t"], "--key"),
    ("enqueue with an empty topic", ["enqueue", "--topic", "", "--key", "k"], "topic:"),
    ("enqueue with a 300-byte key", ["enqueue", "--topic", "t", "--key", "k" * 300], "msg_key:"),
    ("enqueue with headers not JSON", ["enqueue", "--topic", "t", "--key", "k", "--headers", "{bad"],
     "headers:"),
    ("enqueue with a header CR LF", ["enqueue", "--topic", "t", "--key", "k", "--headers",
                                     '{"X": "a\\r\\nb"}'], "headers:"),
    ("enqueue with a lone surrogate", ["enqueue", "--topic", "t", "--key", "k", "--headers",
                                       '{"X": "\\ud800"}'], "headers: not valid UTF-8"),
    ("enqueue from a missing file", ["enqueue", "--topic", "t", "--key", "k", "--payload-file",
                                     "/nonexistent/payload"], "--payload-file"),
    ("enqueue with an unknown flag", ["enqueue", "--topic", "t", "--key", "k", "--max-attempts",
                                           "3"], "--max-attempts"),
]


class CliTestCase(unittest.TestCase):
    def setUp(self):
        self._dir = tempfile.TemporaryDirectory(prefix="outbox-cli-")
        self.dir = self._dir.name
        self.db = os.path.join(self.dir, "app.db")
        self.config_path = os.path.join(self.dir, "outboxd.json")

    def tearDown(self):
        self._dir.cleanup()

    def run_tool(self, argv, stdin=b""):
        return subprocess.run(argv, input=stdin, capture_output=True, timeout=TIMEOUT_S)

    def assert_refused(self, result, expected, status=2):
        err = result.stderr.decode(errors="replace")
        self.assertGreater(result.returncode, 0, f"crashed or succeeded: {result.returncode} {err}")
        self.assertEqual(result.returncode, status, err)
        lines = err.strip("\n").split("\n")
        self.assertEqual(len(lines), 1, err)
        self.assertIn(expected, lines[0])

    def write_config(self, text, mode=0o600):
        with open(self.config_path, "w") as f:
            f.write(text)
        os.chmod(self.config_path, mode)


class OutboxdConfigTest(CliTestCase):
    def test_each_malformed_config_exits_2_naming_the_key(self):
        for name, text, expected in MALFORMED_CONFIGS:
            with self.subTest(name):
                self.write_config(text)
                for extra in ([], ["--check-config"]):
                    result = self.run_tool(
                        [OUTBOXD, "--db", self.db, "--config", self.config_path, *extra])
                    self.assert_refused(result, expected)
                    self.assertNotIn("hunter2", result.stderr.decode(errors="replace"))
                    self.assertFalse(os.path.exists(self.db), "a refused start created the database")

    def test_an_inline_secret_in_a_world_readable_file_is_refused(self):
        text = topic(headers={"Authorization": "Bearer inline-secret-value"})
        self.write_config(text, 0o644)
        for extra in ([], ["--check-config"]):
            result = self.run_tool([OUTBOXD, "--db", self.db, "--config", self.config_path, *extra])
            self.assert_refused(result, 'topics."a".headers."Authorization": secret written inline')
            self.assertNotIn("inline-secret-value", result.stderr.decode())
        self.assertFalse(os.path.exists(self.db))
        # Readable by its owner and group only, as packaged: a warning.
        self.write_config(text, 0o640)
        result = self.run_tool(
            [OUTBOXD, "--db", self.db, "--config", self.config_path, "--check-config"])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("secret written inline", result.stderr.decode())
        self.assertNotIn("inline-secret-value", result.stderr.decode())
        # env: references may sit in a world-readable file.
        self.write_config(topic(headers={"Authorization": "env:OUTBOX_CLI_TEST_TOKEN"}), 0o644)
        result = subprocess.run(
            [OUTBOXD, "--db", self.db, "--config", self.config_path, "--check-config"],
            capture_output=True, timeout=TIMEOUT_S,
            env=dict(os.environ, OUTBOX_CLI_TEST_TOKEN="Bearer from-env"))
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_bad_flags_exit_2_naming_the_flag(self):
        self.write_config(topic())
        cases = [
            ([], "--db"),
            (["--db", self.db], "--config"),
            (["--config", self.config_path], "--db"),
            (["--db", self.db, "--config", self.config_path, "--bogus"], "--bogus"),
            (["--db", self.db, "--config", self.config_path, "extra"], "extra"),
            (["--db"], "--db"),
        ]
        for argv, expected in cases:
            with self.subTest(argv=argv):
                self.assert_refused(self.run_tool([OUTBOXD, *argv]), expected)

    def test_an_unusable_database_exits_1_naming_the_file(self):
        self.write_config(topic())
        not_a_db = os.path.join(self.dir, "notes.txt")
        with open(not_a_db, "w") as f:
            f.write("just text\n" * 100)
        for path in (not_a_db, self.dir, os.path.join(self.dir, "missing-dir", "app.db")):
            with self.subTest(path=path):
                result = self.run_tool([OUTBOXD, "--db", path, "--config", self.config_path])
                self.assert_refused(result, path, status=1)


class OutboxctlFlagsTest(CliTestCase):
    def setUp(self):
        super().setUp()
        subprocess.run([OUTBOXCTL, "--db", self.db, "init"], check=True, capture_output=True)
        with open(self.db, "rb") as f:
            self.before = f.read()

    def test_each_bad_flag_set_exits_2_naming_the_flag(self):
        for name, args, expected in BAD_OUTBOXCTL_FLAGS:
            with self.subTest(name):
                result = self.run_tool([OUTBOXCTL, "--db", self.db, *args])
                self.assert_refused(result, expected)
        rows = subprocess.run([OUTBOXCTL, "--db", self.db, "stats", "--json"], capture_output=True,
                              check=True)
        self.assertEqual(json.loads(rows.stdout)["undelivered"], 0)

    def test_missing_db_flag_and_missing_file(self):
        self.assert_refused(self.run_tool([OUTBOXCTL, "stats"]), "--db")
        missing = os.path.join(self.dir, "missing.db")
        self.assert_refused(self.run_tool([OUTBOXCTL, "--db", missing, "stats"]), missing, status=1)
        self.assertFalse(os.path.exists(missing))

    def test_a_payload_over_the_limit_exits_2(self):
        payload = os.path.join(self.dir, "big")
        with open(payload, "wb") as f:
            f.write(b"x" * (1048576 + 1))
        result = self.run_tool([OUTBOXCTL, "--db", self.db, "enqueue", "--topic", "t", "--key", "k",
                                "--payload-file", payload])
        self.assert_refused(result, "payload:")


class OutboxdSecretsTest(CliTestCase):
    """outboxd with an env: token and a file: signing secret against a
    receiver that quotes every request header and the bare token back in a
    500: neither secret may appear in its log, in last_error, in /metrics or
    in outboxctl's output."""

    TOKEN = "c0ffee-outboxd-secret-token-91d2"
    SIGNING = "whsec_" + base64.b64encode(b"outboxd-signing-key-0123").decode()

    def test_secrets_stay_out_of_logs_errors_metrics_and_outboxctl(self):
        token = self.TOKEN
        seen = []

        class Echo(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                seen.append(self.headers.get("Authorization", ""))
                body = "".join(f"{k}: {v}\n" for k, v in self.headers.items())
                body = (body + f"token={token}").encode()
                self.send_response(500)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Echo)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)

        secret_file = os.path.join(self.dir, "signing")
        with open(secret_file, "w") as f:
            f.write(self.SIGNING + "\n")
        os.chmod(secret_file, 0o600)  # a secret others can read is refused
        url = f"http://127.0.0.1:{server.server_address[1]}/events"
        self.write_config(json.dumps({
            "sweep_interval_ms": 50,
            "metrics": {"listen": "127.0.0.1:0"},
            "log": {"level": "debug"},
            "topics": {"t": {"url": url,
                             "headers": {"Authorization": "env:OUTBOX_CLI_SECRET"},
                             "signing_secret": f"file:{secret_file}",
                             "retry": {"first_interval_ms": 10, "max_interval_ms": 50},
                             "breaker": {"failure_threshold": 2, "open_ms": 10,
                                         "max_open_ms": 20}}},
        }), 0o644)
        subprocess.run([OUTBOXCTL, "--db", self.db, "init"], check=True, capture_output=True)
        conn = sqlite3.connect(self.db, isolation_level=None)
        for i in range(3):
            conn.execute("INSERT INTO outbox(topic, msg_key, payload) VALUES ('t', ?, '{}')",
                         (f"k{i}",))
        daemon = subprocess.Popen(
            [OUTBOXD, "--db", self.db, "--config", self.config_path],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, OUTBOX_CLI_SECRET=f"Bearer {token}"))
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(daemon.stderr), daemon=True)
        reader.start()
        try:
            deadline = time.monotonic() + TIMEOUT_S
            port = None
            while time.monotonic() < deadline:
                failed = conn.execute(
                    "SELECT count(*) FROM outbox WHERE last_error IS NOT NULL").fetchone()[0]
                if port is None:
                    for line in list(lines):
                        match = re.search(r"metrics listening on 127\.0\.0\.1:(\d+)", line)
                        if match:
                            port = int(match.group(1))
                if failed == 3 and port is not None and len(seen) >= 6:
                    break
                time.sleep(0.02)
            else:
                self.fail("rows never failed: " + "".join(lines))
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                metrics = r.read().decode()
        finally:
            daemon.send_signal(signal.SIGTERM)
            status = daemon.wait(TIMEOUT_S)
            reader.join(TIMEOUT_S)
            daemon.stderr.close()
        self.assertEqual(status, 0, "".join(lines))
        self.assertIn(f"Bearer {token}", seen)
        errors = "\n".join(r[0] for r in conn.execute("SELECT last_error FROM outbox"))
        conn.close()
        self.assertIn("[redacted]", errors)
        haystacks = {"outboxd log": "".join(lines), "last_error": errors, "metrics": metrics}
        for args in (["list"], ["list", "--json"], ["show", "1"], ["show", "1", "--json"]):
            result = subprocess.run([OUTBOXCTL, "--db", self.db, *args], capture_output=True,
                                    text=True, timeout=TIMEOUT_S)
            self.assertEqual(result.returncode, 0, result.stderr)
            haystacks["outboxctl " + " ".join(args)] = result.stdout + result.stderr
        signing_key = self.SIGNING[len("whsec_"):]
        for where, text in haystacks.items():
            with self.subTest(where):
                self.assertNotIn(token, text)
                self.assertNotIn(signing_key, text)
                self.assertNotIn("outboxd-signing-key-0123", text)


def main():
    global OUTBOXD, OUTBOXCTL
    parser = argparse.ArgumentParser()
    parser.add_argument("--outboxd", required=True)
    parser.add_argument("--outboxctl", required=True)
    args, rest = parser.parse_known_args()
    OUTBOXD, OUTBOXCTL = args.outboxd, args.outboxctl
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)


if __name__ == "__main__":
    main()
