"""Conformal loss intervals: coverage at the stated level on held-back folds, the shipped calibrations,
the checkpoint round trip and `forge-surrogate mode=calibrate`."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from forge.runtime.config import data_dir
from surrogate.cli import run as surrogate_run
from surrogate.conformal import ConformalInterval, ScoreBins, coverage_cv
from surrogate.dataset import load_labelset, train_val_test
from surrogate.fit import held_predictions
from surrogate.checkpoints import CheckpointError
from surrogate.loading import load_predictor

TINY_LABELS = data_dir() / "labels" / "iha-tiny-cpu-proxy.jsonl"


@pytest.fixture(scope="module")
def tiny_held():
    """The shipped tiny surrogate's held-out rows and its predictions on them (deterministic and 10 MC passes)."""
    torch.set_num_threads(1)
    p = load_predictor("forgeformer-iha-tiny")
    t = p.meta["test"]
    _, _, held = train_val_test(load_labelset(TINY_LABELS), t["seed"], t["test_frac"])
    return p, held, *held_predictions(p, held, 10, 0)


def test_rank_of_the_conformal_quantile():
    b = ScoreBins.fit(np.zeros(9), np.arange(1.0, 10.0), bins=1)  # scores 1..9
    assert b.quantile(0.8)[0] == 8.0  # ceil(10 · 0.8) = 8th smallest
    assert b.quantile(0.9)[0] == 9.0
    assert b.quantile(0.95)[0] == np.inf  # ceil(10 · 0.95) = 10 > 9 rows: no finite bound exists


def test_bins_split_by_predicted_loss_and_keep_at_least_30_rows():
    mu = np.linspace(2.0, 4.0, 90)
    b = ScoreBins.fit(mu, np.where(mu < 3.0, 0.1, 1.0), bins=5)
    assert len(b.scores) == 3 and all(len(s) == 30 for s in b.scores)  # 5 asked, 90 // 30 = 3 allowed
    # each μ gets its own bin's width (at 80 %, 6 of a bin's 30 scores lie at or beyond the rank: no pooling)
    assert b.half_width(np.array([2.1, 3.9]), 0.8).tolist() == [0.1, 1.0]


def test_synthetic_heteroscedastic_coverage_on_held_back_folds():
    rng = np.random.default_rng(0)
    mu = rng.uniform(2.0, 4.0, 600)
    scale = 0.02 + 0.1 * (mu - 2.0)  # errors grow with the predicted loss, as on the real label sets
    y = mu + rng.normal(0.0, 1.0, 600) * scale
    cv = coverage_cv(y, mu, mu, scale / 7.0, 0.9, bins=1)  # σ has the right shape but a 7x too small scale
    for method in ("conformal-residual", "conformal-sigma"):
        assert abs(cv[method]["coverage"] - 0.9) <= 0.05, cv
    assert cv["conformal-sigma"]["width"] < cv["conformal-residual"]["width"]  # σ carries the local scale


def _uncalibrated(mu_mc, sigma, level=0.9):
    z = {0.9: 1.6449}[level]  # the textbook Gaussian interval on raw MC-dropout σ: no calibration
    return mu_mc - z * sigma, mu_mc + z * sigma


def test_tiny_surrogate_interval_covers_its_level_on_held_back_folds(tiny_held):
    """Calibrate on 4 folds of the checkpoint's held-out rows, measure on the 5th: within ±5 points of 90 %.
    Skipping the calibration (raw σ under a Gaussian z) covers far less, so the same check fails on it."""
    _, held, mu, mu_mc, sigma = tiny_held
    cv = coverage_cv(held.y, mu, mu_mc, sigma, 0.9)
    for method in ("conformal-residual", "conformal-sigma"):
        assert abs(cv[method]["coverage"] - 0.9) <= 0.05, cv
    lo, hi = _uncalibrated(mu_mc, sigma)
    skipped = float(np.mean((held.y >= lo) & (held.y <= hi)))
    assert abs(skipped - 0.9) > 0.05, skipped  # the check has teeth: without calibration it fails


def test_iha_paper_interval_covers_its_level_on_held_back_folds(shared_csv):
    torch.set_num_threads(1)
    p = load_predictor("forgeformer-iha-paper")
    t = p.meta["test"]
    _, _, held = train_val_test(load_labelset(shared_csv), t["seed"], t["test_frac"])
    mu, _ = p.predict(held.genomes)
    cv = coverage_cv(held.y, mu, None, None, 0.9)
    assert abs(cv["conformal-residual"]["coverage"] - 0.9) <= 0.05, cv
    assert held.data_hash() == p.conformal.provenance["rows_hash"]  # calibrated on exactly these rows


def test_shipped_checkpoints_carry_a_conformal_calibration_with_provenance():
    for name in ("forgeformer-iha-paper", "forgeformer-iha-tiny", "forgeformer-iha-tiny-swa"):
        p = load_predictor(name)
        prov = p.conformal.provenance
        assert prov["split"] == f"train_val_test(seed={p.meta['test']['seed']}, test_frac={p.meta['test']['test_frac']})"
        assert prov["n_rows"] == p.meta["test"]["n_test"] and prov["n_mc"] == 10
        for method, check in prov["cv_check"].items():
            if method.startswith("conformal-"):
                assert abs(check["coverage"] - 0.9) <= 0.05, (name, method, check)


