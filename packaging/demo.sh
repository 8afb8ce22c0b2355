#!/usr/bin/env bash
# The demo: both ends of the pattern on throwaway databases.
#
#   shop (Python, plain SQL) --commit--> shop.db <--watch-- outboxd --HTTP--> outbox-receiver
#                                                                              (store::Inbox)
#
# The shop commits orders with their outbox rows (some roll back); outboxd
# pushes each committed message, signed, to the example receiver, which
# applies it exactly once. The receiver fails some requests on purpose, loses
# some answers after applying (so the sender retries and the inbox absorbs the
# duplicate) and goes down for a moment half-way through. At the end, a
# summary: committed, delivered, duplicates absorbed, rolled back, dead,
# commit -> receipt latency.
#
# Usage: packaging/demo.sh BUILD_DIR     (packaging/dev.sh demo builds first)
# Environment (defaults in brackets): DEMO_ORDERS [300], DEMO_RATE [orders/s,
# 40: below what fsync on both ends allows on a small VM], DEMO_OUTAGE_S [1.5], DEMO_FAIL_RATIO [0.05] (answered 500 before
# applying), DEMO_LOST_ACK_RATIO [0.05] (applied, then answered 500);
# DEMO_KEEP=1 keeps the work directory with the databases and logs;
# DEMO_SINK [http]: "nats" delivers into a NATS JetStream stream on a local
# nats-server (started here, JetStream on, a port it picks) instead of the
# example receiver, and checks the stream: each committed order landed once
# (by Nats-Msg-Id), none rolled back; no receiver outage in that mode.
# "rabbitmq" delivers into a durable queue of a local rabbitmq-server (started
# here as this user, with its own node, ports, data directory and epmd, all
# stopped at the end) read by a consumer (demo_rabbitmq.py, python3-pika)
# that applies each message once by its message_id.
# Exit status 0 when every committed order was applied exactly once.
# Stops everything it started on exit, also on Ctrl-C.
set -euo pipefail
build=$(cd "${1:?usage: demo.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ctl="$build/agent/outboxctl"
outboxd="$build/agent/outboxd"
receiver="$build/examples/outbox-receiver"

sink=${DEMO_SINK:-http}
case "$sink" in
  http) ;;
  nats) command -v nats-server >/dev/null ||
          { echo "demo: DEMO_SINK=nats needs nats-server (apt-get install nats-server)" >&2; exit 1; } ;;
  rabbitmq)
    [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] ||
      { echo "demo: DEMO_SINK=rabbitmq needs rabbitmq-server (apt-get install rabbitmq-server)" >&2; exit 1; }
    /usr/bin/python3 -c 'import pika' 2>/dev/null ||
      { echo "demo: DEMO_SINK=rabbitmq needs python3-pika (apt-get install python3-pika)" >&2; exit 1; } ;;
  *) echo "demo: DEMO_SINK must be http, nats or rabbitmq, not $sink" >&2; exit 2 ;;
esac

for program in "$ctl" "$outboxd" "$receiver"; do
  if [ ! -x "$program" ]; then
    echo "demo: $program is missing; build the project first (packaging/dev.sh demo)" >&2
    exit 1
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/outbox-demo.XXXXXX")
pids=()

# Stops every process this script started: each runs in its own session
# (setsid, so a Ctrl-C reaches only this script and the order of the stop is
# ours), so SIGTERM goes to its whole process group; then waits for it,
# SIGKILL after 15 s (outboxd's stop grace is 10 s).
stop_all() {
  local pid
  for pid in "${pids[@]}"; do
    kill -TERM -- "-$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 150); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL -- "-$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  pids=()
}
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  stop_all
  if [ "${DEMO_KEEP:-0}" = 1 ]; then
    echo "demo: kept $work"
  else
    rm -rf "$work"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'echo "demo: interrupted; stopping what it started" >&2; exit 130' INT
trap 'echo "demo: terminated; stopping what it started" >&2; exit 143' TERM

