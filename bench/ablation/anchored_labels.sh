#!/bin/bash
# Do anchored labels rank better (issue 38)? Since the speed anchor
# (search/speed_anchor.h) a record's seconds are its raw median scaled by
# reference / now of the greedy plan timed beside it; the raw median stays
# in metrics.time.median. This evaluates the same records twice: as
# recorded (anchored) and with seconds put back to the raw medians, in a
# copy of the database. Same candidates, same splits, same features: only
# the labels differ.
#
# Usage: bench/ablation/anchored_labels.sh DB [OUT_DIR]   (default build/anchored_labels)
#   SPLITS=5     workload splits averaged
#   FORM=pairwise
#   LABEL=median the statistic evaluate-model labels with (median: the records'
#                seconds, as this comparison means; fastest: their fastest
#                repeats, scaled as each record was)
#   BUILD=build  the fusetune build folder
# Writes OUT/anchored.json, OUT/raw.json and prints both reports.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
db=${1:?usage: anchored_labels.sh DB [OUT_DIR]}
out=$(mkdir -p "${2:-$root/build/anchored_labels}" && cd "${2:-$root/build/anchored_labels}" && pwd)
fusetune="$root/${BUILD:-build}/cli/fusetune"
[ -x "$fusetune" ] || { echo "anchored_labels: no $fusetune (scripts/build.sh release)" >&2; exit 2; }
splits=${SPLITS:-5}
form=${FORM:-pairwise}

# Python's sqlite3 (python3 is installed by scripts/setup.sh; the sqlite3
# command line tool is not).
raw="$out/raw.db"
rm -f "$raw" "$raw-wal" "$raw-shm"
python3 - "$db" "$raw" <<'PY'
import sqlite3, sys
src = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
dst = sqlite3.connect(sys.argv[2])
src.backup(dst)
anchored = "status = 'ok' AND json_extract(metrics, '$.search.anchor.seconds') IS NOT NULL"
n = dst.execute(f"SELECT count(*) FROM records WHERE {anchored}").fetchone()[0]
if n == 0:
    sys.exit(f"anchored_labels: {sys.argv[1]} holds no anchored records")
dst.execute(f"UPDATE records SET seconds = json_extract(metrics, '$.time.median') WHERE {anchored}")
dst.commit()
print(f"{n} ok records timed beside the anchor")
PY

for labels in anchored raw; do
  file=$db
  [ $labels = raw ] && file=$raw
  echo "== $labels labels"
  "$fusetune" evaluate-model --db "$file" --splits "$splits" --form "$form" --label "${LABEL:-median}" --json >"$out/$labels.json"
  "$fusetune" evaluate-model --db "$file" --splits "$splits" --form "$form" --label "${LABEL:-median}"
done
