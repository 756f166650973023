"""fusetune.from_torch(): a PyTorch module exported with torch.onnx, tuned,
compiled, and its compiled outputs checked against the module's own."""

import inspect
import io

from ._errors import InvalidArgumentError, VerificationError, error


def _input_names(module, count):
    """forward's parameter names when they name every input, else input0, input1..."""
    try:
        params = [p.name for p in inspect.signature(module.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return params[:count] if len(params) >= count else [f"input{i}" for i in range(count)]


def _flat_outputs(outputs):
    if isinstance(outputs, (tuple, list)):
        return [t for o in outputs for t in _flat_outputs(o)]
    return [outputs]


def _largest_error(got, expected):
    """The largest difference relative to the expected output's largest magnitude."""
    import numpy as np  # here, so that importing fusetune needs no numpy until arrays are used

    scale = max(float(np.abs(expected).max()) if expected.size else 0.0, 1e-30)
    return float(np.abs(got - expected).max()) / scale if expected.size else 0.0


def from_torch(module, example_inputs, db="fusetune.db", time=None, trials=None, *, dims=None,
               tolerance=1e-4, opset=17, progress=None, threads=2, caches="flushed",
               **compile_options):
    """Exports `module` with torch.onnx at the example inputs' shapes (opset
    `opset`), tunes it into `db` with the budget `time` or `trials` (as
    tune()), compiles it from there and runs it on the example inputs: each
    output must be within `tolerance` of the module's, relative to the
    output's largest magnitude, else VerificationError. Returns the
    Executable, with `tune_summary` (tune()'s), `torch_errors` (output name
    -> error) and `onnx_model` (the exported model's bytes) set on it.
    Inputs are named after forward's parameters, outputs "output" (or
    "output0", "output1"...).
    """
    import torch

    inputs = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    if not all(isinstance(t, torch.Tensor) for t in inputs):
        raise error(InvalidArgumentError, "example_inputs must be a tensor or a tuple of tensors")
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            expected = [t.detach().cpu().numpy() for t in _flat_outputs(module(*inputs))]
        names = _input_names(module, len(inputs))
        outputs = ["output"] if len(expected) == 1 else [f"output{i}" for i in range(len(expected))]
        exported = io.BytesIO()
        torch.onnx.export(module, inputs, exported, input_names=names, output_names=outputs,
                          opset_version=opset, do_constant_folding=True)
    finally:
        module.train(was_training)

    from . import compile, tune  # the package's, with its model and worker handling
    model = exported.getvalue()
    summary = tune(model, db=db, time=time, trials=trials, dims=dims, progress=progress,
                   threads=threads, caches=caches)
    exe = compile(model, db=db, dims=dims, threads=threads, caches=caches, **compile_options)
    got = exe.run({n: t.detach().cpu().numpy() for n, t in zip(names, inputs)})
    errors = {n: _largest_error(got[n], e) for n, e in zip(outputs, expected)}
    for name, err in errors.items():
        if not err <= tolerance:
            raise error(VerificationError,
                        f"output '{name}' differs from the module's by {err:.3g} of its scale "
                        f"(tolerance {tolerance:g})")
    exe.tune_summary = summary
    exe.torch_errors = errors
    exe.onnx_model = model
    return exe
