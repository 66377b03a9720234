"""Full-size training on the shared labels (minutes on 2 cores): run with `-m slow`."""
import pytest

from surrogate.dataset import load_labelset, train_val_test
from surrogate.fit import train_forgeformer
from surrogate.metrics import evaluate
from surrogate.training import Recipe


@pytest.mark.slow
def test_fast_recipe_ranks_held_out_architectures(shared_csv):
    train, val, test = train_val_test(load_labelset(shared_csv), seed=0)
    p = train_forgeformer(train, val, Recipe(epochs=40, lr=1e-3, standardize=True, bucket=True, seed=0))
    m = evaluate(test.y, p.predict(test.genomes)[0])
    assert m["spearman"] > 0.68 and m["mae"] < 0.26
