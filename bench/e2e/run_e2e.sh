#!/bin/bash
# End-to-end comparison (issue 9): PyTorch-exported models tuned by fusetune
# with a time budget each, then one run of every contender on this machine:
# fusetune compiled from the database, fusetune's unfused and greedy plans,
# ONNX Runtime 1.20.1 (npm onnxruntime-node, 2 intra-op threads, all graph
# optimisations) and PyTorch eager (2 threads). Outputs are checked against
# the exporter's. Writes OUT/e2e.md (the table) and OUT/e2e.json.
#
# Usage: bench/e2e/run_e2e.sh [OUT_DIR]
#   BUDGET=30m   tuning time per model (issue 9 asks for 30 minutes)
#   RUNS=20      timed runs per contender and round
#   ROUNDS=3     rounds of fusetune and ONNX Runtime, alternated, so that a
#                change of load on a shared host hits both (the median of the
#                rounds' medians is reported)
#   TUNE=1       0: measure what the database holds, without tuning
#   CACHES=warm  how the tuner measures: warm (`tune --warm`, compiled with
#                `run --warm`), as every contender here runs one model in a
#                loop with its weights in the last-level cache; cold-weights
#                (`--caches cold-weights`: weights evicted, activations warm);
#                or flushed
#   PRECISION=f32 or mixed: `tune/run --precision mixed --error-budget ERROR_BUDGET`
#                (bf16 GEMM groups within the budget; issue 40); fusetune's
#                outputs are then held to the budget, the others to 1e-3
#   ERROR_BUDGET=1e-2
#   MODELS="bert_layer gpt2_block llama_block mlp_e2e"
#   BUILD=build  the fusetune build folder
# Needs `scripts/setup.sh --bench` (node/npm: onnxruntime-node is installed
# into OUT/ort with --ignore-scripts; libopenblas0-openmp, without which
# PyTorch runs on the reference BLAS at about 1% of peak).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "${1:-$root/build/e2e}" && cd "${1:-$root/build/e2e}" && pwd)
budget=${BUDGET:-30m}
runs=${RUNS:-20}
rounds=${ROUNDS:-3}
tune=${TUNE:-1}
caches=${CACHES:-warm}
case $caches in
  warm|flushed|cold-weights) warm="--caches $caches" ;;
  *) echo "run_e2e: CACHES is warm, cold-weights or flushed" >&2; exit 2 ;;
esac
precision=${PRECISION:-f32}
error_budget=${ERROR_BUDGET:-1e-2}
case $precision in
  f32) ;;
  mixed) warm="$warm --precision mixed --error-budget $error_budget" ;;
  *) echo "run_e2e: PRECISION is f32 or mixed" >&2; exit 2 ;;
esac
models=${MODELS:-bert_layer gpt2_block llama_block mlp_e2e}
fusetune=$root/${BUILD:-build}/cli/fusetune
[ -x "$fusetune" ] || { echo "run_e2e: build fusetune first ($fusetune)" >&2; exit 2; }

if [ ! -d "$out/ort/node_modules/onnxruntime-node" ]; then
  mkdir -p "$out/ort"
  (cd "$out/ort" && npm install --silent --ignore-scripts onnxruntime-node@1.20.1 >/dev/null)
fi
for m in $models; do
  [ -f "$out/$m.onnx" ] || /usr/bin/python3 -W ignore "$root/scripts/gen_models.py" "$out" --size e2e \
    --only "$(echo $models | tr ' ' ',')"
done

for m in $models; do
  if [ "$tune" = 1 ]; then
    echo "== $m: tuning for $budget" >&2
    "$fusetune" tune "$out/$m.onnx" --db "$out/e2e.db" --time "$budget" $warm --json >"$out/$m.tune.json" 2>"$out/$m.tune.log"
  fi
  in="x=$out/$m.in.x.npy"
  # This run's rounds only (see run_cnn_e2e.sh).
  rm -f "$out/$m".fusetune.[0-9]*.json "$out/$m".ort.[0-9]*.json
  for r in $(seq "$rounds"); do
    "$fusetune" run "$out/$m.onnx" --db "$out/e2e.db" $warm --input "$in" --output-dir "$out/$m.out" \
      --bench "$runs" --json >"$out/$m.fusetune.$r.json"
    NODE_PATH="$out/ort/node_modules" node "$root/bench/e2e/ort_bench.js" "$out/$m.onnx" \
      "$out/$m.in.x.npy" "$runs" >"$out/$m.ort.$r.json"
  done
  for plan in unfused greedy; do
    "$fusetune" run "$out/$m.onnx" --plan $plan --input "$in" --bench "$runs" --json >"$out/$m.$plan.json"
  done
  /usr/bin/python3 -W ignore "$root/bench/e2e/torch_bench.py" "$m" "$runs" "$out" >"$out/$m.torch.json"
done
CACHES=$caches ROUNDS=$rounds PRECISION=$precision ERROR_BUDGET=$error_budget /usr/bin/python3 "$root/bench/e2e/assemble.py" "$out" "$budget" $models
