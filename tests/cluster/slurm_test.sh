#!/usr/bin/env bash
# Issue 41 on a real Slurm cluster: a throw-away cluster of three nodes on this
# machine (scripts/slurm-local.sh), a two-wave job of the bundled example
# over three shards with one shard killed by SIGKILL mid-wave, another
# scancelled and, in wave 2, the node of a third taken down (node loss), then:
#   - the three shards ran again and finished;
#   - the merged database holds every task's records, each measurement once;
#   - a plan compiled from it is at least as fast as one compiled after a
#     single-machine tune of the same trial budget (10% for noise: both run
#     in one process, alternated, by bench/decode/plan_ab);
#   - a job whose shards fail stops at its merge with a status naming
#     the failure; `cluster submit` again continues it; `cluster cancel`
#     stops it and submitting once more continues it to the end;
#   - the cluster is shut down and no process of it is left.
# Exit 77 (ctest: skipped) where Slurm cannot run here (not installed, not root).
# Usage: slurm_test.sh FUSETUNE REPO [short|long] [TESTDATA] [PLAN_AB]  (long: a
# --time 2m job, the issue's check, instead of a trial budget; TESTDATA: the
# build's test models, whose small MLP makes the failed job quick; PLAN_AB: the
# bench program that times two databases' plans, or none)
set -u
FUSETUNE=$1
REPO=$2
MODE=${3:-short}
CLUSTER_SCRIPT=$REPO/scripts/slurm-local.sh
MODEL=$REPO/examples/encoder_small.onnx
SMALL_MODEL=$MODEL
[ -n "${4:-}" ] && [ -f "$4/mlp.onnx" ] && SMALL_MODEL=$4/mlp.onnx
PLAN_AB=${5:-none}
TRIALS=900  # long enough that every shard is caught measuring, on a fast machine too

"$CLUSTER_SCRIPT" check || exit 77
TMP=$(mktemp -d /tmp/fusetune-slurm-test.XXXXXX)
chmod 755 "$TMP"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# phase NAME: how long the test has run when NAME starts (where its time goes).
phase() { echo "[${SECONDS} s] $*"; }
stop_cluster() {
  "$CLUSTER_SCRIPT" stop "$TMP/slurm" || fail "the cluster left processes behind"
}
# FUSETUNE_KEEP_TEST_DIR=1 keeps the job's folder (databases, logs, plans).
trap 'stop_cluster; [ "${FUSETUNE_KEEP_TEST_DIR:-0}" = 1 ] && echo "kept $TMP" || rm -rf "$TMP"' EXIT

"$CLUSTER_SCRIPT" start "$TMP/slurm" 3 || { echo "FAIL: the cluster did not start"; exit 1; }
# shellcheck disable=SC1091
source "$TMP/slurm/env"

# wait_job DB SECONDS: until the job is done or failed; prints the status.
wait_job() {
  local db=$1 limit=$2 start=$SECONDS state
  while [ $((SECONDS - start)) -lt "$limit" ]; do
    state=$("$FUSETUNE" cluster status --db "$db" --json 2>/dev/null |
            /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
    case "$state" in done | failed | cancelled) break ;; esac
    sleep 1
  done
  "$FUSETUNE" cluster status --db "$db"
}

# measuring DB WAVE SHARD: the shard runs and has committed 5 records (its
# status is written every 2 s, too seldom for a wave of a few seconds);
# prints its node.
measuring() {
  /usr/bin/python3 - "$1.cluster/wave-$2/shard-$3" <<'PY' 2>/dev/null
import json, sqlite3, sys
s = json.load(open(sys.argv[1] + ".json"))
assert s["state"] == "running"
db = sqlite3.connect(f"file:{sys.argv[1]}.db?mode=ro", uri=True, timeout=1)
assert db.execute("select count(*) from records").fetchone()[0] >= 5
print(s["node"])
PY
}

# kill_shard DB WAVE SHARD: SIGKILL the shard's fusetune once it has measured.
kill_shard() {
  local start=$SECONDS
  while [ $((SECONDS - start)) -lt 120 ]; do
    measuring "$1" "$2" "$3" >/dev/null &&
      pkill -KILL -f "cluster shard --db $1 --wave $2 --shard $3\$" && return 0
    sleep 0.1
  done
  return 1
}

# cancel_shard DB WAVE SHARD: scancel the shard's array task once it has
# measured (the wave's merge runs it again).
cancel_shard() {
  local start=$SECONDS array
  array=$(/usr/bin/python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))
print(j["submissions"][-1]["wave_jobs"][int(sys.argv[2]) - 1])' "$1.cluster/job.json" "$2") ||
    return 1
  while [ $((SECONDS - start)) -lt 120 ]; do
    measuring "$1" "$2" "$3" >/dev/null && scancel "${array}_$3" && return 0
    sleep 0.1
  done
  return 1
}

