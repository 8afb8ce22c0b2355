#!/usr/bin/env bash
# Runs the benchmarks of the hot paths (tests/bench, issue #9) from a Release
# build and prints one Markdown table: figure, ours, baseline, ratio, target,
# met. Every figure is measured beside its baseline in the same run, the two
# sides alternating, medians of the repetitions.
#
#   packaging/bench.sh BUILD_DIR        (packaging/dev.sh bench builds and calls it)
#
# Environment: OUTBOX_BENCH_REPS (repetitions, default 9), OUTBOX_BENCH_SCALE
# (multiplies every N, default 1), OUTBOX_BENCH_DIR (where database files go,
# default the system temp dir; it must be a local disk), OUTBOX_BENCH_SMOKE=1
# (a smoke run, the ctest `bench` label: every figure must run to its end and
# print at least one row; speed is not judged).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:?usage: bench.sh BUILD_DIR}" && pwd)
reps=${OUTBOX_BENCH_REPS:-9}
scale=${OUTBOX_BENCH_SCALE:-1}
bench=$build/tests/bench/outbox_bench
relay=$build/tests/bench/naive_relay
outboxd=$build/agent/outboxd
outboxctl=$build/agent/outboxctl
for binary in "$bench" "$relay"; do
  [ -x "$binary" ] || { echo "bench.sh: $binary is missing; build the tree first" >&2; exit 1; }
done

rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
smoke=${OUTBOX_BENCH_SMOKE:-0}

# Fails the run (status 1) when the step named $1 added no row since $2 rows.
rows_since() {
  local now
  now=$(grep -c '^@row' "$rows" || true)
  if [ "$now" -le "$2" ]; then
    printf 'bench.sh: %s printed no result row\n' "$1" >&2
    status=1
  fi
}
row_count() { grep -c '^@row' "$rows" || true; }
args=(--reps "$reps" --scale "$scale" --relay "$relay")
[ -x "$outboxd" ] && args+=(--outboxd "$outboxd")
[ -n "${OUTBOX_BENCH_DIR:-}" ] && args+=(--dir "$OUTBOX_BENCH_DIR")

start=$(date +%s)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
status=0
for figure in enqueue store delivery latency scale sidecar commit-latency ordering smalldevice; do
  printf '=== %s\n' "$figure" >&2
  figure_start=$(date +%s)
  before=$(row_count)
  # Result rows go to the table; the details (query plans, timings) to stderr.
  "$bench" "$figure" "${args[@]}" | tee -a "$rows" | sed 's/^@row\t/  /' >&2 || status=1
  rows_since "$figure" "$before"
  printf '    (%ss)\n' "$(( $(date +%s) - figure_start ))" >&2
done

# Figure 7: bytes written per message by payload size (a counting VFS shim).
bytes_bench=$build/tests/bench/bytes_bench
if [ -x "$bytes_bench" ]; then
  printf '=== bytes\n' >&2
  bytes_args=(--messages "$(awk -v s="$scale" 'BEGIN { n = int(1000 * s); print (n < 1 ? 1 : n) }')")
  [ -n "${OUTBOX_BENCH_DIR:-}" ] && bytes_args+=(--dir "$OUTBOX_BENCH_DIR")
  before=$(row_count)
  "$bytes_bench" "${bytes_args[@]}" | tee -a "$rows" | sed 's/^@row\t/  /' >&2 || status=1
  rows_since bytes_bench "$before"
  # 7d: what page_size 1024 costs against 4096 (depth, overflow pages, read speed).
  printf '=== bytes --page-cost\n' >&2
  before=$(row_count)
  "$bytes_bench" --page-cost --reps "$reps" "${bytes_args[@]}" | tee -a "$rows" |
    sed 's/^@row\t/  /' >&2 || status=1
  rows_since 'bytes_bench --page-cost' "$before"
else
  [ "$smoke" = 1 ] && { echo "bench.sh: bytes_bench is not built" >&2; status=1; }
  printf '@row\t7 bytes written per message\tnot measured: bytes_bench not built\t-\t-\t-\t-\n' >>"$rows"
fi

# Figures 9 and 10, the sinks: broker publishes beside raw client loops (sink_bench starts its
# own nats-server and mosquitto, amqp_bench its own rabbitmq-server) and gzip's bytes on the
# wire.
sink_bench=$build/tests/transport/sink_bench
amqp_bench=$build/tests/transport/amqp_bench
compression_bench=$build/tests/transport/compression_bench
for binary in "$sink_bench" "$amqp_bench" "$compression_bench"; do
  name=$(basename "$binary")
  printf '=== %s\n' "$name" >&2
  if [ ! -x "$binary" ]; then
    printf '@row\t9-10 %s\tnot measured: not built\t-\t-\t-\t-\n' "$name" >>"$rows"
    [ "$smoke" = 1 ] && { echo "bench.sh: $name is not built" >&2; status=1; }
    continue
  fi
  figure_start=$(date +%s)
  if [ "$name" = sink_bench ] || [ "$name" = amqp_bench ]; then
    bench_args=("$reps" "$(awk -v s="$scale" 'BEGIN { n = int(3000 * s); print (n < 1 ? 1 : n) }')")
  else
    bench_args=(50)
  fi
  before=$(row_count)
  "$binary" "${bench_args[@]}" | tee -a "$rows" | sed 's/^@row\t/  /' >&2 || status=1
  rows_since "$name" "$before"
  printf '    (%ss)\n' "$(( $(date +%s) - figure_start ))" >&2
done

# Stripped sizes: outboxd and outboxctl beside the naive relay.
stripped_size() {
  local copy
  copy=$(mktemp)
  strip -o "$copy" "$1"
  stat -c %s "$copy"
  rm -f "$copy"
}
relay_bytes=$(stripped_size "$relay")
for tool in "$outboxd" "$outboxctl"; do
  name=$(basename "$tool")
  if [ -x "$tool" ]; then
    bytes=$(stripped_size "$tool")
    awk -v n="$name" -v a="$bytes" -v b="$relay_bytes" 'BEGIN {
      printf "@row\t6 stripped binary size: %s vs naive_relay\t%.1f MiB\t%.0f KiB\t%.1f\t-\t-\n",
        n, a / 1048576, b / 1024, a / b }' >>"$rows"
  else
    printf '@row\t6 stripped binary size: %s\tnot measured: not built\t-\t-\t-\t-\n' "$name" >>"$rows"
  fi
done

printf '\nedge-outbox benchmarks: %s, %s repetitions, scale %s, %s cores (%s), load %s -> %s, %ss\n' \
  "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')" "$reps" "$scale" \
  "$(nproc)" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" \
  "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(( $(date +%s) - start ))"
printf '\n| figure | ours | baseline | ratio | target | met |\n|---|---|---|---|---|---|\n'
grep '^@row' "$rows" | awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s |\n", $2, $3, $4, $5, $6, $7 }'
exit "$status"
