"""Issue 53 §3: a search's memory is flat with its length. Its per-genome caches keep their newest entries, its
records the population's, and archive.csv is streamed from archive.jsonl: the run writes the same files as one
whose caches never drop anything."""
from __future__ import annotations

from search import caches
from search.caches import trim
from tests.search.conftest import tiny_cfg

FILES = ("pareto.jsonl", "archive.jsonl", "history.jsonl", "front.csv", "archive.csv", "loss_cache.jsonl")


def test_trim_drops_the_oldest_entries():
    d = {k: k for k in range(10)}
    trim(d, 4)
    assert list(d) == [6, 7, 8, 9]
    trim(d, 4)
    assert list(d) == [6, 7, 8, 9]


def test_bounded_caches_write_the_same_run_as_unbounded_ones(make_search, tmp_path, monkeypatch):
    cfg = tiny_cfg(search={"generations": 14})  # 8 + 14 x 12 = 176 evaluations
    full = make_search(tmp_path / "full", cfg)
    full.run()
    monkeypatch.setattr(caches, "CACHE_ROWS", 30)
    monkeypatch.setattr(caches, "GENOME_ROWS", 10)
    small = make_search(tmp_path / "small", cfg)
    small.run()
    p = small.problem
    assert max(len(p._cost), len(p._loss)) <= 30 + 2 * cfg["search"]["offspring"]
    assert len(p._genomes) == len(p._ids) <= 10 + 2 * cfg["search"]["offspring"]
    assert len(full.problem._cost) > 100 and len(small.records) == len(full.records) == cfg["search"]["pop_size"]
    assert len(small.log._json) <= 30 + len(small.archive) and small.log._table_rows is None  # + the front, written last
    for name in FILES:
        a, b = (tmp_path / run / name for run in ("full", "small"))
        if a.exists() or b.exists():
            assert a.read_bytes() == b.read_bytes(), name


def test_a_user_objective_s_cache_is_bounded_and_writes_the_same_run(make_search, tmp_path, monkeypatch):
    """A user function's values are kept per genome id like the backend's costs: the newest `CACHE_ROWS`."""
    from collections import defaultdict

    from forge import plugins

    monkeypatch.setattr(plugins, "_registered", defaultdict(set))  # the registration ends with the test
    monkeypatch.setattr(plugins, "_live", {})
    cfg = tiny_cfg(objectives=["val_loss", {"name": "mlp_width", "fn": "tests.search.user_plugins.width"}],
                   search={"generations": 10})
    plugins.trust(cfg)  # the config the user launched names their function
    full = make_search(tmp_path / "full", cfg)
    full.run()
    monkeypatch.setattr(caches, "CACHE_ROWS", 30)
    small = make_search(tmp_path / "small", cfg)
    small.run()
    assert len(full.problem._user) > 60 and len(small.problem._user) <= 30 + 2 * cfg["search"]["offspring"]
    for name in FILES:
        a, b = (tmp_path / run / name for run in ("full", "small"))
        if a.exists() or b.exists():
            assert a.read_bytes() == b.read_bytes(), name


def test_the_codec_s_shared_layers_start_afresh_past_their_bound(monkeypatch):
    """Equal slots share one LayerGene; past `LAYER_CACHE` distinct ones the table starts afresh (same genomes)."""
    import numpy as np

    from forge.spaces import codec
    from forge.spaces.space import load_space

    space = load_space("iha-tiny")
    X = space.sample_x(64, np.random.default_rng(0))
    want = [g.id for g in space.decode(X)]
    monkeypatch.setattr(codec, "LAYER_CACHE", 10)
    fresh = load_space("iha-tiny")
    assert [g.id for g in fresh.decode(X)] == want and [g.id for g in fresh.decode(X)] == want
    assert len(fresh._tables["layers"]) <= 10 + len(X) * fresh.L_max


def test_iter_jsonl_reads_what_read_jsonl_reads(tmp_path):
    """Streamed line by line, with the same torn-tail tolerance and the same refusal of a corrupt middle line."""
    import pytest

    from search.errors import ResumeError
    from search.state import iter_jsonl, read_jsonl

    p = tmp_path / "a.jsonl"
    p.write_text('{"id": "a"}\n\n{"id": "b", "x": [1, 2]}\n{"id": "c", "x"')
    assert list(iter_jsonl(p, True)) == read_jsonl(p, True) == [{"id": "a"}, {"id": "b", "x": [1, 2]}]
    for tolerate in (False, True):
        p.write_text('{"id": "a"}\n{"id": \n{"id": "b"}\n')
        with pytest.raises(ResumeError, match=r"a.jsonl:2: corrupt line"):
            list(iter_jsonl(p, tolerate))
    assert list(iter_jsonl(tmp_path / "missing.jsonl")) == []


def test_constraint_use_streamed_from_the_archive_is_the_records_one(tmp_path):
    """summary.json's constraint_use, read line by line (the latest record of each id), equals the one computed
    from the records themselves."""
    import json

    import numpy as np

    from search.constraints import constraint_use, parse_constraint, use_of_values
    from search.summary import evaluated_values

    rng = np.random.default_rng(0)
    rows = [{"id": f"g{int(i)}", "metrics": {"val_loss": float(v), "tpot_ms": float(t)}}
            for i, v, t in zip(rng.integers(0, 300, 5000), rng.uniform(3, 4.5, 5000), rng.uniform(0.1, 2, 5000))]
    rows[7]["metrics"].pop("tpot_ms")
    (tmp_path / "archive.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"id": "torn')
    latest = list({r["id"]: r for r in rows}.values())
    cons = [parse_constraint("val_loss < 3.8"), parse_constraint("tpot_ms <= 1.5")]
    got = use_of_values(cons, evaluated_values(tmp_path, ["val_loss", "tpot_ms"]))
    assert got == constraint_use(cons, latest) and got[0]["evaluated"] == 300
