#!/usr/bin/env bash
# End-to-end checks of the fusetune command: outputs of run-reference against
# PyTorch's, --json, and the exit code 2 with a clear message for bad input.
# Usage: cli_test.sh FUSETUNE DATA [all|basics|training|tuning]: ctest runs
# the three parts as separate tests, so that they run side by side.
set -u
FUSETUNE=$1
DATA=$2
PART=${3:-all}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect_error CODE PATTERN -- command...: the command exits CODE and stderr matches PATTERN.
expect_error() {
  local code=$1 pattern=$2; shift 3
  "$@" >"$TMP/stdout" 2>"$TMP/stderr"
  local rc=$?
  [ "$rc" -eq "$code" ] || fail "'$*' exited $rc, expected $code"
  grep -qE -- "$pattern" "$TMP/stderr" || fail "'$*' stderr lacks /$pattern/: $(cat "$TMP/stderr")"
}

part() { [ "$PART" = all ] || [ "$PART" = "$1" ]; }

if part basics; then
# --help everywhere
for cmd in "" inspect run-reference space run calibrate measure db "db stats" "db best" "db export" "db import" "db merge" "db check" "db vacuum" collect retrain evaluate-model tune report compile cluster "cluster submit" "cluster status" "cluster cancel" "cluster shard" "cluster merge" "cluster finish"; do
  $FUSETUNE $cmd --help >/dev/null || fail "fusetune $cmd --help"
done

# inspect, text and JSON
$FUSETUNE inspect "$DATA/encoder_3layer_op13.onnx" >"$TMP/inspect.txt" || fail "inspect"
grep -q "x3" "$TMP/inspect.txt" || fail "inspect does not report the 3 repeated layers"
$FUSETUNE inspect "$DATA/encoder_postln_op17.onnx" --json >"$TMP/inspect.json" || fail "inspect --json"
/usr/bin/python3 - "$TMP/inspect.json" <<'PY' || fail "inspect --json content"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["opset"] == 17 and j["nodes"] > 10 and j["flops"] > 0, j
assert any(o["op_type"] == "LayerNormalization" for o in j["op_types"])
PY
# --text prints the graph in the form tests parse, with every Slice bound exact
$FUSETUNE inspect "$DATA/llama_op17.onnx" --text >"$TMP/llama.txt" || fail "inspect --text"
grep -q "^graph .* opset 17 {" "$TMP/llama.txt" || fail "inspect --text: no graph header"
grep -q "= \[9223372036854775807\]" "$TMP/llama.txt" || fail "inspect --text: INT64_MAX not exact"

# run-reference writes one .npy per output, named after it, matching PyTorch
$FUSETUNE run-reference "$DATA/llama_op17.onnx" --input x="$DATA/llama_op17.in.x.npy" --output-dir "$TMP/out" >/dev/null \
  || fail "run-reference"
/usr/bin/python3 - "$TMP/out/y.npy" "$DATA/llama_op17.out.y.npy" <<'PY' || fail "run-reference output differs from PyTorch"
import numpy as np, sys
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert a.shape == b.shape and np.abs(a - b).max() <= 1e-4 * np.abs(b).max(), np.abs(a - b).max()
PY
$FUSETUNE run-reference "$DATA/mlp.onnx" --random-inputs 1 --json >"$TMP/run.json" || fail "run-reference --json"
grep -q '"outputs"' "$TMP/run.json" || fail "run-reference --json content"

# space: candidate groups, partitions, greedy plan; saved plans run and match PyTorch
$FUSETUNE space "$DATA/encoder_postln_op13.onnx" --save-greedy "$TMP/greedy.json" >"$TMP/space.txt" || fail "space"
grep -q "attention" "$TMP/space.txt" || fail "space lists no attention group"
grep -q "partitions" "$TMP/space.txt" || fail "space reports no partition count"
$FUSETUNE space "$DATA/llama_op17.onnx" --json >"$TMP/space.json" || fail "space --json"
/usr/bin/python3 - "$TMP/space.json" <<'PY' || fail "space --json content"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["candidates"]["multi_node_groups"] > 0 and j["partitions"]["count_upper_bound"] > 1, j
assert j["greedy"]["traffic_bytes"] < j["unfused"]["traffic_bytes"], j
PY
$FUSETUNE run "$DATA/encoder_postln_op13.onnx" --plan "$TMP/greedy.json" --input x="$DATA/encoder_postln_op13.in.x.npy" \
  --output-dir "$TMP/run" --verify >"$TMP/run.txt" || fail "run --plan"
/usr/bin/python3 - "$TMP/run/y.npy" "$DATA/encoder_postln_op13.out.y.npy" <<'PY' || fail "run output differs from PyTorch"
import numpy as np, sys
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert a.shape == b.shape and np.abs(a - b).max() <= 1e-4 * np.abs(b).max(), np.abs(a - b).max()
PY
sed 's/"version": 1/"version": 7/' "$TMP/greedy.json" >"$TMP/v7.json"
expect_error 2 "unknown version 7" -- $FUSETUNE run "$DATA/encoder_postln_op13.onnx" --plan "$TMP/v7.json" --random-inputs 1
expect_error 2 "made for a graph of 49 nodes" -- $FUSETUNE run "$DATA/mlp.onnx" --plan "$TMP/greedy.json" --random-inputs 1
expect_error 2 "cannot open plan file" -- $FUSETUNE run "$DATA/mlp.onnx" --plan /nonexistent.json --random-inputs 1
echo "{" >"$TMP/broken.json"
expect_error 2 "not valid JSON" -- $FUSETUNE run "$DATA/mlp.onnx" --plan "$TMP/broken.json" --random-inputs 1
expect_error 2 "max-group-size" -- $FUSETUNE space "$DATA/mlp.onnx" --max-group-size 0

