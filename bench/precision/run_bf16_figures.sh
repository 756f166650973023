#!/bin/bash
# Issue 40's figures (point 4) in one run, one after the other on this
# machine, with the goals checked:
#   1. the bf16 GEMM + bias + GELU at 384x768x3072 (`bench_kernels
#      --benchmark_filter=gemm_bf16_bias_gelu`): the best tiling against the
#      BF16 dot peak the benchmark measures (goal >= 80%) and against
#      oneDNN's bf16 matmul with the same post-ops;
#   2. the transformer blocks tuned BUDGET each with `--precision mixed
#      --error-budget ERROR_BUDGET` against ONNX Runtime 1.20.1 in f32
#      (bench/e2e/run_e2e.sh PRECISION=mixed; goal >= 1.6x, outputs within
#      the budget);
#   3. the decode step with bf16 weights against its own f32 tune
#      (bench/precision/run_decode_bf16.sh; goal >= 1.8x the tokens/s).
# Writes OUT/bf16_figures.md and OUT/bf16_figures.json (bench/precision/
# summarize_bf16.py), beside each part's own files in OUT/gemm, OUT/blocks
# and OUT/decode. Each run tunes from empty databases (those of an earlier
# run into OUT are removed first). A block whose output misses the error
# budget is a "no" in the summary; a decode step whose output misses it
# stops the run (run_decode_bf16.sh checks it against PyTorch's).
#
# Usage: bench/precision/run_bf16_figures.sh [OUT_DIR]   (default build/bf16_figures)
#   BUDGET=30m          tuning time per block (the issue's 30 minutes: about 2 h 40 min
#                       in all; a shorter budget is a shorter run, not the goal's)
#   DECODE_BUDGET=3m    tuning time of each of the decode step's two tunes
#   ERROR_BUDGET=1e-2   ROUNDS=3   BUILD=build
#   MODELS="bert_layer_s128 bert_layer gpt2_block llama_block mlp_e2e"
#                       (bert_layer is the BERT-base layer at sequence 384)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "${1:-$root/build/bf16_figures}" && cd "${1:-$root/build/bf16_figures}" && pwd)
build=${BUILD:-build}
bench_kernels=$root/$build/bench/bench_kernels
[ -x "$bench_kernels" ] || { echo "run_bf16_figures: build bench_kernels first ($bench_kernels)" >&2; exit 2; }
[ -x "$root/$build/cli/fusetune" ] || { echo "run_bf16_figures: build fusetune first ($root/$build/cli/fusetune)" >&2; exit 2; }
export ROUNDS=${ROUNDS:-3} ERROR_BUDGET=${ERROR_BUDGET:-1e-2} BUILD=$build
budget=${BUDGET:-30m}
models=${MODELS:-bert_layer_s128 bert_layer gpt2_block llama_block mlp_e2e}
start=$(date -u +%FT%TZ)

echo "== 1/3: the bf16 GEMM + bias + GELU" >&2
mkdir -p "$out/gemm" "$out/blocks" "$out/decode"
# Tunes start from empty databases; the blocks' figures are this run's.
rm -f "$out"/blocks/e2e.db* "$out"/blocks/e2e.json "$out"/decode/f32.db* "$out"/decode/mixed.db*
"$bench_kernels" --benchmark_filter=gemm_bf16_bias_gelu --benchmark_format=json \
  >"$out/gemm/gemm_bf16.json" 2>"$out/gemm/gemm_bf16.log" || {
  echo "run_bf16_figures: bench_kernels failed; its log: $out/gemm/gemm_bf16.log" >&2
  exit 1
}

echo "== 2/3: the blocks, tuned $budget each in mixed precision" >&2
# run_e2e.sh writes e2e.json, then fails when an output is past its
# tolerance: fusetune's past the budget is a figure of this run (the
# summary's "no"), not a stop; ONNX Runtime's or PyTorch's past 1e-3 is
# in the tail printed here and in blocks/e2e.json.
BUDGET=$budget PRECISION=mixed MODELS="$models" "$root/bench/e2e/run_e2e.sh" "$out/blocks" \
  >"$out/blocks/run.log" 2>&1 || {
  tail -n 20 "$out/blocks/run.log" >&2
  [ -f "$out/blocks/e2e.json" ] || { echo "run_bf16_figures: the blocks' run failed ($out/blocks/run.log)" >&2; exit 1; }
}

echo "== 3/3: the decode step, f32 and mixed tunes of ${DECODE_BUDGET:-3m} each" >&2
BUDGET=${DECODE_BUDGET:-3m} BUDGET_ERR=$ERROR_BUDGET "$root/bench/precision/run_decode_bf16.sh" \
  "$out/decode" >"$out/decode/run.log" 2>&1 || {
  echo "run_bf16_figures: the decode run failed; its log: $out/decode/run.log" >&2
  tail -n 20 "$out/decode/run.log" >&2
  exit 1
}

/usr/bin/python3 "$root/bench/precision/summarize_bf16.py" "$out" --start "$start" \
  --budget "$budget" --scripts "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
