import numpy as np

from surrogate.baselines import MLPBaseline, RFBaseline, ScalingLawBaseline, aggregate
from surrogate.dataset import load_labelset, train_val_test
from surrogate.metrics import evaluate


def test_baselines_learn_a_learnable_target(tiny_jsonl):
    tr, va, te = train_val_test(load_labelset(tiny_jsonl), seed=0)
    for model in (RFBaseline(n_estimators=50), MLPBaseline(epochs=30)):
        pred = model.fit(tr, va).predict(te.genomes)
        assert evaluate(te.y, pred)["spearman"] > 0.5, type(model).__name__


def test_scaling_law_recovers_its_own_parameters(tiny_jsonl):
    data = load_labelset(tiny_jsonl)
    law = ScalingLawBaseline()
    true = np.array([4.0, 0.8, 30.0, 0.3, 0.5, 0.2, 2.0])
    data.y = law.law(true, aggregate(data.genomes))
    fit = law.fit(data).predict(data.genomes)
    assert np.abs(fit - data.y).max() < 0.02


def test_aggregate_features():
    from forge.genomes.genome import Genome, LayerGene

    g = Genome(d_model=128, block_size=256, vocab_size=256,
               layers=(LayerGene(4, 2, 16, 32, 256), LayerGene(2, 1, 16, 16, 512, attn=False),
                       LayerGene(8, 8, 64, 64, 1024, active=False)))
    l, d, r, dm = aggregate([g])[0]
    assert (l, d, r, dm) == (2, 128, 384 / 128, 2 * (16 + 32) / 2)
