#!/usr/bin/python3
"""torch_bench.py NAME RUNS: PyTorch eager (2 threads, no_grad) on one of
gen_models.py's e2e models, with the exporter's input; prints JSON with the
median latency. Weights are the generator's (same seed), so the output is
compared with the exported model's too."""
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import gen_models  # noqa: E402


def main():
    name, runs, data_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    torch.set_num_threads(2)
    torch.manual_seed(0)
    for model_name, model, shapes, _, _ in gen_models.models("e2e"):
        if model_name == name:
            break
    else:
        sys.exit(f"torch_bench: no e2e model {name}")
    model.eval()
    x = torch.from_numpy(np.load(os.path.join(data_dir, f"{name}.in.x.npy")))
    with torch.no_grad():
        for _ in range(3):
            model(x)
        ms = []
        for _ in range(runs):
            t0 = time.perf_counter()
            model(x)
            ms.append((time.perf_counter() - t0) * 1e3)
    ms.sort()
    print(json.dumps({"median_ms": ms[len(ms) // 2], "p10_ms": ms[int(0.1 * (len(ms) - 1))],
                      "p90_ms": ms[int(0.9 * (len(ms) - 1))], "runs": runs,
                      "blas": os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")}))


if __name__ == "__main__":
    main()
