"""Backend interface and registry: every conf/backend/*.yaml builds through `_target_`, errors list valid values."""
from __future__ import annotations

import numpy as np
import pytest

from backends.interface import BackendError, CostTable, Workload, as_population
from backends.registry import backend_config, build_backend, list_backends, resolve_workload
from forge.runtime.config import data_dir
from forge.genomes.importers import load_genome
from forge.spaces.space import load_space

SHIPPED = ("roofline", "gemmini", "eyeriss", "flat", "dxe", "gpu-measured")


@pytest.fixture(scope="module")
def smollm():
    return load_genome(data_dir() / "archs" / "smollm2-135m.yaml")


def test_every_shipped_backend_is_listed():
    assert set(SHIPPED) <= set(list_backends())


@pytest.mark.parametrize("name", [n for n in SHIPPED if n != "gpu-measured"])
def test_backends_evaluate_one_genome_with_their_default_precision(name, smollm):
    b = build_backend(name)
    wl = resolve_workload({"prefill": 64, "decode": 16, "batch": 1, "weight_bits": None, "act_bits": None,
                           "kv_bits": None}, b)
    assert (wl.weight_bits, wl.kv_bits) == ((16, 16) if name == "roofline" else (8, 8))
    r = b.evaluate([smollm], wl)
    assert len(r) == 1 and r.feasible[0] and r.reason[0] == ""
    assert 0 < r.ttft_ms[0] < np.inf and 0 < r.tpot_ms[0] < np.inf and 0 < r.energy_per_token_uj[0] < np.inf
    assert r.row(0)["tpot_ops_ms"]


def test_workload_override_beats_backend_default():
    wl = resolve_workload({"prefill": 8, "decode": 8, "weight_bits": 4}, build_backend("gemmini"))
    assert (wl.weight_bits, wl.act_bits) == (4, 8)


@pytest.mark.parametrize("bad", [{"prefill": 0}, {"decode": -3}, {"batch": 0}])
def test_non_positive_workload_lengths_are_rejected(bad):
    with pytest.raises(BackendError, match="positive integer"):
        resolve_workload({"prefill": 4, "decode": 4, **bad})


def test_unknown_backend_option_and_preset_list_valid_ones():
    with pytest.raises(BackendError, match="roofline.*gemmini|gemmini.*roofline"):
        build_backend("tpu")
    with pytest.raises(BackendError, match="not an option of RooflineBackend; allowed: hardware"):
        build_backend("roofline", eta=0.3)
    with pytest.raises(BackendError, match="a100-40gb"):
        build_backend("roofline", hardware="b200")
    with pytest.raises(BackendError, match="_target_"):
        build_backend({"name": "x"})
    with pytest.raises(BackendError, match="in \\(0, 1\\]"):
        build_backend("roofline", eta_memory=1.5)


def test_roofline_config_follows_the_hardware_group_only_when_present():
    assert backend_config("roofline")["hardware"] == "a100-40gb"
    assert build_backend("roofline", hardware="orin-nano").hw.mem_gb == 8.0


def test_cost_table_helpers_and_population_input():
    t = CostTable.infeasible(3, "too big")
    assert np.isinf(t.objective("tpot_ms")).all() and t.reason == ["too big"] * 3
    sp = load_space("iha-tiny")
    X = sp.sample_x(5, np.random.default_rng(0))
    pop = sp.to_arrays(X)
    assert as_population(pop) is pop and as_population(sp.decode(X)).P == 5
    with pytest.raises(BackendError, match="empty population"):
        as_population([])
    r = build_backend("gemmini").evaluate(pop, Workload(prefill=8, decode=4, weight_bits=8, act_bits=8, kv_bits=8))
    assert np.isfinite(r.objective("area_mm2")).all()


@pytest.mark.parametrize("name", ["roofline", "gemmini"])
def test_energy_per_token_counts_every_sequence_of_the_batch(name, smollm):
    """Batching shares the weight reads: per token of all B sequences, energy must fall with the batch
    (dividing by one sequence's tokens would make it grow instead)."""
    b = build_backend(name)
    e1 = b.evaluate([smollm], resolve_workload({"prefill": 64, "decode": 16, "batch": 1}, b)).energy_per_token_uj[0]
    e4 = b.evaluate([smollm], resolve_workload({"prefill": 64, "decode": 16, "batch": 4}, b)).energy_per_token_uj[0]
    assert 0 < e4 < e1
