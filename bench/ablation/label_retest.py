#!/usr/bin/env python3
"""Test-retest noise of tuning labels: the same candidates measured by two
tuning jobs into two databases (the same models and budget, run one after
the other), per group workload and target, the Spearman correlation between
the two jobs' times of the candidates both measured.

Usage: label_retest.py A.db B.db [MIN_COMMON]   (default 8)

The tuner is deterministic from its seed, so two jobs of the same models
measure many candidates both; a job does not measure a plan twice, so a
retest takes two databases. Workloads are matched by key, candidates by
their plan text, targets by fingerprint; a plan recorded more than once in
one database keeps its lowest time, as the cost model's dataset does
(every kernel version is read: tune both databases with one build). Prints
the mean over workloads with at least MIN_COMMON common candidates, for four
labels: the records' seconds (`evaluate-model --label median`), the raw
medians, the raw fastest repeats, and the fastest repeats scaled as the
record was (`--label fastest`, the default).

Why it matters: a label is true time + noise. No model ranks a workload's
noisy labels better than the true times do, and the true times' Spearman
with one job's labels is about the square root of the two jobs' Spearman
with each other (exact for Pearson's correlation with independent noise of
equal variance, approximate here: per workload, and on the candidates both
jobs measured), so this bounds the cost model's Spearman on tuning records
(issue 38).
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
        median, fastest = t.get("median") or seconds, t.get("min") or seconds
        # As cost_model::LabelSeconds: without both statistics, the seconds.
        scaled = seconds * fastest / median if t.get("median") and t.get("min") else seconds
        labels = (seconds, median, fastest, scaled)
        kept = out[(key, target)].get(plan)
        out[(key, target)][plan] = labels if kept is None else tuple(map(min, kept, labels))
    return out


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    minimum = int(sys.argv[3]) if len(sys.argv) == 4 else 8
    a, b = load(sys.argv[1]), load(sys.argv[2])
    labels = ("records' seconds (--label median)", "raw medians", "raw fastest repeats",
              "fastest repeats scaled (--label fastest)")
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
        print(f"{label:40s} mean Spearman(job A, job B) {mean:.3f}; a model's ceiling "
              f"against one job's labels about {max(mean, 0) ** 0.5:.3f}")


if __name__ == "__main__":
    main()