# lose_node DB WAVE SHARD: the node of a measuring shard goes down (Slurm
# requeues the shard; ReturnToService=2 brings the node back at once).
lose_node() {
  local start=$SECONDS node
  while [ $((SECONDS - start)) -lt 120 ]; do
    if node=$(measuring "$1" "$2" "$3"); then
      scontrol update nodename="$node" state=down reason=fusetune-test && return 0
    fi
    sleep 0.1
  done
  return 1
}

# ---- the two-wave job, one shard killed ------------------------------------
DB=$TMP/team.db
# The three nodes are this machine: calibrated once, quietly, for every shard
# (a shard takes its node's calibration from the job's database) and for the
# single-machine tune below, which starts from a copy.
phase "calibrating"
"$FUSETUNE" calibrate --db "$DB" >/dev/null 2>&1 || fail "calibrate"
phase "the two-wave job"
cp "$DB" "$TMP/calibrated.db"
if [ "$MODE" = long ]; then budget=(--time 2m); else budget=(--trials "$TRIALS"); fi
"$FUSETUNE" cluster submit "$MODEL" --db "$DB" --nodes 3 --waves 2 "${budget[@]}" --threads 1 \
  >"$TMP/submit.txt" 2>&1 || { cat "$TMP/submit.txt"; fail "cluster submit"; }
cat "$TMP/submit.txt"
kill_shard "$DB" 1 2 &
killer=$!
cancel_shard "$DB" 1 1 || fail "shard 1 of wave 1 was not seen measuring (or could not be scancelled)"
wait "$killer" || fail "shard 2 of wave 1 was not seen measuring (or could not be killed)"
lose_node "$DB" 2 3 || fail "shard 3 of wave 2 was not seen measuring (or its node not taken down)"
wait_job "$DB" 600 >"$TMP/status.txt"
phase "the job ended"
cat "$TMP/status.txt"
grep -q "cluster job of .*: done" "$TMP/status.txt" || fail "the job did not end done"
"$FUSETUNE" cluster status --db "$DB" --json >"$TMP/status.json"
/usr/bin/python3 - "$TMP/status.json" <<'PY' || fail "a killed shard was not requeued"
import json, sys
s = json.load(open(sys.argv[1]))
for wave, shard in ((0, 0), (0, 1), (1, 2)):  # scancelled; killed by SIGKILL; its node lost
    shard = s["waves"][wave]["shards"][shard]
    assert shard["state"] == "done", shard
    assert shard["restarts"] >= 1, shard
PY
grep -q "requeueing" "$DB.cluster/logs/wave-1-shard-2.log" || fail "the shard's log does not say it requeued"
grep -q "running again shard(s) 1," "$DB.cluster/logs/merge-1.log" ||
  fail "wave 1's merge did not run the scancelled shard again"

# Every task has records; no measurement is stored twice.
TASKS=$(/usr/bin/python3 - "$TMP/status.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print(sum(sh["progress"]["tasks"] for sh in s["waves"][0]["shards"]))
PY
)
read -r WITH_RECORDS DUPLICATES <<<"$(/usr/bin/python3 - "$DB" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
groups = c.execute("""select count(distinct r.workload_id) from records r join workloads w
                      on w.id = r.workload_id where w.kind = 'group'""").fetchone()[0]
dup = c.execute("""select count(*) from (select r.workload_id, r.target_id, r.plan, count(*) n
                   from records r join workloads w on w.id = r.workload_id
                   where w.kind = 'group' group by 1, 2, 3 having n > 1)""").fetchone()[0]
print(groups, dup)
PY
)"
[ "$WITH_RECORDS" = "$TASKS" ] || fail "$WITH_RECORDS tasks have records, the job has $TASKS"
[ "$DUPLICATES" = 0 ] || fail "$DUPLICATES measurements are stored twice"
[ -s "$DB.cluster/report.txt" ] || fail "no report"

# ---- against a single machine with the same trial budget ---------------------
# (a --time job's: the trials its shards measured)
[ "$MODE" = long ] && TRIALS=$(/usr/bin/python3 -c \
  'import json,sys; print(json.load(open(sys.argv[1]))["trials"])' "$DB.cluster/report.json")
phase "the single-machine tune"
SINGLE=$TMP/single.db
cp "$TMP/calibrated.db" "$SINGLE"
"$FUSETUNE" tune "$MODEL" --db "$SINGLE" --trials "$TRIALS" --threads 1 >/dev/null 2>&1 ||
  fail "the single-machine tune"
