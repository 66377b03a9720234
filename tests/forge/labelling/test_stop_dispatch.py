"""The stopping rule through the dispatchers and forge-label: a stopped training frees its worker and is stored
as a partial label with its checkpoint; a later run without the rule promotes it from its rung (local here; Ray
in test_dispatch.py::test_ray_local_instance, which calls `ray_stop_then_promote` in its one Ray start)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from forge.errors import UserError
from forge.labelling.cli import run
from forge.labelling.curves import checkpoint_path
from forge.labelling.dispatch import LocalTrainer, make_trainer
from forge.fidelity.stopping import rule_spec
from forge.labelling.store import LabelStore
from tests.forge.labelling._train_helpers import TINY_CORPUS, TINY_PROTOCOL, tiny_genomes
from tests.forge.labelling.test_cli import _cfg, _overrides

RUNGED = {**TINY_PROTOCOL, "tokens": 4 * 32 * 9, "val_tokens": 128, "eta": 3, "rungs": 3}  # rungs at 1, 3, 9
MODEL = {"kind": "last", "coef": [[0.0, 1.0], [0.0, 1.0]], "sd": [0.05, 0.05], "n": 0}


def _spec(genomes, loss=0.1):
    """A front member cheaper than every genome, with a loss no tiny model reaches: every training stops at rung 1."""
    return rule_spec("front", {g.id: {"costs": [2.0, 2.0], "prior": None} for g in genomes},
                     [{"id": "m" * 16, "costs": [1.0, 1.0], "loss": loss}], threshold=0.05, model=MODEL)


def test_local_stop_frees_the_worker_then_promotion_continues(tmp_path):
    gs, store = tiny_genomes(2), LabelStore(tmp_path / "s.db")
    t = LocalTrainer(protocol=RUNGED, corpus=TINY_CORPUS, workers=2, poll_s=0.1, store=store,
                     ckpt_dir=str(tmp_path / "ck"), stop=_spec(gs))
    labs = t.train(gs)
    assert [lab.status for lab in labs] == ["stopped", "stopped"] and len(store) == 0
    s = labs[0].provenance["stopped"]
    assert s["rung"] == 1 and s["dominated_by"] == "m" * 16 and s["interval"][0] < s["interval"][1]
    assert labs[0].provenance["tokens_trained"] == 4 * 32 * 1  # one step of nine: the worker was freed there
    fp = t.fingerprint()
    assert all(checkpoint_path(tmp_path / "ck", g.id, fp).is_file() for g in gs)
    assert [lab.status for lab in t.train(gs)] == ["stopped", "stopped"]  # with the rule: reused, not retrained
    again = LocalTrainer(protocol=RUNGED, corpus=TINY_CORPUS, workers=2, poll_s=0.1, store=store,
                         ckpt_dir=str(tmp_path / "ck"))
    done = again.train(gs)  # no rule: promoted from rung 1
    assert all(lab.status == "done" and lab.provenance["resumed_from_step"] == 1 for lab in done)
    assert len(store) == 2 and not any(checkpoint_path(tmp_path / "ck", g.id, fp).exists() for g in gs)


def ray_stop_then_promote(tmp_path: Path) -> None:
    """Run inside a live local Ray (tests/forge/labelling/test_dispatch.py::test_ray_local_instance starts it):
    the rule stops both trainings at rung 1 in Ray workers, then a run without it promotes them."""
    gs = tiny_genomes(2)
    kw = dict(num_gpus=0, timeout_s=300, retries=1, store=LabelStore(tmp_path / "stop.db"), ckpt_dir=str(tmp_path / "c"))
    stopped = make_trainer("ray", RUNGED, TINY_CORPUS, stop=_spec(gs), **kw).train(gs)
    promoted = make_trainer("ray", RUNGED, TINY_CORPUS, **kw).train(gs)
    assert [lab.status for lab in stopped] == ["stopped", "stopped"]
    assert [lab.status for lab in promoted] == ["done", "done"]
    assert all(lab.provenance["resumed_from_step"] == 1 for lab in promoted)


def test_forge_label_batch_given_a_front_logs_every_stop(tmp_path):
    gs = tiny_genomes(2)
    gfile = tmp_path / "g.jsonl"
    gfile.write_text("".join(json.dumps(g.to_dict()) + "\n" for g in gs))
    inputs, model = tmp_path / "in.json", tmp_path / "model.json"
    spec = _spec(gs)
    inputs.write_text(json.dumps({"genomes": spec["genomes"], "front": spec["front"]}))
    model.write_text(json.dumps(MODEL))
    o = [x for x in _overrides(tmp_path / "l.db", genomes=gfile, out_dir=tmp_path / "o") if not x.startswith("protocol.")]
    o += [f"protocol.{k}={v}" for k, v in RUNGED.items()]
    s = run(_cfg(o + ["stop.rule=front", f"stop.inputs={inputs}", f"stop.model={model}"]))
    assert (s["stopped"], s["finite"], s["stops_logged"]) == (2, 0, 2)
    assert s["tokens_trained"] == 2 * 4 * 32
    stops = [json.loads(x) for x in (tmp_path / "o" / "stops.jsonl").read_text().splitlines()]
    assert {r["dominated_by"] for r in stops} == {"m" * 16} and all(r["rung"] == 1 and r["interval"] for r in stops)
    assert Path(str(tmp_path / "l.db") + ".checkpoints").is_dir()
    s2 = run(_cfg(o))  # stop.rule=none: promotes both from their checkpoints
    assert (s2["finite"], s2["stopped"], s2["tokens_trained"]) == (2, 0, 2 * 8 * 4 * 32)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"genomes": {"x": {"costs": ["os.system"]}}}))
    with pytest.raises(UserError, match="allowed: a non-empty list of finite numbers"):
        run(_cfg(o + ["stop.rule=front", f"stop.inputs={bad}", f"stop.model={model}"]))
