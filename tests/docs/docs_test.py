#!/usr/bin/env python3
"""Every shell and SQL block of README.md and docs/*.md runs as written.

Each page runs in a scratch directory of its own, its blocks in order, with
the built outboxd, outboxctl and outbox-receiver first on PATH. A block is a
fenced block whose language is `sh` or `sql`; other languages are not run
(the C++ examples are built by the project, the Go and Node snippets by the
producers tests). An HTML comment on the line before a block, which readers
of the rendered page do not see, changes how it runs:

    <!-- docs-test: skip: REASON -->       not run; the reason is printed
    <!-- docs-test: background -->         started, left running until the
                                           page ends, then stopped (SIGTERM)
    <!-- docs-test: until "TEXT" -->       run again until its output holds
                                           TEXT (at most DEADLINE_S)
    <!-- docs-test: sql DB [:P VALUE]... --> an SQL block's database (default
                                           app.db) and parameter values

An SQL block runs in `sqlite3 DB`; the default app.db is made with
`outboxctl --db app.db init` before the page's first SQL block. What a page
writes to /etc/outbox and /var/lib/outbox goes to the scratch directory
instead (the package's layout is put there first, with the example config),
and port 8080 of 127.0.0.1 becomes a free port chosen at run time: the
blocks run otherwise unchanged, as root or not.

    docs_test.py --root REPO --bin DIR [--bin DIR ...]
"""

import argparse
import glob
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

DEADLINE_S = 30
FENCE = re.compile(r"^```(sh|sql)\s*$")
MARKER = re.compile(r"^<!--\s*docs-test:\s*(.*?)\s*-->\s*$")


class Block:
    def __init__(self, page, line, language, text, marker):
        self.page, self.line, self.language, self.text = page, line, language, text
        self.marker = marker or ""

    def where(self):
        return f"{self.page}:{self.line}"


def blocks_of(root, page):
    with open(os.path.join(root, page), encoding="utf-8") as f:
        lines = f.read().split("\n")
    found = []
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence:
            end = i + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            marker = MARKER.match(lines[i - 1]) if i > 0 else None
            found.append(Block(page, i + 1, fence.group(1), "\n".join(lines[i + 1:end]) + "\n",
                               marker.group(1) if marker else None))
            i = end
        i += 1
    return found


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Page:
    """One page's scratch directory, its background processes and mappings."""

    def __init__(self, root, bins, name):
        self.root = root
        self.dir = tempfile.mkdtemp(prefix="docs-test-")
        os.chmod(self.dir, 0o755)  # outboxd refuses a config in a directory others can write
        self.background = []
        self.port = str(free_port())
        self.env = dict(os.environ)
        self.env["PATH"] = os.pathsep.join(bins + [self.env.get("PATH", "")])
        self.env["HOME"] = self.dir
        etc = os.path.join(self.dir, "etc", "outbox")
        os.makedirs(etc)
        os.makedirs(os.path.join(self.dir, "var", "lib", "outbox"))
        shutil.copy(os.path.join(root, "packaging", "outboxd.example.json"), etc)
        self.name = name

    def mapped(self, text):
        text = text.replace("/etc/outbox", os.path.join(self.dir, "etc", "outbox"))
        text = text.replace("/var/lib/outbox", os.path.join(self.dir, "var", "lib", "outbox"))
        return re.sub(r"\b(127\.0\.0\.1|localhost):8080\b", r"\g<1>:" + self.port, text)

    def command(self, block):
        if block.language == "sh":
            return ["bash", "-euo", "pipefail", "-c", self.mapped(block.text)], None
        words = shlex.split(block.marker[len("sql"):]) if block.marker.startswith("sql") else []
        db = words[0] if words else "app.db"
        if db == "app.db" and not os.path.exists(os.path.join(self.dir, db)):
            subprocess.run(["outboxctl", "--db", db, "init"], cwd=self.dir, env=self.env,
                           check=True, capture_output=True, timeout=DEADLINE_S)
        script = [".bail on"]
        for name, value in zip(words[1::2], words[2::2]):
            script.append(f".parameter set {name} {value}")
        script.append(self.mapped(block.text))
        return ["sqlite3", db], "\n".join(script) + "\n"

    def run(self, block):
        """None when the block passed, else what went wrong."""
        argv, stdin = self.command(block)
        if block.marker == "background":
            log = open(os.path.join(self.dir, f"background-{block.line}.log"), "wb")
            self.background.append((block, log, subprocess.Popen(
                argv, cwd=self.dir, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)))
            return None
        until = re.match(r'^until\s+"(.*)"$', block.marker)
        deadline = time.monotonic() + DEADLINE_S
        while True:
            result = subprocess.run(argv, input=stdin, cwd=self.dir, env=self.env, text=True,
                                    capture_output=True, timeout=DEADLINE_S)
            output = result.stdout + result.stderr
            if result.returncode != 0:
                return f"exit status {result.returncode}:\n{output}"
            if not until or until.group(1) in result.stdout:
                return None
            if time.monotonic() > deadline:
                return f"no {until.group(1)!r} in its output within {DEADLINE_S} s:\n{output}"
            time.sleep(0.2)  # polling a condition the block reports, bounded above

    def close(self):
        problems = []
        for block, log, process in self.background:
            if process.poll() is not None:
                problems.append(f"{block.where()}: the background block exited early "
                                f"(status {process.returncode})")
            else:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=DEADLINE_S)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
            log.close()
        if problems:
            for block, _, _ in self.background:
                with open(os.path.join(self.dir, f"background-{block.line}.log"), "rb") as f:
                    problems.append(f"--- {block.where()} log:\n{f.read().decode(errors='replace')}")
        shutil.rmtree(self.dir, ignore_errors=True)
        return problems


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--bin", action="append", required=True)
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    bins = [os.path.abspath(b) for b in args.bin]
    pages = ["README.md"] + sorted(os.path.relpath(p, root)
                                   for p in glob.glob(os.path.join(root, "docs", "*.md")))
    passed = failed = skipped = 0
    for name in pages:
        blocks = blocks_of(root, name)
        if not blocks:
            continue
        page = Page(root, bins, name)
        try:
            for block in blocks:
                if block.marker.startswith("skip"):
                    reason = block.marker[len("skip"):].lstrip(": ")
                    if not reason:
                        print(f"FAIL {block.where()}: a skip marker needs its reason")
                        failed += 1
                        continue
                    print(f"skip {block.where()}: {reason}")
                    skipped += 1
                    continue
                problem = page.run(block)
                if problem:
                    print(f"FAIL {block.where()} ({block.language}): {problem}")
                    failed += 1
                else:
                    print(f"ok   {block.where()} ({block.language})")
                    passed += 1
        finally:
            for problem in page.close():
                print(f"FAIL {problem}")
                failed += 1
    print(f"docs: {passed} passed, {failed} failed, {skipped} skipped")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
