#!/bin/bash
# bf16 weights on the decode step (issue 40, point 4): one LLaMA-style layer
# (d 2048, 16 heads, FFN 5632, bench/decode/llama_decode.py), one new token
# against PAST cached tokens. The same model tuned BUDGET twice into two
# databases, f32 (`tune`) and mixed (`tune --precision mixed --error-budget
# BUDGET_ERR`), then alternated over ROUNDS rounds: fusetune f32, fusetune
# mixed, and ONNX Runtime 1.20.1 f32 (npm onnxruntime-node). The mixed
# run's outputs are checked against PyTorch's within the error budget.
# Writes OUT/decode_bf16.md and OUT/decode_bf16.json.
#
# Usage: bench/precision/run_decode_bf16.sh [OUT_DIR]   (default build/decode_bf16)
#   PAST=511   BUDGET=3m   BUDGET_ERR=1e-2   RUNS=30   ROUNDS=3   TUNE=1   BUILD=build
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "${1:-$root/build/decode_bf16}" && cd "${1:-$root/build/decode_bf16}" && pwd)
past=${PAST:-511}
budget=${BUDGET:-3m}
err=${BUDGET_ERR:-1e-2}
runs=${RUNS:-30}
rounds=${ROUNDS:-3}
fusetune=$root/${BUILD:-build}/cli/fusetune
[ -x "$fusetune" ] || { echo "run_decode_bf16: build fusetune first ($fusetune)" >&2; exit 2; }
if [ ! -d "$out/ort/node_modules/onnxruntime-node" ]; then
  mkdir -p "$out/ort"
  (cd "$out/ort" && npm install --silent --ignore-scripts onnxruntime-node@1.20.1 >/dev/null)
fi
m=decode_p$past
[ -f "$out/$m.onnx" ] ||
  /usr/bin/python3 -W ignore "$root/bench/decode/llama_decode.py" "$out" --past "$past" --name "$m" >/dev/null
inputs=(--input "x=$out/$m.in.x.npy" --input "past_k_0=$out/$m.in.past_k_0.npy"
        --input "past_v_0=$out/$m.in.past_v_0.npy")
ort_inputs="x=$out/$m.in.x.npy,past_k_0=$out/$m.in.past_k_0.npy,past_v_0=$out/$m.in.past_v_0.npy"
mixed=(--precision mixed --error-budget "$err")
if [ "${TUNE:-1}" = 1 ]; then
  echo "tuning $m f32 for $budget" >&2
  "$fusetune" tune "$out/$m.onnx" --db "$out/f32.db" --time "$budget" >"$out/f32.tune.log" 2>&1
  echo "tuning $m mixed (error budget $err) for $budget" >&2
  "$fusetune" tune "$out/$m.onnx" --db "$out/mixed.db" --time "$budget" "${mixed[@]}" \
    >"$out/mixed.tune.log" 2>&1
fi
"$fusetune" compile "$out/$m.onnx" --db "$out/mixed.db" "${mixed[@]}" --explain >"$out/mixed.explain.txt"
"$fusetune" run "$out/$m.onnx" --db "$out/mixed.db" "${mixed[@]}" "${inputs[@]}" \
  --output-dir "$out/$m.mixed.out" >/dev/null 2>&1
/usr/bin/python3 - "$out" "$m" "$err" <<'PY'
import sys, numpy as np
out, m, budget = sys.argv[1], sys.argv[2], float(sys.argv[3])
for name in ("y", "present_k_0", "present_v_0"):
    got, want = np.load(f"{out}/{m}.mixed.out/{name}.npy"), np.load(f"{out}/{m}.out.{name}.npy")
    e = np.abs(got - want).max() / max(np.abs(want).max(), 1e-30)
    assert e <= budget, f"{name}: error {e} over the budget {budget}"
    print(f"{name}: error {e:.3g} against PyTorch (budget {budget:g})", file=sys.stderr)
PY
median_ms() { grep -o 'median [0-9.]* ms' | head -1 | awk '{print $2}'; }
: >"$out/rounds.txt"
for r in $(seq 1 "$rounds"); do
  f=$("$fusetune" run "$out/$m.onnx" --db "$out/f32.db" "${inputs[@]}" --bench "$runs" 2>&1 | median_ms)
  b=$("$fusetune" run "$out/$m.onnx" --db "$out/mixed.db" "${mixed[@]}" "${inputs[@]}" --bench "$runs" 2>&1 | median_ms)
  o=$(NODE_PATH="$out/ort/node_modules" node "$root/bench/e2e/ort_bench.js" "$out/$m.onnx" \
      "$ort_inputs" "$runs" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["median_ms"])')
  echo "$r $f $b $o" >>"$out/rounds.txt"
  echo "round $r: fusetune f32 $f ms, fusetune mixed $b ms, ONNX Runtime f32 $o ms" >&2
done
"$fusetune" calibrate --json >"$out/calibrate.json"
/usr/bin/python3 - "$out" "$m" "$err" <<'PY'
import json, re, statistics, sys
out, m, budget = sys.argv[1], sys.argv[2], float(sys.argv[3])
cal = json.load(open(f"{out}/calibrate.json"))
rounds = [list(map(float, l.split()[1:])) for l in open(f"{out}/rounds.txt")]
f32, mixed, ort = (statistics.median(r[i] for r in rounds) for i in range(3))
explain = open(f"{out}/mixed.explain.txt").read()
line = re.search(r"^precision .*$", explain, re.M)
res = {"model": m, "error_budget": budget, "rounds": rounds, "fusetune_f32_ms": f32,
       "fusetune_mixed_ms": mixed, "onnxruntime_f32_ms": ort,
       "mixed_over_f32_tokens_per_s": f32 / mixed, "mixed_vs_ort": ort / mixed,
       "dram_read_gbps": cal["dram_read_gbps"], "precision": line.group(0) if line else ""}
json.dump(res, open(f"{out}/decode_bf16.json", "w"), indent=1)
md = [f"| {m} | fusetune f32 | fusetune mixed | ONNX Runtime f32 | mixed / f32 tokens/s | mixed vs ORT |",
      "|---|---|---|---|---|---|",
      f"| median ms | {f32:.3f} | {mixed:.3f} | {ort:.3f} | {f32 / mixed:.2f}x | {ort / mixed:.2f}x |",
      "", res["precision"], f"DRAM read {cal['dram_read_gbps']:.1f} GB/s"]
open(f"{out}/decode_bf16.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