# calibrate: the machine's figures and fingerprint
$FUSETUNE calibrate --json >"$TMP/calibrate.json" || fail "calibrate --json"
/usr/bin/python3 - "$TMP/calibrate.json" <<'PY' || fail "calibrate --json content"
import json, sys
j = json.load(open(sys.argv[1]))
# positive only: under a loaded test run (sanitizers, parallel tests) the
# figures are far from the quiet machine's and their order is not reliable
assert j["fma_gflops"] > 0 and j["dram_read_gbps"] > 0 and j["l2_read_gbps"] > 0, j
assert j["launch_overhead_us"] > 0 and len(j["target"]["hash"]) == 16, j
PY
expect_error 2 "threads" -- $FUSETUNE calibrate --threads 0

# measure: a plan and its groups in the worker process, every metric present
$FUSETUNE space "$DATA/encoder_postln_op13.onnx" --save-greedy "$TMP/enc_plan.json" >/dev/null || fail "space --save-greedy"
$FUSETUNE measure "$DATA/encoder_postln_op13.onnx" --plan "$TMP/enc_plan.json" --groups --json \
  --min-repeats 3 --min-time 0 --no-roofline >"$TMP/measure.json" || fail "measure --json"
/usr/bin/python3 - "$TMP/measure.json" <<'PY' || fail "measure --json content"
import json, sys
j = json.load(open(sys.argv[1]))
for r in [j["result"]] + [g["result"] for g in j["groups"]]:
    assert r["status"] == "ok", r
    assert r["time"]["count"] >= 3 and r["time"]["min"] <= r["time"]["median"] <= r["time"]["max"], r
    assert 0 <= r["overlap"] <= 1 and r["overhead_seconds"] >= 0 and r["threads"] == 2, r
    assert r["bytes_in"] > 0 and r["bytes_out"] > 0 and r["caches_flushed"], r
assert len(j["groups"]) >= 4, j["groups"]
PY
$FUSETUNE measure "$DATA/mlp.onnx" --plan greedy --min-repeats 2 --min-time 0 --warm >"$TMP/measure.txt" 2>"$TMP/measure.err" || fail "measure"
grep -q "caches kept warm" "$TMP/measure.txt" || fail "measure does not say caches were kept warm"
grep -q "roofline" "$TMP/measure.txt" || fail "measure does not report the roofline fraction"
expect_error 2 "invalid plan|not valid JSON" -- $FUSETUNE measure "$DATA/mlp.onnx" --plan "$TMP/broken.json"
expect_error 2 "timeout" -- $FUSETUNE measure "$DATA/mlp.onnx" --plan greedy --timeout 0
FUSETUNE_WORKER=/nonexistent expect_error 2 "FUSETUNE_WORKER" -- $FUSETUNE measure "$DATA/mlp.onnx" --plan greedy

# db: calibration stored, export/import round trip, merge, check, errors
$FUSETUNE calibrate --db "$TMP/a.db" --json >"$TMP/stored.json" || fail "calibrate --db"
$FUSETUNE measure "$DATA/mlp.onnx" --plan greedy --min-repeats 2 --min-time 0 --db "$TMP/a.db" --json >"$TMP/m.json" 2>/dev/null || fail "measure --db"
/usr/bin/python3 -c "import json,sys; j=json.load(open(sys.argv[1])); c=json.load(open(sys.argv[2])); assert j['options']['peak_gflops'] == c['fma_gflops'], (j['options'], c)" "$TMP/m.json" "$TMP/stored.json" || fail "measure --db does not use the stored calibration"
$FUSETUNE db stats --db "$TMP/a.db" --json >"$TMP/stats.json" || fail "db stats"
/usr/bin/python3 - "$TMP/stats.json" <<'PY' || fail "db stats content"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["targets"] == 1 and j["records"] == 0 and j["schema_version"] == 3, j
PY
printf '%s\n' '{"type":"target","fingerprint":"00000000000000aa","description":"{}","calibration":"{}"}' \
  '{"type":"workload","key":"0000000000001000","kind":"group","description":"{}"}' \
  '{"type":"record","workload":"0000000000001000","target":"00000000000000aa","plan":"{}","status":"ok","seconds":0.002,"created_at":1.7e9,"kernel_versions":{"reference":1}}' \
  '{"type":"record","workload":"0000000000001000","target":"00000000000000aa","plan":"{\"fast\":1}","status":"ok","seconds":0.001,"created_at":1.8e9,"kernel_versions":{"reference":1}}' \
  >"$TMP/records.jsonl"
$FUSETUNE db import --db "$TMP/b.db" "$TMP/records.jsonl" 2>"$TMP/import.err" || fail "db import"
grep -q "2 records read, 2 new" "$TMP/import.err" || fail "db import summary: $(cat "$TMP/import.err")"
$FUSETUNE db import --db "$TMP/b.db" "$TMP/records.jsonl" 2>"$TMP/import.err" || fail "db import again"
grep -q "0 new" "$TMP/import.err" || fail "db import twice adds records"
$FUSETUNE db best --db "$TMP/b.db" --target 00000000000000aa --workload 0000000000001000 >"$TMP/best.json" || fail "db best"
grep -q '"fast"' "$TMP/best.json" || fail "db best is not the fastest record"
$FUSETUNE db merge --db "$TMP/a.db" "$TMP/b.db" 2>/dev/null || fail "db merge"
$FUSETUNE db export --db "$TMP/a.db" -o "$TMP/export.jsonl" 2>/dev/null || fail "db export"
[ "$(grep -c '"type":"record"' "$TMP/export.jsonl")" = 2 ] || fail "db export after merge"
$FUSETUNE db check --db "$TMP/a.db" >/dev/null || fail "db check"
$FUSETUNE db vacuum --db "$TMP/a.db" >/dev/null || fail "db vacuum"
$FUSETUNE db stats --db "$TMP/a.db" >"$TMP/stats.txt" || fail "db stats text"
grep -q "measured on another target" "$TMP/stats.txt" || fail "db stats does not flag other targets"
echo "not a database at all, just text, long enough to fill a header of one hundred bytes......" >"$TMP/text.db"
expect_error 2 "not a database" -- $FUSETUNE db stats --db "$TMP/text.db"
expect_error 2 "cannot open" -- $FUSETUNE db stats --db "$TMP/missing.db"
cp "$TMP/a.db" "$TMP/newer.db" && /usr/bin/python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA user_version = 7'); c.commit()" "$TMP/newer.db"
expect_error 2 "newer fusetune" -- $FUSETUNE db stats --db "$TMP/newer.db"
expect_error 2 "measure.json:1: " -- $FUSETUNE db import --db "$TMP/c.db" "$TMP/measure.json"
expect_error 2 "no fresh best plan" -- $FUSETUNE db best --db "$TMP/b.db" --workload ffffffffffffffff

