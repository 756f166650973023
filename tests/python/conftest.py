"""Shared fixtures of the Python module's tests (run by ctest as python.pytest,
or by hand: PYTHONPATH=build/python python3 -m pytest tests/python).

One database is calibrated once per session (calibration takes seconds) and
one short tuning job (20 trials) of the bundled encoder is run into it; the
tests that need a tuned database share it."""

import os
import shutil

import numpy as np
import pytest

import fusetune

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLES = os.path.join(SOURCE, "examples")
ENCODER = os.path.join(EXAMPLES, "encoder_small.onnx")
CNN = os.path.join(EXAMPLES, "cnn_small.onnx")


def example_io(name):
    """The bundled model's input and PyTorch's output."""
    return (np.load(os.path.join(EXAMPLES, f"{name}.in.x.npy")),
            np.load(os.path.join(EXAMPLES, f"{name}.out.y.npy")))


def relative_error(got, expected):
    return float(np.abs(got - expected).max() / max(np.abs(expected).max(), 1e-30))


@pytest.fixture(scope="session")
def session_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fusetune")


@pytest.fixture(scope="session")
def calibration(session_dir):
    """This machine's calibration, stored in the session's database."""
    return fusetune.calibrate(db=str(session_dir / "tune.db"))


@pytest.fixture(scope="session")
def tuned(session_dir, calibration):
    """(database path, summary) after a 20-trial job on the encoder."""
    db = str(session_dir / "tune.db")
    return db, fusetune.tune(ENCODER, db=db, trials=20)


@pytest.fixture
def fresh_db(tmp_path, tuned):
    """A copy of the tuned database for a test that writes."""
    path = str(tmp_path / "copy.db")
    shutil.copy(tuned[0], path)
    return path


@pytest.fixture(scope="session")
def cli():
    """The fusetune command of the same build, for comparing messages."""
    path = os.environ.get("FUSETUNE_CLI")
    if not path or not os.access(path, os.X_OK):
        pytest.skip("FUSETUNE_CLI does not name the fusetune command")
    return path
