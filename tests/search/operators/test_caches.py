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
    small = make_search(tmp_path / "small", cfg)
    small.run()
    p = small.problem
    assert max(len(p._genomes), len(p._ids), len(p._cost), len(p._loss)) <= 30 + 2 * cfg["search"]["offspring"]
    assert len(full.problem._cost) > 100 and len(small.records) <= 30 + cfg["search"]["offspring"]
    assert len(small.log._json) <= 30 + len(small.archive) and small.log._table_rows is None  # + the front, written last
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
