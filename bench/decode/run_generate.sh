#!/bin/bash
# A generation loop side by side (issue 39, point 5): a LLaMA-style model of
# LAYERS layers (examples/llama_generate/export_llama.py, random weights)
# reads a PROMPT-token prompt, then writes STEPS tokens greedily. fusetune
# runs examples/llama_generate (the decode step compiled at a cache of
# CAPACITY rows kept in place, one row written a step) with the prefill and
# decode graphs tuned BUDGET each; ONNX Runtime 1.20.1 (npm
# onnxruntime-node, 2 intra-op threads, all graph optimisations) runs the
# same loop with bench/decode/ort_generate.js, feeding each step's present
# K/V back as the next past. Alternated over ROUNDS rounds; both loops'
# tokens are checked against PyTorch's. Writes OUT/generate.md and
# OUT/generate.json; models and databases stay in OUT.
#
# Usage: bench/decode/run_generate.sh [OUT_DIR]   (default build/generate)
#   LAYERS=8 D=1024 HEADS=8 FF=2816 VOCAB=8192   the model
#   PROMPT=128 STEPS=64 CAPACITY=1024            the loop
#   BUDGET=3m   tuning time per graph     TUNE=1   0: use what the databases hold
#   ROUNDS=3    alternated rounds         BUILD=build   the fusetune build folder
# Needs `scripts/setup.sh --bench` (node/npm) and python3-torch.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "${1:-$root/build/generate}" && cd "${1:-$root/build/generate}" && pwd)
layers=${LAYERS:-8} d=${D:-1024} heads=${HEADS:-8} ff=${FF:-2816} vocab=${VOCAB:-8192}
prompt=${PROMPT:-128} steps=${STEPS:-64} capacity=${CAPACITY:-1024}
budget=${BUDGET:-3m} tune=${TUNE:-1} rounds=${ROUNDS:-3}
build=$root/${BUILD:-build}
fusetune=$build/cli/fusetune generate=$build/examples/llama_generate/llama_generate
[ -x "$generate" ] || { echo "run_generate: build fusetune first ($generate)" >&2; exit 2; }
if [ ! -d "$out/ort/node_modules/onnxruntime-node" ]; then
  mkdir -p "$out/ort"
  (cd "$out/ort" && npm install --silent --ignore-scripts onnxruntime-node@1.20.1 >/dev/null)
fi
model=$out/model
if [ ! -f "$model/decode.onnx" ]; then
  echo "exporting the model" >&2
  /usr/bin/python3 -W ignore "$root/examples/llama_generate/export_llama.py" "$model" \
    --layers "$layers" --d "$d" --heads "$heads" --ff "$ff" --vocab "$vocab" --prompt "$prompt" \
    --steps 8 --max-seq "$capacity" >/dev/null
fi
if [ "$tune" = 1 ]; then
  echo "tuning prefill.onnx (seq $prompt) for $budget" >&2
  "$fusetune" tune "$model/prefill.onnx" --dim seq="$prompt" --db "$out/gen.db" --time "$budget" \
    >"$out/tune_prefill.log" 2>&1
  echo "tuning decode.onnx (past $((capacity - 1))) for $budget" >&2
  "$fusetune" tune "$model/decode.onnx" --dim past=$((capacity - 1)) --db "$out/gen.db" \
    --time "$budget" >"$out/tune_decode.log" 2>&1
fi
: >"$out/rounds.txt"
for r in $(seq 1 "$rounds"); do
  "$generate" "$model" --db "$out/gen.db" --steps "$steps" --capacity "$capacity" >"$out/fusetune.$r.txt"
  NODE_PATH="$out/ort/node_modules" node "$root/bench/decode/ort_generate.js" "$model" "$steps" \
    >"$out/ort.$r.json"
  /usr/bin/python3 - "$out" "$r" >>"$out/rounds.txt" <<'PY'
import json, re, sys
out, r = sys.argv[1:]
text = open(f"{out}/fusetune.{r}.txt").read()
prompt = float(re.search(r"^prompt .*: ([0-9.]+) tokens/s", text, re.M).group(1))
decode = float(re.search(r"^decode .*: ([0-9.]+) tokens/s", text, re.M).group(1))
assert "tokens equal" in text, text
ort = json.load(open(f"{out}/ort.{r}.json"))
assert ort["tokens_match_torch"], "ONNX Runtime's tokens differ from PyTorch's"
print(r, prompt, decode, ort["prompt_tokens_per_s"], ort["decode_tokens_per_s"])
PY
  tail -1 "$out/rounds.txt" | awk '{printf "round %s: fusetune prompt %.0f, decode %.1f tokens/s; ONNX Runtime prompt %.0f, decode %.1f tokens/s\n", $1, $2, $3, $4, $5}' >&2
done
# The DRAM read bandwidth after the rounds: the best of three calibrations
# (a busy host only ever lowers it).
for i in 1 2 3; do "$fusetune" calibrate --json >"$out/calibrate.$i.json"; done
/usr/bin/python3 - "$out" "$layers" "$d" "$heads" "$ff" "$vocab" "$prompt" "$steps" "$capacity" <<'PY'
import json, statistics, sys
out = sys.argv[1]
layers, d, heads, ff, vocab, prompt, steps, capacity = map(int, sys.argv[2:])
rows = [list(map(float, l.split()[1:])) for l in open(f"{out}/rounds.txt")]
med = [statistics.median(r[i] for r in rows) for i in range(4)]
weights = 4 * (layers * (4 * d * d + 3 * d * ff + 2 * d) + 2 * vocab * d + d)
# Bytes a decode step reads: every weight but the embedding table (one row
# of it), and the K and V rows cached, at the loop's mean length.
streamed = weights - 4 * vocab * d + 4 * 2 * layers * d * (prompt + steps / 2)
read_gbs = max(json.load(open(f"{out}/calibrate.{i}.json"))["dram_read_gbps"] for i in (1, 2, 3))
gbs = streamed * med[1] / 1e9
lines = [f"LLaMA-style, {layers} layers, d {d}, {heads} heads, FFN {ff}, vocab {vocab} "
         f"({weights / 2**20:.0f} MiB of f32 weights); prompt {prompt} tokens, {steps} decoded, "
         f"cache capacity {capacity}",
         "", "| | prompt tokens/s | decode tokens/s |", "|---|---|---|",
         f"| fusetune (cache in place) | {med[0]:.0f} | {med[1]:.1f} |",
         f"| ONNX Runtime 1.20.1 | {med[2]:.0f} | {med[3]:.1f} |",
         f"| fusetune / ONNX Runtime | {med[0] / med[2]:.2f}x | {med[1] / med[3]:.2f}x |",
         "", f"medians over {len(rows)} alternated rounds; both loops' tokens equal PyTorch's; "
         f"a fusetune decode step reads {streamed / 2**20:.0f} MiB: {gbs:.1f} GB/s, "
         f"{gbs / read_gbs:.0%} of the DRAM read bandwidth ({read_gbs:.1f} GB/s, the best of "
         "three `fusetune calibrate` after the rounds)"]
json.dump({"layers": layers, "d": d, "heads": heads, "ff": ff, "vocab": vocab, "prompt": prompt,
           "steps": steps, "capacity": capacity, "weight_bytes": weights, "rounds": rows,
           "fusetune_prompt_tps": med[0], "fusetune_decode_tps": med[1],
           "ort_prompt_tps": med[2], "ort_decode_tps": med[3], "decode_step_bytes": streamed,
           "decode_gbs": gbs, "dram_read_gbs": read_gbs},
          open(f"{out}/generate.json", "w"), indent=1)
open(f"{out}/generate.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
