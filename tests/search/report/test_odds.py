"""What the front says about loss (issue 51): p #1 and groups read off the run's calibrated odds, the decide line,
and what `forge-verify` trains by default (the best-predicted members)."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from search.odds import decide_k, decide_lines, group_sizes, loss_groups, p_best, run_odds, training_time
from search.picks import best_picks, choose_picks, front_picks
from search.verify import VerifyError, run
from surrogate.pairwise import PairwiseOdds
from tests.search.verify.test_verify import _parts, fake_run  # noqa: F401 (fixture)

ODDS = PairwiseOdds((0.0, 0.05, 0.2), (0.5, 0.8, 0.95))


def _rows(mus):
    return [{"id": f"{j:016x}", "metrics": {"val_loss": mu, "mu": mu}} for j, mu in enumerate(mus)]


def test_p_best_is_the_curve_at_each_members_gap_to_the_best_predicted():
    rows = _rows([2.10, 2.00, 2.05, 2.50])
    p = p_best(rows, ODDS)  # interpolated between knots, clipped past the last, 2 decimals
    assert math.isnan(p[1]) and p[2] == 0.8 and p[3] == 0.95 and p[0] == 0.85
    assert p_best(rows, None) is None and p_best([], ODDS) is None


def test_groups_open_where_the_groups_first_member_wins_at_0_9_and_ignore_row_order():
    rows = _rows([2.30, 2.00, 2.05, 2.50, 2.32])
    g = loss_groups(rows, ODDS)
    # 2.00 heads group 1: 2.05 (p 0.80) stays; 2.30 (p 0.95) opens group 2 with 2.32 (p 0.62); 2.50 (p 0.95 vs 2.30)
    assert g.tolist() == [2, 1, 1, 3, 2] and group_sizes(g) == [2, 2, 1]
    assert loss_groups(rows[::-1], ODDS).tolist() == g[::-1].tolist()
    assert loss_groups(rows, None) is None and group_sizes(None) == []


def test_decide_trains_the_best_predicted_and_says_how_long():
    paper = {"name": "paper", "tokens": 655_000_000, "accelerator": "gpu"}
    assert training_time(paper, 4) == "about 6 h 00 min to 8 h 00 min on one H100, one after another"
    assert training_time({"name": "cpu-proxy", "tokens": 32768, "accelerator": "cpu"}, 2) == (
        "about 8 s to 13 s on one CPU core, one after another")
    rows = _rows([2.0, 2.01, 2.02, 2.03, 2.04, 2.05, 3.0])
    *said, cmd = decide_lines("runs/a", rows, ODDS, paper)
    assert cmd == "forge-verify run=runs/a k=4 control=0" and "6 h 00 min to 8 h 00 min" in said[-1]
    assert "6 members are not beaten by the best-predicted one with p >= 0.9" in said[0]
    assert "cannot" not in " ".join(said) and "1 in 20" in " ".join(said)
    assert decide_k(1, 5) == 2 and decide_k(3, 5) == 3 and decide_k(9, 9) == 4 and decide_k(1, 1) == 1
    assert decide_lines("r", rows[:1], ODDS, paper) == [] and decide_lines("r", rows, None, paper) == []


def test_a_damaged_recorded_curve_reads_as_no_odds():
    assert run_odds({"loss_pairwise": {"x": [0, 1], "p": [0.9, 0.6]}}) is None  # decreasing: not a calibration
    assert run_odds({"loss_pairwise": ODDS.to_dict()}).p == ODDS.p and run_odds({}) is None


def test_best_picks_are_the_lowest_mu_and_spread_is_one_setting_away():
    rows = _rows([2.3, 2.0, 2.1, 2.6, 2.05])
    for r, c in zip(rows, [1.0, 9.0, 5.0, 0.5, 7.0]):
        r["metrics"]["tpot_ms"] = c
    assert [r["metrics"]["mu"] for _, r in best_picks(rows, 3)] == [2.0, 2.05, 2.1]
    assert [role for role, _ in best_picks(rows, 2)] == ["best:1", "best:2"]
    spread = choose_picks(rows, ["val_loss", "tpot_ms"], 3, "spread")
    assert spread == front_picks(rows, ["val_loss", "tpot_ms"], 3) != best_picks(rows, 3)
    with pytest.raises(Exception, match=r"pick='knee' is unknown; allowed: best \| spread"):
        choose_picks(rows, ["val_loss"], 2, "knee")


def test_verify_k4_trains_the_best_predicted_members_by_default(fake_run, tiny_space, tmp_path):  # noqa: F811
    rows = [json.loads(x) for x in (fake_run / "pareto.jsonl").read_text().splitlines()]
    order = sorted(rows, key=lambda r: (r["metrics"]["mu"], r["id"]))
    out = run({"run": str(fake_run), "k": 4, "control": 0}, _parts(tiny_space, tmp_path / "l.db"))
    want = [r["id"] for r in order[:4]]
    assert [r["id"] for r in out["picks"]][:len(want)] == want and out["pick"] == "best"
    with pytest.raises(VerifyError, match=r"tier=1 is gone .* allowed: pick=best"):
        run({"run": str(fake_run), "k": 2, "control": 0, "tier": 1}, _parts(tiny_space, tmp_path / "l.db"))


def test_the_old_tiers_path_warns_and_names_its_replacement():
    import importlib
    import sys

    sys.modules.pop("search.tiers", None)
    with pytest.warns(DeprecationWarning, match="search.odds"):
        mod = importlib.import_module("search.tiers")
    assert mod.training_time is training_time


def test_under_a_constraint_the_statements_are_about_the_feasible_members(tmp_path, tiny_space):
    """The odds are read over the front, which holds only members that meet the run's constraints: the best-
    predicted member they are compared with is the best feasible one, not a lower-μ genome that broke a budget."""
    from backends.interface import Workload
    from search.build import build_search
    from search.evaluators import LossEvaluator
    from search.state import read_jsonl
    from tests.search.conftest import tiny_cfg
    from tests.search.fakes import FakeBackend, FakePredictor

    class Odd(FakePredictor):
        pairwise = ODDS

    free, capped = tmp_path / "free", tmp_path / "capped"
    for d, cons in ((free, ["val_loss < 3.8"]), (capped, ["val_loss < 3.8", "ttft_ms <= 0.006"])):
        build_search(tiny_cfg(constraints=cons), d, {"space": tiny_space, "evaluator": LossEvaluator(Odd()),
                                                     "backend": FakeBackend(), "workload": Workload()}).run()
    s = json.loads((capped / "summary.json").read_text())
    front = read_jsonl(capped / "pareto.jsonl")
    assert front and all(r["metrics"]["ttft_ms"] <= 0.006 for r in front)
    assert sum(s["loss_pairwise"]["groups"]) == len(front) == s["archive_size"]
    best = min(r["metrics"]["mu"] for r in front)
    infeasible = [r for r in read_jsonl(capped / "archive.jsonl") if r["metrics"]["ttft_ms"] > 0.006]
    assert infeasible, "the cap must bind for this test to mean anything"
    p = p_best(front, run_odds(s))  # against the best feasible member: the front's own best
    want = ODDS.prob([r["metrics"]["mu"] - best for r in front])
    assert np.isnan(p).sum() == 1 and front[int(np.flatnonzero(np.isnan(p))[0])]["metrics"]["mu"] == best
    assert np.array_equal(p[~np.isnan(p)], want[~np.isnan(p)])
