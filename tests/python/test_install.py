"""`cmake --install` puts the package under <prefix>/lib/python3/dist-packages,
and the installed package finds the worker installed beside it."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import ENCODER

BUILD = os.environ.get("FUSETUNE_BUILD_DIR")

SCRIPT = """
import sys, numpy as np, fusetune
prefix, model, db = sys.argv[1:]
assert fusetune.__file__.startswith(prefix), fusetune.__file__
assert fusetune.worker_path() == prefix + "/bin/fusetune-worker", fusetune.worker_path()
summary = fusetune.tune(model, db=db, trials=4)
y = fusetune.compile(model, db=db).run(np.zeros((1, 32, 64), np.float32))["y"]
print("installed ok", summary["trials"], y.shape)
"""


@pytest.mark.skipif(not BUILD, reason="FUSETUNE_BUILD_DIR names no build to install")
def test_installed_package_finds_its_worker(tmp_path, fresh_db):
    prefix = str(tmp_path / "prefix")
    subprocess.run(["cmake", "--install", BUILD, "--prefix", prefix], check=True,
                   capture_output=True)
    db = str(tmp_path / "installed.db")
    shutil.copy(fresh_db, db)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FUSETUNE_WORKER")}
    env["PYTHONPATH"] = os.path.join(prefix, "lib", "python3", "dist-packages")
    done = subprocess.run([sys.executable, "-c", SCRIPT, prefix, ENCODER, db], env=env,
                          capture_output=True, text=True, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "installed ok 4 (1, 32, 64)" in done.stdout
