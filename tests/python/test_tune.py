"""calibrate(), tune() and its progress, the GIL released while it works,
Ctrl-C ending a job with its summary, report()."""

import os
import signal
import threading
import time

import pytest

import fusetune
from conftest import ENCODER


def test_calibrate_gives_target_and_roofline(calibration):
    assert calibration["target"]["hash"] and calibration["target"]["logical_cpus"] >= 1
    roof = calibration["roofline"]
    assert roof["peak_gflops"] == calibration["fma_gflops"] > 0
    assert roof["dram_read_gbps"] > 0
    assert roof["ridge_flop_per_byte"] == pytest.approx(roof["peak_gflops"] / roof["dram_read_gbps"])


def test_tune_summary_as_the_cli_gives_it(tuned):
    db, summary = tuned
    assert summary["trials"] == 20 and summary["stop_reason"] == "trials"
    assert not summary["interrupted"] and summary["db"] == db and summary["job"] >= 1
    assert summary["tasks"] and summary["best"]["seconds"] > 0
    assert "whole model:" in str(summary) and str(summary).startswith(f"job {summary['job']} in ")


def test_progress_is_reported(fresh_db):
    seen = []
    fusetune.tune(ENCODER, db=fresh_db, trials=8, seed=2, progress=seen.append)
    assert seen and seen[-1]["trials"] == 8 and seen[-1]["max_trials"] == 8
    assert {"seconds", "tasks", "tasks_converged", "best_ms", "unfused_ms", "current"} <= set(seen[-1])


def test_an_exception_in_progress_stops_the_job_and_is_raised(fresh_db):
    def fail(progress):
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        fusetune.tune(ENCODER, db=fresh_db, trials=1000, seed=3, progress=fail)
    states = [job["state"] for job in fusetune.Database(fresh_db).jobs()]
    assert states[-1] == "interrupted"  # committed, resumable


def test_ctrl_c_commits_and_returns_the_summary(fresh_db):
    """SIGINT during the job: it ends as `fusetune tune` does, what it measured kept."""
    started = threading.Event()

    def interrupt():
        started.wait(30)
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    summary = fusetune.tune(ENCODER, db=fresh_db, time="5m", seed=4,
                            progress=lambda p: started.set())
    assert summary["interrupted"] and summary["stop_reason"] == "interrupted"
    assert summary["trials"] > 0
    assert fusetune.Database(fresh_db).jobs()[-1]["state"] == "interrupted"
    resumed = fusetune.tune(ENCODER, db=fresh_db, trials=summary["trials"] + 4, resume=True)
    assert resumed["job"] == summary["job"] and not resumed["interrupted"]


def test_the_gil_is_released_while_tuning(fresh_db):
    """A Python thread keeps running through the job: the longest pause
    between its steps is a small part of the job's time."""
    steps, stop = [], threading.Event()

    def count():
        while not stop.is_set():
            steps.append(time.monotonic())
            time.sleep(0.002)

    thread = threading.Thread(target=count)
    thread.start()
    start = time.monotonic()
    fusetune.tune(ENCODER, db=fresh_db, trials=30, seed=5)
    end = time.monotonic()
    stop.set()
    thread.join()
    during = [t for t in steps if start <= t <= end]
    gaps = [b - a for a, b in zip(during, during[1:])]
    # Holding the GIL through the job would leave no step at all inside it.
    assert len(during) > 20, (len(during), end - start)
    assert max(gaps) < 0.75 * (end - start), (max(gaps), end - start)


def test_budget_and_argument_errors(fresh_db):
    with pytest.raises(fusetune.InvalidArgumentError, match="give a budget"):
        fusetune.tune(ENCODER, db=fresh_db)
    with pytest.raises(fusetune.InvalidArgumentError, match="bad duration 'soon'"):
        fusetune.tune(ENCODER, db=fresh_db, time="soon")
    with pytest.raises(fusetune.InvalidArgumentError, match="caches 'hot'"):
        fusetune.tune(ENCODER, db=fresh_db, trials=1, caches="hot")
    with pytest.raises(fusetune.NotFoundError, match="fusetune-worker is not at"):
        fusetune.tune(ENCODER, db=fresh_db, trials=1, worker="/nonexistent/fusetune-worker")


def test_report_gives_tables_and_svg_plots(tuned, tmp_path):
    db, summary = tuned
    report = fusetune.report(db, job=summary["job"])
    assert report.job == summary["job"] and report.summary["trials"] == 20
    assert "whole model:" in report.text and report.text.startswith(f"job {summary['job']} (done)")
    assert sorted(report.plots) == ["predicted_vs_measured.svg", "roofline.svg",
                                    "tuning_curves.svg", "whole_model.svg"]
    for svg in report.plots.values():
        assert "<svg" in svg._repr_svg_()
    assert report._repr_html_().count("<svg") == 4
    assert len(report.save(str(tmp_path / "plots"))) == 4
    with pytest.raises(fusetune.NotFoundError, match="no job 99"):
        fusetune.report(db, job=99)
