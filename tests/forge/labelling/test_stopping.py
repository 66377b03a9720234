"""The stopping rule: the curve model's projection, P(enter the front) with exact costs, the baselines (ASHA,
syne-tune's MOASHA) behind one interface, and the race of forge-verify."""
from __future__ import annotations

import math

import numpy as np
import pytest

from forge.fidelity.race import Entrant, race_plan, race_step
from forge.fidelity.stopping import (AshaRule, Context, CurveModel, FrontRule, StopError, build_rule, fit_curve_model,
                                     p_enter, rule_spec)
from forge.labelling.curves import decider


def _curves(n=40, seed=0):
    """Synthetic curves whose final is a noisy linear map of each rung (the model must recover it)."""
    rng = np.random.default_rng(seed)
    final = rng.normal(3.0, 0.1, n)
    return np.column_stack([final + 1.0 + rng.normal(0, 0.05, n), final + 0.4 + rng.normal(0, 0.02, n),
                            final + 0.1 + rng.normal(0, 0.01, n), final])


def test_curve_model_recovers_the_map_and_its_out_of_sample_spread():
    L = _curves()
    m = fit_curve_model(L, "last")
    assert m.sd[0] > m.sd[1] > m.sd[2]  # later rungs tell more
    assert 0.03 < m.sd[0] < 0.09 and m.sd[2] < 0.02
    mean, sd = m.predict(2, [4.0, 3.4, 3.1])
    assert mean == pytest.approx(3.0, abs=0.02) and sd == m.sd[2]
    assert CurveModel.from_dict(m.to_dict()) == m
    with pytest.raises(StopError, match="needs the surrogate's prior"):
        fit_curve_model(L, "prior")
    with pytest.raises(StopError, match="one finite coefficient row"):
        CurveModel.from_dict({"kind": "last", "coef": [[1.0, 1.0]], "sd": [-1.0]})


def test_p_enter_uses_only_members_that_are_no_costlier():
    front = [("cheap", [1.0, 1.0], 3.0), ("dear", [5.0, 5.0], 2.0)]
    p, who, best = p_enter(3.2, 0.1, [2.0, 2.0], front)  # only "cheap" can dominate it
    assert who == "cheap" and best == 3.0 and p == pytest.approx(0.0228, abs=1e-3)
    assert p_enter(3.2, 0.1, [0.5, 0.5], front)[:2] == (1.0, "")  # cheaper than every member: it enters
    assert p_enter(3.2, 0.1, [2.0, 0.5], front)[0] == 1.0  # one cost below all: nobody dominates it


def test_front_rule_stops_with_its_reason_and_lets_hopefuls_on():
    m = fit_curve_model(_curves(), "last")
    rule = FrontRule(m, 0.05)
    ctx = Context([2.0, 2.0], None, [("a" * 16, [1.0, 1.0], 3.0)])
    v = rule.decide(1, [4.5, 3.6], ctx)  # projected ~3.2: cannot beat 3.0
    assert v is not None and v["dominated_by"] == "a" * 16 and v["interval"][0] < v["projected"] < v["interval"][1]
    assert "P(enter front)" in v["reason"] and v["p_enter"] < 0.05
    assert rule.decide(1, [3.9, 3.2], ctx) is None  # projected ~2.8: can enter
    assert rule.decide(0, [math.nan], ctx)["reason"].startswith("non-finite")


def test_asha_keeps_the_top_third_of_each_rung_so_far():
    peers = {f"p{i}": ([1.0], [3.0 + 0.1 * i], None) for i in range(5)}
    ctx = Context([1.0], None, [], peers, "me")
    assert AshaRule(3).decide(0, [3.05], ctx) is None  # rank 2 of 6: top ceil(6/3) = 2
    assert AshaRule(3).decide(0, [3.15], ctx)["rank"] == 3
    assert AshaRule(3).decide(0, [9.0], Context([1.0], gid="me")) is None  # the first result always goes on


def test_moasha_runs_through_syne_tune_and_stops_dominated_trials():
    pytest.importorskip("syne_tune", reason="the moasha extra; installed by the test extra, so CI runs this")
    rule = build_rule({"rule": "moasha", "eta": 3, "steps": [4, 12, 36, 108]})
    peers = {f"p{i}": ([0.5 + 0.01 * i, 0.5], [2.5 + 0.01 * i], None) for i in range(6)}
    ctx = Context([2.0, 2.0], None, [], peers, "me")
    assert rule.decide(0, [4.0], ctx) is not None  # dominated in every metric: syne-tune's MOASHA stops it
    assert rule.decide(0, [1.0], Context([0.1, 0.1], None, [], peers, "me")) is None  # dominates them all
    shipped = build_rule({"rule": "moasha", "eta": 3, "steps": [4, 12, 36, 108], "priority": "syne"})
    # syne-tune's default priority ranks by index order, so it stops the trial that dominates every other one
    assert shipped.decide(0, [1.0], Context([0.1, 0.1], None, [], peers, "me")) is not None


