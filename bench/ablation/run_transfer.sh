#!/bin/bash
# The cost model across targets (issue 38, point 3): a model trained on one
# target's records ranking another target's unseen workloads, with a small
# share of the new target's records against all of them.
#
# Two targets on one machine: A tunes with 2 threads per kernel, B with 1
# (its own calibration: one thread's FMA peak and bandwidth; other splits,
# other bests). B's database is exported, its target key renamed ("-t1"), and
# imported into a copy of A's: the path of a database from another machine
# (`db export` there, `db import` here). A third target, W: A's models
# measured with warm caches (key "-warm"). Then, for A -> B, B -> A, A -> W
# and W -> A,
#   fusetune evaluate-transfer --from OLD --to NEW --fraction F ...
# Writes OUT/transfer.txt and OUT/transfer.json (A -> B).
#
# Usage: bench/ablation/run_transfer.sh [OUT_DIR]   (default build/transfer)
#   MODELS="..."       ONNX files tuned on both targets (default: the examples
#                      and five of the test models, which the build generates)
#   TRIALS=600         group measurements per tune
#   FRACTIONS="0.05"   shares of B's training records (one --fraction each)
#   SPLITS=5           workload splits averaged
#   BUILD=build        the fusetune build folder
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "${1:-$root/build/transfer}" && cd "${1:-$root/build/transfer}" && pwd)
build="$root/${BUILD:-build}"
fusetune="$build/cli/fusetune"
[ -x "$fusetune" ] || { echo "run_transfer: no $fusetune (scripts/build.sh release)" >&2; exit 2; }
data="$build/testdata"
models=${MODELS:-"$root/examples/encoder_small.onnx $root/examples/cnn_small.onnx
  $data/decoder_preln_op17.onnx $data/llama_op17.onnx $data/mlp.onnx $data/cnn_bn_op13.onnx
  $data/encoder_3layer_op13.onnx"}
trials=${TRIALS:-600}
splits=${SPLITS:-5}
fractions=()
for f in ${FRACTIONS:-0.05}; do fractions+=(--fraction "$f"); done

tune_all() {  # DB THREADS [CACHES]
  local caches=${3:-flushed}
  for model in $models; do
    [ -f "$model" ] || { echo "run_transfer: no $model (build the tests: they generate testdata)" >&2; exit 2; }
    echo "== $(basename "$1" .db), $2 threads, $caches caches: $(basename "$model"), $trials trials"
    "$fusetune" tune "$model" --db "$1" --trials "$trials" --threads "$2" --caches "$caches" \
      >"${1%.db}.$(basename "$model" .onnx).$caches.log" 2>&1
  done
}

rm -f "$out"/{a,b,both}.db{,-wal,-shm}
tune_all "$out/a.db" 2
key_a=$(/usr/bin/python3 - "$out/a.db" <<'EOF'
import sqlite3, sys
print(sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True).execute(
    "select fingerprint from targets").fetchone()[0])
EOF
)
key_b="$key_a-t1"
tune_all "$out/b.db" 1

# B's records under their own key, as if measured on another machine.
"$fusetune" db export --db "$out/b.db" -o "$out/b.jsonl" >/dev/null
/usr/bin/python3 - "$out/b.jsonl" "$key_a" "$key_b" <<'EOF'
import json, sys
path, old, new = sys.argv[1:]
lines = []
for line in open(path):
    j = json.loads(line)
    if j.get("type") == "target" and j.get("fingerprint") == old:
        j["fingerprint"] = new
    if j.get("type") == "record" and j.get("target") == old:
        j["target"] = new
    lines.append(json.dumps(j))
open(path, "w").write("\n".join(lines) + "\n")
EOF
cp "$out/a.db" "$out/both.db"
"$fusetune" db import --db "$out/both.db" "$out/b.jsonl"
# A third target on the same machine: A's models measured with warm caches
# (its own key, "-warm").
tune_all "$out/both.db" 2 warm
"$fusetune" db stats --db "$out/both.db" | tee "$out/stats.txt"

: >"$out/transfer.txt"
for pair in "$key_a $key_b" "$key_b $key_a" "$key_a $key_a-warm" "$key_a-warm $key_a"; do
  set -- $pair
  "$fusetune" evaluate-transfer --db "$out/both.db" --from "$1" --to "$2" \
    "${fractions[@]}" --splits "$splits" | tee -a "$out/transfer.txt"
done
"$fusetune" evaluate-transfer --db "$out/both.db" --from "$key_a" --to "$key_b" \
  "${fractions[@]}" --splits "$splits" --json >"$out/transfer.json"
