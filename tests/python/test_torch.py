"""from_torch(): a PyTorch module exported, tuned, compiled and checked
against the module end to end; the example script."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import fusetune
from conftest import SOURCE

torch = pytest.importorskip("torch")


class Block(torch.nn.Module):
    """A residual MLP block with a LayerNorm: GEMMs with fused epilogues."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(32)
        self.up = torch.nn.Linear(32, 64)
        self.down = torch.nn.Linear(64, 32)

    def forward(self, x, scale):
        return x + self.down(torch.relu(self.up(self.norm(x)))) * scale


def test_from_torch_end_to_end(fresh_db):
    torch.manual_seed(0)
    module = Block()
    x, scale = torch.randn(8, 32), torch.rand(8, 32)
    exe = fusetune.from_torch(module, (x, scale), db=fresh_db, trials=20)
    assert exe.input_names == ["x", "scale"] and exe.output_names == ["output"]
    assert exe.torch_errors["output"] < 1e-4 and exe.tune_summary["trials"] == 20
    assert module.training  # left in the mode it came in
    x2, scale2 = torch.randn(8, 32), torch.rand(8, 32)
    with torch.no_grad():
        expected = module.eval()(x2, scale2).numpy()
    got = exe.run({"x": x2.numpy(), "scale": scale2.numpy()})["output"]
    assert np.abs(got - expected).max() <= 1e-4 * np.abs(expected).max()
    assert exe.onnx_model.startswith(b"\x08")  # the exported ONNX protobuf


def test_from_torch_rejects_non_tensors(fresh_db):
    with pytest.raises(fusetune.InvalidArgumentError, match="example_inputs"):
        fusetune.from_torch(Block(), [1.0], db=fresh_db, trials=1)


def test_example_script(fresh_db, tmp_path):
    """examples/from_torch.py with a small budget, on the calibrated database."""
    db = str(tmp_path / "example.db")
    shutil.copy(fresh_db, db)
    done = subprocess.run([sys.executable, os.path.join(SOURCE, "examples", "from_torch.py"),
                           "--trials", "20", "--db", db], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "PyTorch eager" in done.stdout and "fusetune" in done.stdout
    assert "ONNX Runtime" in done.stdout
