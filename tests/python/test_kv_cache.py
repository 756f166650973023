"""The KV cache kept in place from Python (compile(kv_cache_in_place=True)):
a decode step of examples/llama_generate's exported decoder appends its row
to the caches the executable keeps, and equals the reference executor run on
the model as exported (the past fed, the present concatenated)."""

import os
import subprocess
import sys

import numpy as np
import pytest

import fusetune
from conftest import EXAMPLES, relative_error

LAYERS, HEADS, HEAD_DIM, VOCAB = 2, 4, 16, 64
PAST, CAPACITY = 9, 16


@pytest.fixture(scope="module")
def decode_model(tmp_path_factory):
    """decode.onnx of a 2-layer LLaMA-style model (PyTorch, random weights)."""
    out = tmp_path_factory.mktemp("llama")
    subprocess.run([sys.executable, "-W", "ignore",
                    os.path.join(EXAMPLES, "llama_generate", "export_llama.py"), str(out),
                    "--layers", str(LAYERS), "--d", str(HEADS * HEAD_DIM), "--heads", str(HEADS),
                    "--ff", "96", "--vocab", str(VOCAB), "--prompt", "6", "--steps", "2",
                    "--max-seq", "64"], check=True, stdout=subprocess.DEVNULL)
    return str(out / "decode.onnx")


def cache_names(kind):
    return [f"{kind}_{k}_{i}" for i in range(LAYERS) for k in "kv"]


def random_rows(rows):
    rng = np.random.default_rng(3)
    return {name: rng.standard_normal((1, HEADS, rows, HEAD_DIM)).astype(np.float32)
            for name in cache_names("past")}


def test_a_step_appends_its_row_and_equals_the_model_as_exported(decode_model):
    exe = fusetune.compile(decode_model, dims={"past": CAPACITY - 1}, kv_cache_in_place=True)
    assert exe.cache_capacity == CAPACITY
    assert "past_k_0" not in exe.input_names and "present_k_0" not in exe.output_names
    past = random_rows(PAST)
    assert exe.load_cache(past) == PAST
    ids, pos = np.array([[5]], dtype=np.int64), np.array([PAST], dtype=np.int64)
    got = exe.run({"ids": ids, "pos": pos})
    assert exe.cache_length == PAST + 1
    want = fusetune.run_reference(decode_model, {"ids": ids, "pos": pos, **past},
                                  dims={"past": PAST})
    assert relative_error(got["logits"], want["logits"]) < 1e-4
    for past_name, present_name in zip(cache_names("past"), cache_names("present")):
        rows = exe.cache_rows(past_name)
        assert rows.shape == (1, HEADS, PAST + 1, HEAD_DIM)
        assert relative_error(rows, want[present_name]) < 1e-5
    assert exe.load_cache({}) == 0 and exe.cache_length == 0


def test_a_cache_of_another_shape_is_an_error_naming_it(decode_model):
    exe = fusetune.compile(decode_model, dims={"past": CAPACITY - 1}, kv_cache_in_place=True)
    rows = random_rows(PAST)
    rows["past_v_1"] = rows["past_v_1"][:, :, :PAST - 1]
    with pytest.raises(fusetune.Error, match="past_v_1"):
        exe.load_cache(rows)
    too_many = random_rows(CAPACITY + 1)
    with pytest.raises(fusetune.Error):
        exe.load_cache(too_many)
    with pytest.raises(fusetune.Error, match="nope"):
        exe.cache_rows("nope")


def test_without_it_there_are_no_caches_to_load(decode_model):
    exe = fusetune.compile(decode_model, dims={"past": PAST})
    assert exe.cache_capacity == 0 and exe.cache_length == 0
    assert "past_k_0" in exe.input_names
    with pytest.raises(fusetune.Error):
        exe.load_cache(random_rows(PAST))