def test_interval_brackets_mu_and_picks_sigma_only_when_every_sigma_is_positive():
    p = load_predictor("forgeformer-iha-tiny")
    mu = np.array([2.9, 3.0, 3.2])
    lo, hi = p.interval(mu, np.zeros(3), 0.9)
    assert np.all(lo < mu) and np.all(hi > mu)
    assert p.interval_info(False)["method"] == "conformal-residual"
    assert p.interval_info(True)["method"] == "conformal-sigma"
    lo2, hi2 = p.interval(mu, np.full(3, 0.01), 0.9)
    assert not np.allclose(hi2 - lo2, hi - lo)
    lo8, hi8 = p.interval(mu, np.zeros(3), 0.5)
    assert np.all(hi8 - lo8 < hi - lo)  # a lower level gives a narrower interval
    with pytest.raises(ValueError, match="allowed: a number with 0 < level < 1"):
        p.interval(mu, np.zeros(3), 1.5)


def test_uncalibrated_checkpoint_gives_nan_not_zero_width(tmp_path):
    p = load_predictor("forgeformer-iha-tiny")
    p.conformal = None
    p.save(tmp_path / "plain")
    q = load_predictor(tmp_path / "plain")
    lo, hi = q.interval(np.array([3.0]), np.zeros(1), 0.9)
    assert np.isnan(lo).all() and np.isnan(hi).all() and q.interval_info(False)["method"] == "none"


