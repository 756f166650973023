#!/usr/bin/env python3
"""How noisy are the labels the cost model ranks: per workload and target
(machine and cache protocol) of a tuning database, the Spearman correlation between its candidates ranked by their
median time and by their fastest repeat, two statistics of one measurement.

Usage: label_noise.py DB [MIN_CANDIDATES]   (default 8)

Only group workloads with at least MIN_CANDIDATES ok records on a target count. Prints
the mean over workloads. It is not a test-retest figure (the same
candidates measured again later), which drifting host speed makes worse;
it is a floor on how much of the ranking the records' noise decides.
"""
import json
import sqlite3
import sys
from collections import defaultdict


def ranks(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2  # ties share their mean rank
        i = j + 1
    return out


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    num = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    den = (sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb)) ** 0.5
    return num / den if den > 0 else None


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    minimum = int(sys.argv[2]) if len(sys.argv) == 3 else 8
    db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
    times = defaultdict(list)
    query = ("select r.workload_id, r.target_id, r.metrics from records r"
             " join workloads w on w.id = r.workload_id where r.status = 'ok' and w.kind = 'group'")
    for workload, target, metrics in db.execute(query):
        t = json.loads(metrics).get("time")
        if t:
            times[(workload, target)].append((t["median"], t["min"]))
    scores = [spearman([m for m, _ in v], [f for _, f in v])
              for v in times.values() if len(v) >= minimum]
    scores = [s for s in scores if s is not None]
    if not scores:
        sys.exit(f"no group workload with {minimum} or more ok records in {sys.argv[1]}")
    print(f"{len(scores)} workloads x targets, mean Spearman(median, fastest repeat) {sum(scores) / len(scores):.3f}")


if __name__ == "__main__":
    main()
