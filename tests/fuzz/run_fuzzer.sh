#!/usr/bin/env bash
# Runs one libFuzzer harness: run_fuzzer.sh HARNESS SECONDS WORK_DIR
# Replays tests/fuzz/corpus/<harness> and tests/fuzz/regressions/<harness>,
# then fuzzes for SECONDS. New interesting inputs go to WORK_DIR/corpus (the
# seed folders are only read), a failing input to WORK_DIR/crash-*. Exits
# non-zero on any crash, leak, timeout or sanitizer report.
set -euo pipefail
harness=$1 seconds=$2 work=$3
name=$(basename "$harness")
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work/corpus"
inputs=("$work/corpus" "$here/corpus/$name")
[ -d "$here/regressions/$name" ] && inputs+=("$here/regressions/$name")
# Each input gets 10 s and 2 GiB: a slower or larger one is a finding too.
exec "$harness" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/" "${inputs[@]}"
