#!/usr/bin/env python3
"""Who may configure outboxd, and what a config may make it do (issue #27,
docs/reliability.md "Threat model"): a config or a directory that others can
write, a file: secret that others can read, hook SQL that reaches for native
code. Each is refused by the real outboxd at start, at reload and by
--check-config, in one line naming what is wrong.

    hostile_config_test.py --outboxd PATH --outboxctl PATH [unittest arguments]

Python 3 standard library only; nothing sleeps to synchronise.
"""

import argparse
import json
import os
import pwd
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


def config_text(**topic_fields):
    entry = {"url": "http://127.0.0.1:9/events"}
    entry.update(topic_fields)
    return json.dumps({"metrics": {"listen": ""}, "topics": {"a": entry}})


class Running:
    """outboxd as a child process; its stderr collected line by line."""

    def __init__(self, argv, env=None):
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True, env=env)
        self.lines = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read)
        self._reader.start()

    def _read(self):
        for line in self.proc.stderr:
            with self._lock:
                self.lines.append(line)

    def log(self):
        with self._lock:
            return list(self.lines)

    def wait_for(self, text):
        end = time.monotonic() + TIMEOUT_S
        while time.monotonic() < end:
            found = [line for line in self.log() if text in line]
            if found:
                return found[0]
            if self.proc.poll() is not None:
                break
            time.sleep(0.01)
        raise AssertionError(f"no log line with {text!r}: {self.log()}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=TIMEOUT_S)
        self._reader.join()
        return self.proc.returncode


class ConfigTestCase(unittest.TestCase):
    def setUp(self):
        self._dir = tempfile.TemporaryDirectory(prefix="outbox-hostile-")
        self.top = self._dir.name  # 0700, ours
        self.conf_dir = os.path.join(self.top, "etc")
        os.mkdir(self.conf_dir, 0o755)
        os.chmod(self.conf_dir, 0o755)
        self.config_path = os.path.join(self.conf_dir, "outboxd.json")
        self.db = os.path.join(self.top, "app.db")

    def tearDown(self):
        self._dir.cleanup()

    def write(self, path, text, mode):
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)

    def outboxd(self, *extra):
        return subprocess.run([OUTBOXD, "--db", self.db, "--config", self.config_path, *extra],
                              capture_output=True, text=True, timeout=TIMEOUT_S)

    def assert_refused(self, expected):
        """Both a start and --check-config exit 2 with one line holding each of `expected`."""
        for extra in ([], ["--check-config"]):
            result = self.outboxd(*extra)
            lines = result.stderr.strip("\n").split("\n")
            self.assertEqual(result.returncode, 2, result.stderr)
            self.assertEqual(len(lines), 1, result.stderr)
            for part in expected:
                self.assertIn(part, lines[0])
            self.assertFalse(os.path.exists(self.db), "a refused start created the database")

    def assert_accepted(self):
        result = self.outboxd("--check-config")
        self.assertEqual(result.returncode, 0, result.stderr)


