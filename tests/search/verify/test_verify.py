"""forge-verify: pick selection, the control draw, report fields, resume after a kill, the refit (fakes only)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from backends.interface import Workload
from forge.genomes.genome import genome_from_dict
from forge.labelling.store import LabelStore
from forge.genomes.labels import Label
from search.picks import control_draw, front_picks
from search.evaluators import LossEvaluator, TrainEvaluator
from search.problem import ForgeProblem
from search.build import build_search
from search.verify import Verify, VerifyError, measured_backend, run
from tests.search.conftest import tiny_cfg
from tests.search.fakes import FakeBackend, FakePredictor, fake_finetune, fake_loss


class FakeProtocolTrainer:
    """A store-backed trainer with a fast fake protocol (label = fake loss + 0.1): stored genomes are skipped,
    each new label is stored as it arrives, and `die_after` raises KeyboardInterrupt before the n-th new one."""

    def __init__(self, store: str, die_after: int | None = None):
        self.store, self.die_after, self.trained = LabelStore(store), die_after, []
        self.on_label = None  # the dispatchers' hook, called per new label (forge-verify's progress)

    def train(self, genomes):
        out = []
        for g in genomes:
            lab = self.store.get(g.id)
            if lab is None:
                if self.die_after is not None and len(self.trained) >= self.die_after:
                    raise KeyboardInterrupt
                self.trained.append(g.id)
                lab = Label(g, float(fake_loss([g], 0.1)[0]), {"protocol": "fake"}, "")
                self.store.put(lab)
                if self.on_label is not None:
                    self.on_label(lab)
            out.append(lab)
        return out


class FakeMeasured(FakeBackend):
    """A 'measured' backend (fake timer): the fake costs scaled by 1.3."""

    name = "fake-measured"

    def evaluate(self, genomes, workload):
        t = super().evaluate(genomes, workload)
        t.ttft_ms, t.tpot_ms = t.ttft_ms * 1.3, t.tpot_ms * 1.3
        return t


def _rows(F):
    return [{"id": f"g{i}", "metrics": {"val_loss": f[0], "tpot_ms": f[1]}} for i, f in enumerate(F)]


def test_front_picks_knee_extremes_then_spread_along_cost():
    F = [(3.0 - 0.1 * i, 1.0 + i * i * 0.05) for i in range(12)]  # a convex front: loss down, latency up
    picks = front_picks(_rows(F), ["val_loss", "tpot_ms"], 6)
    roles = [r for r, _ in picks]
    ids = [row["id"] for _, row in picks]
    assert roles[0] == "knee" and roles[1:3] == ["min:val_loss", "min:tpot_ms"] and roles[3:] == ["spread"] * 3
    assert ids[1] == "g11" and ids[2] == "g0" and len(set(ids)) == 6
    Z = np.array(F)
    Z = (Z - Z.min(0)) / np.ptp(Z, 0)
    assert ids[0] == f"g{int(np.argmin(np.linalg.norm(Z, axis=1)))}"
    spread = sorted(int(i[1:]) for i in ids[3:])  # evenly spaced along latency over the remaining members
    assert spread[0] <= 2 and spread[-1] >= 9
    assert [row["id"] for _, row in front_picks(_rows(F[:3]), ["val_loss", "tpot_ms"], 8)] == ["g1", "g2", "g0"]
    with pytest.raises(ValueError, match="k = 0"):
        front_picks(_rows(F), ["val_loss"], 0)


def test_control_draw_is_feasible_seeded_and_excludes(tiny_space):
    backend = FakeBackend(max_params=1.5e6)  # some random genomes do not fit
    problem = ForgeProblem(tiny_space, LossEvaluator(FakePredictor()), backend, Workload(),
                           ["val_loss", "tpot_ms"], ["val_loss < 4.2"])
    a = control_draw(tiny_space, problem, 6, seed=3)
    assert len(a) == 6 and all(r["feasible"] for r in a)
    assert all(r["metrics"]["params"] <= 1.5e6 and r["metrics"]["val_loss"] < 4.2 for r in a)
    assert [r["id"] for r in control_draw(tiny_space, problem, 6, seed=3)] == [r["id"] for r in a]
    b = control_draw(tiny_space, problem, 6, seed=4, exclude=[a[0]["id"]])
    assert [r["id"] for r in b] != [r["id"] for r in a] and a[0]["id"] not in {r["id"] for r in b}
    tight = ForgeProblem(tiny_space, LossEvaluator(FakePredictor()), backend, Workload(), ["val_loss"], ["val_loss < 0"])
    assert control_draw(tiny_space, tight, 3, seed=0, max_rounds=2) == []


def test_control_in_train_mode_costs_k_labels_and_is_not_the_search_sample(tiny_space, tmp_path):
    trainer = FakeProtocolTrainer(str(tmp_path / "s.db"))
    problem = ForgeProblem(tiny_space, TrainEvaluator(trainer), FakeBackend(), Workload(), ["val_loss", "tpot_ms"],
                           ["val_loss < 10"])
    search_gen0 = tiny_space.decode(tiny_space.sample_x(4, np.random.default_rng(0)))
    out = control_draw(tiny_space, problem, 4, seed=0, exclude=[search_gen0[0].id])
    assert len(out) == 4 and len(trainer.trained) == 4  # every sample costs a label here: no 4x over-draw
    assert not {g.id for g in search_gen0} & {r["id"] for r in out}


@pytest.fixture
def fake_run(make_search, tmp_path):
    run_dir = tmp_path / "run"
    cfg = tiny_cfg(space="iha-tiny", search={"generations": 3})
    make_search(run_dir, cfg).run()
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg))
    return run_dir


def _parts(tiny_space, store, **kw):
    return {"space": tiny_space, "evaluator": LossEvaluator(FakePredictor()), "backend": FakeBackend(),
            "measure": FakeMeasured(), "trainer": FakeProtocolTrainer(str(store), **kw),
            "finetune": fake_finetune}


def test_report_fields_intervals_and_measured_latency(fake_run, tiny_space, tmp_path):
    out = run({"run": str(fake_run), "k": 5, "control": 4}, _parts(tiny_space, tmp_path / "l.db"))
    s = out["summary"]
    assert [r["role"] for r in out["picks"]][0] == "best:1" and len(out["picks"]) == 5 and len(out["control"]) == 4
    for r in out["picks"] + out["control"]:
        # fake protocol = fake prediction + 0.1, fake measurement = 1.3 × fake cost, both of the unrounded values
        # (the run keeps 6 significant digits, forge.numeric)
        assert r["real_loss"] == pytest.approx(r["mu"] + 0.1, abs=2e-5)
        assert r["measured_tpot_ms"] == pytest.approx(1.3 * r["predicted_tpot_ms"], rel=1e-5)
        assert r["inside"] is False and r["loss_lo"] == r["loss_hi"] == r["mu"]  # no interval in this run
    assert s["coverage"] == 0.0 and s["mae"] == pytest.approx(0.1, abs=2e-5) and s["spearman"] == pytest.approx(1.0)
    assert s["n_seen_by_refit"] == 0 and s["mae_unseen"] == pytest.approx(0.1, abs=2e-5)  # no co-evolution in this run
    assert s["interval_method"].startswith("none") and s["hv_objectives"] == ["real_loss", "measured_tpot_ms"]
    assert s["real_hv"]["picks"] > 0 and s["real_hv"]["control"] >= 0 and out["cost"].startswith("cost measured")
    saved = json.loads((fake_run / "verify" / "verify.json").read_text())
    assert saved["summary"] == json.loads(json.dumps(s)) and (fake_run / "verify" / "verify.png").stat().st_size > 1000


def test_interval_from_the_run_rows_gives_coverage(fake_run, tiny_space, tmp_path):
    rows = [json.loads(x) for x in (fake_run / "pareto.jsonl").read_text().splitlines()]
    for r in rows:  # H4's fields: [mu - 0.05, mu + 0.15] holds the +0.1 offset of the fake labels
        r["loss_lo"], r["loss_hi"] = r["metrics"]["mu"] - 0.05, r["metrics"]["mu"] + 0.15
    (fake_run / "pareto.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = run({"run": str(fake_run), "k": 4, "control": 0}, _parts(tiny_space, tmp_path / "l.db"))
    assert out["summary"]["coverage"] == 1.0 and all(r["inside"] for r in out["picks"])


def test_resume_after_a_kill_trains_only_the_rest(fake_run, tiny_space, tmp_path):
    full = run({"run": str(fake_run), "k": 4, "control": 4, "out": str(tmp_path / "a")},
               _parts(tiny_space, tmp_path / "a.db"))
    parts = _parts(tiny_space, tmp_path / "b.db", die_after=3)
    with pytest.raises(KeyboardInterrupt):
        run({"run": str(fake_run), "k": 4, "control": 4, "out": str(tmp_path / "b")}, parts)
    assert len(parts["trainer"].trained) == 3 and not (tmp_path / "b" / "verify.json").exists()
    again = _parts(tiny_space, tmp_path / "b.db")
    out = run({"run": str(fake_run), "k": 4, "control": 4, "out": str(tmp_path / "b")}, again)
    assert len(again["trainer"].trained) == 5 and not set(again["trainer"].trained) & set(parts["trainer"].trained)
    assert out["summary"] == full["summary"] and out["picks"] == full["picks"] and out["control"] == full["control"]


def test_refit_lowers_the_error_on_the_picks(fake_run, tiny_space, tmp_path):
    out = run({"run": str(fake_run), "k": 4, "control": 2, "refit": True}, _parts(tiny_space, tmp_path / "l.db"))
    r = out["refit"]
    assert r["refit"] and r["n_new"] == 6 and r["mae_before"] == pytest.approx(0.1, abs=2e-5)
    assert r["mae_after"] < 0.01 and "checkpoint" not in r  # the fake predictor cannot be saved


def test_measured_backend_choice_and_bad_input(fake_run, tiny_space):
    none, note = measured_backend({"backend": {"name": "roofline", "hardware": "a100-40gb"}}, "auto")
    assert none is None and "predicted" in note
    assert measured_backend({}, "none") == (None, "cost predicted (measure=none)")
    with pytest.raises(VerifyError, match="measure='nope'"):
        measured_backend({}, "nope")
    with pytest.raises(VerifyError, match="no pareto.jsonl"):
        Verify({"run": str(fake_run / "missing")})
    with pytest.raises(VerifyError, match="k=0"):
        Verify({"run": str(fake_run), "k": 0}, {"space": tiny_space, "evaluator": LossEvaluator(FakePredictor()),
                                                 "backend": FakeBackend()})
    with pytest.raises(VerifyError, match="protocol='nope' is unknown"):
        Verify({"run": str(fake_run), "protocol": "nope"}, {"space": tiny_space, "measure": None,
                                                          "evaluator": LossEvaluator(FakePredictor()), "backend": FakeBackend()})


def test_cli_reports_bad_input_in_one_line(tmp_path):
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "search.verify_cli", f"run={tmp_path}"], capture_output=True, text=True,
                       cwd=Path(__file__).parents[3], timeout=600)
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "forge-verify: error: run=" in p.stderr


@pytest.mark.slow
def test_refit_with_the_real_surrogate_saves_a_checkpoint_a_search_can_load(make_search, tmp_path, tiny_space):
    from search.components import load_surrogate

    run_dir = tmp_path / "run"
    cfg = tiny_cfg(space="iha-tiny", search={"generations": 2, "coevolve": {"epochs": 2}},
                   evaluator={"predictor": "forgeformer-iha-tiny"})
    make_search(run_dir, cfg).run()
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg))
    parts = _parts(tiny_space, tmp_path / "l.db")
    parts.pop("finetune")
    out = run({"run": str(run_dir), "k": 4, "control": 2, "refit": True}, parts)
    r = out["refit"]
    assert r["refit"] and r["mae_after"] is not None and Path(r["checkpoint"]).with_suffix(".json").is_file()
    pred = load_surrogate(r["checkpoint"], tiny_space)  # what evaluator.predictor=<path> loads
    rows = [json.loads(x) for x in (run_dir / "pareto.jsonl").read_text().splitlines()]
    mu, _ = pred.predict([genome_from_dict(r["genome"]) for r in rows])
    assert np.all(np.isfinite(mu))


def test_cpu_measured_with_a_fake_timer_and_the_workload_override(fake_run, tiny_space, tmp_path):
    from backends.host import CpuMeasuredBackend

    calls = []

    def timer(fn):
        calls.append(1)
        return fn(), 2.0

    parts = _parts(tiny_space, tmp_path / "l.db") | {"measure": CpuMeasuredBackend(warmup=0, repeats=1, timer=timer)}
    out = run({"run": str(fake_run), "k": 2, "control": 1, "workload": {"prefill": 8, "decode": 3}}, parts)
    rows = out["picks"] + out["control"]
    assert all(r["measured_tpot_ms"] == 2.0 and r["measured"]["ttft_ms"] == 2.0 for r in rows)
    assert len(calls) == len(rows) * (1 + 3)  # one prefill and 3 decode steps per genome: the override is used


def test_an_unfinished_run_is_refused_unless_allow_partial(fake_run, tiny_space, tmp_path):
    s = json.loads((fake_run / "summary.json").read_text())
    (fake_run / "summary.json").write_text(json.dumps({**s, "status": "interrupted", "generations_done": 1}))
    with pytest.raises(ValueError, match="interrupted at generation .*allow_partial=true"):
        Verify({"run": str(fake_run)}, _parts(tiny_space, tmp_path / "l.db"))
    out = run({"run": str(fake_run), "k": 2, "control": 0, "allow_partial": True}, _parts(tiny_space, tmp_path / "l.db"))
    assert len(out["picks"]) == 2


def test_a_train_mode_run_reports_real_vs_control_only(make_search, tiny_space, tmp_path):
    """A run whose loss was trained has no prediction to check: no Spearman/MAE/coverage, no interval columns."""
    store = tmp_path / "run.db"
    run_dir = tmp_path / "run"
    cfg = tiny_cfg(space="iha-tiny", search={"generations": 2}, evaluator={"kind": "train"},
                   constraints=["val_loss < 10"])
    ev = TrainEvaluator(FakeProtocolTrainer(str(store)))
    build_search(cfg, run_dir, {"space": tiny_space, "evaluator": ev, "backend": FakeBackend(), "workload": Workload()}).run()
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg))
    parts = _parts(tiny_space, store)
    parts["evaluator"] = TrainEvaluator(parts["trainer"])  # one store-backed trainer, as the CLI builds it
    out = run({"run": str(run_dir), "k": 3, "control": 3}, parts)
    s = out["summary"]
    assert not {"spearman", "mae", "coverage", "spearman_all"} & set(s) and s["predicted_vs_real"].startswith("none")
    assert len(parts["trainer"].trained) == 3  # the picks' labels were in the run's store: only the control trained
    for r in out["picks"] + out["control"]:
        assert not {"mu", "loss_lo", "loss_hi", "inside"} & set(r) and r["real_loss"] > 0
    best = min(r["real_loss"] for r in out["picks"])
    assert s["best_real_loss"]["picks"] == pytest.approx(best) and s["real_hv"]["picks"] > 0
    assert "no prediction is checked" in out["loss"] and (run_dir / "verify" / "verify.png").stat().st_size > 1000
    with pytest.raises(VerifyError, match="refit=true"):
        run({"run": str(run_dir), "k": 3, "control": 3, "refit": True}, parts)


def test_a_front_smaller_than_k_is_topped_up_from_the_next_layers(fake_run, tiny_space, tmp_path):
    front = [json.loads(x)["id"] for x in (fake_run / "pareto.jsonl").read_text().splitlines()]
    k = len(front) + 3
    out = run({"run": str(fake_run), "k": k, "control": 0}, _parts(tiny_space, tmp_path / "l.db"))
    roles = [r["role"] for r in out["picks"]]
    assert len(roles) == k and {r["id"] for r in out["picks"][:len(front)]} == set(front)
    assert all(r.startswith("near-front:") for r in roles[len(front):]) and roles[len(front)] == "near-front:2"
    archive = {json.loads(x)["id"] for x in (fake_run / "archive.jsonl").read_text().splitlines()}
    assert {r["id"] for r in out["picks"]} <= archive and len({r["id"] for r in out["picks"]}) == k


def test_near_front_layers_follow_non_dominated_sorting():
    from search.picks import near_front_picks

    rows = [{"id": f"g{i}", "feasible": True, "metrics": {"val_loss": a, "tpot_ms": b}}
            for i, (a, b) in enumerate([(1, 1), (2, 2), (3, 3), (2, 1.5), (9, 0.5)])]
    rows.append({"id": "bad", "feasible": False, "metrics": {"val_loss": 0.1, "tpot_ms": 0.1}})
    got = near_front_picks(rows, ["val_loss", "tpot_ms"], [1, 1], exclude=["g0"], n=3)
    assert [(role, r["id"]) for role, r in got] == [("near-front:2", "g3"), ("near-front:2", "g4"),
                                                     ("near-front:3", "g1")]


def test_progress_is_a_line_per_trained_genome_and_the_end_is_a_human_summary(fake_run, tiny_space, tmp_path,
                                                                                 capsys):
    """Not a terminal (pytest's capture): one line per trained genome on stderr, n of m and the time left;
    stored genomes are not trained again; the CLI's last screen is a few readable lines, JSON only on request."""
    from search.verify import brief
    from search.verify_cli import human

    parts = _parts(tiny_space, tmp_path / "l.db")
    out = run({"run": str(fake_run), "k": 3, "control": 2, "progress": True}, parts)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "forge-verify: training under the run protocol: 0/5 to do"
    assert [ln.split(":")[1].split("(")[0].strip() for ln in err[1:]] == [f"training under the run protocol {i}/5"
                                                                          for i in range(1, 6)]
    assert "(pick best:1 " in err[1] and "(control " in err[-1] and "left" in err[1] and "left" not in err[-1]
    text = "\n".join(human(brief(out), 65.0))
    assert text.startswith("verified 3 front picks against 2 random controls of ") and "in 1 min 05 s" in text
    assert "Spearman 1.00" in text and "verify.json" in text and "{" not in text
    run({"run": str(fake_run), "k": 3, "control": 2, "progress": False}, parts)
    assert capsys.readouterr().err == ""


def test_verify_names_its_winner_and_exports_it_even_off_the_front(fake_run, tiny_space, tmp_path):
    """Issue 56 §2: the summary names the pick of lowest real loss (not the knee by default), the `next:` export
    selects it by id with the weights this verify trained, and forge-export's `id:` takes any genome the run
    evaluated (archive.jsonl) or verified (verified.jsonl: a control), saying it is not on the front."""
    from search.cli import export_lines
    from search.export import ExportError, run as run_export
    from search.state import read_jsonl
    from search.verify import brief
    from search.verify_cli import export_comment, human

    out = run({"run": str(fake_run), "k": 3, "control": 2}, _parts(tiny_space, tmp_path / "l.db"))
    best = min((r for r in out["picks"]), key=lambda r: (r["real_loss"], r["id"]))
    win = out["summary"]["winner"]
    assert win == {"id": best["id"], "role": best["role"], "real_loss": best["real_loss"]}
    assert out["summary"]["best_control"]["id"] in [r["id"] for r in out["control"]]
    (fake_run / "verify" / "weights").mkdir()
    (fake_run / "verify" / "weights" / f"{win['id']}.safetensors").write_bytes(b"")
    b = brief(out)
    assert f"select=id:{win['id']} " in b["export_trained"] and "weights=" in b["export_trained"]
    assert win["id"][:8] in "\n".join(human(b, 5.0)) and "with its trained weights" in export_comment(b)
    verified = read_jsonl(fake_run / "verify" / "verified.jsonl")
    assert [r["id"] for r in verified] == [r["id"] for r in out["picks"] + out["control"]]
    front = {r["id"] for r in read_jsonl(fake_run / "pareto.jsonl")}
    cfg = yaml.safe_load((fake_run / "config.yaml").read_text())
    (fake_run / "config.yaml").write_text(yaml.safe_dump({**cfg, "space": {"name": cfg["space"]}}))  # as a run writes it
    ctrl = next(r["id"] for r in out["control"] if r["id"] not in front)
    s = run_export({"run": str(fake_run), "select": f"id:{ctrl[:8]}", "out": str(tmp_path / "e1")})
    assert s["exported"][0]["id"] == ctrl and "not on the run's Pareto front" in s["note"] and "control" in s["note"]
    assert any("note: " in ln for ln in export_lines(s))
    off = next(r for r in read_jsonl(fake_run / "archive.jsonl") if r["id"] not in front and r["id"] != ctrl)
    s = run_export({"run": str(fake_run), "select": f"id:{off['id']}", "out": str(tmp_path / "e2")})
    assert s["exported"][0]["id"] == off["id"] and "archive.jsonl" in s["note"]
    with pytest.raises(ExportError, match="0 genomes of the run have this id prefix"):
        run_export({"run": str(fake_run), "select": "id:" + "0" * 16, "out": str(tmp_path / "e3")})
