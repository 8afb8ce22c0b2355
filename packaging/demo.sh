#!/usr/bin/env bash
# The demo: what edge-outbox can do so far, on a throwaway database.
# Usage: packaging/demo.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: demo.sh BUILD_DIR}
ctl="$build/agent/outboxctl"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
db="$work/demo.db"

say() { printf '\n$ %s\n' "$*"; "$@"; }

say "$ctl" --db "$db" init
# An application in any language commits its own row and the outbox row in
# one transaction; here the sqlite3 shell plays that application.
sqlite3 "$db" <<'SQL'
CREATE TABLE orders(id INTEGER PRIMARY KEY, total_cents INTEGER NOT NULL);
BEGIN IMMEDIATE;
INSERT INTO orders(total_cents) VALUES (1999);
INSERT INTO outbox(topic, msg_key, payload)
  VALUES ('order.created', 'order-' || last_insert_rowid(), '{"total_cents":1999}');
COMMIT;
BEGIN IMMEDIATE;
INSERT INTO orders(total_cents) VALUES (500);
INSERT INTO outbox(topic, msg_key, payload) VALUES ('order.created', 'order-rolled-back', '{}');
ROLLBACK;
SQL
echo '{"sku":"A-1","qty":3}' >"$work/payload.json"
say "$ctl" --db "$db" enqueue --topic stock.reserved --key reservation-7 --payload-file "$work/payload.json"
say "$ctl" --db "$db" list
say "$ctl" --db "$db" stats
