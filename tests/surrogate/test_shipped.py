"""The shipped checkpoint: loads without pickle, fits its space, and reproduces its recorded metrics."""
import json

import numpy as np
import pytest

from forge.runtime.config import data_dir
from forge.spaces.space import load_space
from surrogate.forgeformer import n_params
from surrogate.loading import load_predictor

SHIPPED = data_dir() / "surrogate" / "forgeformer-iha-paper"


def test_shipped_files_are_small_and_complete():
    files = [SHIPPED.with_suffix(".json"), SHIPPED.with_suffix(".safetensors")]
    assert all(f.is_file() for f in files)
    # four checkpoints (iha-paper hybrid 3.9 MB, iha-paper-all 4.8 MB with its extra trees and 1,753 scores per
    # tail, iha-tiny and iha-tiny-swa 0.8 MB each)
    assert sum(f.stat().st_size for f in (data_dir() / "surrogate").iterdir() if f.is_file()) < 11_000_000
    meta = json.loads(files[0].read_text())
    assert meta["data_hash"] and set(meta["metrics"]) >= {"mae", "spearman", "kendall", "mae_at_5"}
    # the shipped recipe is the calibrated hybrid: a low-end stretch picked by a nested split
    assert meta["recipe"]["calibrate"] and meta["recipe"]["forests"] and meta["calibration"]["k"] >= 1.0
    assert meta["calibration_fit"]["n_carve"] >= 20 and meta["calibration_fit"]["method"].startswith("nested")


def test_shipped_predictor_scores_its_space():
    p = load_predictor("forgeformer-iha-paper")
    assert p.space["name"] == "iha-paper" and p.L_max == 40
    extra = (p.members[0].cfg.n_fields - 9) * 128
    assert all(n_params(m) == 203_713 + extra for m in p.members)
    g = load_space("iha-paper").sample(16, np.random.default_rng(1))
    mu, sigma = p.predict(g)
    assert np.isfinite(mu).all() and (1.5 < mu).all() and (mu < 8).all() and (sigma == 0).all()


def test_shipped_metrics_reproduce_on_its_held_out_split(shared_csv):
    from surrogate.dataset import load_labelset, train_val_test
    from surrogate.metrics import evaluate

    p = load_predictor("forgeformer-iha-paper")
    seed, frac = p.meta["test"]["seed"], p.meta["test"]["test_frac"]
    train, _, test = train_val_test(load_labelset(shared_csv), seed, frac)
    assert train.data_hash() == p.meta["data_hash"]  # the recorded training rows are the split's
    got = evaluate(test.y, p.predict(test.genomes)[0])
    for k in ("mae", "spearman", "kendall", "mae_at_5"):
        assert got[k] == pytest.approx(p.meta["metrics"][k], abs=1e-4)


def test_eval_mode_defaults_to_the_shipped_checkpoint(shared_csv, tmp_path):
    from hydra import compose, initialize_config_module

    from forge.genomes.labels import from_llmforge_csv, write_labels
    from surrogate.cli import run

    labels, _ = from_llmforge_csv(shared_csv)
    write_labels(tmp_path / "l.jsonl", labels[:120])
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose(config_name="forge-surrogate",
                      overrides=["mode=eval", f"data={tmp_path / 'l.jsonl'}", f"out_dir={tmp_path}", "threads=1"])
    res = run(cfg)
    assert res["ckpt"] == "forgeformer-iha-paper-all" and res["n_rows"] == 120  # in-sample: it trained on them
    assert res["metrics"]["spearman"] > 0.5


def test_the_default_predictor_is_trained_on_every_label_and_declares_its_genes():
    from surrogate.predictor import DEFAULT

    p = load_predictor()
    assert DEFAULT == "forgeformer-iha-paper-all" and p.meta["n_train"] == 1753
    assert [f.kind for f in p.forests] == ["rf", "rf", "et"] and p.nn_weight == 0.25  # equal quarters
    assert p.covers["n_h"] == [1, 16] and p.covers["d_mlp"] == [512, 4096] and "window" not in p.covers
    g = load_space("iha-paper").sample(16, np.random.default_rng(1))
    mu, _ = p.predict(g)
    lo, hi = p.interval(mu, np.zeros(16), 0.95)
    assert np.isfinite(mu).all() and (lo <= mu).all() and (mu <= hi).all() and np.isfinite(hi).all()
