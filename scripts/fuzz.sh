#!/usr/bin/env bash
# Runs every libFuzzer harness of tests/fuzz for longer than the test command
# does: fuzz.sh [seconds per harness, default 600] [harness...]
# Needs the sanitizer build (scripts/build.sh sanitize, clang). What the runs
# find is kept between runs in build-asan/fuzz-findings/<harness>/: corpus/
# (new interesting inputs, the next run starts from them) and crash-*,
# leak-*, timeout-*, oom-* (failing inputs). A failing input, once its bug is
# fixed, goes to tests/fuzz/regressions/<harness>/, which the test command
# replays. Exits non-zero when a harness failed.
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(onnx_import_fuzz npy_fuzz plan_json_fuzz jsonl_import_fuzz)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
for name in "${harnesses[@]}"; do
  binary=build-asan/tests/fuzz/$name
  if [ ! -x "$binary" ]; then
    echo "fuzz: $binary missing: run scripts/build.sh sanitize first" >&2
    exit 2
  fi
  work=build-asan/fuzz-findings/$name
  mkdir -p "$work"
  echo "== $name: ${seconds}s, findings in $work"
  if ! tests/fuzz/run_fuzzer.sh "$binary" "$work" -max_total_time="$seconds" > "$work.log" 2>&1; then
    failed+=("$name")
    grep -E "^(==[0-9]+==ERROR|SUMMARY|.*runtime error)|artifact_prefix|Test unit written" "$work.log" | head -20
  fi
  tail -n 3 "$work.log"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]} (logs and inputs under build-asan/fuzz-findings/)" >&2
  exit 1
fi
echo "fuzz: no crash, leak, timeout or sanitizer report"
