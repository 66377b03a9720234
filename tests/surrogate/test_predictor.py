import hashlib
import json

import numpy as np
import pytest
import torch

from forge.genomes.genome import Genome, LayerGene
from surrogate.dataset import load_labelset, train_val_test
from surrogate.features import FeatureError, MinMax, featurize
from surrogate.fit import finetune, train_forgeformer
from surrogate.checkpoints import CheckpointError
from surrogate.loading import load_predictor
from surrogate.training import Recipe, ReplayBatches

FAST = dict(epochs=2, lr=1e-3, standardize=True)


@pytest.fixture(scope="module")
def split(tiny_jsonl):
    return train_val_test(load_labelset(tiny_jsonl), seed=0)


@pytest.fixture(scope="module")
def base(split, tmp_path_factory):
    tr, va, _ = split
    p = train_forgeformer(tr, va, Recipe(**FAST), "iha-tiny", L_max=12)
    stem = tmp_path_factory.mktemp("ckpt") / "base"
    p.save(stem)
    return p, stem


def test_normalization_uses_train_split_only(split, base):
    from dataclasses import replace

    from forge.genomes.labels import Label
    from surrogate.dataset import from_labels

    tr, va, te = split
    p, _ = base
    ref = MinMax.fit(featurize(tr.genomes, "paper", 12))
    assert np.array_equal(p.norm.lo, ref.lo) and np.array_equal(p.norm.hi, ref.hi)
    # an out-of-range validation architecture must not move the statistics
    g = va.genomes[0]
    wide = g.with_layers([replace(x, d_mlp=4096) for x in g.layers])
    va2 = from_labels([Label(x, float(y)) for x, y in zip(va.genomes + [wide], list(va.y) + [2.0])])
    q = train_forgeformer(tr, va2, Recipe(epochs=1), "iha-tiny", L_max=12)
    assert np.array_equal(q.norm.hi, ref.hi) and q.norm.hi[4] == 1024
    assert MinMax.fit(featurize(va2.genomes, "paper", 12)).hi[4] == 4096


def test_mc_sigma_positive_with_dropout_and_zero_without(split, base):
    p, _ = base
    g = split[2].genomes[:8]
    mu0, s0 = p.predict(g)
    mu1, _ = p.predict(g)
    assert np.array_equal(mu0, mu1) and (s0 == 0).all()
    mu, s = p.predict(g, n_mc=10)
    assert (s > 0).all() and mu.shape == (8,) and np.abs(mu - mu0).max() < 1.0


def test_mc_passes_are_seeded_and_dealt_round_robin_to_members(split, base, monkeypatch):
    from surrogate.numpy_encoder import NumpyForgeFormer
    from surrogate.predictor import ForgeFormerPredictor

    p, _ = base
    g = split[2].genomes[:6]
    p.seed_mc(5)
    a = p.predict(g, n_mc=6)
    p.seed_mc(5)
    assert all(np.array_equal(u, v) for u, v in zip(a, p.predict(g, n_mc=6)))
    # a 3-member ensemble runs n_mc passes in all (4 + 3 + 3), not n_mc per member
    calls, real = [], NumpyForgeFormer.__call__  # on the CPU every member's pass runs in numpy
    monkeypatch.setattr(NumpyForgeFormer, "__call__", lambda m, x, *a: calls.append(x.shape[0]) or real(m, x, *a))
    trio = ForgeFormerPredictor(p.members * 3, p.norm, p.field_set, p.space, p.target)
    mu, s = trio.predict(g, n_mc=10)
    assert sum(calls) == 10 * len(g) and (s > 0).all()


def test_checkpoint_roundtrip_is_exact(split, base):
    p, stem = base
    q = load_predictor(str(stem) + ".json")
    g = split[2].genomes
    assert np.array_equal(p.predict(g)[0], q.predict(g)[0])
    assert q.space == {"name": "iha-tiny", "L_max": 12, "d_model": 128, "block_size": 256, "vocab_size": 256}


def _corrupt(stem, tmp_path, edit):
    meta = json.loads(stem.with_suffix(".json").read_text())
    edit(meta)
    bad = tmp_path / "bad"
    bad.with_suffix(".json").write_text(json.dumps(meta))
    bad.with_suffix(".safetensors").write_bytes(stem.with_suffix(".safetensors").read_bytes())
    return bad


