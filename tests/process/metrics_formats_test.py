#!/usr/bin/env python3
"""/metrics of the real outboxd in both formats, judged by others' tools:
the Prometheus text by `promtool check metrics` (Debian package prometheus),
OpenMetrics by the OpenMetrics parser of Debian's python3-prometheus-client.

    metrics_formats_test.py --outboxd PATH --outboxctl PATH [unittest arguments]
"""

import os
import shutil
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import outboxd_test  # noqa: E402
from outboxd_test import DEADLINE_S, OutboxdTestCase, wait_until  # noqa: E402

# What Prometheus 2.42 sends when it scrapes.
PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                     "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")


class MetricsFormatsTest(OutboxdTestCase):
    def setUp(self):
        super().setUp()
        receiver = self.receiver()
        refusing = self.receiver(status=422)  # permanent: dead at once
        self.daemon = self.start(self.config({
            "orders": {"url": receiver.url},
            "refunds": {"url": refusing.url},
        }))
        # Some of everything: deliveries (the histogram), a dead row, an
        # unconfigured topic counted as "other".
        self.insert("orders", "o1")
        self.insert("orders", "o2")
        self.insert("refunds", "r1")
        self.insert("stray", "s1")
        wait_until(lambda: self.count("status IN (1, 2)") == 3, what="rows delivered or dead")

    def scrape(self, accept=None):
        request = urllib.request.Request(f"http://127.0.0.1:{self.daemon.metrics_port}/metrics")
        if accept is not None:
            request.add_header("Accept", accept)
        with urllib.request.urlopen(request, timeout=DEADLINE_S) as response:
            return response.headers["Content-Type"], response.read().decode()

    def test_prometheus_text_passes_promtool(self):
        promtool = shutil.which("promtool")
        self.assertIsNotNone(promtool, "no promtool: install prometheus (packaging/dev.sh deps)")
        content_type, text = self.scrape()
        self.assertEqual(content_type, "text/plain; version=0.0.4; charset=utf-8")
        self.assertNotIn("# EOF", text)
        checked = subprocess.run([promtool, "check", "metrics"], input=text, text=True,
                                 capture_output=True, timeout=DEADLINE_S)
        self.assertEqual(checked.returncode, 0, checked.stdout + checked.stderr)
        self.assertEqual(checked.stdout + checked.stderr, "")

    def test_openmetrics_parses_with_the_openmetrics_parser(self):
        from prometheus_client.openmetrics.parser import text_string_to_metric_families

        content_type, text = self.scrape(PROMETHEUS_ACCEPT)
        self.assertEqual(content_type, "application/openmetrics-text; version=1.0.0; charset=utf-8")
        self.assertTrue(text.endswith("\n# EOF\n"), text[-200:])
        families = {f.name: f for f in text_string_to_metric_families(text)}
        self.assertEqual(families["outbox_delivered"].type, "counter")
        samples = {(s.name, s.labels.get("topic")): s.value
                   for f in families.values() for s in f.samples}
        self.assertEqual(samples[("outbox_delivered_total", "orders")], 2)
        self.assertGreater(samples[("outbox_delivered_created", "orders")], 1.7e9)
        self.assertEqual(families["outbox_delivery_latency_seconds"].type, "histogram")
        self.assertEqual(families["outbox_delivery_latency_seconds"].unit, "seconds")
        self.assertEqual(samples[("outbox_delivery_latency_seconds_count", "orders")], 2)
        self.assertEqual(families["outbox_dead"].type, "gauge")
        self.assertEqual(samples[("outbox_dead", "refunds")], 1)
        self.assertEqual(samples[("outbox_dead_total", "refunds")], 1)
        self.assertEqual(samples[("outbox_pending", "other")], 1)

    def test_an_openmetrics_only_scraper_and_a_plain_one(self):
        content_type, _ = self.scrape("application/openmetrics-text")
        self.assertTrue(content_type.startswith("application/openmetrics-text; version=1.0.0"))
        content_type, _ = self.scrape("*/*")
        self.assertTrue(content_type.startswith("text/plain; version=0.0.4"))


if __name__ == "__main__":
    outboxd_test.main()  # runs this file's tests with outboxd_test's flags
