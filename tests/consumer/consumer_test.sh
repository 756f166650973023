#!/bin/bash
# Installs fusetune from BUILD_DIR into a temporary prefix, builds the
# consumer project against it with find_package(fusetune), runs it on a
# test model (with and without a tuning database) and compares its output
# with the reference executor's, and tunes the example model through the
# library before compiling from that database; one executable of the
# library over changing sizes (consumer_dynamic) against the reference.
# Usage: consumer_test.sh SOURCE_DIR BUILD_DIR FUSETUNE TESTDATA_DIR
set -euo pipefail
src=$1 build=$2 fusetune=$3 data=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
cmake -S "$src/tests/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=Release > "$work/configure.log"
cmake --build "$work/consumer" > "$work/build.log"
model=$data/encoder_postln_op17.onnx
/usr/bin/python3 - "$work" "$fusetune" "$model" <<'PY'
import subprocess, sys
import numpy as np
work, fusetune, model = sys.argv[1:]
x = (0.5 * np.sin(np.arange(2 * 8 * 32, dtype=np.float32))).reshape(2, 8, 32).astype(np.float32)
np.save(f"{work}/x.npy", x)
subprocess.run([fusetune, "run-reference", model, "--input", f"x={work}/x.npy", "--output-dir",
                f"{work}/ref"], check=True, stdout=subprocess.DEVNULL)
PY
# Without a database (greedy plan), then with one holding a measured plan.
"$work/consumer/consumer" "$model" - "$work/y0.bin"
"$fusetune" tune "$model" --db "$work/t.db" --trials 40 > /dev/null 2>&1
"$work/consumer/consumer" "$model" "$work/t.db" "$work/y1.bin" | tee "$work/run.log"
grep -q "whole-model\|exact" "$work/run.log"
grep -q "per group, chosen: .*; plan remembered for later compiles" "$work/run.log"
grep -q "per group, again: the compile remembered at generation" "$work/run.log"
# One executable over changing sizes, each against the reference executor.
dynamic_model=$data/encoder_dynamic_op17.onnx
"$work/consumer/consumer_dynamic" "$dynamic_model" "$work"
/usr/bin/python3 - "$work" "$fusetune" "$dynamic_model" <<'PY'
import subprocess, sys
import numpy as np
work, fusetune, model = sys.argv[1:]
for seq in (4, 6, 8):
    x = (0.5 * np.sin(np.arange(seq * 32, dtype=np.float32))).reshape(1, seq, 32).astype(np.float32)
    np.save(f"{work}/x_{seq}.npy", x)
    subprocess.run([fusetune, "run-reference", model, "--dim", "batch=1", "--dim", f"seq={seq}",
                    "--input", f"x={work}/x_{seq}.npy", "--output-dir", f"{work}/ref_{seq}"],
                   check=True, stdout=subprocess.DEVNULL)
    ref = np.load(f"{work}/ref_{seq}/y.npy").ravel()
    y = np.fromfile(f"{work}/y_{seq}.bin", dtype=np.float32)
    err = np.abs(y - ref).max() / max(np.abs(ref).max(), 1e-30)
    print(f"dynamic seq={seq}: max error {err:.2e} of the output scale")
    assert y.shape == ref.shape and err < 1e-4, (seq, y.shape, ref.shape, err)
PY
# Tuned through the library (Tune), then compiled from that database; the
# worker is found where it is installed, beside the library.
"$work/consumer/consumer_tune" "$src/examples/encoder_small.onnx" "$work/api.db"
/usr/bin/python3 - "$work" <<'PY'
import sys
import numpy as np
work = sys.argv[1]
ref = np.load(f"{work}/ref/y.npy").ravel()
for name in ("y0", "y1"):
    y = np.fromfile(f"{work}/{name}.bin", dtype=np.float32)
    err = np.abs(y - ref).max() / max(np.abs(ref).max(), 1e-30)
    print(f"{name}: max error {err:.2e} of the output scale")
    assert y.shape == ref.shape and err < 1e-4, (y.shape, ref.shape, err)
PY
echo "consumer project: OK"