def test_mismatched_checkpoint_is_refused(base, tmp_path):
    _, stem = base
    with pytest.raises(CheckpointError, match="field layout"):
        load_predictor(_corrupt(stem, tmp_path, lambda m: m.update(fields=m["fields"][::-1])))
    with pytest.raises(CheckpointError, match="format"):
        load_predictor(_corrupt(stem, tmp_path, lambda m: m.update(format="pickle")))
    with pytest.raises(CheckpointError, match="does not match its config"):
        load_predictor(_corrupt(stem, tmp_path, lambda m: m["config"].update(d_ffn=128)))
    with pytest.raises(CheckpointError, match="not found"):
        load_predictor(tmp_path / "nothing")


def test_genomes_of_another_space_are_refused(base):
    p, _ = base
    other = Genome(d_model=768, block_size=1024, layers=(LayerGene(4, 2, 64, 64, 512),))
    with pytest.raises(FeatureError, match="d_model=768"):
        p.predict([other])
    deep = Genome(d_model=128, block_size=256, vocab_size=256, layers=tuple(LayerGene(2, 1, 16, 16, 128) for _ in range(13)))
    with pytest.raises(FeatureError, match="at most 12"):
        p.predict([deep])


def test_replay_batches_mix_five_old_rows_per_new_row():
    new = (np.zeros((12, 4, 2)), np.ones((12, 4), bool), np.ones(12))
    old = (np.zeros((100, 4, 2)), np.ones((100, 4), bool), np.zeros(100))
    batches = list(ReplayBatches(new, old, ratio=5.0, batch=32, seed=0))
    assert sum(int((b[2] == 1).sum()) for b in batches) == 12  # every new row once per epoch
    for b in batches:
        k = int((b[2] == 1).sum())
        assert int((b[2] == 0).sum()) == 5 * k


def test_finetune_restarts_from_the_frozen_base(split, base, tmp_path):
    _, stem = base
    tr, _, te = split
    before = hashlib.sha256(stem.with_suffix(".safetensors").read_bytes()).hexdigest()
    first = finetune(stem, te.take(range(0, 6)), tr, epochs=2, seed=1)
    first.save(tmp_path / "refit1")
    second = finetune(stem, te.take(range(6, 12)), tr, epochs=2, seed=1)
    alone = finetune(stem, te.take(range(6, 12)), tr, epochs=2, seed=1)  # as if `first` never happened
    chained = finetune(tmp_path / "refit1", te.take(range(6, 12)), tr, epochs=2, seed=1)
    g = te.genomes
    assert np.array_equal(second.predict(g)[0], alone.predict(g)[0])
    assert not np.allclose(second.predict(g)[0], chained.predict(g)[0])
    assert hashlib.sha256(stem.with_suffix(".safetensors").read_bytes()).hexdigest() == before
    assert second.meta["finetune"]["base"] == str(stem) and second.meta["finetune"]["n_new"] == 6


def test_training_is_reproducible_with_a_seed(split):
    tr, va, te = split
    a = train_forgeformer(tr, va, Recipe(epochs=1, seed=5), "iha-tiny", 12)
    b = train_forgeformer(tr, va, Recipe(epochs=1, seed=5), "iha-tiny", 12)
    assert np.array_equal(a.predict(te.genomes)[0], b.predict(te.genomes)[0])
    for x, y in zip(a.members[0].parameters(), b.members[0].parameters()):
        assert torch.equal(x, y)



def test_members_trained_in_worker_processes_equal_sequential_training(split):
    """workers = 2 trains members in spawned processes (one thread each): same weights and val curves as
    one process with one thread, in the same member order."""
    tr, va, te = split
    seq = train_forgeformer(tr, va, Recipe(epochs=2, seed=3, n_members=2), "iha-tiny", 12)
    par = train_forgeformer(tr, va, Recipe(epochs=2, seed=3, n_members=2, workers=2), "iha-tiny", 12)
    assert seq.meta["members"] == par.meta["members"]
    for ms, mp in zip(seq.members, par.members):
        for x, y in zip(ms.state_dict().values(), mp.state_dict().values()):
            assert torch.equal(x, y)
    assert not torch.equal(seq.members[0].head.weight, seq.members[1].head.weight)  # two seeds, two members
    assert np.array_equal(seq.predict(te.genomes, n_mc=4)[1], par.predict(te.genomes, n_mc=4)[1])
    with pytest.raises(ValueError, match="workers = 0; allowed"):
        train_forgeformer(tr, va, Recipe(epochs=1, workers=0), "iha-tiny", 12)

def test_finetune_without_replay_corpus(split, base):
    _, stem = base
    te = split[2]
    p = finetune(stem, te.take(range(0, 6)), [], epochs=1, seed=0)
    assert p.meta["finetune"]["n_replay"] == 0 and np.isfinite(p.predict(te.genomes)[0]).all()


