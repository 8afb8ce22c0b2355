#!/usr/bin/env python3
"""Issue #33: which in-memory SQLite database can an agent share with the
application? Measures the two that SQLite offers, with Debian's libsqlite3:

    file:NAME?mode=memory&cache=shared   (shared cache)
    file:/NAME?vfs=memdb                  (the memdb VFS)

For each: a read on one connection while another holds a write transaction
(busy timeout 1 s), a write while another holds a read transaction, and
2000 commits on one thread against 2000 reads on another.

    python3 tests/bench/in_memory_modes.py
"""

import sqlite3
import threading
import time


def one_op(label, uri, what, holder_begin, other_sql):
    keep = sqlite3.connect(uri, uri=True, isolation_level=None)
    keep.execute("CREATE TABLE IF NOT EXISTS t(a)")
    holder = sqlite3.connect(uri, uri=True, timeout=1, isolation_level=None)
    other = sqlite3.connect(uri, uri=True, timeout=1, isolation_level=None)
    holder.execute(holder_begin)
    holder.execute("SELECT count(*) FROM t").fetchone()
    if "IMMEDIATE" in holder_begin:
        holder.execute("INSERT INTO t VALUES(1)")
    start = time.perf_counter()
    try:
        other.execute(other_sql).fetchall()
        result = "ok"
    except sqlite3.OperationalError as error:
        result = str(error)
    print(f"{label:13} {what:32} {result:36} after {time.perf_counter() - start:.3f} s")
    holder.execute("COMMIT")


def contention(label, uri):
    keep = sqlite3.connect(uri, uri=True, isolation_level=None)
    keep.execute("CREATE TABLE IF NOT EXISTS c(a)")
    writer = sqlite3.connect(uri, uri=True, timeout=5, isolation_level=None,
                             check_same_thread=False)
    reader = sqlite3.connect(uri, uri=True, timeout=5, isolation_level=None,
                             check_same_thread=False)
    failed = {"writes": 0, "reads": 0}

    def write():
        for _ in range(2000):
            try:
                writer.execute("BEGIN IMMEDIATE")
                writer.execute("INSERT INTO c VALUES(1)")
                writer.execute("COMMIT")
            except sqlite3.OperationalError:
                failed["writes"] += 1
                if writer.in_transaction:
                    writer.execute("ROLLBACK")

    def read():
        for _ in range(2000):
            try:
                reader.execute("SELECT count(*) FROM c").fetchone()
            except sqlite3.OperationalError:
                failed["reads"] += 1

    start = time.perf_counter()
    threads = [threading.Thread(target=write), threading.Thread(target=read)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"{label:13} 2000 commits || 2000 reads: {time.perf_counter() - start:.3f} s, "
          f"failed writes {failed['writes']}, failed reads {failed['reads']}")


def main():
    print("SQLite", sqlite3.sqlite_version)
    for label, uri in (("shared-cache", "file:m33?mode=memory&cache=shared"),
                       ("memdb", "file:/m33?vfs=memdb")):
        one_op(label, uri, "read during a write transaction", "BEGIN IMMEDIATE",
               "SELECT count(*) FROM t")
        one_op(label, uri, "write during a read transaction", "BEGIN",
               "INSERT INTO t VALUES(2)")
        contention(label, uri)


if __name__ == "__main__":
    main()
