#!/bin/bash
# The generation loop example (examples/llama_generate) on an 8-layer
# LLaMA-style model exported from PyTorch with random weights: prefill of a
# 12-token prompt, then 16 tokens decoded against the KV cache kept in
# place; the example itself checks tokens and logits against PyTorch's loop
# and exits 1 when they differ.
# Also the one-graph decoder (decoder.onnx: `seq` and `past` symbolic) run
# by fusetune against PyTorch's logits after a cache, and at past 0.
# Usage: llama_generate_test.sh SOURCE_DIR LLAMA_GENERATE FUSETUNE
set -euo pipefail
src=$1 generate=$2 fusetune=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 -W ignore "$src/examples/llama_generate/export_llama.py" "$work" --layers 8 \
  --d 64 --heads 4 --ff 172 --vocab 256 --prompt 12 --steps 8 --max-seq 512 > /dev/null
"$generate" "$work" --steps 16 --capacity 64 | tee "$work/out.txt"
grep -q "^decode    16 tokens in .* tokens/s" "$work/out.txt"
grep -q "^check     8 steps against PyTorch: .* tokens equal" "$work/out.txt"
# Past the cache's capacity: a clear error, not a crash.
if "$generate" "$work" --steps 60 --capacity 64 > "$work/full.txt" 2>&1; then
  echo "a loop past the cache's capacity succeeded"; exit 1
fi
grep -q "the KV cache is full" "$work/full.txt"
# decoder.onnx: the prompt's last 3 tokens after the cache of its first 9
check=$work/decoder_check caches=()
for f in "$check"/past_*.npy; do caches+=(--input "$(basename "$f" .npy)=$f"); done
"$fusetune" run "$work/decoder.onnx" --plan greedy --dim seq=3 --dim past=9 \
  --input ids="$check/ids.npy" "${caches[@]}" --output-dir "$work/decoder_out" > /dev/null
/usr/bin/python3 -c "
import sys, numpy as np
want, got = np.load(sys.argv[1]), np.load(sys.argv[2])
error = float(abs(want - got).max() / abs(want).max())
print(f'decoder.onnx at past 9, seq 3: {error:.2e} of the scale of PyTorch logits')
sys.exit(error > 1e-4)" "$check/logits.npy" "$work/decoder_out/logits.npy"
# the prompt itself, a cache of no rows: its last token's logits are the
# first row of PyTorch's loop
mkdir -p "$work/empty" && empties=()
for f in "$check"/past_*.npy; do
  /usr/bin/python3 -c "import numpy as np, sys; a = np.load(sys.argv[1]); np.save(sys.argv[2], a[:, :, :0])" \
    "$f" "$work/empty/$(basename "$f")"
  empties+=(--input "$(basename "$f" .npy)=$work/empty/$(basename "$f")")
done
"$fusetune" run "$work/decoder.onnx" --plan greedy --dim seq=12 --dim past=0 \
  --input ids="$work/prompt.npy" "${empties[@]}" --output-dir "$work/prompt_out" > /dev/null
/usr/bin/python3 -c "
import sys, numpy as np
want, got = np.load(sys.argv[1])[0], np.load(sys.argv[2])[0, -1]
error = float(abs(want - got).max() / abs(want).max())
print(f'decoder.onnx at past 0, seq 12: {error:.2e} of the scale of PyTorch logits')
sys.exit(error > 1e-4)" "$work/torch_logits.npy" "$work/prompt_out/logits.npy"
echo "llama_generate: OK"