def test_moasha_without_syne_tune_says_how_to_install(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_syne(name, *a, **k):
        if name.startswith("syne_tune"):
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_syne)
    with pytest.raises(StopError, match=r"pip install -e '\.\[moasha\]'"):
        build_rule({"rule": "moasha"}).decide(0, [3.0], Context([1.0]))


def test_rule_spec_is_checked_in_the_caller_and_decides_in_the_worker(tmp_path):
    m = fit_curve_model(_curves(), "last")
    with pytest.raises(StopError, match="allowed: 0 < threshold < 1"):
        rule_spec("front", {}, threshold=1.5, model=m.to_dict())
    with pytest.raises(StopError, match="needs a curve model"):
        rule_spec("front", {})
    with pytest.raises(StopError, match="allowed: none, front"):
        rule_spec("bogus", {})
    spec = rule_spec("front", {"g1": {"costs": [2.0, 2.0], "prior": None}},
                     front=[{"id": "m1", "costs": [1.0, 1.0], "loss": 3.0}], model=m.to_dict())
    decide = decider(spec, "g1")
    assert decide(1, [{"val_loss": 4.5}, {"val_loss": 3.6}])["dominated_by"] == "m1"
    assert decider(spec, "unknown")(1, [{"val_loss": 9.0}, {"val_loss": 9.0}]) is None  # no costs: train in full


def test_rung_thresholds_decide_per_rung_and_are_checked(tmp_path):
    m = fit_curve_model(_curves(), "last")
    ctx = Context([2.0, 2.0], None, [("a" * 16, [1.0, 1.0], 3.0)])
    hopeless = [4.3, 3.7, 3.4]  # projected ~3.3 at every rung: far behind the member (3.0)
    skip1 = build_rule({"rule": "front", "model": m.to_dict(), "rung_thresholds": [0, 0.05, 0.05]})
    assert build_rule({"rule": "front", "model": m.to_dict(), "threshold": 0.05}).decide(0, hopeless, ctx)
    assert skip1.decide(0, hopeless, ctx) is None  # 0: no decision at rung 1, whatever the projection
    v = skip1.decide(1, hopeless, ctx)
    assert v is not None and "< 0.05" in v["reason"]
    mean, sd = m.predict(2, [4.0, 3.4, 3.1])  # a candidate projected just behind the member: P(enter) in (0.05, 0.3)
    near = Context([2.0, 2.0], None, [("a" * 16, [1.0, 1.0], mean - 0.5 * sd)])
    loose = build_rule({"rule": "front", "model": m.to_dict(), "rung_thresholds": [0.05, 0.05, 0.5]})
    assert build_rule({"rule": "front", "model": m.to_dict(), "threshold": 0.05}).decide(2, [4.0, 3.4, 3.1], near) is None
    assert loose.decide(2, [4.0, 3.4, 3.1], near)["p_enter"] == pytest.approx(0.3085, abs=1e-3)  # Phi(-0.5)
    for bad in ([0.1, 0.1], [0.1, 0.1, 1.0], [0, 0, 0], ["x", 0.1, 0.1]):
        with pytest.raises(StopError, match="allowed: 3 numbers in \\[0, 1\\)"):
            rule_spec("front", {}, model=m.to_dict(), rung_thresholds=bad)
    from forge.labelling.stop_cli import stop_spec  # forge-label's stop.rung_thresholds reaches the workers' spec

    inputs = tmp_path / "in.json"
    inputs.write_text('{"genomes": {"g1": {"costs": [2.0, 2.0], "prior": null}}, "front": []}')
    spec = stop_spec({"rule": "front", "inputs": str(inputs), "model": m.to_dict(), "rung_thresholds": [0, 0.05, 0.3]})
    assert build_rule(spec).rung_thresholds == (0.0, 0.05, 0.3)


def test_race_stops_only_picks_another_pick_beats_in_every_objective():
    m = fit_curve_model(_curves(), "last")
    ents = [Entrant("a", [1.0], None, [4.0, 3.4]), Entrant("b", [2.0], None, [4.8, 4.2]),
            Entrant("c", [0.5], None, [4.9, 4.3])]
    st = race_step(1, ents, m, 0.05)
    assert set(st) == {"b"} and st["b"]["dominated_by"] == "a"  # c is cheaper than a: it can still be best
    curves = {"a": [4.0, 3.4, 3.1, 3.0], "b": [4.8, 4.3, 4.0, 3.9], "c": [4.9, 4.3, 4.0, 3.9]}
    plan = race_plan(curves, {"a": [1.0], "b": [2.0], "c": [0.5]}, {}, m, 0.05)
    assert set(plan["finished"]) == {"a", "c"} and plan["stopped"]["b"]["rung"] == 1
