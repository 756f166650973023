#!/bin/bash
# Decode steps with the KV cache served in place (issue 39, points 3 and 4):
# a one-layer LLaMA-style model (examples/llama_generate/export_llama.py:
# d 2048, 16 heads, FFN 5632, a vocabulary of VOCAB; `past` symbolic,
# positions an input) tuned BUDGET per cache length with flushed caches.
# fusetune runs the step with build/bench/decode_step: compiled at a
# capacity of PAST + 1 rows, the cache held by the executable, one row
# written a step. ONNX Runtime 1.20.1 (npm onnxruntime-node, 2 intra-op
# threads, all graph optimisations) runs the same graph as exported, the
# past fed as an input and the present concatenated, as its users run it.
# Alternated over ROUNDS rounds. The bytes a step must move (every weight
# but the embedding table, of which it reads one row; the PAST cached K and
# V rows; the new rows written) over fusetune's time are set against the
# DRAM read bandwidth `fusetune calibrate` measures after the rounds (the
# best of three: a busy host only lowers it). Writes OUT/in_place.md and
# OUT/in_place.json; the model and database stay in OUT.
#
# Usage: bench/decode/run_decode_in_place.sh [OUT_DIR]   (default build/decode_in_place)
#   PASTS="511 2047"  cache lengths     BUDGET=3m   tuning time per length
#   RUNS=30  timed steps    ROUNDS=3  alternated rounds    VOCAB=256
#   TUNE=1   0: measure what the database holds    BUILD=build
# Needs `scripts/setup.sh --bench` (node/npm) and python3-torch.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "${1:-$root/build/decode_in_place}" && cd "${1:-$root/build/decode_in_place}" && pwd)
pasts=${PASTS:-511 2047} budget=${BUDGET:-3m} runs=${RUNS:-30} rounds=${ROUNDS:-3}
vocab=${VOCAB:-256} tune=${TUNE:-1}
build=$root/${BUILD:-build}
fusetune=$build/cli/fusetune step=$build/bench/decode_step
[ -x "$step" ] || { echo "run_decode_in_place: build first ($step)" >&2; exit 2; }
if [ ! -d "$out/ort/node_modules/onnxruntime-node" ]; then
  mkdir -p "$out/ort"
  (cd "$out/ort" && npm install --silent --ignore-scripts onnxruntime-node@1.20.1 >/dev/null)
fi
max_past=$(echo "$pasts" | tr ' ' '\n' | sort -n | tail -1)
model=$out/model
export_args="--layers 1 --d 2048 --heads 16 --ff 5632 --vocab $vocab --prompt 16 --steps 2 --max-seq $((max_past + 1))"
# A model exported with other arguments (a smaller --max-seq, another VOCAB) is exported again.
if [ ! -f "$model/decode.onnx" ] || [ "$(cat "$model/export_args" 2>/dev/null)" != "$export_args" ]; then
  echo "exporting the model" >&2
  # shellcheck disable=SC2086  # the arguments are words
  /usr/bin/python3 -W ignore "$root/examples/llama_generate/export_llama.py" "$model" $export_args >/dev/null
  echo "$export_args" >"$model/export_args"
fi
: >"$out/rounds.txt"
for p in $pasts; do
  # ONNX Runtime's inputs: one token at position p after p random cached rows.
  /usr/bin/python3 - "$out" "$p" <<'PY'
import sys, numpy as np
out, p = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(7)
np.save(f"{out}/ids.npy", np.array([[1]], dtype=np.int64))
np.save(f"{out}/pos_{p}.npy", np.array([p], dtype=np.int64))
for kind in "kv":
    np.save(f"{out}/past_{kind}_{p}.npy", rng.standard_normal((1, 16, p, 128), dtype=np.float32))
PY
  if [ "$tune" = 1 ]; then
    echo "tuning decode.onnx at past $p for $budget" >&2
    "$fusetune" tune "$model/decode.onnx" --dim past="$p" --db "$out/in_place.db" --time "$budget" \
      >"$out/tune_$p.log" 2>&1
  fi
  for r in $(seq 1 "$rounds"); do
    f=$("$step" "$model" --past "$p" --db "$out/in_place.db" --runs "$runs" |
        grep -o 'median [0-9.]* ms' | awk '{print $2}')
    o=$(NODE_PATH="$out/ort/node_modules" node "$root/bench/e2e/ort_bench.js" "$model/decode.onnx" \
        "ids=$out/ids.npy,pos=$out/pos_$p.npy,past_k_0=$out/past_k_$p.npy,past_v_0=$out/past_v_$p.npy" \
        "$runs" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["median_ms"])')
    echo "$p $r $f $o" >>"$out/rounds.txt"
    echo "past $p round $r: fusetune in place $f ms, ONNX Runtime $o ms" >&2
  done
done
for i in 1 2 3; do "$fusetune" calibrate --json >"$out/calibrate.$i.json"; done
/usr/bin/python3 - "$out" "$vocab" <<'PY'
import json, statistics, sys
out, vocab = sys.argv[1], int(sys.argv[2])
d, ff, layers = 2048, 5632, 1
read_gbs = max(json.load(open(f"{out}/calibrate.{i}.json"))["dram_read_gbps"] for i in (1, 2, 3))
rows = {}
for line in open(f"{out}/rounds.txt"):
    p, r, f, o = line.split()
    rows.setdefault(int(p), []).append((float(f), float(o)))
weights = 4 * (layers * (4 * d * d + 3 * d * ff + 2 * d) + 2 * vocab * d + d)
lines = ["| cache | step bytes | fusetune, cache in place | ONNX Runtime, as exported | vs ORT | GB/s | of DRAM read |",
         "|---|---|---|---|---|---|---|"]
result = {"dram_read_gbs": read_gbs, "vocab": vocab, "pasts": {}}
for p, rs in rows.items():
    step = weights - 4 * vocab * d + 4 * 2 * layers * d * p + 4 * 2 * layers * d
    f = statistics.median(r[0] for r in rs)
    o = statistics.median(r[1] for r in rs)
    gbs = step / f / 1e6
    result["pasts"][p] = dict(bytes=step, fusetune_ms=f, ort_ms=o, gbs=gbs, rounds=rs)
    lines.append(f"| {p} | {step / 2**20:.1f} MiB | {f:.2f} ms | {o:.2f} ms | {o / f:.2f}x | "
                 f"{gbs:.1f} | {gbs / read_gbs:.0%} |")
lines.append(f"\nDRAM read bandwidth (fusetune calibrate after the rounds, best of three): "
             f"{read_gbs:.1f} GB/s; times are medians over the rounds of each contender's median")
open(f"{out}/in_place.md", "w").write("\n".join(lines) + "\n")
json.dump(result, open(f"{out}/in_place.json", "w"), indent=1)
print("\n".join(lines))
PY
