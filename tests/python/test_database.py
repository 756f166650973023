"""fusetune.Database: statistics, best plans, records and jobs as dicts;
export and import round trip; merge; the integrity check."""

import pytest

import fusetune


def test_stats_best_plans_and_records(tuned):
    db = fusetune.Database(tuned[0])
    stats = db.stats()
    assert stats["db"] == tuned[0] and stats["jobs"] >= 1 and stats["records"] > 0
    plans = db.best_plans()
    assert plans and all({"workload", "record", "seconds", "plan"} <= set(p) for p in plans)
    one = db.best(plans[0]["workload"])
    assert one["record"] == plans[0]["record"]
    records = db.records()
    assert len(records) == stats["records"]
    first = next(iter(records))
    assert {"id", "workload", "target", "plan", "status", "seconds", "metrics", "job"} <= set(first)
    assert isinstance(first["plan"], dict) and isinstance(first["metrics"], dict)
    ok = list(db.records(status="ok", workload=plans[0]["workload"]))
    assert ok and all(r["status"] == "ok" and r["workload"] == plans[0]["workload"] for r in ok)
    assert db.jobs()[0]["has_summary"]


def test_export_import_and_merge_round_trip(tuned, tmp_path):
    db = fusetune.Database(tuned[0])
    records = db.stats()["records"]
    exported = db.export(str(tmp_path / "records.jsonl"))
    assert exported["records_read"] == records
    copy = fusetune.Database(str(tmp_path / "copy.db"), create=True)
    assert copy.import_(str(tmp_path / "records.jsonl"))["records_added"] == records
    assert copy.import_(str(tmp_path / "records.jsonl"))["records_added"] == 0  # duplicates skipped
    merged = fusetune.Database(str(tmp_path / "merged.db"), create=True)
    summaries = merged.merge(tuned[0], copy.path)
    assert [s["records_added"] for s in summaries] == [records, 0]
    assert merged.stats()["records"] == records
    assert len(merged.best_plans()) == len(db.best_plans())
    merged.check()


def test_database_errors(tmp_path, tuned):
    with pytest.raises(fusetune.NotFoundError, match="cannot open"):
        fusetune.Database(str(tmp_path / "missing.db"))
    text = tmp_path / "text.db"
    text.write_text("not a database at all, just text, long enough to fill a header of one "
                    "hundred bytes......\n")
    with pytest.raises(fusetune.CorruptError, match="not a database"):
        fusetune.Database(str(text))
    db = fusetune.Database(tuned[0])
    with pytest.raises(fusetune.NotFoundError, match="no fresh best plan"):
        db.best("ffffffffffffffff")
    with pytest.raises(fusetune.ParseError, match="unknown record status 'splendid'"):
        db.records(status="splendid")
