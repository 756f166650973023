#!/bin/bash
# The cost model's ablation (issue 38, point 1): how many trials the tuner
# needs to get each fused group within 5% of its best time, with the cost
# model and without it (`tune --no-model`: each round a random draw from the
# candidates the evolution breeds from the measured bests). Every model is
# tuned from an empty database per seed and arm, with the same trial budget;
# trials_to_within.py then reads the records in the order they were
# measured. Writes OUT/ablation.md (the table) and OUT/ablation.json.
#
# Usage: bench/ablation/run_model_ablation.sh [OUT_DIR]   (default build/ablation)
#   MODELS="examples/encoder_small.onnx examples/cnn_small.onnx ..."  ONNX files
#   SEEDS="1 2 3"   root seeds; each seed tunes once with and once without the model
#   TRIALS=300      group measurements per tune
#   WITHIN=0.05     "within 5% of the best"
#   MIN_US=0        leave out groups whose best is under this many microseconds
#   BUILD=build     the fusetune build folder
# The reference best of a group is the fastest time any run of that model
# measured for it (both arms, every seed), so an arm that stops short of it
# is not flattered by its own weaker best; a run that never gets within
# WITHIN of it counts all its trials of that group and is reported as such.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "${1:-$root/build/ablation}" && cd "${1:-$root/build/ablation}" && pwd)
models=${MODELS:-"$root/examples/encoder_small.onnx $root/examples/cnn_small.onnx"}
seeds=${SEEDS:-1 2 3}
trials=${TRIALS:-300}
within=${WITHIN:-0.05}
min_us=${MIN_US:-0}
fusetune="$root/${BUILD:-build}/cli/fusetune"
[ -x "$fusetune" ] || { echo "run_model_ablation: no $fusetune (scripts/build.sh release)" >&2; exit 2; }

# One calibration for every run: the model's target features are the same
# in both arms and every seed.
template="$out/calibrated.db"
rm -f "$template" "$template-wal" "$template-shm"
"$fusetune" calibrate --db "$template" >"$out/calibrate.log" 2>&1

dbs=()
for model in $models; do
  name=$(basename "$model" .onnx)
  for seed in $seeds; do
    for arm in model none; do
      db="$out/$name.seed$seed.$arm.db"
      rm -f "$db" "$db-wal" "$db-shm"
      cp "$template" "$db"
      flag=; [ "$arm" = none ] && flag=--no-model
      echo "== $name, seed $seed, $arm: $trials trials"
      "$fusetune" tune "$model" --db "$db" --trials "$trials" --seed "$seed" $flag --json \
        >"$out/$name.seed$seed.$arm.json" 2>"$out/$name.seed$seed.$arm.log"
      dbs+=("$name:$seed:$arm:$db")
    done
  done
done
/usr/bin/python3 "$root/bench/ablation/trials_to_within.py" --within "$within" --min-us "$min_us" \
  --json "$out/ablation.json" "${dbs[@]}" | tee "$out/ablation.md"
