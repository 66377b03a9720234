"""front.csv / archive.csv / history.csv beside the JSONL, and forge-report's runs.csv (issue 28 §2)."""
from __future__ import annotations

import csv
import json

from search.state import read_jsonl
from search.tables import compare_runs, genome_row, read_front


def _csv(path):
    return list(csv.DictReader(path.open(encoding="utf-8")))


def test_a_search_leaves_one_csv_row_per_genome_beside_the_jsonl(make_search, tmp_path):
    s = make_search(tmp_path)
    s.run()
    front, archive, hist = _csv(tmp_path / "front.csv"), _csv(tmp_path / "archive.csv"), _csv(tmp_path / "history.csv")
    pareto, evaluated = read_jsonl(tmp_path / "pareto.jsonl"), read_jsonl(tmp_path / "archive.jsonl")
    assert [r["id"] for r in front] == [r["id"] for r in pareto]
    assert [r["id"] for r in archive] == [r["id"] for r in evaluated] and len(archive) > len(front)
    cols = list(front[0])
    assert cols[:7] == ["id", "generation", "feasible", "val_loss", "ttft_ms", "tpot_ms", "energy_per_token_uj"]
    assert {"loss_lo", "loss_hi", "params", "layers"} <= set(cols)
    for row, rec in zip(front, pareto):
        assert float(row["val_loss"]) == rec["metrics"]["val_loss"] and int(row["generation"]) == rec["generation"]
    assert [int(r["generation"]) for r in hist] == list(range(5))
    assert [float(r["hv"]) for r in hist] == [h["hv"] for h in read_jsonl(tmp_path / "history.jsonl")]
    assert all(float(r["eval_s"]) >= 0 and int(r["front_size"]) >= 1 for r in hist)


def test_history_csv_after_stop_and_resume_has_each_generation_once(make_search, tmp_path):
    assert make_search(tmp_path).run(stop_after=1)["status"] == "stopped"
    with (tmp_path / "history.csv").open("a") as f:  # a generation logged after the checkpoint (then killed)
        f.write("2,0,0,0,0,0,0,0,0,0,0,0,0\n")
    s = make_search(tmp_path)
    s.load()
    s.run()
    assert [int(r["generation"]) for r in _csv(tmp_path / "history.csv")] == list(range(5))


def test_genome_row_flattens_metrics_interval_and_design():
    rec = {"id": "abc", "generation": 3, "feasible": True, "reason": "",
           "metrics": {"val_loss": 2.5, "tpot_ms": 1.0, "loss_lo": 2.4, "loss_hi": 2.6, "params": 10.0, "area": 3.0},
           "genome": {"layers": [{}, {}]}, "design": {"batch": 4}}
    row = genome_row(rec, ["val_loss", "tpot_ms"])
    assert list(row)[:5] == ["id", "generation", "feasible", "val_loss", "tpot_ms"]
    assert row["loss_lo"] == 2.4 and row["area"] == 3.0 and row["layers"] == 2 and row["design.batch"] == 4


def test_compare_runs_reads_each_front(make_search, tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        make_search(d).run()
    (dirs[1] / "front.csv").unlink()  # a run from before the CSVs: derived from pareto.jsonl
    summaries = [json.loads((d / "summary.json").read_text()) for d in dirs]
    rows = compare_runs(dirs, summaries, tmp_path / "runs.csv")
    assert [r["front_size"] for r in rows] == [len(read_front(d)) for d in dirs]
    assert rows[0]["best.val_loss"] == min(r["metrics"]["val_loss"] for r in read_jsonl(dirs[0] / "pareto.jsonl"))
    assert [r["run"] for r in _csv(tmp_path / "runs.csv")] == [str(d) for d in dirs]
