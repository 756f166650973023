#!/usr/bin/python3
"""assemble.py OUT BUDGET MODEL...: the end-to-end table from run_e2e.sh's
JSON files: latency per contender, fusetune's speedup over ONNX Runtime, the
share of the FP32 FMA peak (the database's calibration of this machine) and
fusetune's error against the exporter's output."""
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


def main():
    out, budget, models = sys.argv[1], sys.argv[2], sys.argv[3:]
    caches = os.environ.get("CACHES", "warm")
    db = sqlite3.connect(os.path.join(out, "e2e.db"))
    calibration = json.loads(db.execute("select calibration from targets limit 1").fetchone()[0])
    # The all-thread figure of a calibration taken while the shared host was
    # busy can fall to one core's; the peak is at least threads x 1-thread.
    peak = max(calibration.get("fma_gflops", 0),
               calibration.get("fma_gflops_1_thread", 0) * calibration.get("threads", 1))
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")),
               platform.processor())
    rows, result = [], {"date": datetime.date.today().isoformat(), "cpu": cpu, "budget": budget,
                        "tuned_caches": caches, "fma_peak_gflops": peak, "models": {}}
    for m in models:
        # fusetune and ONNX Runtime alternate over the rounds: each is the
        # median of its rounds' medians. Every round on file counts (a rerun
        # with more rounds than the first leaves them all).
        rounds = 0
        while os.path.exists(os.path.join(out, f"{m}.fusetune.{rounds + 1}.json")) and \
                os.path.exists(os.path.join(out, f"{m}.ort.{rounds + 1}.json")):
            rounds += 1
        if rounds == 0:
            sys.exit(f"assemble: no rounds of {m} in {out}")
        fts = [load(out, f"{m}.fusetune.{i}.json") for i in range(1, rounds + 1)]
        orts = [load(out, f"{m}.ort.{i}.json") for i in range(1, rounds + 1)]
        ft = fts[0]
        tune = load(out, f"{m}.tune.json") if os.path.exists(os.path.join(out, f"{m}.tune.json")) else {}
        r = {
            "fusetune": float(np.median([f["bench"]["median_ms"] for f in fts])),
            "fusetune_rounds": [f["bench"]["median_ms"] for f in fts],
            "unfused": load(out, f"{m}.unfused.json")["bench"]["median_ms"],
            "greedy": load(out, f"{m}.greedy.json")["bench"]["median_ms"],
            "onnxruntime": float(np.median([o["median_ms"] for o in orts])),
            "onnxruntime_rounds": [o["median_ms"] for o in orts],
            "pytorch": load(out, f"{m}.torch.json")["median_ms"],
            "gflops": ft["bench"]["gflops"] * ft["bench"]["median_ms"] /
                      float(np.median([f["bench"]["median_ms"] for f in fts])),
            "sources": ft["compiled"]["sources"],
            "rounds": rounds,
            # Rounds where fusetune was faster than ONNX Runtime run beside it.
            "rounds_won": int(sum(f["bench"]["median_ms"] < o["median_ms"] for f, o in zip(fts, orts))),
            "trials": tune.get("trials", 0),
        }
        got = np.load(os.path.join(out, f"{m}.out", "y.npy"))
        want = np.load(os.path.join(out, f"{m}.out.y.npy"))
        r["max_rel_error"] = float(np.abs(got - want).max() / np.abs(want).max())
        r["ort_max_rel_error"] = orts[0].get("max_rel_error")
        result["models"][m] = r
        rows.append((m, r))
    lines = [f"End to end, {result['date']}, {cpu}, 2 threads; fusetune tuned {budget} per model "
             f"(caches {caches}); "
             f"median of the alternated rounds' medians; FP32 FMA peak {peak:.0f} GFLOP/s (calibrated).", "",
             "| model | fusetune | % peak | unfused | greedy | ONNX Runtime 1.20.1 | PyTorch eager | "
             "vs ORT | rounds won | error vs exporter | trials |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for m, r in rows:
        lines.append(
            f"| {m} | {r['fusetune']:.2f} ms | {100 * r['gflops'] / peak:.0f}% | {r['unfused']:.2f} ms | "
            f"{r['greedy']:.2f} ms | {r['onnxruntime']:.2f} ms | {r['pytorch']:.2f} ms | "
            f"{r['onnxruntime'] / r['fusetune']:.2f}x | {r['rounds_won']}/{r['rounds']} | "
            f"{r['max_rel_error']:.1e} | {r['trials']} |")
    with open(os.path.join(out, "e2e.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out, "e2e.json"), "w") as f:
        json.dump(result, f, indent=1)
    print("\n".join(lines))
    bad = [m for m, r in rows if r["max_rel_error"] > 1e-3]
    if bad:
        sys.exit(f"assemble: outputs differ from the exporter's by more than 1e-3 on {bad}")


if __name__ == "__main__":
    main()