# bad input: exit code 2 and a message naming what is wrong
echo "not a model" >"$TMP/bad.onnx"
head -c 3000 "$DATA/mlp.onnx" >"$TMP/truncated.onnx"
expect_error 2 "not a valid ONNX model" -- $FUSETUNE inspect "$TMP/bad.onnx"
expect_error 2 "truncated.onnx" -- $FUSETUNE inspect "$TMP/truncated.onnx"
expect_error 2 "cannot open model '/nonexistent.onnx'" -- $FUSETUNE inspect /nonexistent.onnx
expect_error 2 "dimension 0 is symbolic \('batch'\)" -- $FUSETUNE inspect "$DATA/encoder_dynamic_op17.onnx"
expect_error 2 "input 'x' .* has no --input x=FILE.npy" -- $FUSETUNE run-reference "$DATA/mlp.onnx"
expect_error 2 "expects shape \[16, 32\]" -- $FUSETUNE run-reference "$DATA/mlp.onnx" --input x="$DATA/llama_op17.in.x.npy"
expect_error 2 "is not of the form NAME=VALUE" -- $FUSETUNE run-reference "$DATA/mlp.onnx" --input x
expect_error 2 "not an input of the graph" -- $FUSETUNE run-reference "$DATA/mlp.onnx" --input x="$DATA/mlp.in.x.npy" --input q="$DATA/mlp.in.x.npy"
expect_error 2 "" -- $FUSETUNE inspect
expect_error 2 "" -- $FUSETUNE no-such-command
$FUSETUNE inspect "$DATA/encoder_dynamic_op17.onnx" --dim batch=1 --dim seq=4 >/dev/null || fail "inspect with --dim"

# A shape fed as a graph input (Reshape's shape): bound to the run's value,
# from --input or --value, in the reference executor and the compiled run
/usr/bin/python3 - "$TMP" <<'PY' || fail "writing the reshape-by-input model"
import sys, numpy as np, onnx
from onnx import helper, TensorProto
d = sys.argv[1]
g = helper.make_graph(
    [helper.make_node("Reshape", ["x", "shape"], ["r"]), helper.make_node("Relu", ["r"], ["y"])],
    "reshape_by_input",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
     helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), f"{d}/reshape.onnx")
np.save(f"{d}/rx.npy", np.arange(-6, 6, dtype=np.float32).reshape(2, 6))
np.save(f"{d}/rshape.npy", np.array([3, 4], dtype=np.int64))
PY
$FUSETUNE run-reference "$TMP/reshape.onnx" --input x="$TMP/rx.npy" --input shape="$TMP/rshape.npy" \
  --output-dir "$TMP/rout" >/dev/null || fail "run-reference with a shape input"
$FUSETUNE run "$TMP/reshape.onnx" --plan greedy --input x="$TMP/rx.npy" --value shape=3,4 --output-dir "$TMP/rrun" \
  >/dev/null || fail "run with --value for a shape input"
/usr/bin/python3 - "$TMP/rout/y.npy" "$TMP/rrun/y.npy" <<'PY' || fail "shape input: wrong outputs"
import sys, numpy as np
want = np.maximum(np.arange(-6, 6, dtype=np.float32).reshape(3, 4), 0)
for f in sys.argv[1:]:
    assert np.array_equal(np.load(f), want), f
PY
$FUSETUNE inspect "$TMP/reshape.onnx" --value shape=4,3 >/dev/null || fail "inspect --value"

# A decode step with a KV cache (one new token, 7 cached; the decode path of
# attention, the cache concatenated): every output against PyTorch's
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
/usr/bin/python3 -W ignore "$ROOT/bench/decode/llama_decode.py" "$TMP" --d 64 --heads 4 --ff 128 \
  --past 7 >/dev/null || fail "exporting the decode step"
dec=(--input x="$TMP/decode.in.x.npy" --input past_k_0="$TMP/decode.in.past_k_0.npy"
     --input past_v_0="$TMP/decode.in.past_v_0.npy")
$FUSETUNE run "$TMP/decode.onnx" --plan greedy "${dec[@]}" --output-dir "$TMP/dec_out" >/dev/null \
  || fail "run a decode step"
/usr/bin/python3 - "$TMP" <<'PY' || fail "decode step: outputs differ from PyTorch"
import sys, numpy as np
d = sys.argv[1]
for name in ("y", "present_k_0", "present_v_0"):
    got, want = np.load(f"{d}/dec_out/{name}.npy"), np.load(f"{d}/decode.out.{name}.npy")
    assert got.shape == want.shape and np.abs(got - want).max() <= 1e-4 * np.abs(want).max(), name
PY
expect_error 2 "computed from graph input 'shape' \(i64\[2\]\).*--input shape=FILE.npy" -- $FUSETUNE inspect "$TMP/reshape.onnx"
expect_error 2 "has shape \[3\]; the model declares i64\[2\]" -- $FUSETUNE inspect "$TMP/reshape.onnx" --value shape=1,3,4
expect_error 2 "is not of the form NAME=VALUE" -- $FUSETUNE inspect "$TMP/reshape.onnx" --value shape