def test_round_trip_and_malformed_sidecar(tmp_path):
    p = load_predictor("forgeformer-iha-tiny")
    p.save(tmp_path / "ck")
    q = load_predictor(tmp_path / "ck")
    assert q.conformal == p.conformal
    meta = json.loads((tmp_path / "ck.json").read_text())
    meta["conformal"]["residual"]["upper"]["edges"] = [1.0]  # one edge too few or many for its score lists
    (tmp_path / "ck.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="conformal"):
        load_predictor(tmp_path / "ck")


def _cal_cfg(tmp_path, ckpt, data):
    return OmegaConf.create({"mode": "calibrate", "ckpt": str(ckpt), "data": str(data), "seed": 0, "threads": 1,
                             "out_dir": str(tmp_path / "out"),
                             "interval": {"n_mc": 10, "bins": [0.1, 0.4, 0.7], "level": 0.9}})


def _copy_tiny(tmp_path):
    src = data_dir() / "surrogate" / "forgeformer-iha-tiny"
    for ext in (".json", ".safetensors"):
        shutil.copy(src.with_suffix(ext), tmp_path / f"ck{ext}")
    return tmp_path / "ck"


def test_mode_calibrate_reproduces_the_shipped_tiny_calibration(tmp_path):
    _copy_tiny(tmp_path)
    meta = json.loads((tmp_path / "ck.json").read_text())
    del meta["conformal"]
    (tmp_path / "ck.json").write_text(json.dumps(meta))
    res = surrogate_run(_cal_cfg(tmp_path, tmp_path / "ck", TINY_LABELS))
    assert res["n_rows"] == 68
    got = load_predictor(tmp_path / "ck").conformal.to_dict()
    shipped = load_predictor("forgeformer-iha-tiny").conformal.to_dict()
    # the scores are |y − μ| of a float encoder: another instruction set moves them in the last stored digit
    # (1e-6, up to ~4e-6 on the MC-dropout σ scores), so they match to 1e-5 nats, 1000x below label noise
    assert _leaves(got).keys() == _leaves(shipped).keys()
    for k, v in _leaves(shipped).items():
        assert _leaves(got)[k] == (pytest.approx(v, rel=1e-6, abs=1e-5) if isinstance(v, float) else v), k


def _leaves(d, path=""):
    """{path: value} of a nested dict/list (the calibration's JSON form)."""
    if isinstance(d, dict):
        return {k: v for key, sub in d.items() for k, v in _leaves(sub, f"{path}.{key}").items()}
    if isinstance(d, list):
        return {k: v for i, sub in enumerate(d) for k, v in _leaves(sub, f"{path}[{i}]").items()}
    return {path: d}


def test_mode_calibrate_refuses_labels_that_do_not_remake_the_training_split(tmp_path, tiny_jsonl):
    with pytest.raises(ValueError, match="does not re-make .* training split"):
        surrogate_run(_cal_cfg(tmp_path, _copy_tiny(tmp_path), tiny_jsonl))


def test_a_replay_finetune_keeps_the_base_calibration_and_says_so():
    from forge.genomes.labels import load_any
    from surrogate.fit import finetune

    torch.set_num_threads(1)
    labels, _ = load_any(TINY_LABELS)
    p = finetune("forgeformer-iha-tiny", labels[:8], labels[8:40], epochs=1)
    base = load_predictor("forgeformer-iha-tiny").conformal
    assert p.conformal.residual == base.residual and p.conformal.sigma == base.sigma
    assert "forgeformer-iha-tiny" in p.conformal.provenance["measured_on"]


def test_mode_train_calibrates_on_its_test_split_as_mode_calibrate_does(tiny_jsonl, tmp_path):
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose(config_name="forge-surrogate", overrides=[
            "threads=1", f"data={tiny_jsonl}", "space=iha-tiny", "surrogate.epochs=2", f"out={tmp_path / 'ck'}",
            f"out_dir={tmp_path / 'train'}"])
    res = surrogate_run(cfg)
    trained = load_predictor(tmp_path / "ck").conformal
    assert trained.provenance["n_rows"] == res["n_test"] and trained.provenance["data"] == tiny_jsonl.name
    meta = json.loads((tmp_path / "ck.json").read_text())
    del meta["conformal"]
    (tmp_path / "ck.json").write_text(json.dumps(meta))
    surrogate_run(_cal_cfg(tmp_path, tmp_path / "ck", tiny_jsonl))
    assert load_predictor(tmp_path / "ck").conformal == trained


def _skewed(n=1500, seed=0):
    """Errors like a shrinking model's: mostly small and symmetric, a long tail of rows worse than predicted."""
    rng = np.random.default_rng(seed)
    mu = rng.uniform(2.5, 3.5, n)
    y = mu + rng.normal(0.0, 0.03, n) + rng.exponential(0.15, n) * (rng.random(n) < 0.3)
    return y, mu


def test_one_tailed_scores_put_every_miss_above_two_tailed_split_them_evenly():
    y, mu = _skewed()
    ids = [f"a{i // 2}" for i in range(len(y))]  # pairs of rows share an architecture
    one = coverage_cv(y, mu, None, None, 0.9, ids=ids, two_tailed=False)["conformal-residual"]
    two = coverage_cv(y, mu, None, None, 0.9, ids=ids)["conformal-residual"]
    assert one["below"] < 0.01 and one["above"] > 0.08, one  # |error| scores: every miss on the optimistic side
    for tail in ("below", "above"):
        assert abs(two[tail] - 0.05) <= 0.025, two
    assert abs(two["coverage_best10"] - 0.9) <= 0.05, two


def test_tails_round_trip_and_bins_at_quantile_levels():
    y, mu = _skewed(600)
    cal = ConformalInterval.fit(y, mu, bins=(0.1, 0.4, 0.7))
    assert cal.two_tailed and len(cal.residual.upper.scores) == 4 and len(cal.residual.upper.scores[0]) == 60
    lo, hi = cal.interval(mu[:5], np.zeros(5), 0.9)
    assert np.all(hi - mu[:5] > mu[:5] - lo)  # the upper tail is the long one
    back = ConformalInterval.from_dict(json.loads(json.dumps(cal.to_dict())))  # scores stored to 6 decimals
    assert back.two_tailed and back.to_dict() == cal.to_dict()
    assert ScoreBins.fit(mu[:100], y[:100] - mu[:100], (0.1, 0.5)).edges == (float(np.quantile(mu[:100], 0.5)),)


def test_one_tailed_sidecars_written_before_two_tails_still_load_and_stay_symmetric():
    y, mu = _skewed(300)
    old = ConformalInterval.fit(y, mu, bins=3, two_tailed=False).to_dict()
    assert set(old["residual"]) == {"edges", "scores"}  # the format every sidecar had before issue 27
    cal = ConformalInterval.from_dict(old)
    lo, hi = cal.interval(mu[:4], np.zeros(4), 0.9)
    assert not cal.two_tailed and np.allclose((lo + hi) / 2, mu[:4])


def test_mode_calibrate_refuses_to_rewrite_a_shipped_checkpoint_and_writes_a_copy_with_out(tmp_path):
    """A shipped checkpoint is the package's data: calibrating it in place is refused in one line; `out=` writes
    the same weights and the recomputed sidecar beside each other, and leaves the shipped files untouched."""
    from forge.errors import UserError

    shipped = data_dir() / "surrogate" / "forgeformer-iha-tiny"
    before = {ext: shipped.with_suffix(ext).read_bytes() for ext in (".json", ".safetensors")}
    cfg = _cal_cfg(tmp_path, "forgeformer-iha-tiny", TINY_LABELS)
    with pytest.raises(UserError, match="shipped checkpoint.*allowed: out=<stem>"):
        surrogate_run(cfg)
    cfg.out = str(tmp_path / "copy")
    res = surrogate_run(cfg)
    assert res["checkpoint"] == str(tmp_path / "copy.json")
    assert (tmp_path / "copy.safetensors").read_bytes() == before[".safetensors"]
    assert load_predictor(tmp_path / "copy").conformal.provenance["n_rows"] == res["n_rows"] == 68
    assert {ext: shipped.with_suffix(ext).read_bytes() for ext in before} == before
