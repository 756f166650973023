"""Errors are Python exceptions with the messages the fusetune command prints
(after "fusetune: error: "), of classes by kind, never a crash."""

import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import fusetune
from conftest import ENCODER, example_io


def cli_error(cli, *args):
    done = subprocess.run([cli, *args], capture_output=True, text=True)
    assert done.returncode == 2, done
    assert done.stderr.startswith("fusetune: error: ")
    return done.stderr[len("fusetune: error: "):].rstrip("\n")


def unsupported_model(path):
    graph = helper.make_graph([helper.make_node("Det", ["x"], ["y"])], "det",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_bad_model_as_the_cli_says(tmp_path, cli):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"this is not a protobuf message at all")
    with pytest.raises(fusetune.ParseError) as raised:
        fusetune.compile(str(bad))
    assert str(raised.value) == cli_error(cli, "inspect", str(bad))
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, RuntimeError)
    with pytest.raises(fusetune.IoError) as raised:
        fusetune.compile("/nonexistent.onnx")
    assert str(raised.value) == cli_error(cli, "inspect", "/nonexistent.onnx")


def test_unsupported_op_as_the_cli_says(tmp_path, cli):
    path = str(tmp_path / "det.onnx")
    unsupported_model(path)
    with pytest.raises(fusetune.UnsupportedError) as raised:
        fusetune.compile(path)
    assert "Det (first used by node #0 (Det))" in str(raised.value)
    assert str(raised.value) == cli_error(cli, "inspect", path)
    with pytest.raises(fusetune.UnsupportedError):
        fusetune.tune(path, db=str(tmp_path / "t.db"), trials=1)


def test_shape_mismatch_as_the_cli_says(tmp_path, cli):
    wrong = np.zeros((2, 3), dtype=np.float32)
    np.save(tmp_path / "wrong.npy", wrong)
    with pytest.raises(fusetune.ShapeMismatchError) as raised:
        fusetune.run_reference(ENCODER, {"x": wrong})
    assert str(raised.value) == cli_error(cli, "run-reference", ENCODER, "--input",
                                          f"x={tmp_path / 'wrong.npy'}")
    exe = fusetune.compile(ENCODER)
    with pytest.raises(fusetune.ShapeMismatchError, match="expects shape"):
        exe.run({"x": wrong})
    x, _ = example_io("encoder_small")
    assert exe.run({"x": x})["y"].shape == (1, 32, 64)  # the executable still works


def test_corrupt_database_as_the_cli_says(tmp_path, cli):
    text = tmp_path / "text.db"
    text.write_text("not a database at all, just text, long enough to fill a header of one "
                    "hundred bytes......\n")
    with pytest.raises(fusetune.CorruptError) as raised:
        fusetune.compile(ENCODER, db=str(text))
    with pytest.raises(fusetune.CorruptError) as stats_raised:
        fusetune.Database(str(text)).stats()
    assert str(stats_raised.value) == cli_error(cli, "db", "stats", "--db", str(text))
    assert "not a database" in str(raised.value)


def test_bad_inputs_and_arguments():
    exe = fusetune.compile(ENCODER)
    x, _ = example_io("encoder_small")
    with pytest.raises(fusetune.NotFoundError, match="no value given for input 'x'"):
        exe.run({})
    with pytest.raises(fusetune.NotFoundError, match="'q' is not an input of the graph"):
        exe.run({"x": x, "q": x})
    with pytest.raises(fusetune.InvalidArgumentError, match="numpy dtype object cannot be fed"):
        exe.run({"x": object()})
    with pytest.raises(fusetune.InvalidArgumentError, match="numpy dtype <U1 cannot be fed"):
        exe.run({"x": np.array(["a"])})
    with pytest.raises(fusetune.InvalidArgumentError, match="model must be a path"):
        fusetune.compile(42)
    with pytest.raises(fusetune.InvalidArgumentError, match="threads"):
        fusetune.compile(ENCODER, threads=0)
    with pytest.raises(fusetune.InvalidArgumentError, match="max_memory"):
        fusetune.compile(ENCODER, max_memory="lots")
    with pytest.raises(fusetune.InvalidArgumentError, match="threads"):
        fusetune.calibrate(threads=0)
