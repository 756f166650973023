#!/usr/bin/env python3
"""Trials to within 5% of the best, with the cost model and without it.

Arguments: NAME:SEED:ARM:DB for every tuning run (ARM is `model` or `none`),
as run_model_ablation.sh writes them. Two figures per model:

Groups. Only the groups every run of the model measured count (the
partition search visits other groups in other runs), and with --min-us only
those whose best is at least that long. A group's reference is the fastest
time any run measured for it; a run "reaches" the group at its first trial
of the group (in measurement order: record ids) within WITHIN of the
reference. A run that never does counts every trial it spent on the group,
and the group is reported as not reached (so the figure is a lower bound).
A run's figure is the sum over the groups. Beside it, the issue's own
measure: trials until the first within WITHIN of the run's own final best
of each group (always reached, and kinder to a run that stops short).

Whole plans. Group trials until the job measured a tuned whole plan within
WITHIN of the fastest tuned plan any run of the model measured (and of the
run's own final best).

Per model: the mean over seeds of each arm and the ratio none / model (how
many times fewer trials the model needs).
"""
import argparse
import collections
import json
import math
import sqlite3
import statistics
import sys


def plan_kind(metrics):
    """The search note's plan kind of a whole-plan record: tuned, greedy, unfused."""
    try:
        return json.loads(metrics).get("search", {}).get("plan_kind", "")
    except (TypeError, ValueError):
        return ""


def job_records(db_path):
    """[(workload kind, workload key, seconds or None, plan kind)] of the job's
    records, in measurement order."""
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    rows = con.execute(
        "select w.kind, w.key, r.status, r.seconds, r.metrics from records r "
        "join workloads w on r.workload_id = w.id where r.job_id is not null order by r.id"
    ).fetchall()
    con.close()
    return [(kind, key, seconds if status == "ok" else None,
             plan_kind(metrics) if kind == "graph" else "")
            for kind, key, status, seconds, metrics in rows]


def group_trials(records):
    """{group workload key: [seconds or None, ...]} in measurement order."""
    trials = collections.defaultdict(list)
    for kind, key, seconds, _ in records:
        if kind == "group":
            trials[key].append(seconds)
    return trials


def plan_trials(records):
    """[(group trials measured before it, whole-plan seconds)] of the job's ok
    tuned plans (the unfused and greedy baselines, the same in every run, left out)."""
    plans, groups = [], 0
    for kind, _, seconds, kind_of_plan in records:
        if kind == "group":
            groups += 1
        elif seconds is not None and kind_of_plan not in ("unfused", "greedy"):
            plans.append((groups, seconds))
    return plans


def plan_reach(plans, reference, within):
    """Group trials until a whole plan within `within` of `reference` was measured, or None."""
    for trials, seconds in plans:
        if seconds <= reference * (1 + within):
            return trials
    return None


def reach(times, reference, within):
    """(trials to get within `within` of `reference`, whether it got there)."""
    for i, t in enumerate(times, 1):
        if t is not None and t <= reference * (1 + within):
            return i, True
    return len(times), False


