#!/usr/bin/env bash
# The main job on the bundled example: installs missing packages, builds
# Release, then inspects examples/encoder_small.onnx, shows its fusion space
# (candidate groups, partitions, the greedy plan), runs the greedy plan with
# fused kernels on the bundled input and checks the result against the output
# PyTorch saved when it exported the model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release
FT=build/cli/fusetune
MODEL=examples/encoder_small.onnx
OUT=${OUT_DIR:-out/example}
echo "== fusetune inspect $MODEL"
$FT inspect "$MODEL"
echo
echo "== fusetune space $MODEL"
mkdir -p "$OUT"
$FT space "$MODEL" --save-greedy "$OUT/greedy-plan.json"
echo
echo "== fusetune run $MODEL --plan $OUT/greedy-plan.json"
$FT run "$MODEL" --plan "$OUT/greedy-plan.json" --input x=examples/encoder_small.in.x.npy --output-dir "$OUT" --verify --steps
/usr/bin/python3 - "$OUT/y.npy" examples/encoder_small.out.y.npy <<'PY'
import numpy as np, sys
got, want = np.load(sys.argv[1]), np.load(sys.argv[2])
err = np.abs(got - want).max() / np.abs(want).max()
print(f"max error relative to PyTorch's output: {err:.2e}")
sys.exit(0 if err <= 1e-4 else 1)
PY