class ConfigOwnershipTest(ConfigTestCase):
    def test_a_config_others_can_write_is_refused_naming_path_owner_and_mode(self):
        for mode, why in ((0o666, "writable by every user"), (0o620, "writable by its group")):
            with self.subTest(mode=oct(mode)):
                self.write(self.config_path, config_text(), mode)
                self.assert_refused([self.config_path, "owner ", f"mode 0{mode:o}", why])

    def test_a_directory_others_can_write_is_refused_even_sticky(self):
        self.write(self.config_path, config_text(), 0o640)
        for mode, why in ((0o777, "writable by every user"),
                          (0o1777, "the sticky bit does not help"),
                          (0o775, "writable by its group")):
            with self.subTest(mode=oct(mode)):
                os.chmod(self.conf_dir, mode)
                self.assert_refused([self.conf_dir + " (the config's directory)",
                                     f"mode {mode:04o}", why])
        os.chmod(self.conf_dir, 0o755)
        self.assert_accepted()

    @unittest.skipUnless(os.geteuid() == 0, "needs root to give the file away")
    def test_a_config_owned_by_another_user_is_refused(self):
        nobody = pwd.getpwnam("nobody")
        self.write(self.config_path, config_text(), 0o600)
        os.chown(self.config_path, nobody.pw_uid, nobody.pw_gid)
        self.assert_refused([self.config_path, f"owner nobody (uid {nobody.pw_uid})",
                             "owned by neither root nor"])
        # The packaged layout: root:<group> 0640 in a root-owned directory.
        os.chown(self.config_path, 0, nobody.pw_gid)
        os.chmod(self.config_path, 0o640)
        self.assert_accepted()

    def test_a_file_secret_others_can_read_is_refused(self):
        secret = os.path.join(self.top, "token")
        self.write(secret, "Bearer t0ken\n", 0o644)
        self.write(self.config_path,
                   config_text(headers={"Authorization": f"file:{secret}"}), 0o640)
        self.assert_refused([f"secret file {secret}", "mode 0644", "readable by every user"])
        os.chmod(secret, 0o640)
        self.assert_accepted()

    def test_a_reload_of_a_config_others_can_write_is_refused_and_the_daemon_keeps_running(self):
        self.write(self.config_path, config_text(), 0o640)
        subprocess.run([OUTBOXCTL, "--db", self.db, "init"], check=True, capture_output=True)
        daemon = Running([OUTBOXD, "--db", self.db, "--config", self.config_path])
        try:
            daemon.wait_for("outboxd started")
            os.chmod(self.config_path, 0o666)
            daemon.proc.send_signal(signal.SIGHUP)
            self.assertIn("mode 0666", daemon.wait_for("reload failed"))
            self.assertIsNone(daemon.proc.poll(), "outboxd exited")
        finally:
            self.assertEqual(daemon.stop(), 0)


