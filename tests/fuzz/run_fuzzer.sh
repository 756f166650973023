#!/usr/bin/env bash
# Runs one libFuzzer harness:
#   run_fuzzer.sh HARNESS WORK_DIR [--fresh] libFuzzer-flags...
# (--fresh: WORK_DIR is emptied first, so that a fixed -seed and -runs fuzz
# the same inputs each time.)
# Replays tests/fuzz/corpus/<harness> and tests/fuzz/regressions/<harness>,
# then fuzzes as the flags say. New interesting inputs go to WORK_DIR/corpus
# (the seed folders are only read), a failing input to WORK_DIR/crash-* (or
# leak-, timeout-, oom-). Exits non-zero on any crash, leak, timeout or
# sanitizer report.
set -euo pipefail
harness=$1 work=$2
shift 2
if [ "${1:-}" = --fresh ]; then
  rm -rf "$work"
  shift
fi
name=$(basename "$harness")
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work/corpus"
inputs=("$work/corpus" "$here/corpus/$name")
[ -d "$here/regressions/$name" ] && inputs+=("$here/regressions/$name")
# Each input gets 10 s and 2 GiB: a slower or larger one is a finding too.
exec "$harness" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/" \
  "$@" "${inputs[@]}"
