#!/usr/bin/env python3
"""outboxd's metrics listener under a local attack (issue: "a local user ...
cannot crash, stall or read outboxd").

    hostile_listener_test.py --outboxd PATH --outboxctl PATH [unittest arguments]

The attack, all at once against the real outboxd on 127.0.0.1 (ports chosen
at run time): 64 idle connections and 8 clients sending one header line a
second (each reconnecting whenever the server closes it), 256 MiB POSTs and
1 MB gzip POSTs (a gzip bomb of 1 GiB) sent over and over. Meanwhile 1 000
messages are committed. Judged: /healthz answers within 1 s every time (a
fresh connection every 100 ms, every other one sending its request 200 ms
after its connect; times OUTBOX_TEST_SLOWDOWN under emulation),
every message is delivered with no failed attempt, and outboxd's RSS grows by
less than 8 MiB (only when outboxd is neither built with AddressSanitizer,
which keeps freed memory in quarantine, nor run under qemu-user).

Python 3 standard library only; attack pacing uses waits on the stop event,
every wait for an outcome polls with a deadline.
"""

import os
import resource
import socket
import sys
import threading
import time
import unittest
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import outboxd_test  # noqa: E402  (the Daemon, Receiver and helpers)
from outboxd_test import OutboxdTestCase, wait_until  # noqa: E402

IDLE_CONNECTIONS = 64
SLOW_HEADER_CLIENTS = 8
MESSAGES = 1000
# Scaled under emulation (OUTBOX_TEST_SLOWDOWN), which is 5-20x slower.
HEALTHZ_LIMIT_S = 1.0 * float(os.environ.get("OUTBOX_TEST_SLOWDOWN", "1"))
RSS_GROWTH_LIMIT = 8 * 1024 * 1024
# Longer than outboxd's 5 s request deadline, so slow clients are cut and come back.
MIN_ATTACK_S = 6.0
# Within the limit above, much longer than the flood takes to cycle the
# connection cap (about 20 ms natively).
PROBE_PAUSE_S = 0.2


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def rss_not_judged_because():
    """Why outboxd's RSS cannot be judged in this run, or None when it can."""
    if os.environ.get("OUTBOX_TEST_EMULATED"):
        return "outboxd runs under qemu-user, whose own memory grows as it translates code"
    if built_with_asan(outboxd_test.OUTBOXD):
        return "outboxd is built with AddressSanitizer, whose quarantine keeps freed memory"
    return None


def built_with_asan(path):
    with open(path, "rb") as f:
        return b"__asan_init" in f.read()