"$FUSETUNE" compile "$MODEL" --db "$DB" -o "$TMP/cluster-plan.json" >/dev/null || fail "compile (cluster)"
"$FUSETUNE" compile "$MODEL" --db "$SINGLE" -o "$TMP/single-plan.json" >/dev/null || fail "compile (single)"
phase "measuring both plans"
# Both plans run in one process (bench/decode/plan_ab), their runs alternated
# in pairs, caches flushed before each run as the tuner measures: the verdict
# is the median of the pairs' ratios cluster / single. Separate `measure`
# processes of one plan differ by up to 30% on this host (0.17-0.23 ms seen
# back to back), more than the difference being judged.
# (The two `compile -o` above check that the command works; plan_ab
# compiles each database's plan itself.)
if [ "$PLAN_AB" = none ] || [ ! -x "$PLAN_AB" ]; then
  echo "the plans' speeds are not compared: plan_ab is not built (FUSETUNE_BUILD_BENCH=OFF," \
    "or only fusetune was built)"
else
  "$PLAN_AB" "$MODEL" --db "$DB" --db "$SINGLE" --threads 1 --pairs 600 --json "$TMP/ab.json" \
    >"$TMP/ab.txt" 2>&1 || { cat "$TMP/ab.txt"; fail "plan_ab"; }
  cat "$TMP/ab.txt"
  RATIO=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ratio"])' \
    "$TMP/ab.json" 2>/dev/null) || RATIO=missing
  echo "cluster plan / single-machine plan: $RATIO ($TRIALS trials each)"
  case $RATIO in
    missing) fail "the plans could not be compared" ;;
    *) /usr/bin/python3 -c 'import sys; sys.exit(float(sys.argv[1]) > 1.10)' "$RATIO" ||
         fail "the cluster's plan is more than 10% slower than the single machine's" ;;
  esac
fi

# ---- a failed wave stops the job; submitting again continues it -----------
phase "a job that fails"
BROKEN=$TMP/broken.db
cp "$TMP/calibrated.db" "$BROKEN"
cp "$SMALL_MODEL" "$TMP/copy.onnx"
# The nodes drained while the job is submitted and its model moved away, so
# that wave 1's shards start only once they cannot load it: submitted on
# idle nodes, a shard could open the model before the move (wave 1 then
# passed and wave 2 failed, a race this test once lost).
NODES="node[1-3]"
scontrol update nodename="$NODES" state=drain reason=fusetune-test-hold || fail "drain the nodes"
"$FUSETUNE" cluster submit "$TMP/copy.onnx" --db "$BROKEN" --nodes 3 --waves 2 --trials 200 \
  --threads 1 >/dev/null 2>&1 || fail "cluster submit (broken)"
mv "$TMP/copy.onnx" "$TMP/moved.onnx"  # the shards cannot load the model
scontrol update nodename="$NODES" state=resume || fail "resume the nodes"
wait_job "$BROKEN" 300 >/dev/null
# The wave's merge fails the wave; Slurm then cancels the steps after it.
for _ in $(seq 1 120); do
  "$FUSETUNE" cluster status --db "$BROKEN" >"$TMP/broken.txt" 2>&1
  grep -q "finish *cancelled" "$TMP/broken.txt" && break
  sleep 1
done
cat "$TMP/broken.txt"
grep -q "failed (wave 1 shard .* failed" "$TMP/broken.txt" || fail "the status does not name the failed shard"
grep -q "merge *failed" "$TMP/broken.txt" || fail "the merge did not fail the wave"
[ "$(grep -c "merge *cancelled" "$TMP/broken.txt")" = 1 ] || fail "wave 2's merge was not cancelled"
grep -q "finish *cancelled" "$TMP/broken.txt" || fail "the steps after the failed wave were not cancelled"
"$FUSETUNE" cluster status --db "$BROKEN" >/dev/null 2>&1 && fail "status of a failed job exits 0"
phase "the failed job submitted again"
mv "$TMP/moved.onnx" "$TMP/copy.onnx"
"$FUSETUNE" cluster submit "$TMP/copy.onnx" --db "$BROKEN" --nodes 3 --waves 2 --trials 200 \
  --threads 1 >"$TMP/again.txt" 2>&1 || { cat "$TMP/again.txt"; fail "cluster submit again"; }
grep -q "continuing the job from wave 1" "$TMP/again.txt" || fail "submit again does not continue"
# Stopped at once with `cluster cancel`, then continued to the end.
"$FUSETUNE" cluster cancel --db "$BROKEN" >/dev/null || fail "cluster cancel"
wait_job "$BROKEN" 60 | grep -q ": cancelled (stopped by" || fail "the status does not say cancelled"
"$FUSETUNE" cluster submit "$TMP/copy.onnx" --db "$BROKEN" --nodes 3 --waves 2 --trials 200 \
  --threads 1 >"$TMP/again.txt" 2>&1 || { cat "$TMP/again.txt"; fail "cluster submit after cancel"; }
wait_job "$BROKEN" 300 | grep -q ": done" || fail "the continued job did not end done"

phase "done"
if [ "$failures" -ne 0 ]; then
  echo "$failures failure(s)"
  tail -n 20 "$DB.cluster"/logs/*.log "$TMP/slurm/log/slurmctld.log" 2>/dev/null
  exit 1
fi
echo "slurm cluster tests passed"
