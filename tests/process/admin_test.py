#!/usr/bin/env python3
"""The admin API and console of a real outboxd over real HTTP on 127.0.0.1.

    admin_test.py --outboxd PATH --outboxctl PATH --docs DIR [unittest arguments]

Every route that docs/operations.md lists is asked without a token (401), with
an unknown one (401) and, for actions, with a read token (403); an operate
token's bulk retry acts on exactly the previewed rows and leaves one audit row
per message with the token's name; a count that moved is refused; hostile
strings come back as JSON text; the console's page carries its security
headers and no inline script. Python 3 standard library only.
"""

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import outboxd_test  # noqa: E402  (Receiver, Daemon, wait_until)
from outboxd_test import Daemon, Receiver, wait_until  # noqa: E402

DOCS = None
OPS_TOKEN = "ops-" + "5" * 40
NOC_TOKEN = "noc-" + "7" * 40
HOSTILE_TOPIC = "<script>alert('topic')</script>"
HOSTILE_KEY = '"><img src=x onerror=alert(1)>'
HOSTILE_ERROR = "</td><script>alert('error')</script>"


def documented_routes():
    """(method, path) of every route in docs/operations.md's route table."""
    with open(os.path.join(DOCS, "operations.md"), encoding="utf-8") as f:
        text = f.read()
    routes = re.findall(r"^\| `(GET|POST) /admin/api/([^`?]*)[^`]*` \|", text, re.M)
    if len(routes) < 7:
        raise AssertionError(f"docs/operations.md lists {len(routes)} admin routes, expected 7+")
    # A concrete path for each: {id} and {action} become a row and an action.
    return [(m, p.replace("{id}", "1").replace("{action}", "retry")) for m, p in routes]


class AdminFixture(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.db = os.path.join(self.tmp.name, "app.db")
        subprocess.run([outboxd_test.OUTBOXCTL, "--db", self.db, "init"], check=True,
                       capture_output=True)
        self.receiver = Receiver(status=200)
        token_file = os.path.join(self.tmp.name, "ops.token")
        with open(token_file, "w") as f:
            f.write(OPS_TOKEN + "\n")
        os.chmod(token_file, 0o600)
        self.config = os.path.join(self.tmp.name, "outboxd.json")
        with open(self.config, "w") as f:
            json.dump({
                "sweep_interval_ms": 100,
                "metrics": {"listen": "127.0.0.1:0"},
                "admin": {"listen": "127.0.0.1:0", "tokens": [
                    {"name": "ops", "token": "file:" + token_file, "role": "operate"},
                    {"name": "noc", "token": "env:OUTBOX_TEST_NOC", "role": "read"}]},
                "topics": {"*": {"url": self.receiver.url,
                                 "retry": {"first_interval_ms": 50, "jitter": 0}}},
            }, f)
        self.daemon = Daemon(self.db, self.config, {"OUTBOX_TEST_NOC": NOC_TOKEN})
        self.daemon.wait_ready()
        match = self.daemon.wait_for_log(r"admin console on .* \(port (\d+)\)")
        self.port = int(match.group(1))
        self.app = sqlite3.connect(self.db, timeout=10)

    def tearDown(self):
        self.app.close()
        self.daemon.kill()
        self.receiver.close()
        self.tmp.cleanup()

    def request(self, method, path, token=None, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data,
                                     method=method)
        if token:
            req.add_header("Authorization", "Bearer " + token)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=10) as response:
                return response.status, response.read(), response.headers
        except urllib.error.HTTPError as e:
            return e.code, e.read(), e.headers

    def api(self, method, path, token=OPS_TOKEN, body=None):
        status, raw, _ = self.request(method, "/admin/api/" + path, token, body)
        return status, json.loads(raw)

    def insert_dead(self, topic, key, error="HTTP 400 from receiver"):
        cur = self.app.execute(
            "INSERT INTO outbox(topic, msg_key, payload, status, dead_reason, last_error)"
            " VALUES(?, ?, ?, 2, 'permanent', ?)", (topic, key, b'{"n": 1}', error))
        self.app.commit()
        return cur.lastrowid