@pytest.fixture(scope="module")
def hybrid(split, tmp_path_factory):
    tr, va, _ = split
    p = train_forgeformer(tr, va, Recipe(**FAST, n_members=2, forests=True, forest_trees=6, field_set="derived"),
                          "iha-tiny", L_max=12)
    stem = tmp_path_factory.mktemp("hyb") / "hybrid"
    p.save(stem)
    return p, stem


def test_hybrid_blends_encoder_and_forests_and_roundtrips(split, hybrid):
    p, stem = hybrid
    g = split[2].genomes
    assert len(p.forests) == 2 and p.nn_weight == pytest.approx(1 / 3)
    enc, _ = p.encoder_predict(g, 0)
    trees = np.mean([f.predict(g) for f in p.forests], axis=0)
    mu, sigma = p.predict(g)
    assert np.allclose(mu, enc / 3 + 2 * trees / 3) and (sigma == 0).all()
    _, s_mc = p.predict(g, n_mc=6)
    assert (s_mc > 0).all()
    q = load_predictor(stem)
    assert len(q.forests) == 2 and np.array_equal(q.predict(g)[0], mu)
    # the forests were fit on train + val (fixed settings, nothing selected on val)
    tv = np.concatenate([split[0].y, split[1].y])
    assert np.allclose(q.forests[0].target.grid_y[[0, -1]], [tv.min(), tv.max()])


def test_hybrid_with_damaged_forest_arrays_is_refused(hybrid, tmp_path):
    from safetensors.numpy import load_file, save_file

    _, stem = hybrid
    t = load_file(str(stem.with_suffix(".safetensors")))
    t["f1.value"] = t["f1.value"][:-3]
    bad = tmp_path / "bad"
    save_file(t, str(bad.with_suffix(".safetensors")))
    bad.with_suffix(".json").write_text(stem.with_suffix(".json").read_text())
    with pytest.raises(CheckpointError, match="forest arrays"):
        load_predictor(bad)


def test_hybrid_finetune_refits_forests_on_replay_plus_new(split, hybrid):
    _, stem = hybrid
    tr, va, te = split
    ft = finetune(stem, te, tr, ratio=5.0, epochs=1, seed=0)
    ends = lambda p: p.forests[0].target.grid_y[[0, -1]]  # noqa: E731
    both = lambda *d: [min(x.y.min() for x in d), max(x.y.max() for x in d)]  # noqa: E731
    assert np.allclose(ends(ft), both(tr, te))  # refit on replay + new rows
    assert np.allclose(ends(load_predictor(stem)), both(tr, va))  # base untouched


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    from forge.genomes.labels import write_labels
    from tests.surrogate.conftest import synth_labels

    path = tmp_path_factory.mktemp("cal") / "labels.jsonl"
    write_labels(path, synth_labels(300, seed=3))
    tr, va, te = train_val_test(load_labelset(path), seed=0)
    p = train_forgeformer(tr, va, Recipe(**FAST, forests=True, forest_trees=8, calibrate=True), "iha-tiny", 12)
    stem = tmp_path_factory.mktemp("calck") / "cal"
    p.save(stem)
    return p, stem, (tr, va, te)


def test_calibration_only_stretches_the_model_and_roundtrips(calibrated):
    from surrogate.trees import forests_predict

    p, stem, (tr, va, te) = calibrated
    assert p.calib is not None and p.meta["calibration_fit"]["n_carve"] >= 20
    enc = p.encoder_predict(te.genomes, 0)[0]
    blend = enc / 3 + 2 * forests_predict(p.forests, te.genomes) / 3
    mu, _ = p.predict(te.genomes)
    assert np.allclose(mu, p.calib.apply(blend, np.zeros_like(blend))[0])
    assert (np.argsort(mu, kind="stable") == np.argsort(blend, kind="stable")).all()
    q = load_predictor(stem)
    assert q.calib == p.calib and np.array_equal(q.predict(te.genomes)[0], mu)


