"""The demo's RabbitMQ end (demo.sh's DEMO_SINK=rabbitmq), with Debian's
python3-pika: declares the durable queue outboxd publishes into, and runs the
consumer that applies each message once by its AMQP message_id.

    python3 demo_rabbitmq.py declare amqp://127.0.0.1:5672/ orders
    python3 demo_rabbitmq.py consume amqp://127.0.0.1:5672/ orders consumer.db

The consumer applies a message and records its message_id in one SQLite
transaction, and acknowledges it to the broker only after that commit: a
message redelivered (the consumer died before its ack) or published twice
(outboxd resent it after a lost confirm) finds its id already there and is
counted as a duplicate instead of applied again. Stops on SIGTERM.
"""

import signal
import sqlite3
import sys
import time

import pika


def declare(url, queue):
    connection = pika.BlockingConnection(pika.URLParameters(url))
    # Durable, so that persistent messages survive a broker restart; a quorum
    # queue would also survive the loss of a node (docs/sinks-rabbitmq.md).
    connection.channel().queue_declare(queue=queue, durable=True)
    connection.close()


def open_db(path):
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE IF NOT EXISTS orders_received ("
               " message_id TEXT PRIMARY KEY, body BLOB NOT NULL, applied_at INTEGER NOT NULL)")
    db.execute("CREATE TABLE IF NOT EXISTS duplicates (message_id TEXT NOT NULL)")
    return db


def apply_once(db, message_id, body):
    """Applies the message unless its id was applied before; True if it was new."""
    db.execute("BEGIN IMMEDIATE")
    try:
        inserted = db.execute(
            "INSERT OR IGNORE INTO orders_received (message_id, body, applied_at)"
            " VALUES (?, ?, ?)", (message_id, body, time.time_ns() // 1_000_000)).rowcount
        if not inserted:
            db.execute("INSERT INTO duplicates (message_id) VALUES (?)", (message_id,))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return inserted == 1


def consume(url, queue, db_path):
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    db = open_db(db_path)
    connection = pika.BlockingConnection(pika.URLParameters(url))
    channel = connection.channel()
    channel.basic_qos(prefetch_count=50)
    for method, properties, body in channel.consume(queue, inactivity_timeout=0.2):
        if stopping:
            break
        if method is None:
            continue  # idle: look at the stop flag again
        if not properties.message_id:
            # Not from the outbox: nothing to deduplicate on; leave it dead.
            channel.basic_reject(method.delivery_tag, requeue=False)
            continue
        apply_once(db, properties.message_id, body)
        channel.basic_ack(method.delivery_tag)
    channel.cancel()
    connection.close()


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "declare":
        declare(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 5 and sys.argv[1] == "consume":
        consume(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit("usage: demo_rabbitmq.py declare AMQP_URL QUEUE\n"
                 "       demo_rabbitmq.py consume AMQP_URL QUEUE CONSUMER_DB")


if __name__ == "__main__":
    main()