class AdminApiTest(AdminFixture):
    def test_every_documented_route_needs_a_token(self):
        routes = documented_routes()
        for method, path in routes:
            with self.subTest(route=f"{method} {path}"):
                body = {} if method == "POST" else None
                for token in (None, "not-a-token", OPS_TOKEN[:-1]):
                    status, raw, headers = self.request(method, "/admin/api/" + path, token, body)
                    self.assertEqual(status, 401, raw)
                    self.assertIn("error", json.loads(raw))
                    self.assertTrue(headers["Content-Type"].startswith("application/json"))
                    self.assertEqual(headers["X-Content-Type-Options"], "nosniff")
        refused = self.daemon.metrics()[("outbox_admin_refused_total", (("status", "401"),))]
        self.assertEqual(refused, 3 * len(routes))

    def test_a_read_token_reads_but_cannot_act(self):
        row = self.insert_dead("orders", "k1")
        for path in ("overview", "messages?status=dead", f"messages/{row}", "audit", "config"):
            status, body = self.api("GET", path, NOC_TOKEN)
            self.assertEqual(status, 200, body)
        for path, body in ((f"messages/{row}/retry", None),
                           ("bulk/retry", {"filter": {"status": "dead"}, "dry_run": True})):
            status, answer = self.api("POST", path, NOC_TOKEN, body)
            self.assertEqual(status, 403, answer)
        self.assertEqual(self.app.execute("SELECT status FROM outbox WHERE id = ?",
                                          (row,)).fetchone()[0], 2)
        forbidden = self.daemon.metrics()[("outbox_admin_refused_total", (("status", "403"),))]
        self.assertEqual(forbidden, 2)

    def test_config_is_redacted(self):
        status, config = self.api("GET", "config", NOC_TOKEN)
        self.assertEqual(status, 200)
        text = json.dumps(config)
        self.assertNotIn(OPS_TOKEN, text)
        self.assertNotIn(NOC_TOKEN, text)
        self.assertEqual(config["admin"]["tokens"][0]["token"], "<redacted>")

    def test_bulk_retry_acts_on_exactly_the_previewed_rows(self):
        wanted = [self.insert_dead("orders", f"k{i}") for i in range(3)]
        self.insert_dead("orders", "other", error="HTTP 500")
        self.insert_dead("invoices", "k0")
        action = {"filter": {"topic": "orders", "error": "http 400"}}
        status, preview = self.api("POST", "bulk/retry", body={**action, "dry_run": True})
        self.assertEqual((status, preview["matched"]), (200, 3), preview)
        status, done = self.api("POST", "bulk/retry",
                                body={**action, "expected": preview["matched"]})
        self.assertEqual(status, 200, done)
        self.assertEqual((done["applied"], done["changed"]), (True, 3))
        audit = self.app.execute(
            "SELECT row_id FROM outbox_audit WHERE actor = 'ops' AND action = 'retry'"
            " AND rows = 1 ORDER BY row_id").fetchall()
        self.assertEqual([r[0] for r in audit], wanted)
        # The retried rows go out again to the real receiver.
        wait_until(lambda: self.app.execute(
            "SELECT count(*) FROM outbox WHERE status = 1").fetchone()[0] == 3,
            what="the three retried rows delivered")
        status, page = self.api("GET", "messages?status=dead")
        self.assertEqual(sorted(r["msg_key"] for r in page["rows"]), ["k0", "other"])

    def test_a_count_that_moved_since_the_preview_is_refused(self):
        for i in range(3):
            self.insert_dead("orders", f"k{i}")
        action = {"filter": {"topic": "orders", "status": "dead"}}
        _, preview = self.api("POST", "bulk/cancel", body={**action, "dry_run": True})
        self.assertEqual(preview["matched"], 3)
        self.insert_dead("orders", "k3")
        self.insert_dead("orders", "k4")
        status, answer = self.api("POST", "bulk/cancel",
                                  body={**action, "expected": 3, "tolerance": 1})
        self.assertEqual(status, 409, answer)
        self.assertFalse(answer["applied"])
        self.assertEqual(answer["matched"], 5)
        self.assertEqual(self.app.execute(
            "SELECT count(*) FROM outbox WHERE dead_reason = 'cancelled'").fetchone()[0], 0)
        self.assertEqual(self.app.execute("SELECT count(*) FROM outbox_audit").fetchone()[0], 0)
        status, _ = self.api("POST", "bulk/cancel", body=action)  # no count: refused too
        self.assertEqual(status, 400)

    def test_one_message_action_and_its_audit(self):
        row = self.insert_dead("orders", "one")
        status, answer = self.api("POST", f"messages/{row}/retry")
        self.assertEqual((status, answer["changed"]), (200, 1))
        wait_until(lambda: self.api("GET", f"messages/{row}")[1]["message"]["status"]
                   == "delivered", what="the retried message delivered")
        _, shown = self.api("GET", f"messages/{row}")
        self.assertEqual([(e["actor"], e["action"]) for e in shown["audit"]], [("ops", "retry")])
        self.assertEqual(shown["message"]["payload"], '{"n": 1}')

    def test_hostile_strings_come_back_as_json_text(self):
        row = self.insert_dead(HOSTILE_TOPIC, HOSTILE_KEY, HOSTILE_ERROR)
        status, raw, headers = self.request("GET", f"/admin/api/messages/{row}", OPS_TOKEN)
        self.assertEqual(status, 200)
        self.assertTrue(headers["Content-Type"].startswith("application/json"))
        message = json.loads(raw)["message"]
        self.assertEqual((message["topic"], message["msg_key"], message["last_error"]),
                         (HOSTILE_TOPIC, HOSTILE_KEY, HOSTILE_ERROR))

    def test_bad_input_is_400_naming_the_field(self):
        for path, field in (("messages?status=lost", "status"), ("messages?limit=0", "limit"),
                            ("messages?colour=red", "colour"), ("messages?cursor=x", "cursor"),
                            ("messages?created_from=yesterday", "created_from"),
                            ("messages/abc", "id")):
            status, body = self.api("GET", path)
            self.assertEqual(status, 400, path)
            self.assertTrue(body["error"].startswith(field), body)
        status, body = self.api("POST", "bulk/retry", body={"filter": {"topik": "x"},
                                                           "dry_run": True})
        self.assertEqual(status, 400)
        self.assertIn("topik", body["error"])


