#!/bin/bash
# Decode steps of a LLaMA-style layer (issue 39, point 4): d 2048, 16 heads,
# FFN 5632, one new token against a KV cache of PAST tokens given as inputs
# (bench/decode/llama_decode.py). Per cache size: fusetune tuned BUDGET
# with flushed caches (the weights of a model too large for the last-level
# cache come from DRAM every step) and compiled from the database, its
# greedy plan, and ONNX Runtime 1.20.1 (npm onnxruntime-node, 2 intra-op
# threads, all graph optimisations), alternated over ROUNDS rounds. Each
# step's bytes (weights + the cache read + the cache written) over its time
# are set against the DRAM read bandwidth `fusetune calibrate` measures in
# the same run. Outputs are checked against PyTorch's (1e-3 relative).
# Writes OUT/decode.md and OUT/decode.json; models and databases stay in OUT.
#
# Usage: bench/decode/run_decode.sh [OUT_DIR]   (default build/decode)
#   PASTS="511 2047"  cache sizes      BUDGET=3m   tuning time per model
#   RUNS=30           timed runs       ROUNDS=3    alternated rounds
#   TUNE=1            0: measure what the databases hold
#   BUILD=build       the fusetune build folder
# Needs `scripts/setup.sh --bench` (node/npm) and python3-torch.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "${1:-$root/build/decode}" && cd "${1:-$root/build/decode}" && pwd)
pasts=${PASTS:-511 2047}
budget=${BUDGET:-3m}
runs=${RUNS:-30}
rounds=${ROUNDS:-3}
tune=${TUNE:-1}
fusetune=$root/${BUILD:-build}/cli/fusetune
[ -x "$fusetune" ] || { echo "run_decode: build fusetune first ($fusetune)" >&2; exit 2; }
if [ ! -d "$out/ort/node_modules/onnxruntime-node" ]; then
  mkdir -p "$out/ort"
  (cd "$out/ort" && npm install --silent --ignore-scripts onnxruntime-node@1.20.1 >/dev/null)
fi

median_ms() { grep -o 'median [0-9.]* ms' | head -1 | awk '{print $2}'; }
for p in $pasts; do
  m=decode_p$p
  [ -f "$out/$m.onnx" ] ||
    /usr/bin/python3 -W ignore "$root/bench/decode/llama_decode.py" "$out" --past "$p" --name "$m" >/dev/null
  inputs=(--input "x=$out/$m.in.x.npy" --input "past_k_0=$out/$m.in.past_k_0.npy"
          --input "past_v_0=$out/$m.in.past_v_0.npy")
  ort_inputs="x=$out/$m.in.x.npy,past_k_0=$out/$m.in.past_k_0.npy,past_v_0=$out/$m.in.past_v_0.npy"
  if [ "$tune" = 1 ]; then
    echo "tuning $m for $budget" >&2
    "$fusetune" tune "$out/$m.onnx" --db "$out/$m.db" --time "$budget" >"$out/$m.tune.log" 2>&1
  fi
  "$fusetune" run "$out/$m.onnx" --db "$out/$m.db" "${inputs[@]}" --output-dir "$out/$m.out" \
    >/dev/null 2>&1
  /usr/bin/python3 - "$out" "$m" <<'PY'
import sys, numpy as np
out, m = sys.argv[1:]
for name in ("y", "present_k_0", "present_v_0"):
    got, want = np.load(f"{out}/{m}.out/{name}.npy"), np.load(f"{out}/{m}.out.{name}.npy")
    err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-30)
    assert err < 1e-3, f"{m} {name}: relative error {err}"
PY
  for r in $(seq 1 "$rounds"); do
    f=$("$fusetune" run "$out/$m.onnx" --db "$out/$m.db" "${inputs[@]}" --bench "$runs" 2>&1 | median_ms)
    g=$("$fusetune" run "$out/$m.onnx" --plan greedy "${inputs[@]}" --bench "$runs" 2>&1 | median_ms)
    o=$(NODE_PATH="$out/ort/node_modules" node "$root/bench/e2e/ort_bench.js" "$out/$m.onnx" \
        "$ort_inputs" "$runs" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["median_ms"])')
    echo "$m $r $f $g $o" >>"$out/rounds.txt"
    echo "$m round $r: fusetune $f ms, greedy $g ms, ONNX Runtime $o ms" >&2
  done
done
"$fusetune" calibrate --json >"$out/calibrate.json"
/usr/bin/python3 - "$out" <<'PY'
import json, os, sys, statistics
out = sys.argv[1]
cal = json.load(open(f"{out}/calibrate.json"))
read_gbs = cal["dram_read_gbps"]
rows = {}
for line in open(f"{out}/rounds.txt"):
    m, r, f, g, o = line.split()
    rows.setdefault(m, []).append((float(f), float(g), float(o)))
lines = ["| model | cache | step bytes | fusetune | greedy | ONNX Runtime | vs ORT | GB/s | of DRAM read |",
         "|---|---|---|---|---|---|---|---|---|"]
result = {"dram_read_gbs": read_gbs, "models": {}}
for m, rs in rows.items():
    past = int(m.split("_p")[1])
    d, ff, heads = 2048, 5632, 16
    weights = 4 * (4 * d * d + 3 * d * ff + 2 * d)
    cache = 4 * 2 * (past * d) + 4 * 2 * ((past + 1) * d)  # read past, write present
    f = statistics.median(r[0] for r in rs); g = statistics.median(r[1] for r in rs)
    o = statistics.median(r[2] for r in rs)
    gbs = (weights + cache) / f / 1e6
    result["models"][m] = dict(past=past, bytes=weights + cache, fusetune_ms=f, greedy_ms=g,
                               ort_ms=o, gbs=gbs, rounds=rs)
    lines.append(f"| {m} | {past} | {(weights + cache) / 2**20:.1f} MiB | {f:.2f} ms | {g:.2f} ms | "
                 f"{o:.2f} ms | {o / f:.2f}x | {gbs:.1f} | {gbs / read_gbs:.0%} |")
lines.append(f"\nDRAM read bandwidth (fusetune calibrate, after the rounds): {read_gbs:.1f} GB/s; "
             "times are medians over the rounds of each contender's median")
open(f"{out}/decode.md", "w").write("\n".join(lines) + "\n")
json.dump(result, open(f"{out}/decode.json", "w"), indent=1)
print("\n".join(lines))
PY
