"""forge-verify race=true: the picks race through the rungs (paused, then promoted from their checkpoints); the
ones another pick beats at no higher cost stop, each stop logged; the control is trained in full. Real
trainings (LocalTrainer, tiny protocol) check the live race; the verify glue runs on a fake racing trainer."""
from __future__ import annotations

import json
import math

import pytest

from forge.fidelity.stopping import fit_curve_model
from forge.genomes.labels import Label
from forge.labelling.dispatch import LocalTrainer
from forge.labelling.store import LabelStore
from search.race import race
from search.verify import VerifyError, run
from tests.forge.labelling._train_helpers import TINY_CORPUS, TINY_PROTOCOL, tiny_genomes
from tests.search.fakes import fake_loss
from tests.search.verify.test_verify import _parts, fake_run  # noqa: F401 - the fixture

RUNGED = {**TINY_PROTOCOL, "tokens": 4 * 32 * 9, "val_tokens": 128, "eta": 3, "rungs": 3}
SHARP = {"kind": "last", "coef": [[0.0, 1.0], [0.0, 1.0]], "sd": [1e-4, 1e-4], "n": 0}


def test_live_race_pauses_promotes_and_stops_the_beaten(tmp_path):
    from forge.fidelity.stopping import CurveModel

    gs = tiny_genomes(3)
    t = LocalTrainer(protocol=RUNGED, corpus=TINY_CORPUS, workers=2, poll_s=0.1, store=LabelStore(tmp_path / "s.db"),
                     ckpt_dir=str(tmp_path / "ck"))
    notes: list[str] = []
    labels, log = race(t, gs, {g.id: [1.0] for g in gs}, {}, CurveModel.from_dict(SHARP), 0.45, 3, notes.append)
    done = [lab for lab in labels.values() if lab.status == "done"]
    assert len(done) >= 1 and len(done) + len(log) == 3  # equal costs, sharp model: only the leader(s) go on
    assert all(lab.provenance["resumed_from_step"] == 3 for lab in done)  # paused at rung 2, promoted from it
    assert all(rec["dominated_by"] in labels and rec["interval"] for rec in log)
    assert "the whole race takes between" in notes[0] and t.stop is None  # the trainer is handed back as it was


class FakeRacer:
    """A racing trainer on synthetic curves that contradict the surrogate (final = 6 - fake loss: the picks it
    predicted worst, the cheap ones, are the best), rung r = final + 0.5 / 3^r."""

    def __init__(self, store):
        self.store, self.stop, self.promote, self.ckpt_dir, self.on_label = LabelStore(store), None, None, None, None
        self.batches: list[int] = []

    def train(self, genomes):
        self.batches.append(len(genomes))
        at = (self.stop or {}).get("at", 2)
        out = []
        for g in genomes:
            final = 6.0 - float(fake_loss([g], 0.0)[0])
            curve = [{"rung": r + 1, "val_loss": final + 0.5 / 3 ** r, "tokens": 100 * 3 ** r} for r in range(at + 1)]
            status = "stopped" if self.stop else "done"
            out.append(Label(g, math.inf if self.stop else final, {"curve": curve, "tokens": curve[-1]["tokens"],
                                                                   "protocol_config": {"tokens": 900}},
                             reason="paused" if self.stop else "", status=status))
        return out


def test_verify_race_writes_its_log_and_keeps_the_default_picks(fake_run, tiny_space, tmp_path):  # noqa: F811
    model = tmp_path / "m.json"
    import numpy as np

    L = np.array([[3.5 + d, 3.1666 + d, 3.0555 + d, 3.0 + d] for d in np.linspace(0, 0.3, 12)])
    model.write_text(json.dumps(fit_curve_model(L, "last").to_dict()))
    parts = _parts(tiny_space, tmp_path / "l.db")
    parts["trainer"] = FakeRacer(tmp_path / "l.db")
    cfg = {"run": str(fake_run), "k": 5, "control": 2, "protocol": {"rungs": 3}}
    plain = run(cfg, _parts(tiny_space, tmp_path / "p.db"))
    out = run({**cfg, "race": True, "race_model": str(model), "out": str(tmp_path / "v")}, parts)
    assert [r["id"] for r in out["picks"]] == [r["id"] for r in plain["picks"]]  # the same picks, raced
    rec = json.loads((tmp_path / "v" / "race.json").read_text())
    assert len(rec["finished"]) + len(rec["stops"]) == 5 and rec["tokens"] < 5 * 900
    assert parts["trainer"].batches[:2] == [5, 5 - sum(1 for s in rec["stops"] if s["rung"] == 1)]
    assert all(s["dominated_by"] and "P(beats" in s["reason"] for s in rec["stops"])
    with pytest.raises(VerifyError, match="race=true needs"):
        run({**cfg, "race": True, "out": str(tmp_path / "w")}, _parts(tiny_space, tmp_path / "q.db"))


