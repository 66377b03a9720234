"""Curves and partial labels: rungs are read without changing the final label; a training stopped at a rung
keeps its checkpoint and, promoted, ends with the label of an uninterrupted run (the same bytes)."""
from __future__ import annotations

import math

import pytest

from forge.genomes.labels import Label, fingerprint
from forge.labelling.corpus import build_corpus
from forge.labelling.curves import CurveError, checkpoint_path, rung_steps
from forge.labelling.store import LabelStore
from forge.labelling.train import Protocol, ProtocolError, train_genome
from tests.forge.labelling._train_helpers import TINY_CORPUS, TINY_PROTOCOL, tiny_genome

CURVED = {**TINY_PROTOCOL, "tokens": 4 * 32 * 27, "eta": 3, "rungs": 4}  # 27 steps: rungs at 1, 3, 9, 27


@pytest.fixture(scope="module")
def corpus():
    return build_corpus(TINY_CORPUS)


def test_rung_ladder_is_geometric_and_ends_at_the_budget():
    assert rung_steps(27, 3, 4) == [1, 3, 9, 27]
    assert rung_steps(108, 3, 4) == [4, 12, 36, 108]
    assert rung_steps(6, 3, 4) == [1, 2, 6]  # rungs that round to the same step are read once
    assert rung_steps(100, 2, 1) == [100]
    with pytest.raises(CurveError, match="eta >= 2"):
        rung_steps(10, 1, 3)
    with pytest.raises(ProtocolError, match="eta >= 2"):
        Protocol.from_config({**CURVED, "eta": 1})


def test_rungs_do_not_change_the_fingerprint():
    a = fingerprint({**CURVED, "rungs": 1}, {"corpus_hash": "x"})
    assert a == fingerprint({**CURVED, "rungs": 4, "eta": 2}, {"corpus_hash": "x"})
    assert a != fingerprint({**CURVED, "tokens": 256}, {"corpus_hash": "x"})


def test_curve_is_recorded_and_final_label_equals_a_run_without_rungs(corpus):
    p = Protocol.from_config(CURVED)
    lab = train_genome(tiny_genome(), p, corpus)
    flat = train_genome(tiny_genome(), Protocol.from_config({**CURVED, "rungs": 1}), corpus)
    curve = lab.provenance["curve"]
    assert [c["step"] for c in curve] == [1, 3, 9, 27] and [c["rung"] for c in curve] == [1, 2, 3, 4]
    assert curve[-1]["val_loss"] == round(lab.label, 6)
    assert curve[0]["val_loss"] > curve[-1]["val_loss"]  # it learns
    assert lab.label == flat.label  # reading rungs draws no randomness and leaves the training alone
    assert lab.provenance["tokens_trained"] == p.tokens


def test_stopped_then_promoted_equals_uninterrupted(corpus, tmp_path):
    p = Protocol.from_config(CURVED)
    straight = train_genome(tiny_genome(), p, corpus)
    stop_at_2 = lambda r, curve: {"rule": "test", "reason": "told to"} if r == 1 else None  # noqa: E731
    part = train_genome(tiny_genome(), p, corpus, ckpt_dir=str(tmp_path), fp="abc", decide=stop_at_2)
    ck = checkpoint_path(tmp_path, tiny_genome().id, "abc")
    assert part.status == "stopped" and not part.finite and ck.is_file()
    assert part.provenance["stopped"]["rung"] == 2 and part.provenance["stopped"]["step"] == 3
    assert part.provenance["tokens_trained"] == 3 * 4 * 32 and "rung 2/4" in part.reason
    done = train_genome(tiny_genome(), p, corpus, ckpt_dir=str(tmp_path), fp="abc")
    assert done.status == "done" and done.provenance["resumed_from_step"] == 3
    assert done.label == straight.label  # the same bytes
    assert [c["val_loss"] for c in done.provenance["curve"]] == [c["val_loss"] for c in straight.provenance["curve"]]
    assert done.provenance["tokens_trained"] == (27 - 3) * 4 * 32 and not ck.exists()


def test_a_torn_checkpoint_starts_over(corpus, tmp_path):
    p = Protocol.from_config(CURVED)
    ck = checkpoint_path(tmp_path, tiny_genome().id, "abc")
    ck.write_bytes(b"not a checkpoint")
    lab = train_genome(tiny_genome(), p, corpus, ckpt_dir=str(tmp_path), fp="abc")
    assert lab.status == "done" and "resumed_from_step" not in lab.provenance


def test_partial_labels_are_kept_but_never_final(tmp_path):
    store = LabelStore(tmp_path / "s.db")
    g = tiny_genome()
    part = Label(g, math.inf, {"curve": [{"rung": 1, "val_loss": 3.0}], "stopped": {"rung": 1, "loss": 3.0}},
                 reason="stopped at rung 1/4: test", status="stopped", protocol_fp="fp1")
    assert store.put(part)
    assert store.get(g.id, "fp1").status == "stopped" and len(store) == 0 and store.done_ids("fp1") == set()
    assert isinstance(store.claim(g, "fp1"), Label)  # not claimed by a labeller that does not promote
    tok = store.claim(g, "fp1", promote=True)
    assert isinstance(tok, str)
    assert store.finish(Label(g, 2.5, {"protocol": "t"}, status="done", protocol_fp="fp1"), "fp1", tok)
    assert store.get(g.id, "fp1").label == 2.5 and len(store) == 1
    exported = tmp_path / "e.jsonl"
    store.put(Label(tiny_genome(d_mlp=32), math.inf, {}, reason="stopped", status="stopped", protocol_fp="fp1"))
    assert store.export_jsonl(exported, protocol="fp1") == 2
    from forge.genomes.labels import load_any

    kept, dropped = load_any(exported)
    assert [lab.label for lab in kept] == [2.5] and dropped == 1  # what fine-tune reads: the final label only
