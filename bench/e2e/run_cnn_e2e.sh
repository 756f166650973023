#!/bin/bash
# End-to-end comparison on CNNs (issue 37, point 5): torchvision ResNet-18,
# ResNet-50 and MobileNetV2 at 1x3x224x224, batch 1, random weights, each
# exported at opset 17 with BatchNormalization folded by the exporter (NAME)
# and kept (NAME_bn) by bench/e2e/cnn_models.py. As run_e2e.sh: fusetune
# tuned with a time budget per model and compiled from the database,
# fusetune's unfused and greedy plans, ONNX Runtime 1.20.1 (npm
# onnxruntime-node, 2 intra-op threads, all graph optimisations: it folds
# Conv+BN+activation and runs NCHWc convolutions) and PyTorch eager (2
# threads). Every contender's output is checked against PyTorch's (1e-3
# relative). Writes OUT/e2e.md (the table) and OUT/e2e.json; the models and
# the database (OUT/cnn.db) stay in OUT, out of git.
#
# Usage: bench/e2e/run_cnn_e2e.sh [OUT_DIR]   (default build/cnn_e2e)
#   BUDGET=30m   tuning time per model (issue 37 asks for 30 minutes)
#   RUNS=20      timed runs per contender and round
#   ROUNDS=3     rounds of fusetune and ONNX Runtime, alternated
#   TUNE=1       0: measure what the database holds, without tuning
#   FUSETUNE=1   0: ONNX Runtime and PyTorch only (no fusetune build needed)
#   CACHES=warm  how the tuner measures: warm, cold-weights (weights evicted
#                before each run, activations warm: ResNet-50's weights do not
#                fit the last-level cache, so a group measured warm flatters
#                the algorithms that read more of them) or flushed
#   PRECISION=f32 or mixed: `tune/run --precision mixed --error-budget ERROR_BUDGET`
#                (bf16 implicit-GEMM and direct convs within the budget; issue 40); the
#                database then holds the mixed records beside the f32 ones
#   ERROR_BUDGET=1e-2
#   MODELS="resnet18 resnet18_bn resnet50 resnet50_bn mobilenet_v2 mobilenet_v2_bn"
#   BUILD=build  the fusetune build folder
# Once BN is folded into the convs (issue 37, point 2) both exports of a
# model import to the same graph, so tuning one fills the database for both:
# tune the folded exports, then measure all six with TUNE=0.
# Needs `scripts/setup.sh --bench` (node/npm, libopenblas0-openmp) and
# Debian's python3-torchvision.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "${1:-$root/build/cnn_e2e}" && cd "${1:-$root/build/cnn_e2e}" && pwd)
budget=${BUDGET:-30m}
runs=${RUNS:-20}
rounds=${ROUNDS:-3}
tune=${TUNE:-1}
with_fusetune=${FUSETUNE:-1}
caches=${CACHES:-warm}
case $caches in
  warm|flushed|cold-weights) warm="--caches $caches" ;;
  *) echo "run_cnn_e2e: CACHES is warm, cold-weights or flushed" >&2; exit 2 ;;
esac
precision=${PRECISION:-f32}
error_budget=${ERROR_BUDGET:-1e-2}
case $precision in
  f32) ;;
  mixed) warm="$warm --precision mixed --error-budget $error_budget" ;;
  *) echo "run_cnn_e2e: PRECISION is f32 or mixed" >&2; exit 2 ;;
esac
models=${MODELS:-resnet18 resnet18_bn resnet50 resnet50_bn mobilenet_v2 mobilenet_v2_bn}
fusetune=$root/${BUILD:-build}/cli/fusetune
if [ "$with_fusetune" = 1 ] && [ ! -x "$fusetune" ]; then
  echo "run_cnn_e2e: build fusetune first ($fusetune), or FUSETUNE=0 for the peers only" >&2
  exit 2
fi

if [ ! -d "$out/ort/node_modules/onnxruntime-node" ]; then
  mkdir -p "$out/ort"
  (cd "$out/ort" && npm install --silent --ignore-scripts onnxruntime-node@1.20.1 >/dev/null)
fi
missing=
for m in $models; do
  [ -f "$out/$m.onnx" ] || missing="$missing,$m"
done
if [ -n "$missing" ]; then
  /usr/bin/python3 -W ignore "$root/bench/e2e/cnn_models.py" "$out" --only "${missing#,}"
fi

for m in $models; do
  in="x=$out/$m.in.x.npy"
  if [ "$with_fusetune" = 1 ] && [ "$tune" = 1 ]; then
    echo "== $m: tuning for $budget" >&2
    "$fusetune" tune "$out/$m.onnx" --db "$out/cnn.db" --time "$budget" $warm --json \
      >"$out/$m.tune.json" 2>"$out/$m.tune.log"
  fi
  # This run's rounds only: a round left by an earlier run (of other code,
  # or more rounds) would be assembled with them.
  rm -f "$out/$m".fusetune.[0-9]*.json "$out/$m".ort.[0-9]*.json
  for r in $(seq "$rounds"); do
    if [ "$with_fusetune" = 1 ]; then
      "$fusetune" run "$out/$m.onnx" --db "$out/cnn.db" $warm --input "$in" --output-dir "$out/$m.out" \
        --bench "$runs" --json >"$out/$m.fusetune.$r.json"
    fi
    NODE_PATH="$out/ort/node_modules" node "$root/bench/e2e/ort_bench.js" "$out/$m.onnx" \
      "$out/$m.in.x.npy" "$runs" >"$out/$m.ort.$r.json"
  done
  if [ "$with_fusetune" = 1 ]; then
    for plan in unfused greedy; do
      "$fusetune" run "$out/$m.onnx" --plan $plan --input "$in" --bench "$runs" --json >"$out/$m.$plan.json"
    done
  fi
  /usr/bin/python3 -W ignore "$root/bench/e2e/torch_bench.py" "$m" "$runs" "$out" >"$out/$m.torch.json"
done
# Budget 0: the header says the database's plans were measured, not a budget this run did not spend.
[ "$tune" = 1 ] || budget=0
DB=cnn.db CACHES=$caches ROUNDS=$rounds PRECISION=$precision ERROR_BUDGET=$error_budget /usr/bin/python3 "$root/bench/e2e/assemble.py" "$out" "$budget" $models
