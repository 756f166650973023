#!/usr/bin/python3
"""torch_bench.py NAME RUNS DATA_DIR: PyTorch eager (2 threads, no_grad) on
one of gen_models.py's e2e models or cnn_models.py's CNNs, with the
exporter's input; prints JSON with the median latency. Weights are the
generator's (same seed; the CNNs' state dict saved beside them), so the
output is compared with the exported model's too (max_rel_error)."""
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import gen_models  # noqa: E402

import cnn_models  # noqa: E402  (this folder, on sys.path as the script's own)


def find_model(name, data_dir):
    arch = name.removesuffix("_bn")
    if arch in cnn_models.ARCHS:
        return cnn_models.load(arch, data_dir)
    torch.manual_seed(0)
    for model_name, model, shapes, _, _ in gen_models.models("e2e"):
        if model_name == name:
            return model.eval()
    sys.exit(f"torch_bench: no e2e model {name}")


def main():
    name, runs, data_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    torch.set_num_threads(2)
    model = find_model(name, data_dir)
    x = torch.from_numpy(np.load(os.path.join(data_dir, f"{name}.in.x.npy")))
    with torch.no_grad():
        y = model(x)
        for _ in range(2):
            model(x)
        ms = []
        for _ in range(runs):
            t0 = time.perf_counter()
            model(x)
            ms.append((time.perf_counter() - t0) * 1e3)
    ms.sort()
    result = {"median_ms": ms[len(ms) // 2], "p10_ms": ms[int(0.1 * (len(ms) - 1))],
              "p90_ms": ms[int(0.9 * (len(ms) - 1))], "min_ms": ms[0], "runs": runs,
              "blas": os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")}
    want_path = os.path.join(data_dir, f"{name}.out.y.npy")
    if isinstance(y, torch.Tensor) and os.path.exists(want_path):
        want = np.load(want_path)
        result["max_rel_error"] = float(np.abs(y.numpy() - want).max() / np.abs(want).max())
    print(json.dumps(result))


if __name__ == "__main__":
    main()
