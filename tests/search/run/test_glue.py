"""The search loop's fast paths give what the slow ones gave: keys from encoded rows group rows exactly as
genome ids do, decoded genomes equal validated ones, a GenomeBatch's arrays equal stacked genomes', and the
compact checkpoint loads."""
from __future__ import annotations

import json

import numpy as np
import pytest

from backends.interface import Workload, as_population
from forge.spaces.arrays import GenomeBatch, PopArrays
from forge.genomes.genome import genome_from_dict
from forge.spaces.space import load_space
from search.operators import mutate
from search.evaluators import strip_precision
from search.problem import ForgeProblem
from surrogate.features import featurize
from tests.search.fakes import FakeBackend, FakePredictor


@pytest.mark.parametrize("name", ["iha-tiny", "gqa-tiny", "iha-paper-mx", "iha-tiny-swa"])
def test_row_keys_group_rows_exactly_as_ids_do(name):
    from search.evaluators import LossEvaluator

    space = load_space(name)
    rng = np.random.default_rng(3)
    att = [j for j, k in enumerate(space.codec_genes) if k in ("n_h", "n_kv", "d_qk", "d_v", "window")]
    X = space.sample_x(40, rng)
    X = np.concatenate([X, mutate(X, space, rng)])
    X3 = X[:, :space.n_layer_var].reshape(len(X), space.L_max, space.n_genes)
    Y3 = space.sample_x(len(X), rng)[:, :space.n_layer_var].reshape(X3.shape)  # other values everywhere...
    keep = X3[:, :, :1].astype(bool) & (X3[:, :, 1:2].astype(bool) | ~np.isin(np.arange(space.n_genes), att)[None, None])
    keep[:, :, :2] = True  # ...except where they build the network: same masks, same live genes
    Y = np.concatenate([np.where(keep, X3, Y3).reshape(len(X), -1), X[:, space.n_layer_var:]], axis=1)
    X = np.concatenate([X, space.repair_x(Y)])
    prob = ForgeProblem(space, LossEvaluator(FakePredictor()), FakeBackend(), Workload(), ["val_loss"], [])
    keys, ids = prob.keys(X), [g.id for g in space.decode(X)]
    assert len(set(ids)) < len(ids)  # the draw holds real duplicates
    pairs = {(k, i) for k, i in zip(keys, ids)}
    assert len({k for k, _ in pairs}) == len({i for _, i in pairs}) == len(pairs)  # one id per key and back


@pytest.mark.parametrize("name", ["iha-tiny", "gqa-tiny", "iha-paper-mx", "iha-tiny-swa"])
def test_the_codec_batch_matches_stacked_validated_genomes(name):
    space = load_space(name)
    X = space.sample_x(30, np.random.default_rng(5))
    fast = space.decode(X)
    slow = [genome_from_dict(g.to_dict()) for g in fast]
    assert fast == slow and [g.id for g in fast] == [g.id for g in slow]
    batch = GenomeBatch(fast, space.to_arrays(X))
    stacked = PopArrays.from_genomes(slow)
    for k in ("active", "attn", "n_h", "n_kv", "d_qk", "d_v", "d_mlp", "window", "d_model", "weight_bytes"):
        assert np.array_equal(getattr(as_population(batch), k), getattr(stacked, k), equal_nan=True), k
    assert np.array_equal(featurize(strip_precision(batch), "derived").x, featurize(strip_precision(slow), "derived").x)


def test_the_checkpoint_is_compact_and_loads(make_search, tmp_path):
    from search.state import CHECKPOINT, load_checkpoint
    from tests.search.conftest import tiny_cfg

    s = make_search(tmp_path, tiny_cfg(search={"generations": 1}))
    s.run()
    text = (s.run_dir / CHECKPOINT).read_text()
    assert "\n " not in text and load_checkpoint(s.run_dir)["generation"] == 1
    assert json.loads(text)["n_evaluated"] == s.problem.n_evaluated


def test_logs_and_checkpoint_are_made_durable_every_few_seconds_and_at_the_end(make_search, tmp_path, monkeypatch):
    import search.runlog as runlog
    from tests.search.conftest import tiny_cfg

    calls: list[list[str]] = []
    real = runlog.sync_files

    def spy(paths):
        paths = list(paths)
        calls.append([p.name for p in paths])
        real(paths)

    monkeypatch.setattr(runlog, "sync_files", spy)
    monkeypatch.setattr(runlog, "DURABLE_EVERY_S", 1e9)  # a fast run: generations far shorter than the interval
    make_search(tmp_path / "a", tiny_cfg(search={"generations": 3})).run()
    end = ["archive.jsonl", "history.jsonl", "loss_cache.jsonl", "checkpoint.json"]
    tick = ["archive.jsonl", "loss_cache.jsonl"]  # what the durable checkpoint covers (search.ledger)
    assert calls == [tick, end]  # the first checkpoint, then only the end
    calls.clear()
    monkeypatch.setattr(runlog, "DURABLE_EVERY_S", 0.0)  # a slow run (real training): every generation
    make_search(tmp_path / "b", tiny_cfg(search={"generations": 3})).run()
    assert calls == [tick] * 4 + [end]