class SecretsAndUrlsTest(ConfigTestCase):
    SECRET_PATH = "services/T0000/B0000/XyZsecretWebhookPath"

    def test_a_url_from_a_secret_shows_only_scheme_host_and_port(self):
        env = dict(os.environ, HOOK_URL=f"http://127.0.0.1:9/{self.SECRET_PATH}?token=abc")
        self.write(self.config_path, json.dumps({
            "metrics": {"listen": "127.0.0.1:0"},
            "topics": {"a": {"url": "env:HOOK_URL",
                             "retry": {"first_interval_ms": 10, "max_interval_ms": 50},
                             "breaker": {"failure_threshold": 1, "open_ms": 10,
                                         "max_open_ms": 20}}}}), 0o640)
        printed = subprocess.run(
            [OUTBOXD, "--db", self.db, "--config", self.config_path, "--check-config", "--print"],
            capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
        self.assertEqual(printed.returncode, 0, printed.stderr)
        self.assertIn('"http://127.0.0.1:9/<redacted>"', printed.stdout)
        subprocess.run([OUTBOXCTL, "--db", self.db, "init"], check=True, capture_output=True)
        conn = sqlite3.connect(self.db)
        conn.execute("INSERT INTO outbox(topic, msg_key, payload) VALUES('a', 'k', '{}')")
        conn.commit()
        conn.close()
        daemon = Running([OUTBOXD, "--db", self.db, "--config", self.config_path], env=env)
        try:
            port = re.search(r"metrics listening on 127\.0\.0\.1:(\d+)",
                             daemon.wait_for("metrics listening on")).group(1)
            # Port 9 refuses: the send fails, and its failure is logged.
            daemon.wait_for("breaker open for endpoint http://127.0.0.1:9 ")
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                metrics = r.read().decode()
            self.assertIn('endpoint="http://127.0.0.1:9"', metrics)
        finally:
            self.assertEqual(daemon.stop(), 0)
        for where, text in (("--print", printed.stdout + printed.stderr),
                            ("log", "".join(daemon.log())), ("/metrics", metrics)):
            with self.subTest(where):
                self.assertNotIn("XyZsecretWebhookPath", text)
                self.assertNotIn("token=abc", text)

    def test_credentials_over_plaintext_urls_warn_once_and_tls_or_loopback_do_not(self):
        env = dict(os.environ, TOKEN="Bearer t")
        cases = [("http://receiver.example/events", True),
                 ("nats://broker.example:4222/orders", True),
                 ("https://receiver.example/events", False),
                 ("http://127.0.0.1:9/events", False)]
        for url, warns in cases:
            with self.subTest(url):
                fields = {"url": url}
                if url.startswith("nats"):
                    fields["nats"] = {"token": "env:TOKEN"}
                else:
                    fields["headers"] = {"Authorization": "env:TOKEN"}
                self.write(self.config_path, json.dumps({
                    "metrics": {"listen": ""}, "topics": {"a": fields}}), 0o640)
                result = subprocess.run(
                    [OUTBOXD, "--db", self.db, "--config", self.config_path, "--check-config"],
                    capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
                self.assertEqual(result.returncode, 0, result.stderr)
                warnings = [line for line in result.stderr.splitlines()
                            if "unencrypted" in line]
                self.assertEqual(len(warnings), 1 if warns else 0, result.stderr)
        # At start: one warning line in the log.
        self.write(self.config_path, json.dumps({
            "metrics": {"listen": ""},
            "topics": {"a": {"url": "http://receiver.example/events",
                             "signing_secret": "env:SIGNING"}}}), 0o640)
        subprocess.run([OUTBOXCTL, "--db", self.db, "init"], check=True, capture_output=True)
        daemon = Running([OUTBOXD, "--db", self.db, "--config", self.config_path],
                         env=dict(env, SIGNING="whsec_" + "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3"))
        try:
            daemon.wait_for("outboxd started")
        finally:
            self.assertEqual(daemon.stop(), 0)
        self.assertEqual(len([l for l in daemon.log() if "unencrypted" in l]), 1, daemon.log())

    def test_the_audit_names_the_real_user_and_keeps_sudo_user_beside_it(self):
        subprocess.run([OUTBOXCTL, "--db", self.db, "init"], check=True, capture_output=True)
        conn = sqlite3.connect(self.db)
        conn.execute("INSERT INTO outbox(topic, msg_key, payload) VALUES('a', 'k', '{}')")
        conn.commit()
        row_id = conn.execute("SELECT max(id) FROM outbox").fetchone()[0]
        conn.close()
        env = dict(os.environ, SUDO_USER="mallory\x1b[2J", USER="mallory")
        result = subprocess.run([OUTBOXCTL, "--db", self.db, "cancel", "--id", str(row_id)],
                                capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        audit = json.loads(subprocess.run([OUTBOXCTL, "--db", self.db, "audit", "--json"],
                                          capture_output=True, text=True, check=True).stdout)
        me = pwd.getpwuid(os.getuid()).pw_name
        self.assertEqual([entry["actor"] for entry in audit], [f"{me} (SUDO_USER=mallory?[2J)"])


class HookCheckTest(ConfigTestCase):
    def test_check_config_refuses_what_the_runtime_refuses_naming_key_and_function(self):
        subprocess.run([OUTBOXCTL, "--db", self.db, "init"], check=True, capture_output=True)
        conn = sqlite3.connect(self.db)
        conn.execute("CREATE TABLE shop(k TEXT PRIMARY KEY, note TEXT)")
        conn.commit()
        conn.close()
        cases = [
            ("UPDATE shop SET note = hex(fts3_tokenizer('simple')) WHERE k = :key",
             "function fts3_tokenizer is not allowed in a hook"),
            ("UPDATE shop SET note = load_extension('/tmp/x.so')",
             "function load_extension is not allowed in a hook"),
        ]
        for sql, why in cases:
            with self.subTest(sql):
                self.write(self.config_path, config_text(on_delivered=sql), 0o640)
                for extra in (["--check-config"], []):
                    result = self.outboxd(*extra)
                    self.assertNotEqual(result.returncode, 0, result.stderr)
                    self.assertIn('topics."a".on_delivered: ' + why, result.stderr)
        # Without a database nothing can be checked, and it says so.
        os.remove(self.db)
        result = self.outboxd("--check-config")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("hooks not checked", result.stdout)


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
