"""The generation loop: determinism, the Pareto archive, hypervolume, run files, recipes."""
from __future__ import annotations

import json

import numpy as np

from search.archive import Hypervolume, ParetoArchive, default_anchor, non_dominated
from search.state import read_jsonl
from tests.search.conftest import tiny_cfg


def _pareto(d):
    return [(r["id"], r["metrics"]) for r in read_jsonl(d / "pareto.jsonl")]


def test_same_seed_same_archive_other_seed_differs(make_search, tmp_path):
    a = make_search(tmp_path / "a").run()
    b = make_search(tmp_path / "b").run()
    c = make_search(tmp_path / "c", tiny_cfg(seed=1)).run()
    assert _pareto(tmp_path / "a") == _pareto(tmp_path / "b")
    assert a["hv_per_generation"] == b["hv_per_generation"]
    assert _pareto(tmp_path / "a") != _pareto(tmp_path / "c") and c["evaluations"] == a["evaluations"]


def test_run_directory_and_summary(make_search, tmp_path):
    s = make_search(tmp_path).run()
    for name in ("summary.json", "archive.jsonl", "pareto.jsonl", "history.jsonl", "state/checkpoint.json"):
        assert (tmp_path / name).is_file(), name
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["evaluations"] == 8 + 4 * 12 == s["evaluations"]
    assert len(summary["hv_per_generation"]) == 5 and summary["hypervolume"] == summary["hv_per_generation"][-1]
    assert summary["archive_size"] == len(_pareto(tmp_path)) > 0
    assert {"mating", "survival", "eval.surrogate", "eval.backend", "checkpoint"} <= set(summary["phase_s"])
    hist = read_jsonl(tmp_path / "history.jsonl")
    assert [h["generation"] for h in hist] == list(range(5))
    assert np.all(np.diff([h["hv"] for h in hist]) >= -1e-12)  # the archive only grows: HV never drops


def test_archive_holds_every_feasible_non_dominated_genome_seen(make_search, tmp_path):
    make_search(tmp_path).run()
    objs = tiny_cfg()["objectives"]
    seen = [r for r in read_jsonl(tmp_path / "archive.jsonl") if r["feasible"]]
    uniq = {r["id"]: r for r in seen}
    F = np.array([[r["metrics"][o] for o in objs] for r in uniq.values()])
    front_ids = {list(uniq)[i] for i in non_dominated(F)}
    pareto = read_jsonl(tmp_path / "pareto.jsonl")
    assert {r["id"] for r in pareto} == front_ids
    assert all(r["metrics"]["val_loss"] < 3.8 for r in pareto)
    assert all(len(r["genome"]["layers"]) >= 1 and "generation" in r for r in pareto)


def test_random_recipe_has_the_same_budget(make_search, tmp_path):
    n = make_search(tmp_path / "n").run()
    r = make_search(tmp_path / "r", tiny_cfg(search={"algorithm": "random"})).run()
    assert r["evaluations"] == n["evaluations"] and r["algorithm"] == "random"
    assert _pareto(tmp_path / "n") != _pareto(tmp_path / "r")


def test_gqa_space_search_stays_gqa(make_search, tmp_path):
    from forge.spaces.space import load_space

    gqa = load_space("gqa-paper")
    make_search(tmp_path, tiny_cfg(search={"generations": 1, "pop_size": 6, "offspring": 6}), space=gqa).run()
    for r in read_jsonl(tmp_path / "archive.jsonl"):
        for layer in r["genome"]["layers"]:
            if layer["attn"]:
                assert 768 % layer["n_h"] == 0 and layer["d_qk"] == layer["d_v"] == 768 // layer["n_h"]


def test_pareto_archive_update_and_hypervolume():
    arch = ParetoArchive(["a", "b"])
    rows = [{"id": str(i)} for i in range(4)]
    added = arch.update(rows, np.array([[1.0, 4.0], [2.0, 2.0], [3.0, 3.0], [4.0, 1.0]]))
    assert added == 3 and [e["id"] for e in arch.entries] == ["0", "1", "3"]
    assert arch.update([{"id": "9"}], np.array([[0.5, 0.5]])) == 1 and len(arch) == 1
    assert arch.update([{"id": "9"}], np.array([[0.1, 0.1]])) == 0  # same id is never re-added
    hv = Hypervolume(np.array([1.0, 1.0]), ref=2.0)
    assert np.isclose(hv(np.array([[1.0, 1.0]])), 1.0) and np.isclose(hv(np.array([[0.5, 1.0]])), 1.5)
    assert hv(np.zeros((0, 2))) == 0.0
    # a generation with no feasible candidate (README's gemmini budget on a tiny population) adds nothing
    assert arch.update([], np.zeros((0, 2))) == 0 and len(arch) == 1


def test_default_anchor_is_gpt2_small_on_the_paper_spaces():
    from forge.spaces.space import load_space

    for name in ("iha-paper", "gqa-paper"):
        a = default_anchor(load_space(name))
        load_space(name).validate(a)
        layers = a.active_layers
        assert len(layers) == 12 and layers[0].n_h == 12 and layers[0].d_qk == 64 and layers[0].d_mlp == 3072


def test_hv_anchor_and_seeded_sampling_from_config(make_search, tmp_path):
    import pytest

    from search.errors import SearchConfigError

    cfg = tiny_cfg(hv={"anchor": "gpt2", "ref": 3.0}, search={"sampling": "gpt2", "generations": 1})
    s = make_search(tmp_path / "a", cfg)
    out = s.run()
    assert out["hv_anchor"]["ref"] == 3.0 and out["hv_anchor"]["genome"]["d_model"] == 128  # repaired into iha-tiny
    first = [r for r in read_jsonl(tmp_path / "a" / "archive.jsonl") if r["generation"] == 0]
    assert first[0]["id"] == s.anchor_genome.id  # sampling around the same seed: row 0 is the seed itself
    with pytest.raises(SearchConfigError, match="allowed: a genome file or a name from data/archs"):
        make_search(tmp_path / "b", tiny_cfg(search={"sampling": "no-such-arch"}))


def test_progress_display_shows_generation_archive_and_hv(make_search, tmp_path, capsys):
    s = make_search(tmp_path, tiny_cfg(search={"generations": 2}))
    s.progress = True
    s.run()
    err = capsys.readouterr().err
    assert "archive" in err and "HV" in err and "loss=" in err
