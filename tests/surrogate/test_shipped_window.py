"""The shipped window-aware tiny checkpoint (issue 26): it sees the `window` gene where the window-blind ones do
not, scores iha-tiny and iha-tiny-swa genomes, and reproduces its recorded metrics on its held-out split."""
import numpy as np
import pytest

from forge.runtime.config import data_dir
from forge.spaces.space import load_space
from surrogate.loading import load_predictor

SWA = "forgeformer-iha-tiny-swa"
LABELS = [data_dir() / "labels" / f for f in ("iha-tiny-cpu-proxy.jsonl", "iha-tiny-swa-cpu-proxy.jsonl")]


def _windowed(n: int, seed: int) -> list:
    gs = load_space("iha-tiny-swa").sample(n, np.random.default_rng(seed))
    return [g for g in gs if any(x.active and x.attn and x.window > 0 for x in g.layers)]


def _all_windows(genomes: list, w: int) -> list:
    return [g.with_layers(x.replace(window=w if x.attn else 0) for x in g.layers) for g in genomes]


def test_a_window_moves_the_aware_prediction_and_not_the_blind_one():
    g = _windowed(24, 3)
    aware, blind = load_predictor(SWA), load_predictor("forgeformer-iha-tiny")
    assert aware.field_set == "paper+window" and blind.field_set == "paper" and len(g) >= 10
    full = _all_windows(g, 0)
    assert [x.id for x in full] != [x.id for x in g]  # the windows make other architectures
    assert np.abs(aware.predict(g)[0] - aware.predict(full)[0]).max() > 1e-3
    np.testing.assert_array_equal(blind.predict(g)[0], blind.predict(full)[0])
    short, wide = aware.predict(_all_windows(g, 16))[0], aware.predict(_all_windows(g, 128))[0]
    assert np.abs(short - wide).max() > 1e-3  # which window, not only whether one


def test_it_scores_full_attention_iha_tiny_genomes_with_an_interval():
    p = load_predictor(SWA)
    assert p.space["name"] == "iha-tiny-swa" and p.L_max == 12
    g = load_space("iha-tiny").sample(16, np.random.default_rng(1))
    mu, sigma = p.predict(g)
    lo, hi = p.interval(mu, sigma, 0.9)
    assert np.isfinite(mu).all() and (2.5 < mu).all() and (mu < 3.6).all()
    assert (lo < mu).all() and (mu < hi).all()
    assert p.conformal.provenance["tails"].startswith("two")


def test_its_metrics_reproduce_on_its_held_out_split():
    from surrogate.dataset import load_labelset, train_val_test
    from surrogate.metrics import evaluate

    p = load_predictor(SWA)
    train, _, test = train_val_test(load_labelset(LABELS), p.meta["test"]["seed"], p.meta["test"]["test_frac"])
    assert train.data_hash() == p.meta["data_hash"]  # the recorded training rows are the split's
    windowed = [any(x.active and x.attn and x.window > 0 for x in g.layers) for g in test.genomes]
    assert sum(windowed) >= 10 and not set(test.ids) & set(train.ids)
    got = evaluate(test.y, p.predict(test.genomes)[0])
    for k in ("mae", "spearman", "kendall", "mae_at_5"):
        assert got[k] == pytest.approx(p.meta["metrics"][k], abs=1e-4)