class CurveTrainer:
    """Co-evolution's trainer with a stopping rule: synthetic curves (rung r = final + 0.4 / 3^r; final = fake loss
    + 0.1, plus up to 0.5 by the id's first hex digit: the surrogate is wrong about some picks) run through the
    real worker-side decider (forge.labelling.curves.decider) at each rung."""

    def __init__(self):
        self.stop, self.ckpt_dir, self.specs = None, None, []

    def train(self, genomes):
        from forge.labelling.curves import decider

        self.specs.append(self.stop)
        out = []
        for g in genomes:
            final = float(fake_loss([g], 0.1)[0]) + 0.5 * int(g.id[0], 16) / 15
            curve, verdict = [], None
            decide = decider(self.stop, g.id) if self.stop else (lambda r, c: None)
            for r in range(2):
                curve.append({"rung": r + 1, "val_loss": final + 0.4 / 3 ** r})
                verdict = decide(r, list(curve))
                if verdict:
                    break
            if verdict:
                out.append(Label(g, math.inf, {"curve": curve, "stopped": {**verdict, "rung": len(curve)}},
                                 reason="stopped", status="stopped"))
            else:
                out.append(Label(g, final, {"curve": curve + [{"rung": 3, "val_loss": final}]}))
        return out


def test_coevolution_stops_picks_that_cannot_enter_the_real_front(make_search, tmp_path):
    from search.coevolution import CoEvolution
    from search.coevolution_stop import CoStop
    from search.state import read_jsonl
    from tests.search.conftest import tiny_cfg
    from tests.search.fakes import fake_finetune

    trainer = CurveTrainer()
    model = {"kind": "last", "coef": [[-0.4, 1.0], [-0.1333333, 1.0]], "sd": [0.002, 0.002], "n": 0}
    co = CoEvolution(1, trainer, fake_finetune, "base", None, batch=6, n_mc=3, seed=0,
                     stop=CoStop("front", 0.05, model, 0))
    cfg = {**tiny_cfg(search={"generations": 4}), "objectives": ["val_loss", "tpot_ms"]}  # one cost: dominance is common
    make_search(tmp_path, cfg, coevolution=co).run()
    first, later = trainer.specs[0], trainer.specs[1:]
    assert first["front"] == [] and all(s["front"] for s in later)  # the front: real labels of earlier events
    assert all(set(s["genomes"]) and all(len(v["costs"]) >= 1 for v in s["genomes"].values()) for s in later)
    events = read_jsonl(tmp_path / "coevolution.jsonl")
    stops = read_jsonl(tmp_path / "stops.jsonl") if (tmp_path / "stops.jsonl").exists() else []
    assert all("stopped" in e for e in events) and sum(e["stopped"] for e in events) == len(stops)
    buffered = {lab.genome_id for lab in co.buffer}
    assert not buffered & {s["genome_id"] for s in stops}  # a partial label is never fine-tuned on


def test_costop_arms_the_front_of_real_labels_and_logs_each_stop(tmp_path):
    import numpy as np

    from forge.labelling.curves import decider
    from search.coevolution_stop import CoStop

    gs = tiny_genomes(3)
    st = CoStop("front", 0.05, {"kind": "last", "coef": [[0.0, 1.0]], "sd": [0.01], "n": 0}, 0)
    t = CurveTrainer()
    st.arm(t, gs[:1], np.array([[3.0, 1.0]]), np.array([3.0]), [])  # event 1: no front yet
    assert t.stop["front"] == [] and decider(t.stop, gs[0].id)(0, [{"val_loss": 9.0}]) is None
    buffer = [Label(gs[0], 3.0, {})]
    st.arm(t, gs[1:], np.array([[3.1, 2.0], [3.1, 0.5]]), np.array([3.1, 3.1]), buffer)
    assert t.stop["front"] == [{"id": gs[0].id, "costs": [1.0], "loss": 3.0}]
    v = decider(t.stop, gs[1].id)(0, [{"val_loss": 3.5}])  # costlier and worse than gs[0]: stopped
    assert v["dominated_by"] == gs[0].id and decider(t.stop, gs[2].id)(0, [{"val_loss": 3.5}]) is None  # cheaper
    lab = Label(gs[1], math.inf, {"stopped": {**v, "rung": 1}}, reason="stopped at rung 1/3: " + v["reason"],
                status="stopped")
    assert st.log([lab, buffer[0]], tmp_path) == 1
    rec = json.loads((tmp_path / "stops.jsonl").read_text())
    assert rec["genome_id"] == gs[1].id and rec["rung"] == 1 and rec["interval"]
    near = [{"val_loss": 3.005}]  # P(enter) = Phi(-0.5) = 0.31: goes on at 0.05, stops at a rung threshold of 0.5
    assert decider(t.stop, gs[1].id)(0, near) is None
    # search.coevolve.stop.rung_thresholds: one threshold per rung instead of `threshold`
    loose = CoStop("front", 0.05, st.model, 0, dict(st.costs), rung_thresholds=(0.5,))
    loose.arm(t, gs[1:], np.array([[3.1, 2.0], [3.1, 0.5]]), np.array([3.1, 3.1]), buffer)
    assert decider(t.stop, gs[1].id)(0, near)["dominated_by"] == gs[0].id


def test_a_saved_curve_model_path_is_launch_only():
    from forge.runtime.launch_only import LaunchOnlyError, check_saved

    saved = {"search": {"coevolve": {"stop": {"rule": "front", "model": "/etc/passwd"}}}}
    with pytest.raises(LaunchOnlyError, match="search.coevolve.stop.model"):
        check_saved(saved, None, "run=x", "forge-search resume=x")
    check_saved(saved, saved, "run=x", "forge-search resume=x")  # the launched command names it itself: fine
