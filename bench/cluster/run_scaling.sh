#!/usr/bin/env bash
# Scaling of a cluster job on paper (issue 41): one machine cannot show the
# speed-up of N nodes, so this measures what the prediction needs and
# derives it (cluster/scaling.h):
#   1. a single-machine tuning job of MODEL (TIME of wall time): each task's
#      measuring time, from its records' timestamps;
#   2. a two-wave job of the same model on a throw-away local Slurm cluster
#      of 3 nodes (scripts/slurm-local.sh, as root): a shard's start, the
#      merge's and retraining's seconds per record, Slurm's gap between steps;
#   3. bench_cluster_scaling: the predicted wall time of N = 1, 4, 16, 64.
# Usage: bench/cluster/run_scaling.sh [MODEL]   (default examples/encoder_small.onnx)
#   TIME=5m WAVES=2 OUT=bench/results-cluster-scaling-DATE-MACHINE.json
# Needs the Release build with benchmarks (scripts/build.sh release).
set -euo pipefail
cd "$(dirname "$0")/../.."
MODEL=$(realpath "${1:-examples/encoder_small.onnx}")
TIME=${TIME:-5m}
WAVES=${WAVES:-2}
MACHINE=${MACHINE:-$(uname -n)}
OUT=${OUT:-bench/results-cluster-scaling-$(date +%F)-$MACHINE.json}
FUSETUNE=$PWD/build/cli/fusetune
PREDICT=$PWD/build/bench/bench_cluster_scaling
[ -x "$PREDICT" ] || { echo "build the benchmarks first: scripts/build.sh release" >&2; exit 2; }
WORK=$(mktemp -d /tmp/fusetune-scaling.XXXXXX)
chmod 755 "$WORK"
trap 'scripts/slurm-local.sh stop "$WORK/slurm" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

echo "== single-machine job: $MODEL, $TIME"
"$FUSETUNE" tune "$MODEL" --db "$WORK/single.db" --time "$TIME" >"$WORK/single.txt"
tail -n 3 "$WORK/single.txt"

echo "== the cluster's fixed costs: $WAVES waves x 3 shards on a local cluster"
scripts/slurm-local.sh start "$WORK/slurm" 3
# shellcheck disable=SC1091
source "$WORK/slurm/env"
"$FUSETUNE" cluster submit "$MODEL" --db "$WORK/team.db" --nodes 3 --waves "$WAVES" \
  --trials 600 --threads 1
until "$FUSETUNE" cluster status --db "$WORK/team.db" | grep -qE "^cluster job .*: (done|failed)"; do
  sleep 2
done
"$FUSETUNE" cluster status --db "$WORK/team.db"

echo "== prediction"
"$PREDICT" --single "$WORK/single.db" --report "$WORK/team.db.cluster/report.json" \
  --waves "$WAVES" --nodes 1,4,16,64 --json "$WORK/prediction.json"
/usr/bin/python3 - "$WORK/prediction.json" "$OUT" "$MODEL" "$TIME" "$MACHINE" <<'PY'
import json, sys, datetime
p = json.load(open(sys.argv[1]))
p.update({"model": sys.argv[3], "single_job_time": sys.argv[4], "machine": sys.argv[5],
          "date": datetime.date.today().isoformat(),
          "note": "a prediction: per-task times of one machine's job, fixed costs of a local "
                  "3-node cluster on the same machine (bench/cluster/run_scaling.sh)"})
json.dump(p, open(sys.argv[2], "w"), indent=2)
print("written to", sys.argv[2])
PY
