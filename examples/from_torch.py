#!/usr/bin/env python3
"""A PyTorch model tuned and compiled by fusetune in ten lines, then timed
against PyTorch eager and, where onnxruntime is importable, ONNX Runtime.

    PYTHONPATH=build/python /usr/bin/python3 examples/from_torch.py [--time 1m | --trials N] [--db FILE]

from_torch() exports the module with torch.onnx, tunes it into the database
(a second run reuses what the first measured), compiles it and checks its
outputs against the module's. docs/PYTHON.md walks through it.
"""

import argparse
import time

import numpy as np
import torch

import fusetune


def median_ms(run, runs=200, warmup=10):
    for _ in range(warmup):
        run()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1e3)
    return float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time", default="1m", help="tuning budget: 30s, 2m, 1h (default 1m)")
    parser.add_argument("--trials", type=int, help="tuning budget in measurements, instead of --time")
    parser.add_argument("--db", default="from_torch.db", help="tuning database (default from_torch.db)")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(2)  # as fusetune's kernels (threads=2)

    # The ten lines: a model, an input, tuned and compiled, run.
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 1024),
        torch.nn.GELU(),
        torch.nn.Linear(1024, 256),
    ).eval()
    x = torch.randn(64, 256)
    exe = fusetune.from_torch(model, x, db=args.db, time=None if args.trials else args.time,
                              trials=args.trials)
    y = exe.run(x.numpy())["output"]

    print(f"tuned {exe.tune_summary['trials']} trials into {args.db}; output {tuple(y.shape)}, "
          f"error {exe.torch_errors['output']:.2g} of its scale against PyTorch")
    ours = exe.benchmark(200)["median_ms"]
    print(f"fusetune          {ours:8.3f} ms (median of 200 runs)")
    with torch.no_grad():
        eager = median_ms(lambda: model(x))
    print(f"PyTorch eager     {eager:8.3f} ms: fusetune {eager / ours:.2f}x")
    try:
        import onnxruntime
    except ImportError:
        print("ONNX Runtime      not importable: skipped")
        return
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 2
    session = onnxruntime.InferenceSession(exe.onnx_model, options,
                                           providers=["CPUExecutionProvider"])
    feeds = {session.get_inputs()[0].name: x.numpy()}
    ort = median_ms(lambda: session.run(None, feeds))
    print(f"ONNX Runtime {onnxruntime.__version__:<5}{ort:8.3f} ms: fusetune {ort / ours:.2f}x")


if __name__ == "__main__":
    main()