say() { printf '$ %s\n' "$*"; }
fail() {
  echo "demo: $*" >&2
  for log in "$work"/*.log; do
    [ -s "$log" ] && { echo "--- $log" >&2; tail -n 20 "$log" >&2; }
  done
  exit 1
}

# Signing secret shared by outboxd (signs) and the receiver (verifies).
DEMO_WEBHOOK_SECRET="whsec_$(head -c 32 /dev/urandom | base64)"
export DEMO_WEBHOOK_SECRET

start_nats() {
  echo "== the receiving end: a NATS JetStream stream ORDERS on subject orders"
  mkdir -p "$work/nats-ports"
  printf 'listen: "127.0.0.1:-1"\njetstream { store_dir: "%s" }\n' "$work/nats-store" \
    >"$work/nats.conf"
  say nats-server -c nats.conf
  setsid nats-server -c "$work/nats.conf" --ports_file_dir "$work/nats-ports" \
    >"$work/nats.log" 2>&1 &
  pids+=($!)
  port=
  for _ in $(seq 100); do
    port=$(cat "$work"/nats-ports/*.ports 2>/dev/null | grep -o '127.0.0.1:[0-9]*' | head -n 1 |
      cut -d: -f2 || true)
    [ -n "$port" ] && break
    kill -0 "${pids[0]}" 2>/dev/null || fail "nats-server did not start"
    sleep 0.1
  done
  [ -n "$port" ] || fail "nats-server wrote no port within 10 s"
  echo "listening on 127.0.0.1:$port"
  say python3 demo_jetstream.py create "nats://127.0.0.1:$port" ORDERS orders
  python3 "$here/demo_jetstream.py" create "nats://127.0.0.1:$port" ORDERS orders ||
    fail "could not create the stream"
}

# A free 127.0.0.1 port (rabbitmq-server cannot pick its own).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Debian's /usr/sbin/rabbitmq-server switches to the rabbitmq user; the
# script under it runs as anyone, given its own node, ports and directories.
# Its own epmd too, started first, so that none outlives the demo.
start_rabbitmq() {
  echo "== the receiving end: a durable RabbitMQ queue orders and a consumer that applies each message once"
  port=$(free_port)
  local epmd_port dist_port
  epmd_port=$(free_port)
  dist_port=$(free_port)
  mkdir -p "$work/rabbitmq"
  echo '[].' >"$work/rabbitmq/enabled_plugins"
  printf 'listeners.tcp.default = 127.0.0.1:%s
disk_free_limit.absolute = 1MB
' "$port" \
    >"$work/rabbitmq/rabbitmq.conf"
  export HOME="$work/rabbitmq" ERL_EPMD_PORT=$epmd_port RABBITMQ_NODENAME="outbox-demo$$@localhost" \
    RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT=$port RABBITMQ_DIST_PORT=$dist_port \
    RABBITMQ_MNESIA_BASE="$work/rabbitmq/mnesia" RABBITMQ_LOG_BASE="$work/rabbitmq/log" RABBITMQ_LOGS=- \
    RABBITMQ_CONFIG_FILE="$work/rabbitmq/rabbitmq.conf" \
    RABBITMQ_CONF_ENV_FILE="$work/rabbitmq/rabbitmq-env.conf" \
    RABBITMQ_ENABLED_PLUGINS_FILE="$work/rabbitmq/enabled_plugins" \
    RABBITMQ_PID_FILE="$work/rabbitmq/rabbitmq.pid" RUNNING_UNDER_SYSTEMD=true
  say epmd -port "$epmd_port" '&&' rabbitmq-server
  setsid epmd -port "$epmd_port" -address 127.0.0.1 >"$work/epmd.log" 2>&1 &
  pids+=($!)
  setsid /usr/lib/rabbitmq/bin/rabbitmq-server >"$work/rabbitmq.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 600); do
    grep -q 'Server startup complete' "$work/rabbitmq.log" 2>/dev/null && break
    kill -0 "${pids[1]}" 2>/dev/null || fail "rabbitmq-server did not start"
    sleep 0.1
  done
  grep -q 'Server startup complete' "$work/rabbitmq.log" || fail "rabbitmq-server did not start within 60 s"
  echo "listening on 127.0.0.1:$port"
  # Debian's python3-pika is there for Debian's python3, whatever else PATH
  # finds first.
  say python3 demo_rabbitmq.py declare "amqp://127.0.0.1:$port/" orders
  /usr/bin/python3 "$here/demo_rabbitmq.py" declare "amqp://127.0.0.1:$port/" orders ||
    fail "could not declare the queue"
  say python3 demo_rabbitmq.py consume "amqp://127.0.0.1:$port/" orders consumer.db
  setsid /usr/bin/python3 "$here/demo_rabbitmq.py" consume "amqp://127.0.0.1:$port/" orders \
    "$work/consumer.db" 2>"$work/consumer.log" &
  pids+=($!)
}

start_receiver() {
  echo "== the receiver: applies each message once (store::Inbox), fails on purpose now and then"
  fail_ratio=${DEMO_FAIL_RATIO:-0.05}
  lost_ack_ratio=${DEMO_LOST_ACK_RATIO:-0.05}
  say outbox-receiver --db receiver.db --listen 127.0.0.1:0 --signing-secret env:DEMO_WEBHOOK_SECRET \
    --outage-file outage --fail-ratio "$fail_ratio" --lose-ack-ratio "$lost_ack_ratio"
  setsid "$receiver" --db "$work/receiver.db" --listen 127.0.0.1:0 \
    --signing-secret env:DEMO_WEBHOOK_SECRET --outage-file "$work/outage" \
    --fail-ratio "$fail_ratio" --lose-ack-ratio "$lost_ack_ratio" \
    >"$work/receiver.port" 2>"$work/receiver.log" &
  pids+=($!)
  port=
  for _ in $(seq 100); do
    port=$(head -n 1 "$work/receiver.port")
    [ -n "$port" ] && break
    kill -0 "${pids[0]}" 2>/dev/null || fail "outbox-receiver did not start"
    sleep 0.1
  done
  [ -n "$port" ] || fail "outbox-receiver printed no port within 10 s"
  echo "listening on 127.0.0.1:$port"
}

case "$sink" in
  nats) start_nats ;;
  rabbitmq) start_rabbitmq ;;
  *) start_receiver ;;
esac

echo
echo "== the shop's database and outboxd beside it"
say outboxctl --db shop.db init
"$ctl" --db "$work/shop.db" init
python3 "$here/demo_producer.py" --create-orders-table "$work/shop.db"
if [ "$sink" = nats ]; then
  # JetStream drops a resend by its Nats-Msg-Id (the message id): no
  # signature, no inbox needed for exactly-once within the duplicate window.
  route="\"url\": \"nats://127.0.0.1:$port/orders\""
elif [ "$sink" = rabbitmq ]; then
  # Confirmed by the broker is delivered; the consumer deduplicates by
  # message_id, which RabbitMQ itself does not.
  route="\"url\": \"amqp://127.0.0.1:$port/\", \"amqp\": { \"queue\": \"orders\" }"
else
  route="\"url\": \"http://127.0.0.1:$port/orders\", \"signing_secret\": \"env:DEMO_WEBHOOK_SECRET\""
fi
cat >"$work/outboxd.json" <<EOF
{
  "sweep_interval_ms": 100,
  "metrics": { "listen": "" },
  "log": { "level": "warn" },
  "topics": {
    "order.created": {
      $route,
      "workers": 4,
      "timeout_ms": 2000,
      "retry": { "strategy": "exponential", "first_interval_ms": 100,
                 "max_interval_ms": 1000, "max_attempts": 10, "jitter": 0.2 },
      "breaker": { "failure_threshold": 5, "open_ms": 250, "max_open_ms": 1000 },
      "on_delivered": "UPDATE orders SET confirmed_at = :now WHERE 'order-' || id = :key"
    }
  }
}
EOF
say outboxd --db shop.db --config outboxd.json
setsid "$outboxd" --db "$work/shop.db" --config "$work/outboxd.json" 2>"$work/outboxd.log" &
pids+=($!)

echo
echo "== the shop: Python's sqlite3, the order and its outbox row in one transaction"
say python3 demo_producer.py --db shop.db ...
# In the background and waited for, so that a signal to this script runs
# its trap at once instead of after the producer.
if [ "$sink" = nats ]; then
  receiving=(--nats-url "nats://127.0.0.1:$port" --stream ORDERS)
elif [ "$sink" = rabbitmq ]; then
  receiving=(--consumer-db "$work/consumer.db")
else
  receiving=(--receiver-db "$work/receiver.db" --receiver-url "http://127.0.0.1:$port"
             --outage-file "$work/outage")
fi
no_proxy="127.0.0.1,localhost${no_proxy:+,$no_proxy}" setsid python3 "$here/demo_producer.py" \
  --db "$work/shop.db" "${receiving[@]}" \
  --orders "${DEMO_ORDERS:-300}" --rate "${DEMO_RATE:-40}" \
  --outage-s "${DEMO_OUTAGE_S:-1.5}" &
producer=$!
pids+=("$producer")
status=0
wait "$producer" || status=$?
outboxd_pid=${pids[${#pids[@]}-2]}
kill -0 "$outboxd_pid" 2>/dev/null || fail "outboxd is not running"

echo
say outboxctl --db shop.db stats
"$ctl" --db "$work/shop.db" stats

stop_all
echo
echo "outboxd and the receiving end stopped"
[ "$status" -eq 0 ] || fail "the summary above shows a problem"
