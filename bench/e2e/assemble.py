#!/usr/bin/python3
"""assemble.py OUT BUDGET MODEL...: the end-to-end table from run_e2e.sh's
(or run_cnn_e2e.sh's) JSON files: latency per contender, fusetune's speedup
over ONNX Runtime, the share of the FP32 FMA peak (the database's calibration
of this machine) and each contender's error against the exporter's output.
DB names the database file in OUT (e2e.db). Contenders without files are
shown as "-": a run with FUSETUNE=0 has only ONNX Runtime and PyTorch."""
import datetime
import json
import os
import platform
import sqlite3
import sys

import numpy as np


def load(out, name):
    with open(os.path.join(out, name)) as f:
        return json.load(f)


def load_if(out, name):
    path = os.path.join(out, name)
    return load(out, name) if os.path.exists(path) else None


def ms(value):
    return f"{value:.2f} ms" if value is not None else "-"


def calibrated_peak(db_path):
    """The database's FP32 FMA peak in GFLOP/s, or None without one."""
    if not os.path.exists(db_path):
        return None
    row = sqlite3.connect(db_path).execute("select calibration from targets limit 1").fetchone()
    if row is None:
        return None
    calibration = json.loads(row[0])
    # The all-thread figure of a calibration taken while the shared host was
    # busy can fall to one core's; the peak is at least threads x 1-thread.
    return max(calibration.get("fma_gflops", 0),
               calibration.get("fma_gflops_1_thread", 0) * calibration.get("threads", 1)) or None


def count_rounds(out, m, contender):
    rounds = 0
    while os.path.exists(os.path.join(out, f"{m}.{contender}.{rounds + 1}.json")):
        rounds += 1
    return rounds


def model_row(out, m):
    # fusetune and ONNX Runtime alternate over the rounds: each is the
    # median of its rounds' medians. The run scripts remove a model's
    # earlier rounds before measuring it, so the rounds on file are one run's.
    ft_rounds, ort_rounds = count_rounds(out, m, "fusetune"), count_rounds(out, m, "ort")
    rounds = min(ft_rounds, ort_rounds) if ft_rounds else ort_rounds
    if rounds == 0:
        sys.exit(f"assemble: no rounds of {m} in {out}")
    orts = [load(out, f"{m}.ort.{i}.json") for i in range(1, rounds + 1)]
    fts = [load(out, f"{m}.fusetune.{i}.json") for i in range(1, rounds + 1)] if ft_rounds else []
    tune = load_if(out, f"{m}.tune.json") or {}
    torch_run = load_if(out, f"{m}.torch.json")
    plans = {plan: load_if(out, f"{m}.{plan}.json") for plan in ("unfused", "greedy")}
    r = {
        "fusetune": None,
        "unfused": plans["unfused"]["bench"]["median_ms"] if plans["unfused"] else None,
        "greedy": plans["greedy"]["bench"]["median_ms"] if plans["greedy"] else None,
        "onnxruntime": float(np.median([o["median_ms"] for o in orts])),
        "onnxruntime_rounds": [o["median_ms"] for o in orts],
        "pytorch": torch_run["median_ms"] if torch_run else None,
        "rounds": rounds,
        "trials": tune.get("trials", 0),
        "max_rel_error": None,
        "ort_max_rel_error": orts[0].get("max_rel_error"),
        "pytorch_max_rel_error": torch_run.get("max_rel_error") if torch_run else None,
    }
    if fts:
        median = float(np.median([f["bench"]["median_ms"] for f in fts]))
        r.update({
            "fusetune": median,
            "fusetune_rounds": [f["bench"]["median_ms"] for f in fts],
            "gflops": fts[0]["bench"]["gflops"] * fts[0]["bench"]["median_ms"] / median,
            "sources": fts[0]["compiled"]["sources"],
            # Rounds where fusetune was faster than ONNX Runtime run beside it.
            "rounds_won": int(sum(f["bench"]["median_ms"] < o["median_ms"] for f, o in zip(fts, orts))),
        })
        got = np.load(os.path.join(out, f"{m}.out", "y.npy"))
        want = np.load(os.path.join(out, f"{m}.out.y.npy"))
        r["max_rel_error"] = float(np.abs(got - want).max() / np.abs(want).max())
    return r


def main():
    out, budget, models = sys.argv[1], sys.argv[2], sys.argv[3:]
    caches = os.environ.get("CACHES", "warm")
    precision = os.environ.get("PRECISION", "f32")
    budget_err = float(os.environ.get("ERROR_BUDGET", "1e-2")) if precision == "mixed" else 1e-3
    peak = calibrated_peak(os.path.join(out, os.environ.get("DB", "e2e.db")))
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")),
               platform.processor())
    rows, result = [], {"date": datetime.date.today().isoformat(), "cpu": cpu, "budget": budget,
                        "tuned_caches": caches, "precision": precision, "fma_peak_gflops": peak,
                        "models": {}}
    if precision == "mixed":
        result["error_budget"] = budget_err
    for m in models:
        r = model_row(out, m)
        result["models"][m] = r
        rows.append((m, r))
    peak_text = f"{peak:.0f} GFLOP/s (calibrated)" if peak else "not calibrated (no database)"
    if not any(r["fusetune"] for _, r in rows):
        tuned = "ONNX Runtime and PyTorch only"
    elif budget == "0":
        tuned = f"fusetune compiled from the database's plans, not tuned in this run (caches {caches})"
    else:
        tuned = f"fusetune tuned {budget} per model (caches {caches})"
    if precision == "mixed":
        tuned += f", precision mixed (bf16 where within the error budget {budget_err:g}; the others f32)"
    lines = [f"End to end, {result['date']}, {cpu}, 2 threads; {tuned}; "
             f"median of the alternated rounds' medians; FP32 FMA peak {peak_text}.", "",
             "| model | fusetune | % peak | unfused | greedy | ONNX Runtime 1.20.1 | PyTorch eager | "
             "vs ORT | rounds won | error vs exporter | trials |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for m, r in rows:
        ft = r["fusetune"]
        share = f"{100 * r['gflops'] / peak:.0f}%" if ft and peak else "-"
        speedup = f"{r['onnxruntime'] / ft:.2f}x" if ft else "-"
        won = f"{r['rounds_won']}/{r['rounds']}" if ft else "-"
        error = f"{r['max_rel_error']:.1e}" if ft else "-"
        lines.append(f"| {m} | {ms(ft)} | {share} | {ms(r['unfused'])} | {ms(r['greedy'])} | "
                     f"{ms(r['onnxruntime'])} | {ms(r['pytorch'])} | {speedup} | {won} | {error} | "
                     f"{r['trials']} |")
    with open(os.path.join(out, "e2e.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out, "e2e.json"), "w") as f:
        json.dump(result, f, indent=1)
    print("\n".join(lines))
    bad = [f"{m} ({who})" for m, r in rows
           for who, e in (("fusetune", r["max_rel_error"]), ("onnxruntime", r["ort_max_rel_error"]),
                          ("pytorch", r["pytorch_max_rel_error"]))
           if e is not None and e > (budget_err if who == "fusetune" else 1e-3)]
    if bad:
        sys.exit(f"assemble: outputs differ from the exporter's by more than the tolerance "
                 f"({budget_err:g} for fusetune, 1e-3 for the others) on {', '.join(bad)}")


if __name__ == "__main__":
    main()
