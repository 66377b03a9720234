"""`layer_ops(..., fields=...)`: the named fields equal the full table's, the others are None (never a silent
zero), and the model totals (which read three fields) equal the sums over the full table."""
from __future__ import annotations

import numpy as np
import pytest

from forge.spaces.space import load_space
from forge.lm.workload import OP_FIELDS, Precision, layer_ops, model_totals


@pytest.mark.parametrize("name", ["iha-paper", "gqa-tiny", "iha-tiny-swa", "iha-paper-mx"])
def test_field_subset_equals_full_table(name: str) -> None:
    space = load_space(name)
    pop = space.to_arrays(space.sample_x(20, np.random.default_rng(5)))
    full = layer_ops(pop, 3, 700, 2)
    part = layer_ops(pop, 3, 700, 2, fields=("flops", "kv_write_bytes"))
    assert np.array_equal(part.flops, full.flops) and np.array_equal(part.kv_write_bytes, full.kv_write_bytes)
    assert all(getattr(part, f) is None for f in OP_FIELDS if f not in ("flops", "kv_write_bytes"))


@pytest.mark.parametrize("name", ["iha-paper", "iha-tiny-swa"])
def test_model_totals_match_the_full_table(name: str) -> None:
    space = load_space(name)
    pop = space.to_arrays(space.sample_x(20, np.random.default_rng(6)))
    nan = np.full(pop.P, np.nan)
    full = layer_ops(pop.with_bytes(weight_bytes=nan, act_bytes=nan), 1, 1, prec=Precision(1.0, 1.0, 2.0))
    t = model_totals(pop)
    assert np.array_equal(t["kv_bytes_per_token"], full.total("kv_write_bytes"))
    assert np.all(t["params"] > full.total("weight_bytes"))  # plus embeddings and the final norm
