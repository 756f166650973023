"""compile() and Executable: models given three ways, numbers against the
reference executor and PyTorch, the input forms, zero-copy and copied inputs,
explain() and benchmark()."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import fusetune
from conftest import CNN, ENCODER, example_io, relative_error


def offset_copy(x, floats):
    """A copy of `x` starting `floats` floats after a 64-byte boundary."""
    raw = np.empty(x.size + 16 + floats, dtype=np.float32)
    start = (-raw.ctypes.data % 64) // 4 + floats
    copy = raw[start:start + x.size].reshape(x.shape)
    copy[...] = x
    return copy


@pytest.mark.parametrize("name,path", [("encoder_small", ENCODER), ("cnn_small", CNN)])
def test_greedy_plan_matches_reference_and_pytorch(name, path):
    x, torch_y = example_io(name)
    exe = fusetune.compile(path)
    y = exe.run({"x": x})["y"]
    assert y.dtype == np.float32 and y.shape == torch_y.shape
    reference = fusetune.run_reference(path, {"x": x})["y"]
    assert relative_error(y, reference) < 1e-4
    assert relative_error(y, torch_y) < 1e-4


def test_tuned_plan_matches_reference(tuned):
    db, summary = tuned
    x, _ = example_io("encoder_small")
    exe = fusetune.compile(ENCODER, db=db)
    assert exe.explain()["sources"].get("whole-model", 0) > 0  # the job measured whole plans
    y = exe.run({"x": x})["y"]
    assert relative_error(y, fusetune.run_reference(ENCODER, {"x": x})["y"]) < 1e-4


def test_model_as_path_bytes_and_proto_round_trip():
    x, _ = example_io("encoder_small")
    with open(ENCODER, "rb") as f:
        data = f.read()
    outputs = [fusetune.compile(model).run({"x": x})["y"]
               for model in (ENCODER, data, onnx.load(ENCODER))]
    np.testing.assert_array_equal(outputs[0], outputs[1])
    np.testing.assert_array_equal(outputs[0], outputs[2])


def test_input_forms_and_copies_agree():
    """A dict, a list, one array; aligned arrays read in place, unaligned,
    strided and float64 ones copied: the same outputs."""
    x, _ = example_io("encoder_small")
    exe = fusetune.compile(ENCODER)
    assert exe.input_names == ["x"] and exe.output_names == ["y"]
    assert exe.input_shape("x") == list(x.shape)
    expected = exe.run({"x": x})["y"]
    aligned, unaligned = offset_copy(x, 0), offset_copy(x, 1)
    assert aligned.ctypes.data % 64 == 0 and unaligned.ctypes.data % 64 != 0
    strided = np.asfortranarray(x)
    for given in ({"x": aligned}, {"x": unaligned}, {"x": strided}, {"x": x.astype(np.float64)},
                  [x], x):
        np.testing.assert_array_equal(exe.run(given)["y"], expected)


def test_outputs_are_owned_arrays():
    x, _ = example_io("encoder_small")
    exe = fusetune.compile(ENCODER)
    first = exe.run(x)["y"]
    kept = first.copy()
    exe.run(x + 1)  # a later run does not write into an earlier run's outputs
    np.testing.assert_array_equal(first, kept)
    assert first.flags.writeable and first.flags.c_contiguous


def test_integer_inputs_take_whole_numbers(tmp_path):
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["y"])], "embedding",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor("table", TensorProto.FLOAT, [10, 4], table.ravel())])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    exe = fusetune.compile(model)
    ids = np.array([1, 7, 3])
    np.testing.assert_array_equal(exe.run({"ids": ids})["y"], table[ids])
    with pytest.raises(fusetune.InvalidArgumentError, match="not a whole number"):
        exe.run({"ids": np.array([1.5, 2, 3])})
    with pytest.raises(fusetune.InvalidArgumentError, match="beyond 2\\^24"):
        exe.run({"ids": np.array([1, 2, 1 << 30])})


def test_explain_gives_each_group_as_data(tuned):
    exe = fusetune.compile(ENCODER, db=tuned[0])
    e = exe.explain()
    assert e["groups"] and sum(e["sources"].values()) == len(e["groups"])
    for g in e["groups"]:
        assert set(g) >= {"nodes", "kernel", "tiling", "source", "measured_ms", "predicted_ms",
                          "why", "workload_key", "record"}
        assert g["source"] in e["sources"]
    assert len(e["plan"]["groups"]) == len(e["groups"])  # the plan file, loadable by `run --plan`


def test_benchmark():
    exe = fusetune.compile(ENCODER)
    b = exe.benchmark(20)
    assert b["runs"] == 20 and 0 < b["min_ms"] <= b["median_ms"] <= b["p90_ms"]
    x, _ = example_io("encoder_small")
    assert exe.benchmark(5, inputs={"x": x}, warmup=0)["runs"] == 5


def test_torch_arrays_are_aligned_for_zero_copy():
    torch = pytest.importorskip("torch")
    assert torch.randn(1, 32, 64).numpy().ctypes.data % 64 == 0