def gzip_bomb(size=1_000_000):
    """About `size` bytes of gzip that inflate to about 1000 times as much:
    one member of 64 MiB of zeros, repeated (gzip allows several members)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    member = b"".join(compressor.compress(zeros) for _ in range(64)) + compressor.flush()
    return member * (size // len(member) + 1)


def connect(port, timeout=2.0):
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class Attack:
    """The attackers, each a thread that reconnects until stop()."""

    def __init__(self, port):
        self.port = port
        self.stopping = threading.Event()
        self.connects = {"idle": 0, "slow": 0, "big": 0, "gzip": 0}
        self._lock = threading.Lock()
        self._bomb = gzip_bomb()
        self._threads = [threading.Thread(target=self._idle)]
        self._threads += [threading.Thread(target=self._slow, args=(i,))
                          for i in range(SLOW_HEADER_CLIENTS)]
        self._threads += [threading.Thread(target=self._post, args=("big",)),
                          threading.Thread(target=self._post, args=("gzip",))]

    def start(self):
        for thread in self._threads:
            thread.start()

    def stop(self):
        self.stopping.set()
        for thread in self._threads:
            thread.join()

    def _count(self, kind):
        with self._lock:
            self.connects[kind] += 1

    def _idle(self):
        """Holds IDLE_CONNECTIONS open, replacing each one the server closes."""
        held = []
        try:
            while not self.stopping.is_set():
                alive = []
                for sock in held:
                    try:
                        closed = sock.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK) == b""
                    except BlockingIOError:
                        closed = False
                    except OSError:
                        closed = True
                    if closed:
                        sock.close()
                    else:
                        alive.append(sock)
                held = alive
                while len(held) < IDLE_CONNECTIONS and not self.stopping.is_set():
                    try:
                        sock = connect(self.port)
                        sock.setblocking(False)  # polled below without waiting
                        held.append(sock)
                        self._count("idle")
                    except OSError:
                        break
                self.stopping.wait(0.05)
        finally:
            for sock in held:
                sock.close()

    def _slow(self, index):
        """Sends a request head one header line a second, never finishing it."""
        while not self.stopping.is_set():
            try:
                with connect(self.port) as sock:
                    self._count("slow")
                    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                    line = 0
                    while not self.stopping.wait(1.0):
                        sock.sendall(b"X-Slow-%d-%d: still coming\r\n" % (index, line))
                        line += 1
            except OSError:
                pass  # closed by the server: come back

    def _post(self, kind):
        """256 MiB bodies, or 1 MB gzip bombs, to served and unserved paths."""
        chunk = bytes(1 << 20)
        paths = [b"/metrics", b"/healthz", b"/nothing"]
        sent = 0
        while not self.stopping.is_set():
            path = paths[sent % len(paths)]
            sent += 1
            try:
                with connect(self.port) as sock:
                    self._count(kind)
                    if kind == "big":
                        sock.sendall(b"POST " + path + b" HTTP/1.1\r\nHost: x\r\n"
                                     b"Content-Length: %d\r\n\r\n" % (256 << 20))
                        for _ in range(256):
                            if self.stopping.is_set():
                                break
                            sock.sendall(chunk)
                    else:
                        sock.sendall(b"POST " + path + b" HTTP/1.1\r\nHost: x\r\n"
                                     b"Content-Encoding: gzip\r\nContent-Type: text/plain\r\n"
                                     b"Content-Length: %d\r\n\r\n" % len(self._bomb))
                        sock.sendall(self._bomb)
                    while sock.recv(65536):
                        pass
            except OSError:
                pass  # refused and closed, as it should be
            self.stopping.wait(0.05)


def probe_healthz(port, pause=0.0):
    """(status line, seconds) of one GET /healthz on a fresh connection,
    whose request is sent `pause` seconds after the connect."""
    start = time.monotonic()
    try:
        with connect(port, timeout=HEALTHZ_LIMIT_S * 3) as sock:
            time.sleep(pause)  # a client descheduled between connect and send
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = b""
            while True:
                data = sock.recv(4096)
                if not data:
                    break
                answer += data
        status = answer.split(b"\r\n", 1)[0].decode(errors="replace")
    except OSError as e:
        status = f"error: {e}"
    return status, time.monotonic() - start


class HostileListenerTest(OutboxdTestCase):
    def insert_many(self, count, start):
        import sqlite3

        db = sqlite3.connect(self.db, timeout=10, isolation_level=None)
        try:
            db.execute("BEGIN")
            db.executemany("INSERT INTO outbox(topic, msg_key, payload) VALUES ('orders', ?, ?)",
                           [(f"k{i}", b'{"n":1}') for i in range(start, start + count)])
            db.execute("COMMIT")
        finally:
            db.close()

    def test_attack_leaves_healthz_delivery_and_memory_alone(self):
        receiver = self.receiver()
        daemon = self.start(self.config({"orders": {"url": receiver.url}},
                                        sweep_interval_ms=1000))
        pid = daemon.proc.pid
        # Warm up what a normal run touches: deliveries, /metrics, /healthz.
        self.insert_many(50, 0)
        wait_until(lambda: receiver.count() == 50, what="warm-up delivered")
        for _ in range(3):
            daemon.metrics()
            probe_healthz(daemon.metrics_port)
        baseline = rss_bytes(pid)

        attack = Attack(daemon.metrics_port)
        probes, peak = [], baseline
        started = time.monotonic()
        attack.start()
        try:
            committed = 0
            while (time.monotonic() - started < MIN_ATTACK_S or
                   receiver.count() < 50 + MESSAGES):
                self.assertLess(time.monotonic() - started, 60, "attack ran a minute")
                if committed < MESSAGES:
                    self.insert_many(100, 50 + committed)
                    committed += 100
                # Every other probe pauses before its request, as a client on
                # a busy device may: the flood must not push its connection out.
                pause = PROBE_PAUSE_S if len(probes) % 2 else 0.0
                probes.append(probe_healthz(daemon.metrics_port, pause))
                peak = max(peak, rss_bytes(pid))
                if probes[-1][0] != "HTTP/1.1 200 OK" or probes[-1][1] >= HEALTHZ_LIMIT_S:
                    break  # judged below, without waiting for the rest
                attack.stopping.wait(0.1)
        finally:
            attack.stop()
        figures = {
            "attack_s": round(time.monotonic() - started, 1),
            "probes": len(probes),
            "slowest_probe_s": round(max(s for _, s in probes[::2]), 3),
            "slowest_paused_probe_s": round(max((s for _, s in probes[1::2]), default=0), 3),
            "rss_baseline_kib": baseline // 1024,
            "rss_growth_kib": (peak - baseline) // 1024,
            "connects": attack.connects,
            "fds_after": len(os.listdir(f"/proc/{pid}/fd")),
        }
        print("hostile listener figures:", figures, flush=True)

        bad = [(status, round(s, 3)) for status, s in probes
               if status != "HTTP/1.1 200 OK" or s >= HEALTHZ_LIMIT_S]
        self.assertEqual(bad, [], f"every /healthz within {HEALTHZ_LIMIT_S:g} s")
        self.assertEqual(self.count("status = 1"), 50 + MESSAGES)
        samples = daemon.metrics()
        failures = sum(v for (name, _), v in samples.items()
                       if name == "outbox_attempt_failures_total")
        self.assertEqual(failures, 0, "no delivery attempt failed")
        self.assertFalse([k for k, v in samples.items()
                          if k[0] == "outbox_breaker_state" and v != 0], "breaker closed")
        for kind in ("idle", "slow", "big", "gzip"):
            self.assertGreater(attack.connects[kind], 0, kind)
        reason = rss_not_judged_because()
        if reason:
            print("RSS not judged:", reason, flush=True)
        else:
            self.assertLess(peak - baseline, RSS_GROWTH_LIMIT,
                            f"RSS grew {(peak - baseline) // 1024} KiB")
        self.assertIsNone(daemon.proc.poll(), "outboxd still runs")

    def test_request_bodies_are_refused_unread_and_never_inflated(self):
        daemon = self.start(self.config({"*": {"url": self.receiver().url}}))
        pid = daemon.proc.pid
        daemon.metrics()
        baseline = rss_bytes(pid)
        # The answer comes right after the head of a 256 MiB body: the body is
        # never waited for, nor read.
        for path, status in ((b"/metrics", b"405"), (b"/nothing", b"404"), (b"/healthz", b"405")):
            with connect(daemon.metrics_port, timeout=3.0) as sock:
                sock.sendall(b"POST " + path + b" HTTP/1.1\r\nHost: x\r\n"
                             b"Content-Length: %d\r\n\r\n" % (256 << 20))
                answer = sock.recv(4096)
            self.assertTrue(answer.startswith(b"HTTP/1.1 " + status), (path, answer[:40]))
            self.assertIn(b"Connection: close", answer)
        # A gzip bomb sent whole is neither read nor inflated (the server
        # closes without reading it, so the peer may see a reset).
        bomb = gzip_bomb()
        for path in (b"/metrics", b"/nothing"):
            with connect(daemon.metrics_port, timeout=3.0) as sock:
                answer = b""
                try:
                    sock.sendall(b"POST " + path + b" HTTP/1.1\r\nHost: x\r\n"
                                 b"Content-Encoding: gzip\r\n"
                                 b"Content-Length: %d\r\n\r\n" % len(bomb) + bomb)
                    answer = sock.recv(4096)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # refused before the end of the bomb
            self.assertRegex(answer[:12], rb"^(HTTP/1.1 40[45])?$", path)
        self.assertEqual(daemon.get("/healthz")[0], 200)
        growth = rss_bytes(pid) - baseline
        reason = rss_not_judged_because()
        if reason:
            print("RSS not judged:", reason, flush=True)
        else:
            self.assertLess(growth, RSS_GROWTH_LIMIT, f"RSS grew {growth // 1024} KiB")

    def test_idle_connections_cannot_take_the_descriptors_deliveries_need(self):
        receiver = self.receiver()
        self.write_config(self.config({"orders": {"url": receiver.url}}))
        # outboxd with 128 descriptors; the attacker opens more than that.
        limit = 128
        daemon = outboxd_test.Daemon(self.db, self.config_path)
        self.daemons.append(daemon)
        resource.prlimit(daemon.proc.pid, resource.RLIMIT_NOFILE, (limit, limit))
        daemon.wait_ready()
        held = []
        try:
            for _ in range(limit + 32):
                try:
                    held.append(connect(daemon.metrics_port, timeout=1.0))
                except OSError:
                    break  # the backlog is full: nobody accepts any more
            # Whatever outboxd accepted by now holds its descriptors.
            status, _ = probe_healthz(daemon.metrics_port)
            self.assertEqual(status, "HTTP/1.1 200 OK")
            self.insert_many(20, 0)
            wait_until(lambda: self.count("status = 1") == 20, what="delivered", timeout=15)
        finally:
            for sock in held:
                sock.close()
        failures = sum(v for (name, _), v in daemon.metrics().items()
                       if name == "outbox_attempt_failures_total")
        self.assertEqual(failures, 0, "no delivery attempt failed")


def main():
    import argparse

    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--outboxd", required=True)
    parser.add_argument("--outboxctl", required=True)
    args, rest = parser.parse_known_args()
    outboxd_test.OUTBOXD = os.path.abspath(args.outboxd)
    outboxd_test.OUTBOXCTL = os.path.abspath(args.outboxctl)
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)


if __name__ == "__main__":
    main()