def test_stretch_is_picked_by_a_nested_split(calibrated, monkeypatch):
    """The factor is chosen on an inner carve of the training rows, predicted by a fit that never saw it and
    selected its epochs on the usual validation carve; validation and test rows never reach the choice.
    The returned model is the fit on all training rows, identical to an uncalibrated fit."""
    import surrogate.fit as fit_mod
    from surrogate.calibration import LowEndStretch

    p, _, (tr, va, te) = calibrated
    fits, picks, real_fit, real_pick = [], [], fit_mod._fit, LowEndStretch.fit.__func__
    monkeypatch.setattr(fit_mod, "_fit", lambda t, v, *a: fits.append((set(t.ids), set(v.ids))) or real_fit(t, v, *a))
    monkeypatch.setattr(LowEndStretch, "fit", classmethod(lambda c, pr, y: picks.append((pr, y)) or real_pick(c, pr, y)))
    recipe = Recipe(**FAST, forests=True, forest_trees=8, calibrate=True)
    again = train_forgeformer(tr, va, recipe, "iha-tiny", 12)
    (full, v0), (inner, v1) = fits
    carve = full - inner
    assert full == set(tr.ids) and v0 == v1 == set(va.ids) and len(carve) >= 20
    assert not carve & (set(va.ids) | set(te.ids))
    (pred, y), = picks
    rows = [i for i, x in enumerate(tr.ids) if x in carve]
    assert sorted(y) == sorted(tr.y[rows]) and len(pred) == len(rows)
    assert again.calib.k == p.calib.k and again.calib.cut == pytest.approx(p.calib.cut, abs=1e-6)  # by seed
    plain = train_forgeformer(tr, va, Recipe(**FAST, forests=True, forest_trees=8), "iha-tiny", 12)
    raw = plain.predict(te.genomes)[0]
    np.testing.assert_allclose(p.calib.apply(raw, np.zeros_like(raw))[0], p.predict(te.genomes)[0], atol=1e-6)


def test_bad_calibration_in_a_sidecar_is_refused(calibrated, tmp_path):
    _, stem, _ = calibrated
    meta = json.loads(stem.with_suffix(".json").read_text())
    meta["calibration"] = {"cut": 2.0, "k": 0.5}
    bad = tmp_path / "bad"
    bad.with_suffix(".safetensors").write_bytes(stem.with_suffix(".safetensors").read_bytes())
    bad.with_suffix(".json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="1 <= k <= 10"):
        load_predictor(bad)


def test_calibrate_with_too_small_a_calibration_carve_stays_uncalibrated_and_says_why(split):
    tr, va, _ = split
    p = train_forgeformer(tr, va, Recipe(epochs=1, calibrate=True, calib_frac=0.05), "iha-tiny", 12)
    assert p.calib is None and "raise calib_frac" in p.meta["calibration_skipped"]


def test_hybrid_predict_featurizes_a_population_once(split, hybrid, monkeypatch):
    import surrogate.predictor as pr
    import surrogate.trees as tr

    p, _ = hybrid
    mu = p.predict(split[2].genomes)[0]
    calls = []
    for mod in (pr, tr):
        real = mod.featurize
        monkeypatch.setattr(mod, "featurize", lambda *a, _real=real, **k: calls.append(1) or _real(*a, **k))
    assert np.array_equal(p.predict(split[2].genomes)[0], mu) and len(calls) == 1


def test_predictor_device_moves_only_the_encoder(split, hybrid, tmp_path):
    p, _ = hybrid
    g = split[2].genomes
    mu = p.predict(g)[0]
    assert p.to("cpu").device.type == "cpu" and np.array_equal(p.predict(g)[0], mu)
    assert load_predictor(p.save(tmp_path / "again")).device.type == "cpu"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (the GPU path of predict)")
def test_gpu_predict_matches_cpu(split, hybrid, tmp_path):
    p, stem = hybrid
    g = split[2].genomes
    q = load_predictor(stem).to("cuda")
    assert np.allclose(q.predict(g)[0], p.predict(g)[0], atol=1e-4)
    mu, sigma = q.predict(g, n_mc=6)
    assert np.isfinite(mu).all() and (sigma > 0).all()
    q.save(tmp_path / "from_gpu")  # weights come back to the CPU for safetensors


def test_hybrid_mc_sigma_adds_the_forests_tree_spread(split, hybrid):
    from surrogate.trees import forests_predict_spread

    p, _ = hybrid
    g = split[2].genomes
    p.seed_mc(3)
    _, sigma = p.predict(g, n_mc=6)
    p.seed_mc(3)
    _, s_enc = p.encoder_predict(g, 6)
    _, spread = forests_predict_spread(p.forests, g)
    w = p.nn_weight
    assert np.allclose(sigma, np.sqrt((w * s_enc) ** 2 + ((1 - w) * spread) ** 2))
    assert (sigma > w * s_enc).any() and (p.predict(g)[1] == 0).all()  # deterministic mode keeps sigma = 0
