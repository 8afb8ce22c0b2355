"""The demo's view of a NATS JetStream stream, with nothing but the standard
library: the NATS text protocol over one socket, and JetStream's JSON API
($JS.API.*) as request/reply. Enough to create the stream outboxd publishes
into and to read it back; not a general client.

    python3 demo_jetstream.py create nats://127.0.0.1:4222 ORDERS orders
"""

import base64
import datetime
import json
import socket
import sys
import urllib.parse


class JetStream:
    def __init__(self, url, timeout=5):
        parts = urllib.parse.urlsplit(url)
        self.sock = socket.create_connection((parts.hostname, parts.port or 4222), timeout)
        self.reader = self.sock.makefile("rb")
        self.next_reply = 0
        info = self.reader.readline()
        if not info.startswith(b"INFO "):
            raise RuntimeError(f"not a NATS server at {url}: {info[:80]!r}")
        self._send(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,'
                   b'"no_responders":true,"protocol":1}\r\nSUB _INBOX.demo.* 1\r\n')

    def close(self):
        self.sock.close()

    def _send(self, data):
        self.sock.sendall(data)

    def request(self, subject, body):
        """Publishes `body` (a dict) to `subject` and returns the JSON reply."""
        self.next_reply += 1
        reply = f"_INBOX.demo.{self.next_reply}"
        payload = json.dumps(body).encode()
        self._send(f"PUB {subject} {reply} {len(payload)}\r\n".encode() + payload + b"\r\n")
        while True:
            line = self.reader.readline()
            if not line:
                raise RuntimeError("the NATS server closed the connection")
            words = line.split()
            if words[0] == b"PING":
                self._send(b"PONG\r\n")
            elif words[0] == b"-ERR":
                raise RuntimeError(line.decode().strip())
            elif words[0] in (b"MSG", b"HMSG"):
                size = int(words[-1])
                data = self.reader.read(size + 2)[:-2]
                if words[1].decode() != reply:
                    continue  # an answer to an earlier request that timed out
                if words[0] == b"HMSG":  # a status only: 503 no responders
                    raise RuntimeError(f"no answer from {subject}: {data[:40]!r}")
                return json.loads(data)

    def create(self, stream, subject):
        answer = self.request(f"$JS.API.STREAM.CREATE.{stream}", {
            "name": stream, "subjects": [subject], "storage": "file",
            # JetStream's default duplicate window: a resend within it is dropped.
            "duplicate_window": 120 * 10**9})
        if "error" in answer:
            raise RuntimeError(f"creating stream {stream}: {answer['error']}")

    def count(self, stream):
        answer = self.request(f"$JS.API.STREAM.INFO.{stream}", {})
        if "error" in answer:
            raise RuntimeError(f"stream {stream}: {answer['error']}")
        return answer["state"]["messages"]

    def messages(self, stream):
        """Every message as (Nats-Msg-Id, payload bytes, stored at ms)."""
        found = []
        for seq in range(1, self.count(stream) + 1):
            answer = self.request(f"$JS.API.STREAM.MSG.GET.{stream}", {"seq": seq})
            message = answer.get("message")
            if message is None:
                continue
            headers = base64.b64decode(message.get("hdrs", "")).decode(errors="replace")
            msg_id = ""
            for line in headers.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "nats-msg-id":
                    msg_id = value.strip()
            found.append((msg_id, base64.b64decode(message.get("data", "")),
                          stored_ms(message["time"])))
        return found


def stored_ms(rfc3339):
    """ms since the epoch of JetStream's nanosecond RFC 3339 time."""
    text = rfc3339.rstrip("Z")
    whole, _, fraction = text.partition(".")
    seconds = datetime.datetime.fromisoformat(whole).replace(
        tzinfo=datetime.timezone.utc).timestamp()
    return int(seconds * 1000) + int((fraction + "000")[:3])


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[1] != "create":
        sys.exit("usage: demo_jetstream.py create NATS_URL STREAM SUBJECT")
    js = JetStream(sys.argv[2])
    js.create(sys.argv[3], sys.argv[4])
    js.close()
