#!/usr/bin/env bash
# first_compile.sh MODEL.onnx DB [PROCESSES] [BUILD]: the first compile of a
# process (what `fusetune compile` pays beyond import), in PROCESSES fresh
# processes (default 10; each imports the model first), as median, min and
# max. The figure bench_compile prints once per process.
set -euo pipefail
model=$1 db=$2 n=${3:-10} build=${4:-build}
times=()
for _ in $(seq "$n"); do
  line=$("$build/bench/bench_compile" "$model" "$db" --warm --only first | grep '^first compile')
  times+=("$(sed -E 's/.*total ([0-9.]+) ms beyond import.*/\1/' <<<"$line")")
done
printf '%s\n' "${times[@]}" | sort -n | awk -v n="$n" '
  { t[NR] = $1 }
  END { printf "first compile of %d processes: median %.3f ms, min %.3f, max %.3f\n",
        n, (n % 2 ? t[(n + 1) / 2] : (t[n / 2] + t[n / 2 + 1]) / 2), t[1], t[n] }'
