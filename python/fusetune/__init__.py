"""fusetune: search-based operator fusion and tiling, from Python.

    import fusetune
    fusetune.calibrate()                                   # this machine's target and roofline
    summary = fusetune.tune("model.onnx", db="tune.db", time="10m")
    exe = fusetune.compile("model.onnx", db="tune.db")
    outputs = exe.run({"x": x})                            # numpy in, numpy out
    exe.explain()                                          # where each kernel's plan came from
    exe = fusetune.from_torch(module, example, db="tune.db", time="2m")

A model is a path, bytes or an onnx.ModelProto. Failures raise fusetune.Error
subclasses with the messages the `fusetune` command prints. Tuning, compiling
and running release the GIL. docs/PYTHON.md is the walkthrough.
"""

import os

from . import _fusetune, _paths
from ._errors import (CorruptError, Error, InternalError, InvalidArgumentError, IoError,
                      NotFoundError, ParseError, ShapeMismatchError, UnsupportedError,
                      VerificationError, error)
from ._fusetune import Database, Executable, calibrate
from ._model import model_file
from ._report import Report, Svg, report

__version__ = _fusetune.__version__


class TuneSummary(dict):
    """A tuning job's summary: the dict `fusetune tune --json` prints (job, db,
    tasks, whole-model times, trials, stop_reason...) with "interrupted";
    str() gives the tables `fusetune tune` prints."""

    def __init__(self, summary, text):
        super().__init__(summary)
        self.text = text

    def __str__(self):
        return self.text


def worker_path(worker=None):
    """The fusetune-worker that tune() measures in: `worker`, else
    $FUSETUNE_WORKER, else the one built or installed with this package."""
    path = worker or os.environ.get("FUSETUNE_WORKER") or _paths.WORKER
    if not os.access(path, os.X_OK):
        raise error(NotFoundError, f"fusetune-worker is not at '{path}' (set FUSETUNE_WORKER "
                                   "or pass worker=)")
    return path


def tune(model, db="fusetune.db", time=None, trials=None, *, dims=None, values=None,
         progress=None, until_converged=False, resume=False, caches="flushed", threads=2, seed=1,
         worker=None):
    """Tunes the model's fusion and tiling on this machine into the database
    (`fusetune tune`): every result is committed as it arrives.

    time: "10m", "1h30m", "90s" or seconds; trials: group measurements; the
    budget is spent in full (with until_converged, whichever comes first).
    dims: {name: value} of symbolic input dimensions; values: {input: [ints]}
    for inputs that shapes depend on. progress(dict) is called as the job
    advances (trials, seconds, tasks, tasks_converged, best_ms, unfused_ms,
    current); an exception it raises stops the job and is raised again.
    Ctrl-C stops the job as it stops `fusetune tune`: what was measured is
    committed and the summary returns with "interrupted" true (resume=True
    continues it). caches: "flushed", "warm" or "cold-weights". The GIL is
    released while the job runs. Returns a TuneSummary.
    """
    path, holder = model_file(model)
    try:
        summary, text = _fusetune.tune(path, os.fspath(db), time, int(trials or 0), dict(dims or {}),
                                       dict(values or {}), until_converged, resume, caches, threads,
                                       seed, worker_path(worker), progress)
    finally:
        if holder is not None:
            holder.cleanup()
    return TuneSummary(summary, text)


def compile(model, db=None, *, dims=None, values=None, threads=2, caches="flushed",
            max_memory=None, dynamic_dims=(), whole_model_plans=True, remember=True,
            kv_cache_in_place=False):
    """Compiles the model with the database's plans for this machine (none:
    the greedy plan) and returns an Executable.

    dims and values as for tune(); caches: the protocol the plans were tuned
    under; max_memory: a limit on live intermediates ("64MiB" or bytes);
    dynamic_dims: symbolic dimensions that may change between runs (a program
    per size met); remember: store the plan chosen from group records for
    later compiles (the database must be writable).

    kv_cache_in_place: serve a decoder's KV cache in place (a model exported
    with its cache as past inputs and present outputs, present = Concat(past,
    new rows), positions and masks as inputs). Bind the past dimension to
    the capacity minus one step's rows (dims={"past": 2047} holds 2,048 rows
    of one-token steps); the executable keeps the caches: load_cache() sets
    them, each run() takes the other inputs, appends its new rows and
    returns the other outputs; cache_rows(), cache_length and
    cache_capacity read them back.
    """
    path, holder = model_file(model)
    exe = _fusetune.compile(path, "" if db is None else os.fspath(db), dict(dims or {}),
                            dict(values or {}), threads, caches, max_memory, list(dynamic_dims),
                            whole_model_plans, remember, kv_cache_in_place)
    exe._model_file = holder  # removed with the executable, which may compile other sizes from it
    return exe


def run_reference(model, inputs, *, dims=None, values=None):
    """The model's outputs from the reference executor (`fusetune
    run-reference`), the oracle every plan is verified against: inputs and
    outputs as numpy arrays of the model's dtypes, by name."""
    path, holder = model_file(model)
    try:
        return _fusetune.run_reference(path, dict(inputs), dict(dims or {}), dict(values or {}))
    finally:
        if holder is not None:
            holder.cleanup()


from ._torch import from_torch  # noqa: E402  (uses tune and compile above)

# compile is left out: `from fusetune import *` would hide the builtin.
__all__ = ["CorruptError", "Database", "Error", "Executable", "InternalError",
           "InvalidArgumentError", "IoError", "NotFoundError", "ParseError", "Report",
           "ShapeMismatchError", "Svg", "TuneSummary", "UnsupportedError", "VerificationError",
           "calibrate", "from_torch", "report", "run_reference", "tune", "worker_path"]
