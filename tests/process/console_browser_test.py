#!/usr/bin/env python3
"""The web console in a real browser: Debian's chromium, headless, driven by
chromium-driver through python3-selenium, against a real outboxd and a real
receiver on 127.0.0.1.

    console_browser_test.py --outboxd PATH --outboxctl PATH --docs DIR --out DIR

Logs in with a token, checks the overview against `outboxctl stats`, filters
dead messages of one topic, opens one and retries it (the receiver gets it),
runs a bulk retry through its preview, finds the actions in the audit page,
and shows hostile topics, keys, payloads and errors as text (no alert, no
injected element). A screenshot of each page goes to --out.
"""

import argparse
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import admin_test  # noqa: E402
import outboxd_test  # noqa: E402
from admin_test import HOSTILE_ERROR, HOSTILE_KEY, HOSTILE_TOPIC, OPS_TOKEN  # noqa: E402
from outboxd_test import wait_until  # noqa: E402

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import NoAlertPresentException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

OUT = None


class ConsoleBrowserTest(admin_test.AdminFixture):
    def setUp(self):
        super().setUp()
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1400,1000"):
            options.add_argument(flag)
        self.browser = webdriver.Chrome(service=Service("/usr/bin/chromedriver"),
                                        options=options)
        self.browser.set_page_load_timeout(30)
        self.wait = WebDriverWait(self.browser, 15)
        self.base = f"http://127.0.0.1:{self.port}/admin/"

    def tearDown(self):
        self.browser.quit()
        super().tearDown()

    def shot(self, name):
        os.makedirs(OUT, exist_ok=True)
        self.browser.save_screenshot(os.path.join(OUT, name + ".png"))

    def text(self, element_id):
        return self.browser.find_element(By.ID, element_id).text

    def no_alert(self):
        try:
            alert = self.browser.switch_to.alert
        except NoAlertPresentException:
            return
        self.fail("an alert opened: " + alert.text)

    def log_in(self):
        self.browser.get(self.base)
        self.wait.until(expected_conditions.visibility_of_element_located((By.ID, "token")))
        self.shot("0-login")
        self.browser.find_element(By.ID, "token").send_keys(OPS_TOKEN)
        self.browser.find_element(By.CSS_SELECTOR, "#login-form button").click()
        self.wait.until(expected_conditions.visibility_of_element_located((By.ID, "overview")))

    def overview_row(self, topic):
        for row in self.browser.find_elements(By.CSS_SELECTOR, "#overview-rows tr"):
            cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
            if cells and cells[0] == topic:
                return cells
        return None

    def test_an_operator_session(self):
        dead = [self.insert_dead("orders", f"k{i}") for i in range(3)]
        self.insert_dead("invoices", "k0")
        self.log_in()
        wait_until(lambda: self.overview_row("orders"), what="the orders row on the overview")
        stats = json.loads(subprocess.run(
            [outboxd_test.OUTBOXCTL, "--db", self.db, "stats", "--json"], check=True,
            capture_output=True, text=True).stdout)
        dead_counts = {t["topic"]: t["count"] for t in stats["topics"] if t["status"] == "dead"}
        self.assertEqual(int(self.overview_row("orders")[5]), dead_counts["orders"])
        self.assertEqual(int(self.overview_row("invoices")[5]), dead_counts["invoices"])
        self.shot("1-overview")

        # Dead messages of one topic, then one of them, retried.
        self.browser.get(self.base + "#messages")
        Select(self.browser.find_element(By.ID, "f-status")).select_by_visible_text("dead")
        self.browser.find_element(By.ID, "f-topic").send_keys("orders")
        self.browser.find_element(By.ID, "filter-apply").click()
        wait_until(lambda: len(self.browser.find_elements(By.CSS_SELECTOR,
                                                          "#message-rows tr")) == 3,
                   what="three dead orders listed")
        self.shot("2-messages")
        self.browser.find_element(By.LINK_TEXT, str(dead[0])).click()
        self.wait.until(expected_conditions.text_to_be_present_in_element((By.ID, "m-id"),
                                                                          str(dead[0])))
        self.shot("3-message")
        self.browser.find_element(By.ID, "act-retry").click()
        wait_until(lambda: self.receiver.count() >= 1, what="the retried message delivered")

        def shows_delivered():
            self.browser.refresh()
            return "status delivered" in self.text("m-fields")

        wait_until(shows_delivered, what="the message page showing delivered")

        # A bulk retry of the other two, with its preview.
        self.browser.get(self.base + "#messages")
        Select(self.browser.find_element(By.ID, "f-status")).select_by_visible_text("dead")
        self.browser.find_element(By.ID, "f-topic").send_keys("orders")
        self.browser.find_element(By.ID, "filter-apply").click()
        self.browser.find_element(By.ID, "bulk-preview").click()
        self.wait.until(expected_conditions.text_to_be_present_in_element(
            (By.ID, "bulk-count"), "would change 2 message(s)"))
        self.shot("4-bulk-preview")
        self.browser.find_element(By.ID, "bulk-confirm").click()
        self.wait.until(expected_conditions.text_to_be_present_in_element(
            (By.ID, "bulk-result"), "2 message(s) changed"))
        wait_until(lambda: self.receiver.count() >= 3, what="the bulk-retried messages delivered")

        # The audit page names the token.
        self.browser.get(self.base + "#audit")
        wait_until(lambda: len(self.browser.find_elements(By.CSS_SELECTOR,
                                                          "#audit-rows tr")) == 3,
                   what="three audit rows")
        actors = {row.find_elements(By.TAG_NAME, "td")[1].text
                  for row in self.browser.find_elements(By.CSS_SELECTOR, "#audit-rows tr")}
        self.assertEqual(actors, {"ops"})
        self.shot("5-audit")

    def test_hostile_strings_are_shown_as_text(self):
        row = self.insert_dead(HOSTILE_TOPIC, HOSTILE_KEY, HOSTILE_ERROR)
        self.app.execute("UPDATE outbox_payload SET payload = ? WHERE id = ?",
                         (b"<img src=x onerror=alert('payload')>", row))
        self.app.commit()
        self.log_in()
        wait_until(lambda: self.overview_row(HOSTILE_TOPIC), what="the hostile topic shown")
        self.no_alert()
        self.browser.get(self.base + "#messages")
        self.browser.find_element(By.ID, "filter-apply").click()
        wait_until(lambda: HOSTILE_KEY in self.text("message-rows"), what="the hostile key")
        self.no_alert()
        self.shot("6-hostile-list")
        self.browser.get(self.base + f"#message/{row}")
        wait_until(lambda: "onerror" in self.text("m-payload"), what="the hostile payload")
        self.no_alert()
        self.assertIn(HOSTILE_ERROR, self.text("m-fields"))
        self.shot("7-hostile-message")
        # Nothing was injected: one script (ours), no image.
        self.assertEqual(len(self.browser.find_elements(By.TAG_NAME, "script")), 1)
        self.assertEqual(self.browser.find_elements(By.TAG_NAME, "img"), [])


def main():
    global OUT
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--outboxd", required=True)
    parser.add_argument("--outboxctl", required=True)
    parser.add_argument("--docs", required=True)
    parser.add_argument("--out", required=True)
    args, rest = parser.parse_known_args()
    outboxd_test.OUTBOXD = args.outboxd
    outboxd_test.OUTBOXCTL = args.outboxctl
    admin_test.DOCS = args.docs
    OUT = args.out
    unittest.main(argv=[sys.argv[0]] + rest)


if __name__ == "__main__":
    main()
