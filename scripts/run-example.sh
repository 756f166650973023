#!/usr/bin/env bash
# The main job on a bundled example: installs missing packages, builds
# Release, inspects examples/$EXAMPLE.onnx (EXAMPLE=encoder_small, the
# default, or cnn_small: a CNN with Conv -> BN -> ReLU, a residual block and
# an inverted residual), tunes it for a few minutes
# into a tuning database (TUNE_TIME, default 2m), prints the report and
# writes its plots, compiles the model from the database (--explain), runs
# the compiled model on the bundled input with a latency benchmark and checks
# the result against the output PyTorch saved when it exported the model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
FUSETUNE_BUILD_BENCH=OFF scripts/build.sh release  # the benchmarks: scripts/build.sh release
FT=build/cli/fusetune
EXAMPLE=${EXAMPLE:-encoder_small}
MODEL=examples/$EXAMPLE.onnx
[ -f "$MODEL" ] || { echo "run-example: no example $MODEL" >&2; exit 2; }
OUT=${OUT_DIR:-out/example/$EXAMPLE}
echo "== fusetune inspect $MODEL"
$FT inspect "$MODEL"
mkdir -p "$OUT"
rm -f "$OUT/tune.db" "$OUT/tune.db-wal" "$OUT/tune.db-shm"
echo
echo "== fusetune tune $MODEL --db $OUT/tune.db --time ${TUNE_TIME:-2m}"
$FT tune "$MODEL" --db "$OUT/tune.db" --time "${TUNE_TIME:-2m}"
echo
echo "== fusetune report --db $OUT/tune.db --out $OUT/plots"
$FT report --db "$OUT/tune.db" --out "$OUT/plots" | tail -n 3
echo
echo "== fusetune compile $MODEL --db $OUT/tune.db -o $OUT/plan.json --explain"
$FT compile "$MODEL" --db "$OUT/tune.db" -o "$OUT/plan.json" --export-onnx "$OUT/fused.onnx" --explain
echo
echo "== fusetune run $MODEL --db $OUT/tune.db --bench 200"
$FT run "$MODEL" --db "$OUT/tune.db" --input x=examples/$EXAMPLE.in.x.npy --output-dir "$OUT" --verify --bench 200
/usr/bin/python3 - "$OUT/y.npy" examples/$EXAMPLE.out.y.npy <<'PY'
import numpy as np, sys
got, want = np.load(sys.argv[1]), np.load(sys.argv[2])
err = np.abs(got - want).max() / np.abs(want).max()
print(f"max error relative to PyTorch's output: {err:.2e}")
sys.exit(0 if err <= 1e-4 else 1)
PY
