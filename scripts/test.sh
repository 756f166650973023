#!/usr/bin/env bash
# The test command: installs missing packages, builds the Release and the
# ASan+UBSan configurations, and runs the whole suite under ctest in both.
# The sanitizer suite includes the libFuzzer harnesses (label `fuzz`, a fixed
# number of inputs each; scripts/fuzz.sh fuzzes longer).
# Ends with ctest's summary, why each failed test failed, and each phase's time.
set -euo pipefail
cd "$(dirname "$0")/.."
# How long each phase took, printed last (CI shows the end of the output).
phases=()
mark() { phases+=("$1 $((SECONDS - phase_start)) s"); phase_start=$SECONDS; }
phase_start=$SECONDS
scripts/setup.sh
mark setup
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Both configurations build and run and report, so that a failure in one (its
# build or its tests) does not hide the other's result; the command fails if
# either failed. The Release suite's summary comes after the sanitizer one's.
status=0
failed_dirs=()
asan_built=1
scripts/build.sh sanitize || { status=1; asan_built=0; echo "test.sh: the sanitizer build failed" >&2; }
mark "sanitizer build"
# The benchmarks are not tests: not built here (scripts/build.sh release builds them).
FUSETUNE_BUILD_BENCH=OFF scripts/build.sh release
mark "release build"
if [ "$asan_built" -eq 1 ]; then
  echo "== sanitizer build (ASan + UBSan)"
  # cli.tuning and cli.training drive whole tuning jobs and trainings through
  # the CLI (4 of the suite's 15 CPU-minutes under ASan): they run in the
  # Release suite; their code is under ASan in the unit suites, and the
  # CLI's own in cli.basics. cluster.slurm (a two-wave job on a throw-away
  # Slurm cluster, 2-3 minutes) likewise: its shard, merge and status code
  # runs under ASan in search_tests and cluster_tests.
  # Seven unit tests repeat, many times over, code that smaller tests run
  # under ASan, and take 10-30x their Release time there (XGBoost trainings
  # over thousands of JSON records, SQLite commits under SIGKILL, a tuning
  # run to convergence, a brute-force partition check): 159 of the sanitizer
  # suite's 580 CPU-seconds on 2026-12-04. They run in the Release suite.
  heavy='Transfer\.(ARankingThatCarriesOverRanksTheNewTargetAsWellAsItsOwnRecords'
  heavy+='|BalancingWeighsOnlyTheArmsThatMixTheTwoTargets|TuningJobRowsAreScoredApartInEveryArm)'
  heavy+='|Training\.TuningJobRecordsAreScoredApart|Partition\.ExactSelectionMatchesBruteForce'
  heavy+='|Tuner\.ConvergenceEndsTheJobOnlyWhenAskedOtherwiseTheBudgetIsSpent'
  heavy+='|Process\.SigkillDuringCommitsLosesNothingCommitted'
  (cd build-asan && ctest --output-on-failure -j "$(nproc)" --timeout 600 \
     -E "^(cli\.(tuning|training)|cluster\.slurm|$heavy)\$") || { status=1; failed_dirs+=(build-asan); }
  mark "sanitizer suite"
fi
echo "== release build"
# One test more than cores: cluster.slurm, the longest, mostly waits on
# Slurm (39 CPU-seconds in 83; 115 s beside the others on 2 cores), and a
# core would idle beside it.
(cd build && ctest --output-on-failure -j "$(($(nproc) + 1))" --timeout 600) || { status=1; failed_dirs+=(build); }
mark "release suite"
# Why each failed test failed, again at the end, where CI's excerpt is.
for dir in "${failed_dirs[@]}"; do /usr/bin/python3 scripts/failed-tests.py "$dir" || true; done
echo "test.sh: ${phases[*]/%/,} ${SECONDS} s in all" | sed 's/, \([0-9]* s in all\)/; \1/'
[ "$status" -eq 0 ] || echo "test.sh: a suite failed (see the ctest summaries above)" >&2
exit "$status"
