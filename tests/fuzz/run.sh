#!/usr/bin/env bash
# Runs every libFuzzer target of BUILD (a tree configured with OUTBOX_FUZZ=ON)
# for SECONDS each, one after the other, starting from the committed seed
# corpus. New inputs go to BUILD/fuzz-corpus/<target>/ (kept between runs),
# crashes to BUILD/fuzz-artifacts/; a crash, a leak, a timeout (10 s per
# input) or a broken invariant fails the run.
#
#   tests/fuzz/run.sh BUILD [SECONDS]
set -euo pipefail

build=$1
seconds=${2:-20}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$build/fuzz-artifacts"
for target in row_headers retry_after message_builders enqueue config sink_url; do
  work="$build/fuzz-corpus/$target"
  mkdir -p "$work"
  dict=()
  [ -f "$here/$target.dict" ] && dict=(-dict="$here/$target.dict")
  printf -- '--- fuzz_%s, %ss: ' "$target" "$seconds"
  log="$build/fuzz-artifacts/$target.log"
  if ! "$build/tests/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$build/fuzz-artifacts/$target-" "${dict[@]}" \
      "$work" "$here/corpus/$target" </dev/null >"$log" 2>&1; then
    echo "FAILED"
    tail -n 60 "$log"
    exit 1
  fi
  # "stat::number_of_executed_units: N" and the corpus size, from libFuzzer.
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  echo "$runs runs, corpus $(find "$work" -mindepth 1 -maxdepth 1 | wc -l) + $(find "$here/corpus/$target" -mindepth 1 -maxdepth 1 | wc -l) seeds"
done
