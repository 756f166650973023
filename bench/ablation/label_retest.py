#!/usr/bin/env python3
"""Test-retest noise of tuning labels: the same candidates measured by two
tuning jobs into two databases (the same models and budget, run one after
the other), per group workload and target, the Spearman correlation between
the two jobs' recorded times of the candidates both measured.

Usage: label_retest.py A.db B.db [MIN_COMMON]   (default 8)

A database never holds the same plan twice for a workload, so a retest takes
two. Workloads are matched by key, candidates by their plan text, targets by
fingerprint. Prints the mean over workloads with at least MIN_COMMON common
candidates, for the recorded seconds (the label the cost model trains on)
for the raw medians, the fastest repeats, and the fastest repeats scaled as
the record was (the label of `evaluate-model --label fastest`).

Why it matters: a label is true time + noise. No model ranks a workload's
noisy labels better than the true times do, and the true times' Spearman
with one job's labels is about the square root of the two jobs' Spearman
with each other (for small noise), so this bounds the cost model's Spearman
on tuning records (issue 38).
"""
import json
import os
import sqlite3
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from label_noise import spearman  # noqa: E402


def load(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    query = ("select w.key, t.fingerprint, r.plan, r.seconds, r.metrics from records r"
             " join workloads w on w.id = r.workload_id join targets t on t.id = r.target_id"
             " where r.status = 'ok' and w.kind = 'group'")
    out = defaultdict(dict)
    for key, target, plan, seconds, metrics in db.execute(query):
        t = json.loads(metrics).get("time") or {}
        median, fastest = t.get("median", seconds), t.get("min", seconds)
        anchored_fastest = seconds * fastest / median if median > 0 else seconds
        out[(key, target)][plan] = (seconds, median, fastest, anchored_fastest)
    return out


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    minimum = int(sys.argv[3]) if len(sys.argv) == 4 else 8
    a, b = load(sys.argv[1]), load(sys.argv[2])
    labels = ("recorded seconds", "raw medians", "raw fastest repeats",
              "recorded fastest (evaluate-model --label fastest)")
    scores, common_counts = [[] for _ in labels], []
    for workload, plans_a in a.items():
        plans_b = b.get(workload, {})
        common = [p for p in plans_a if p in plans_b]
        if len(common) < minimum:
            continue
        s = [spearman([plans_a[p][i] for p in common], [plans_b[p][i] for p in common])
             for i in range(len(labels))]
        if None in s:
            continue
        for i, value in enumerate(s):
            scores[i].append(value)
        common_counts.append(len(common))
    if not common_counts:
        sys.exit(f"no group workload with {minimum} or more candidates in both databases")
    n = len(common_counts)
    print(f"{n} workloads x targets, {sum(common_counts)} candidates measured twice "
          f"(median {sorted(common_counts)[n // 2]} per workload)")
    for label, values in zip(labels, scores):
        mean = sum(values) / n
        print(f"{label:48s} mean Spearman(job A, job B) {mean:.3f}; a model's ceiling "
              f"against one job's labels about {max(mean, 0) ** 0.5:.3f}")


if __name__ == "__main__":
    main()