def PlanTable(runs, within, summary):
    """Whole plans: group trials until the job measured a plan within `within`
    of the best plan (any run of the model; and the run's own final best)."""
    best = collections.defaultdict(lambda: math.inf)
    for r in runs:
        for _, seconds in r["plans"]:
            best[r["model"]] = min(best[r["model"]], seconds)
    for r in runs:
        own = min((sec for _, sec in r["plans"]), default=math.inf)
        r["plan_trials_to_within"] = plan_reach(r["plans"], best[r["model"]], within)
        r["plan_trials_to_within_own_best"] = plan_reach(r["plans"], own, within)
    print(f"\nWhole plans: group trials until the job measured a tuned plan within {within:.0%} "
          "of the fastest tuned plan any run of the model measured (of its own final best in "
          "brackets); mean over seeds, a run that never got there counted at its full budget "
          "(marked +); the unfused and greedy baselines left out\n")
    print("| model | seeds | with the model | without | without / with |")
    print("|---|---|---|---|---|")
    for name in dict.fromkeys(r["model"] for r in runs):
        cells, means = {}, {}
        for arm in ("model", "none"):
            mine = [r for r in runs if r["model"] == name and r["arm"] == arm]
            if not mine:
                cells[arm], means[arm] = "-", None
                continue
            full = [r["plan_trials_to_within"] if r["plan_trials_to_within"] is not None
                    else r["trials_spent"] for r in mine]
            own = [r["plan_trials_to_within_own_best"] if r["plan_trials_to_within_own_best"]
                   is not None else r["trials_spent"] for r in mine]
            censored = any(r["plan_trials_to_within"] is None for r in mine)
            means[arm] = statistics.mean(full)
            cells[arm] = f"{means[arm]:.0f}{'+' if censored else ''} ({statistics.mean(own):.0f})"
        ratio = means["none"] / means["model"] if means["model"] and means["none"] else None
        print(f"| {name} | {len([r for r in runs if r['model'] == name and r['arm'] == 'model'])} | "
              f"{cells['model']} | {cells['none']} | {'-' if ratio is None else f'{ratio:.2f}x'} |")
        summary[name].update(plan_mean_trials_with_model=means["model"],
                             plan_mean_trials_without=means["none"], plan_ratio=ratio)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="NAME:SEED:ARM:DB")
    ap.add_argument("--within", type=float, default=0.05)
    ap.add_argument("--json", help="write the per-run and per-model figures here")
    ap.add_argument("--min-us", type=float, default=0,
                    help="leave out the groups whose best time is under this many microseconds "
                         "(kernels of a few microseconds differ from run to run by launch jitter "
                         "more than their tilings differ)")
    args = ap.parse_args()

    runs = []
    for spec in args.runs:
        name, seed, arm, db = spec.split(":", 3)
        if arm not in ("model", "none"):
            sys.exit(f"trials_to_within: arm '{arm}' in '{spec}' is neither model nor none")
        records = job_records(db)
        runs.append({"model": name, "seed": int(seed), "arm": arm,
                     "trials": group_trials(records), "plans": plan_trials(records)})

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
    for model, refs in reference.items():
        reference[model] = {k: v for k, v in refs.items() if v * 1e6 >= args.min_us}

    for r in runs:
        total, missed, own_total = 0, 0, 0
        for key, best in reference[r["model"]].items():
            n, reached = reach(r["trials"][key], best, args.within)
            total += n
            missed += not reached
            # The issue's own measure: within WITHIN of the run's final best
            # of the group (always reached).
            own_best = min(t for t in r["trials"][key] if t is not None)
            own_total += reach(r["trials"][key], own_best, args.within)[0]
        r.update(trials_to_within=total, trials_to_within_own_best=own_total,
                 groups=len(reference[r["model"]]),
                 groups_not_reached=missed, trials_spent=sum(len(t) for t in r["trials"].values()),
                 groups_measured=len(r["trials"]))

    by_model = collections.defaultdict(lambda: {"model": [], "none": []})
    for r in runs:
        by_model[r["model"]][r["arm"]].append(r)
    floor = f", whose best is at least {args.min_us:g} us" if args.min_us > 0 else ""
    print(f"Trials to get every group within {args.within:.0%} of its best (the groups every run "
          f"measured{floor}; sum over groups, mean over seeds; in brackets the groups a run never "
          "got within, over all seeds, their trials counted in full: a lower bound)\n")
    print("| model | groups | seeds | with the model | without | without / with | "
          "of the run's own final best: with, without, without / with |")
    print("|---|---|---|---|---|---|---|")
    summary = {}
    for name, arms in by_model.items():
        mean = {a: statistics.mean(r["trials_to_within"] for r in arms[a]) if arms[a] else None
                for a in ("model", "none")}
        own = {a: statistics.mean(r["trials_to_within_own_best"] for r in arms[a])
               if arms[a] else None for a in ("model", "none")}
        own_ratio = own["none"] / own["model"] if own["model"] and own["none"] else None
        missed = {a: sum(r["groups_not_reached"] for r in arms[a]) for a in ("model", "none")}
        ratio = mean["none"] / mean["model"] if mean["model"] and mean["none"] else None
        groups = len(reference[name])
        seeds = len(arms["model"])
        cell = lambda a: "-" if mean[a] is None else f"{mean[a]:.0f} ({missed[a]})"
        own_cell = ("-" if own_ratio is None else
                    f"{own['model']:.0f}, {own['none']:.0f}, {own_ratio:.2f}x")
        print(f"| {name} | {groups} | {seeds} | {cell('model')} | {cell('none')} | "
              f"{'-' if ratio is None else f'{ratio:.2f}x'} | {own_cell} |")
        summary[name] = {"groups": groups, "seeds": seeds, "mean_trials_with_model": mean["model"],
                         "mean_trials_without": mean["none"], "ratio": ratio,
                         "groups_not_reached_with_model": missed["model"],
                         "groups_not_reached_without": missed["none"],
                         "own_best_mean_trials_with_model": own["model"],
                         "own_best_mean_trials_without": own["none"], "own_best_ratio": own_ratio}
    PlanTable(runs, args.within, summary)
    if args.json:
        for r in runs:
            del r["trials"]
            del r["plans"]
        with open(args.json, "w") as f:
            json.dump({"within": args.within, "min_us": args.min_us, "models": summary,
                       "runs": runs}, f, indent=2)


if __name__ == "__main__":
    main()
