#!/usr/bin/env python3
"""Trials to within 5% of the best, with the cost model and without it.

Arguments: NAME:SEED:ARM:DB for every tuning run (ARM is `model` or `none`),
as run_model_ablation.sh writes them. For each group workload of a model, the
reference is the fastest time any run of that model measured for it. A run
"reaches" a group at the first trial of that group (counted in the order the
records were measured: record ids) whose time is within WITHIN of the
reference; only the groups every run of the model measured count (the
partition search visits other groups in other runs); a run that never does counts every trial it spent on the group
and the group is reported as not reached. A run's figure is the sum over its
groups; the table gives, per model, the mean over seeds of each arm and the
ratio none / model (how many times fewer trials the model needs).
"""
import argparse
import collections
import json
import math
import sqlite3
import statistics
import sys


def group_trials(db_path):
    """{workload key: [seconds or None, ...]} in measurement order (job records only)."""
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    rows = con.execute(
        "select w.key, r.status, r.seconds from records r join workloads w on r.workload_id = w.id "
        "where w.kind = 'group' and r.job_id is not null order by r.id").fetchall()
    con.close()
    trials = collections.defaultdict(list)
    for key, status, seconds in rows:
        trials[key].append(seconds if status == "ok" and seconds is not None else None)
    return trials


def reach(times, reference, within):
    """(trials to get within `within` of `reference`, whether it got there)."""
    for i, t in enumerate(times, 1):
        if t is not None and t <= reference * (1 + within):
            return i, True
    return len(times), False


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="NAME:SEED:ARM:DB")
    ap.add_argument("--within", type=float, default=0.05)
    ap.add_argument("--json", help="write the per-run and per-model figures here")
    args = ap.parse_args()

    runs = []
    for spec in args.runs:
        name, seed, arm, db = spec.split(":", 3)
        if arm not in ("model", "none"):
            sys.exit(f"trials_to_within: arm '{arm}' in '{spec}' is neither model nor none")
        runs.append({"model": name, "seed": int(seed), "arm": arm, "trials": group_trials(db)})

    # The groups every run of a model measured: a group only some runs
    # visited (a partition the others never tried) has no comparable count.
    common = {}
    for r in runs:
        keys = set(k for k, times in r["trials"].items() if any(t is not None for t in times))
        common[r["model"]] = keys if r["model"] not in common else common[r["model"]] & keys
    reference = collections.defaultdict(dict)  # model -> workload -> best seconds
    for r in runs:
        for key in common[r["model"]]:
            best = min(t for t in r["trials"][key] if t is not None)
            reference[r["model"]][key] = min(reference[r["model"]].get(key, math.inf), best)

    for r in runs:
        total, missed = 0, 0
        for key, best in reference[r["model"]].items():
            n, reached = reach(r["trials"][key], best, args.within)
            total += n
            missed += not reached
        r.update(trials_to_within=total, groups=len(reference[r["model"]]),
                 groups_not_reached=missed, trials_spent=sum(len(t) for t in r["trials"].values()),
                 groups_measured=len(r["trials"]))

    by_model = collections.defaultdict(lambda: {"model": [], "none": []})
    for r in runs:
        by_model[r["model"]][r["arm"]].append(r)
    print(f"Trials to get every group within {args.within:.0%} of its best (the groups every run "
          "measured; sum over groups, mean over seeds; in brackets the groups a run never got "
          "within, over all seeds, their trials counted in full: a lower bound)\n")
    print("| model | groups | seeds | with the model | without | without / with |")
    print("|---|---|---|---|---|---|")
    summary = {}
    for name, arms in by_model.items():
        mean = {a: statistics.mean(r["trials_to_within"] for r in arms[a]) if arms[a] else None
                for a in ("model", "none")}
        missed = {a: sum(r["groups_not_reached"] for r in arms[a]) for a in ("model", "none")}
        ratio = mean["none"] / mean["model"] if mean["model"] and mean["none"] else None
        groups = len(reference[name])
        seeds = len(arms["model"])
        cell = lambda a: "-" if mean[a] is None else f"{mean[a]:.0f} ({missed[a]})"
        print(f"| {name} | {groups} | {seeds} | {cell('model')} | {cell('none')} | "
              f"{'-' if ratio is None else f'{ratio:.2f}x'} |")
        summary[name] = {"groups": groups, "seeds": seeds, "mean_trials_with_model": mean["model"],
                         "mean_trials_without": mean["none"], "ratio": ratio,
                         "groups_not_reached_with_model": missed["model"],
                         "groups_not_reached_without": missed["none"]}
    if args.json:
        for r in runs:
            del r["trials"]
        with open(args.json, "w") as f:
            json.dump({"within": args.within, "models": summary, "runs": runs}, f, indent=2)


if __name__ == "__main__":
    main()