# sharded tuning and the cluster job (issue 41): bad flags, and --dry-run's scripts
M=$DATA/mlp.onnx
expect_error 2 "one job tunes one model" -- $FUSETUNE tune "$M" "$M" --db "$TMP/x.db" --trials 5
expect_error 2 "--shard '3/2'" -- $FUSETUNE tune "$M" --shard 3/2 --db "$TMP/x.db" --trials 5
expect_error 2 "needs --trials" -- $FUSETUNE tune "$M" --shard 1/2 --db "$TMP/x.db" --time 1m
expect_error 2 "go with --shard" -- $FUSETUNE tune "$M" --wave 1/2 --db "$TMP/x.db" --trials 5
expect_error 2 "has no cluster job" -- $FUSETUNE cluster status --db "$TMP/none.db"
expect_error 2 "give a budget" -- $FUSETUNE cluster submit "$M" --db "$TMP/c.db" --nodes 2 --dry-run
$FUSETUNE cluster submit "$M" --db "$TMP/c.db" --nodes 2 --waves 2 --trials 50 --constraint zen5 \
  --dry-run >"$TMP/dry.txt" || fail "cluster submit --dry-run"
grep -q "submit.sh submits them" "$TMP/dry.txt" || fail "--dry-run does not say how to submit"
for f in wave-1.sbatch wave-2.sbatch merge-1.sbatch merge-2.sbatch finish.sbatch submit.sh job.json; do
  [ -s "$TMP/c.db.cluster/$f" ] || fail "--dry-run did not write $f"
done
grep -q "^#SBATCH --array=1-2$" "$TMP/c.db.cluster/wave-1.sbatch" || fail "the wave script is no array of 2"
grep -q "^#SBATCH --constraint=zen5$" "$TMP/c.db.cluster/wave-1.sbatch" || fail "--constraint lost"
grep -q "afterok" "$TMP/c.db.cluster/submit.sh" || fail "submit.sh does not chain the steps"
$FUSETUNE cluster status --db "$TMP/c.db" >"$TMP/cs.txt" 2>/dev/null || fail "cluster status of a dry run"
grep -q "not submitted" "$TMP/cs.txt" || fail "cluster status does not say the job is not submitted"
expect_error 2 "not 3" -- $FUSETUNE cluster submit "$M" --db "$TMP/c.db" --nodes 3 --waves 2 --trials 50 --dry-run
fi  # basics

if part training; then
# collect, retrain, evaluate-model: a small training set end to end, and errors
if [ ! -f "$TMP/a.db" ]; then  # the one-workload database of the basics
  $FUSETUNE calibrate --db "$TMP/a.db" >/dev/null 2>&1 || fail "calibrate --db"
  $FUSETUNE measure "$DATA/mlp.onnx" --plan greedy --min-repeats 2 --min-time 0 --db "$TMP/a.db" \
    >/dev/null 2>&1 || fail "measure --db"
fi
$FUSETUNE collect "$DATA/mlp.onnx" "$DATA/encoder_postln_op13.onnx" --db "$TMP/train.db" --per-task 6 --min-time 0 --json >"$TMP/collect.json" 2>/dev/null || fail "collect"
/usr/bin/python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['records'] > 100 and j['ok'] == j['records'], j" "$TMP/collect.json" || fail "collect summary"
$FUSETUNE retrain --db "$TMP/train.db" --rounds 20 --json >"$TMP/retrain.json" 2>/dev/null || fail "retrain"
/usr/bin/python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['promoted'] and j['valid_workloads'] > 0 and any(s['model'] == 'random' for s in j['scores']), j" "$TMP/retrain.json" || fail "retrain report"
$FUSETUNE evaluate-model --db "$TMP/train.db" --rounds 20 --form direct >"$TMP/eval.txt" 2>/dev/null || fail "evaluate-model"
grep -q "analytical" "$TMP/eval.txt" || fail "evaluate-model table lacks the analytical model"
expect_error 2 "at least 2" -- $FUSETUNE retrain --db "$TMP/a.db"
expect_error 2 "unable to open|not exist|cannot open" -- $FUSETUNE evaluate-model --db "$TMP/missing.db"
expect_error 2 "form" -- $FUSETUNE retrain --db "$TMP/train.db" --form magic

fi  # training