class ConsolePageTest(AdminFixture):
    def test_the_page_needs_no_token_and_carries_its_security_headers(self):
        for path in ("/admin/", "/admin/console.js", "/admin/console.css"):
            status, body, headers = self.request("GET", path)
            self.assertEqual(status, 200, path)
            csp = headers["Content-Security-Policy"]
            self.assertIn("default-src 'self'", csp)
            self.assertIn("script-src 'self'", csp)
            self.assertNotIn("unsafe-inline", csp)
            self.assertEqual(headers["X-Content-Type-Options"], "nosniff")
            self.assertEqual(headers["Referrer-Policy"], "no-referrer")
        _, page, _ = self.request("GET", "/admin/")
        page = page.decode()
        self.assertEqual(re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", page), [])
        self.assertEqual(re.findall(r"\son[a-z]+\s*=", page), [])
        _, script, _ = self.request("GET", "/admin/console.js")
        self.assertNotIn(b"innerHTML", script)
        self.assertNotIn(b"document.cookie", script)

    def test_the_metrics_listener_serves_no_admin_route(self):
        self.assertEqual(self.daemon.get("/admin/api/overview")[0], 404)
        self.assertEqual(self.daemon.get("/admin/")[0], 404)


class AdminConfigTest(unittest.TestCase):
    def test_a_token_file_others_can_read_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            token = os.path.join(tmp, "ops.token")
            with open(token, "w") as f:
                f.write(OPS_TOKEN)
            os.chmod(token, 0o644)
            config = os.path.join(tmp, "outboxd.json")
            with open(config, "w") as f:
                json.dump({"admin": {"tokens": [{"name": "ops", "token": "file:" + token,
                                                 "role": "operate"}]},
                           "topics": {"t": {"url": "http://127.0.0.1:9/"}}}, f)
            result = subprocess.run(
                [outboxd_test.OUTBOXD, "--db", os.path.join(tmp, "x.db"), "--config", config,
                 "--check-config"], capture_output=True, text=True)
            self.assertEqual(result.returncode, 2, result.stderr)
            self.assertIn("admin.tokens[0].token", result.stderr)
            self.assertIn("0644", result.stderr)
            self.assertNotIn(OPS_TOKEN, result.stderr)


def main():
    global DOCS
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--outboxd", required=True)
    parser.add_argument("--outboxctl", required=True)
    parser.add_argument("--docs", required=True)
    args, rest = parser.parse_known_args()
    outboxd_test.OUTBOXD = args.outboxd
    outboxd_test.OUTBOXCTL = args.outboxctl
    DOCS = args.docs
    unittest.main(argv=[sys.argv[0]] + rest)


if __name__ == "__main__":
    main()
