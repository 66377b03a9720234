"""Tiers of a front (issue 44 §2): greedy from the best member, tier 1 = the members the best cannot be told
from; the forge-verify command that decides inside a tier, and how long it takes under the run's protocol."""
from __future__ import annotations

import json

import numpy as np
import pytest

from search.archive import loss_overlap
from search.tiers import decide_lines, loss_tiers, tier_sizes, training_time
from search.verify import VerifyError, run
from tests.search.test_verify import _parts, fake_run  # noqa: F401 (fixture)


def _rows(spec):
    return [{"id": f"{j:016x}", "metrics": {"val_loss": mu, "loss_lo": lo, "loss_hi": hi}}
            for j, (mu, lo, hi) in enumerate(spec)]


def test_tiers_are_greedy_from_the_best_and_tier_one_is_the_overlap_with_the_best():
    rows = _rows([(2.30, 2.2, 2.4), (2.00, 1.9, 2.1), (2.15, 2.05, 2.25), (2.50, 2.45, 2.55), (2.32, 2.26, 2.38)])
    tiers = loss_tiers(rows)
    # best [1.9, 2.1] takes 2.15; next best unplaced 2.30 [2.2, 2.4] takes 2.32; 2.50 overlaps neither opener
    assert tiers.tolist() == [2, 1, 1, 3, 2] and tier_sizes(tiers) == [2, 2, 1]
    assert (tiers == 1).tolist() == loss_overlap(rows)[0].tolist()
    assert loss_tiers(rows[::-1]).tolist() == tiers[::-1].tolist()  # the row order changes nothing


def test_no_interval_no_tiers_and_no_command():
    rows = _rows([(2.0, float("nan"), float("nan")), (2.1, 2.0, 2.2)])
    assert loss_tiers(rows) is None and tier_sizes(None) == []
    assert decide_lines("run", rows, None, {}) == []
    assert decide_lines("run", _rows([(2.0, 1.9, 2.1)]), np.array([1]), {}) == []  # one member: nothing to decide


def test_training_time_scales_with_the_protocol_budget_and_k():
    paper = {"name": "paper", "tokens": 655_000_000, "accelerator": "gpu"}
    assert training_time(paper, 4) == "about 6 h 00 min to 8 h 00 min on one H100, one after another"
    cpu = {"name": "cpu-proxy", "tokens": 32768, "accelerator": "cpu"}
    assert training_time(cpu, 2) == "about 8 s to 13 s on one CPU core, one after another"
    assert training_time({"name": "x"}, 4) == ""
    rows = _rows([(2.0, 1.9, 2.1), (2.05, 1.95, 2.15), (2.08, 2.0, 2.2)])
    line, cmd = decide_lines("runs/a", rows, loss_tiers(rows), paper)
    assert "tier 1: 3 members" in line and "train 3" in line and "4 h 30 min to 6 h 00 min on one H100" in line
    assert cmd == "forge-verify run=runs/a tier=1 k=3 control=0"


def test_verify_tier_trains_only_that_tiers_members(fake_run, tiny_space, tmp_path):  # noqa: F811
    rows = [json.loads(x) for x in (fake_run / "pareto.jsonl").read_text().splitlines()]
    for r in rows:  # a narrow interval: several tiers
        r["metrics"]["loss_lo"], r["metrics"]["loss_hi"] = r["metrics"]["mu"] - 1e-3, r["metrics"]["mu"] + 1e-3
    (fake_run / "pareto.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    tiers = loss_tiers(rows)
    t = int(np.argmax(np.bincount(tiers)))  # the largest tier
    members = {r["id"] for r, x in zip(rows, tiers) if x == t}
    out = run({"run": str(fake_run), "k": 2, "control": 0, "tier": t}, _parts(tiny_space, tmp_path / "l.db"))
    assert {r["id"] for r in out["picks"]} <= members and len(out["picks"]) == min(2, len(members))
    assert out["tier"] == t
    with pytest.raises(VerifyError, match=r"tier=99: allowed: a tier number 1\.\."):
        run({"run": str(fake_run), "k": 2, "control": 0, "tier": 99}, _parts(tiny_space, tmp_path / "l.db"))
