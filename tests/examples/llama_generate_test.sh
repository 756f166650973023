#!/bin/bash
# The generation loop example (examples/llama_generate) on an 8-layer
# LLaMA-style model exported from PyTorch with random weights: prefill of a
# 12-token prompt, then 16 tokens decoded against the KV cache kept in
# place; the example itself checks tokens and logits against PyTorch's loop
# and exits 1 when they differ.
# Usage: llama_generate_test.sh SOURCE_DIR LLAMA_GENERATE
set -euo pipefail
src=$1 generate=$2
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
echo "llama_generate: OK"