if part tuning; then
# tune, report: a short job, its plan verified, a SIGKILL and --resume that
# measures nothing twice, Ctrl-C, plots, and errors
$FUSETUNE tune "$DATA/mlp.onnx" --db "$TMP/tune.db" --trials 40 --min-time 0 --json --save-plan "$TMP/tuned.json" >"$TMP/tune.json" 2>/dev/null || fail "tune"
/usr/bin/python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['trials'] == 40 and j['best']['seconds'] <= j['greedy']['seconds'] and j['best']['seconds'] <= j['unfused']['seconds'], (j['trials'], j['best'])" "$TMP/tune.json" || fail "tune summary"
$FUSETUNE run "$DATA/mlp.onnx" --plan "$TMP/tuned.json" --input x="$DATA/mlp.in.x.npy" --verify >/dev/null || fail "run the tuned plan"
# Waits (at most a minute) until the database holds more than $2 records of job $3.
wait_for_records() {
  for _ in $(seq 120); do
    n=$(/usr/bin/python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from records where job_id = ?', (int(sys.argv[2]),)).fetchone()[0])" "$1" "$3" 2>/dev/null || echo 0)
    [ "$n" -gt "$2" ] && return 0
    sleep 0.5
  done
  return 1
}
$FUSETUNE tune "$DATA/encoder_postln_op13.onnx" --db "$TMP/tune.db" --trials 100000 --min-time 0 >/dev/null 2>&1 &
tune_pid=$!
wait_for_records "$TMP/tune.db" 50 2 || fail "tune wrote no records"
kill -9 $tune_pid; wait $tune_pid 2>/dev/null
$FUSETUNE tune "$DATA/encoder_postln_op13.onnx" --db "$TMP/tune.db" --resume --trials 300 --min-time 0 --json >"$TMP/resume.json" 2>/dev/null || fail "tune --resume after SIGKILL"
/usr/bin/python3 - "$TMP/tune.db" "$TMP/resume.json" <<'PY' || fail "resume measured something twice or overspent"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
# (a whole plan measured far slower than its groups is measured again on
# purpose, its second record marked "remeasure", and so is one that wins
# the showdown at a job's end, marked "showdown")
dup = db.execute("select count(*) from (select workload_id, plan, count(*) c from records where json_extract(metrics, '$.search.remeasure') is null and json_extract(metrics, '$.search.showdown') is null group by 1, 2 having c > 1)").fetchone()[0]
assert dup == 0, dup
j = json.load(open(sys.argv[2]))
group_records = db.execute("select count(*) from records r join workloads w on w.id = r.workload_id where r.job_id = ? and w.kind = 'group'", (j['job'],)).fetchone()[0]
assert j['trials'] >= 300 and j['stop_reason'] == 'trials' and group_records == j['trials'], (j['trials'], j['stop_reason'], group_records)
assert [r[0] for r in db.execute("select state from jobs order by id")] == ['done', 'done'], 'job states'
PY
$FUSETUNE tune "$DATA/encoder_postln_op13.onnx" --db "$TMP/int.db" --time 1h --min-time 0 >"$TMP/int.txt" 2>"$TMP/int.err" &
tune_pid=$!
wait_for_records "$TMP/int.db" 20 1 || fail "tune wrote no records"
kill -INT $tune_pid
wait $tune_pid
rc=$?
[ $rc -eq 130 ] || fail "tune after Ctrl-C exited $rc, expected 130: $(tail -c 2000 "$TMP/int.err")"
grep -q "stopped: interrupted" "$TMP/int.txt" || fail "tune after Ctrl-C prints the summary"
$FUSETUNE report --db "$TMP/tune.db" --out "$TMP/plots" >"$TMP/report.txt" || fail "report"
grep -q "whole model" "$TMP/report.txt" || fail "report table"
for f in tuning_curves whole_model predicted_vs_measured roofline; do
  /usr/bin/python3 -c "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])" "$TMP/plots/$f.svg" || fail "plot $f.svg"
done
# compile from the database, run the compiled model (and its plan file)
M=$DATA/encoder_postln_op13
$FUSETUNE compile "$M.onnx" --db "$TMP/tune.db" -o "$TMP/compiled.json" --explain \
  --export-onnx "$TMP/fused.onnx" >"$TMP/compile.txt" || fail "compile"
grep -qE "whole-model|exact" "$TMP/compile.txt" || fail "compile found nothing tuned: $(head -c 2000 "$TMP/compile.txt")"
$FUSETUNE compile "$M.onnx" --db "$TMP/tune.db" --no-whole-model --max-memory 64MiB --json >"$TMP/compile.json" || fail "compile --json"
$FUSETUNE compile "$M.onnx" --db "$TMP/tune.db" --no-whole-model --max-memory 64MiB --explain >"$TMP/compile_groups.txt" 2>/dev/null || fail "compile --no-whole-model --explain"
# the same compile again takes the plan the first remembered; --no-remember chooses anew
$FUSETUNE compile "$M.onnx" --db "$TMP/tune.db" --no-whole-model --max-memory 64MiB --json >"$TMP/compile_again.json" 2>/dev/null || fail "compile again"
$FUSETUNE compile "$M.onnx" --db "$TMP/tune.db" --no-whole-model --max-memory 64MiB --json --no-remember >"$TMP/compile_anew.json" 2>/dev/null || fail "compile --no-remember"
$FUSETUNE run "$M.onnx" --db "$TMP/tune.db" --input "x=$M.in.x.npy" --output-dir "$TMP/compiled_out" --bench 20 --json >"$TMP/run_db.json" || fail "run --db --bench"
$FUSETUNE run "$M.onnx" --plan "$TMP/compiled.json" --input "x=$M.in.x.npy" --verify >/dev/null || fail "run --plan compiled.json"
/usr/bin/python3 - "$TMP" "$M" <<'PY' || fail "compile/run outputs"
import json, sys
import numpy as np
import onnx
tmp, m = sys.argv[1:]
plan = json.load(open(f"{tmp}/compiled.json"))
assert plan["format"] == "fusetune-plan" and all("source" in g for g in plan["groups"]), "provenance"
summary = json.load(open(f"{tmp}/compile.json"))
# Group records are consulted: a kernel's plan is an exact hit, or an exact
# record lost to the partition (on a noisy host, the few measured repeats of
# these 10-microsecond kernels can come out slower than an untuned group's
# prediction).
groups = open(f"{tmp}/compile_groups.txt").read()
assert summary["sources"].get("exact", 0) > 0 or "(exact)" in groups, summary["sources"]
assert "whole-model" not in summary["sources"], summary["sources"]
assert summary["peak_intermediate_bytes"] <= 64 << 20
assert summary["remembered"].startswith("plan remembered for later compiles"), summary.get("remembered")
again = json.load(open(f"{tmp}/compile_again.json"))
anew = json.load(open(f"{tmp}/compile_anew.json"))
assert "remembered at generation" in again["partition"] and "remembered" not in again, again
assert "remembered" not in anew["partition"] and "remembered" not in anew, anew
for other in (again, anew):
    assert other["kernels"] == summary["kernels"] and other["sources"] == summary["sources"], other
    assert other["predicted_ms"] == summary["predicted_ms"], other
run = json.load(open(f"{tmp}/run_db.json"))
assert run["bench"]["runs"] == 20 and run["bench"]["median_ms"] > 0, run["bench"]
got, want = np.load(f"{tmp}/compiled_out/y.npy"), np.load(f"{m}.out.y.npy")
err = np.abs(got - want).max() / np.abs(want).max()
assert err < 1e-3, err
fused = onnx.load(f"{tmp}/fused.onnx")
custom = [n for n in fused.graph.node if n.domain == "ai.fusetune"]
# One node per kernel; a custom node exactly for each kernel of several nodes
# (a noisy host may measure the unfused plan fastest, leaving none).
multi = sum(len(g["nodes"]) > 1 for g in plan["groups"])
assert len(custom) == multi and len(fused.graph.node) == len(plan["groups"]), (len(custom), multi, len(fused.graph.node))
PY
# tune --warm: records under the warm target key, which only compile/run --warm read
$FUSETUNE tune "$DATA/mlp.onnx" --db "$TMP/warm.db" --warm --trials 20 --min-time 0 --json >/dev/null 2>&1 || fail "tune --warm"
$FUSETUNE compile "$DATA/mlp.onnx" --db "$TMP/warm.db" --warm --json >"$TMP/warm_compile.json" || fail "compile --warm"
$FUSETUNE compile "$DATA/mlp.onnx" --db "$TMP/warm.db" --json >"$TMP/flushed_compile.json" 2>/dev/null || fail "compile of a warm-only database"
$FUSETUNE run "$DATA/mlp.onnx" --db "$TMP/warm.db" --warm --input x="$DATA/mlp.in.x.npy" --verify >/dev/null || fail "run --warm"
/usr/bin/python3 - "$TMP" <<'PY' || fail "warm and flushed records kept apart"
import json, sqlite3, sys
tmp = sys.argv[1]
warm = json.load(open(f"{tmp}/warm_compile.json"))["sources"]
flushed = json.load(open(f"{tmp}/flushed_compile.json"))["sources"]
assert "whole-model" in warm or "exact" in warm, warm
assert "whole-model" not in flushed and "exact" not in flushed, flushed
db = sqlite3.connect(f"{tmp}/warm.db")
targets = {k for (k,) in db.execute("select distinct t.fingerprint from records r join targets t on r.target_id = t.id")}
assert len(targets) == 1 and next(iter(targets)).endswith("-warm"), targets
PY
expect_error 2 "caches flushed" -- $FUSETUNE tune "$DATA/encoder_postln_op13.onnx" --db "$TMP/int.db" --resume --warm --trials 1
# tune --caches cold-weights: records under the machine's "-coldw" key, read by compile --caches cold-weights
$FUSETUNE tune "$DATA/mlp.onnx" --db "$TMP/coldw.db" --caches cold-weights --trials 12 --min-time 0 --json >/dev/null 2>&1 || fail "tune --caches cold-weights"
$FUSETUNE compile "$DATA/mlp.onnx" --db "$TMP/coldw.db" --caches cold-weights --json >"$TMP/coldw_compile.json" || fail "compile --caches cold-weights"
/usr/bin/python3 - "$TMP" <<'PY' || fail "cold-weights records under their own key"
import json, sqlite3, sys
tmp = sys.argv[1]
sources = json.load(open(f"{tmp}/coldw_compile.json"))["sources"]
assert "whole-model" in sources or "exact" in sources, sources
db = sqlite3.connect(f"{tmp}/coldw.db")
targets = {k for (k,) in db.execute("select distinct t.fingerprint from records r join targets t on r.target_id = t.id")}
assert len(targets) == 1 and next(iter(targets)).endswith("-coldw"), targets
PY
# Looked up with the default protocol, the cold-weights plans are not used,
# and a note says where they are.
$FUSETUNE compile "$DATA/mlp.onnx" --db "$TMP/coldw.db" >/dev/null 2>"$TMP/coldw_default.err" || fail "compile a cold-weights database with the default --caches"
grep -q "tuned with --caches cold-weights: pass those flags" "$TMP/coldw_default.err" || fail "no note on the cold-weights plans: $(cat "$TMP/coldw_default.err")"
$FUSETUNE compile "$DATA/mlp.onnx" --db "$TMP/coldw.db" --caches cold-weights >/dev/null 2>"$TMP/coldw_own.err" || fail "compile --caches cold-weights"
if grep -q "pass those flags" "$TMP/coldw_own.err"; then fail "the note on another protocol appears with the right one"; fi
expect_error 2 "lukewarm" -- $FUSETUNE tune "$DATA/mlp.onnx" --db "$TMP/coldw.db" --caches lukewarm --trials 1
expect_error 2 "excludes" -- $FUSETUNE compile "$DATA/mlp.onnx" --db "$TMP/coldw.db" --caches warm --warm
expect_error 2 "no such tuning database" -- $FUSETUNE compile "$M.onnx" --db "$TMP/missing.db"
# The database is opened before the model is imported: a wrong --db is
# what is reported, even with a model that would not load either.
expect_error 2 "no such tuning database" -- $FUSETUNE compile "$TMP/no_model.onnx" --db "$TMP/missing.db"
expect_error 2 "no such tuning database" -- $FUSETUNE run "$TMP/no_model.onnx" --db "$TMP/missing.db"
expect_error 2 "max-memory '12Q'" -- $FUSETUNE compile "$M.onnx" --db "$TMP/tune.db" --max-memory 12Q
expect_error 2 "within --max-memory" -- $FUSETUNE compile "$M.onnx" --db "$TMP/tune.db" --max-memory 16
expect_error 2 "needs --db" -- $FUSETUNE run "$M.onnx" --input "x=$M.in.x.npy"
expect_error 2 "not a database|corrupt" -- $FUSETUNE compile "$M.onnx" --db "$M.onnx"
# A database with a damaged page (the header intact): compile and run --db
# fail naming the file and `db check` instead of compiling on default
# figures (the targets table: --no-whole-model makes the compile predict) or
# without a word (the generation counter).
for table in targets generation; do
  cp "$TMP/tune.db" "$TMP/damaged.db"
  /usr/bin/python3 - "$TMP/damaged.db" "$table" <<'PY' || fail "damaging $table"
import sqlite3, sys
path, table = sys.argv[1:]
db = sqlite3.connect(path)
db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
size = db.execute("PRAGMA page_size").fetchone()[0]
root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
db.close()
with open(path, "r+b") as f:
    f.seek((root - 1) * size)
    f.write(b"\xa5" * size)
PY
  expect_error 2 "tuning database '$TMP/damaged.db' is damaged.*db check" -- \
    $FUSETUNE compile "$M.onnx" --db "$TMP/damaged.db" --no-whole-model
  expect_error 2 "tuning database '$TMP/damaged.db' is damaged.*db check" -- \
    $FUSETUNE run "$M.onnx" --db "$TMP/damaged.db" --no-whole-model --input "x=$M.in.x.npy"
  expect_error 2 "corrupt" -- $FUSETUNE db check --db "$TMP/damaged.db"
done

# Shape buckets: one job per listed value, the budget shared
$FUSETUNE tune "$DATA/encoder_dynamic_op17.onnx" --db "$TMP/tune.db" --dim batch=1 --dim seq=4,8 \
  --trials 8 --min-time 0 --json >"$TMP/buckets.json" 2>/dev/null || fail "tune with shape buckets"
/usr/bin/python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert [b['dims'] for b in j] == [['batch=1', 'seq=4'], ['batch=1', 'seq=8']] and all(b['trials'] == 4 for b in j), j" "$TMP/buckets.json" || fail "tune with shape buckets: summaries"
expect_error 2 "writes one plan" -- $FUSETUNE tune "$DATA/encoder_dynamic_op17.onnx" --db "$TMP/tune.db" --dim batch=1 --dim seq=4,8 --trials 8 --save-plan "$TMP/x.json"
# The buckets' plans, and what a size between them compiles to
$FUSETUNE compile "$DATA/encoder_dynamic_op17.onnx" --db "$TMP/tune.db" --dim batch=1 \
  --dim seq=4,8 --explain >"$TMP/buckets.txt" 2>&1 || fail "compile with shape buckets"
grep -q "^  batch=1 seq=4 .* kernels, predicted" "$TMP/buckets.txt" &&
  grep -q "^  batch=1 seq=8 .* kernels, predicted" "$TMP/buckets.txt" &&
  grep -Eq "^  batch=1 seq=4 -> seq=8: (the same plan|same partition; tilings of [0-9]+ kernels from seq=[5-8]|partition from seq=[5-8])" "$TMP/buckets.txt" ||
  { cat "$TMP/buckets.txt"; fail "compile with shape buckets: report"; }
# Without --dim: the sizes the database was tuned at for this model file
$FUSETUNE compile "$DATA/encoder_dynamic_op17.onnx" --db "$TMP/tune.db" >"$TMP/tuned_sizes.txt" 2>&1 ||
  { cat "$TMP/tuned_sizes.txt"; fail "compile at the sizes tuned"; }
grep -q "note: --dim batch=1 --dim seq=4,8: the sizes .* was tuned at" "$TMP/tuned_sizes.txt" &&
  grep -q "^  batch=1 seq=8 .* kernels, predicted" "$TMP/tuned_sizes.txt" ||
  { cat "$TMP/tuned_sizes.txt"; fail "compile at the sizes tuned: report"; }
expect_error 2 "is symbolic .*bind it with --dim" -- $FUSETUNE compile "$DATA/encoder_dynamic_op17.onnx" --db "$TMP/warm.db"
# One graph for the prompt and the steps: a KV cache of no rows (past=0) is a
# size like the others; a node that would compute an empty tensor is named
$FUSETUNE tune "$DATA/attention_cache_op17.onnx" --db "$TMP/cache.db" --dim seq=1,3 --dim past=0..2 \
  --trials 12 --min-time 0 >"$TMP/cache_tune.txt" 2>&1 || { cat "$TMP/cache_tune.txt"; fail "tune at past=0"; }
$FUSETUNE compile "$DATA/attention_cache_op17.onnx" --db "$TMP/cache.db" >"$TMP/cache.txt" 2>&1 &&
  grep -q "note: --dim seq=1,3 --dim past=0,1,2: the sizes" "$TMP/cache.txt" &&
  grep -q "^  past=0 seq=3 .* kernels, predicted" "$TMP/cache.txt" ||
  { cat "$TMP/cache.txt"; fail "compile at the sizes tuned, past=0 among them"; }
$FUSETUNE run "$DATA/attention_cache_op17.onnx" --db "$TMP/cache.db" --dim seq=2 --dim past=0 \
  --random-inputs 1 --verify --json >"$TMP/cache_run.json" 2>/dev/null &&
  /usr/bin/python3 -c "import json,sys; e=json.load(open(sys.argv[1]))['max_scaled_error']; assert e < 1e-4, e" \
    "$TMP/cache_run.json" || { cat "$TMP/cache_run.json"; fail "run at past=0"; }
expect_error 2 "with past=0, seq=0, node .* (reads|computes) an empty tensor" -- \
  $FUSETUNE run "$DATA/attention_cache_op17.onnx" --db "$TMP/cache.db" --dim seq=0 --dim past=0 --random-inputs 1
# --max-memory holds for every bucket; the one no plan fits is named
expect_error 2 "batch=1 seq=4: no plan keeps the live intermediates within --max-memory 1 KiB" -- \
  $FUSETUNE compile "$DATA/encoder_dynamic_op17.onnx" --db "$TMP/tune.db" --dim batch=1 --dim seq=4,8 --max-memory 1KiB
expect_error 2 "--dim seq=8..4: a range LO..HI needs LO < HI" -- \
  $FUSETUNE tune "$DATA/encoder_dynamic_op17.onnx" --db "$TMP/tune.db" --dim batch=1 --dim seq=8..4 --trials 2
expect_error 2 "one value per dimension" -- $FUSETUNE compile "$DATA/encoder_dynamic_op17.onnx" --db "$TMP/tune.db" --dim batch=1 --dim seq=4,8 --json
$FUSETUNE run "$DATA/encoder_dynamic_op17.onnx" --db "$TMP/tune.db" --dim batch=1 --dim seq=6 \
  --random-inputs 1 --verify >"$TMP/seq6.txt" 2>&1 || fail "run between buckets"
# never silently: a size that was not tuned says what it is predicted to lose
grep -q "fusetune: note: .* kernels are not tuned for this machine (largest predicted loss" \
  "$TMP/seq6.txt" || { cat "$TMP/seq6.txt"; fail "run between buckets: the note"; }
# Mixed precision: bf16 GEMM tilings under their own target key, a compile
# that checks the plan end to end and says so, run --verify within the budget
if grep -q avx512_bf16 /proc/cpuinfo; then
  $FUSETUNE tune "$DATA/mlp.onnx" --db "$TMP/mixed.db" --trials 40 --min-time 0 --precision mixed \
    --error-budget 0.02 >/dev/null 2>&1 || fail "tune --precision mixed"
  /usr/bin/python3 - "$TMP/mixed.db" <<'PY' || fail "tune --precision mixed: records"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
keys = [r[0] for r in db.execute("select fingerprint from targets")]
assert keys and all(k.endswith("-mixed0.02") for k in keys), keys
bf16 = db.execute("select count(*), max(json_extract(metrics, '$.max_error')) from records where plan like '%\"precision\":\"bf16\"%' and status = 'ok'").fetchone()
assert bf16[0] > 0 and 0 < bf16[1] <= 0.02, bf16
PY
  $FUSETUNE compile "$DATA/mlp.onnx" --db "$TMP/mixed.db" --precision mixed --error-budget 0.02 \
    --no-whole-model --explain >"$TMP/mixed.txt" 2>&1 || fail "compile --precision mixed"
  grep -Eq "^precision   [0-9]+ of [0-9]+ kernels in bf16, error budget 0.02" "$TMP/mixed.txt" ||
    { cat "$TMP/mixed.txt"; fail "compile --precision mixed: the precision line"; }
  $FUSETUNE compile "$DATA/mlp.onnx" --db "$TMP/mixed.db" >/dev/null 2>"$TMP/mixed_default.err"
  grep -q "tuned with --precision mixed --error-budget 0.02: pass those flags" "$TMP/mixed_default.err" ||
    fail "no note on the mixed-precision plans: $(cat "$TMP/mixed_default.err")"
  $FUSETUNE run "$DATA/mlp.onnx" --db "$TMP/mixed.db" --precision mixed --error-budget 0.02 \
    --no-whole-model --random-inputs 1 --verify --json >"$TMP/mixed_run.json" 2>/dev/null || fail "run --precision mixed"
  /usr/bin/python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['max_scaled_error'] <= 0.02, (j['max_scaled_error'], j['compiled'])" "$TMP/mixed_run.json" ||
    fail "run --precision mixed --verify: over the budget"
fi
# A plan file's bf16 tilings run as written (on any CPU: without avx512_bf16
# on the portable micro-kernels), rounding: an error above f32's, within 1e-2
$FUSETUNE space "$DATA/mlp.onnx" --save-greedy "$TMP/mlp_greedy.json" >/dev/null || fail "space --save-greedy"
/usr/bin/python3 - "$TMP/mlp_greedy.json" "$TMP/bf16_plan.json" <<'PY' || fail "a bf16 plan file"
import json, sys
plan = json.load(open(sys.argv[1]))
gemms = [g for g in plan["groups"] if g["template"] == "gemm"]
assert gemms, "no GEMM group in the greedy plan"
for g in gemms:
    g["tiling"]["precision"] = "bf16"
json.dump(plan, open(sys.argv[2], "w"))
PY
$FUSETUNE run "$DATA/mlp.onnx" --plan "$TMP/bf16_plan.json" --random-inputs 1 --verify --json >"$TMP/bf16_plan_run.json" ||
  fail "run --plan with bf16 tilings"
/usr/bin/python3 -c "import json,sys; e=json.load(open(sys.argv[1]))['max_scaled_error']; assert 1e-5 < e <= 1e-2, e" "$TMP/bf16_plan_run.json" ||
  fail "run --plan with bf16 tilings: not rounded, or too far: $(cat "$TMP/bf16_plan_run.json" | head -c 300)"
expect_error 2 "--error-budget: needs --precision mixed" -- $FUSETUNE compile "$DATA/mlp.onnx" --db "$TMP/tune.db" --error-budget 0.01
expect_error 2 "precision: fp16 not in" -- $FUSETUNE tune "$DATA/mlp.onnx" --db "$TMP/tune.db" --trials 1 --precision fp16
expect_error 2 "give a budget" -- $FUSETUNE tune "$DATA/mlp.onnx" --db "$TMP/tune.db"
expect_error 2 "bad duration '8x'" -- $FUSETUNE tune "$DATA/mlp.onnx" --db "$TMP/tune.db" --time 8x
expect_error 2 "no unfinished job" -- $FUSETUNE tune "$DATA/mlp.onnx" --db "$TMP/tune.db" --resume
$FUSETUNE calibrate --db "$TMP/no_job.db" >/dev/null 2>&1 || fail "calibrate --db"
expect_error 2 "no tuning job" -- $FUSETUNE report --db "$TMP/no_job.db"
expect_error 2 "no job 99" -- $FUSETUNE report --db "$TMP/tune.db" --job 99
fi  # tuning

if [ "$failures" -ne 0 ]; then
  echo "$failures CLI check(s) failed"
  exit 1
fi
echo "all CLI checks passed ($PART)"
