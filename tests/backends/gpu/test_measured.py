"""gpu-measured: the measuring logic on CPU with a fake timer and a fake energy meter (no GPU needed)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from backends.gpu.measured import GpuMeasuredBackend, measure_generation
from backends.interface import BackendError, Workload
from backends.registry import build_backend
from forge.genomes.genome import Genome, LayerGene


class FakeTimer:
    """Runs fn; reports 10 ms per prefill-sized call, then 1, 2, 3, … ms per decode step of a run."""

    def __init__(self, n_decode: int) -> None:
        self.n, self.calls = n_decode, itertools.count()

    def __call__(self, fn):
        out = fn()
        k = next(self.calls) % (self.n + 1)
        return out, 10.0 if k == 0 else float(k)


class FakeEnergy:
    def start(self):
        pass

    def stop(self):
        return 0.5  # joules per run


def tiny() -> Genome:
    layers = (LayerGene(4, 2, 16, 16, 128), LayerGene(2, 1, 16, 16, 64, attn=False), LayerGene(2, 2, 16, 32, 64))
    return Genome(d_model=64, block_size=128, vocab_size=256, layers=layers)


def test_measure_generation_takes_medians_and_mean_step():
    state = {"steps": 0}

    def decode(tok):
        state["steps"] += 1
        return tok

    m = measure_generation(lambda: 0, decode, 4, FakeTimer(4), warmup=1, repeats=3, energy=FakeEnergy())
    assert m["ttft_ms"] == 10.0 and m["tpot_ms"] == pytest.approx(2.5) and m["energy_j"] == 0.5
    assert state["steps"] == 4 * 4  # warm-up run + 3 repeats


def test_backend_runs_the_real_model_on_cpu_with_injected_timer():
    wl = Workload(prefill=6, decode=5, batch=2, weight_bits=32, act_bits=32, kv_bits=32)
    b = GpuMeasuredBackend(device="cpu", timer=FakeTimer(5), energy_meter=FakeEnergy(), warmup=0, repeats=2)
    r = b.evaluate([tiny(), tiny()], wl)
    assert r.feasible.all() and np.allclose(r.ttft_ms, 10.0) and np.allclose(r.tpot_ms, 3.0)
    assert r.energy_per_token_uj[0] == pytest.approx(0.5 / 11 * 1e6)
    assert r.extras[0]["energy_source"] == "nvml" and r.extras[0]["device"] == "cpu"


def test_cache_fills_exactly_prefill_plus_decode():
    # a KV cache overflow would raise inside the model: L_p + L_d tokens must fit exactly
    b = GpuMeasuredBackend(device="cpu", warmup=0, repeats=1)
    r = b.evaluate([tiny()], Workload(prefill=3, decode=7, weight_bits=32, act_bits=32, kv_bits=32))
    assert r.feasible[0] and r.ttft_ms[0] > 0 and r.tpot_ms[0] > 0 and np.isnan(r.energy_per_token_uj[0])
    assert r.extras[0]["energy_source"] == "unavailable"


def test_out_of_memory_is_infeasible_not_an_exception(monkeypatch):
    import forge.lm.model

    def boom(*a, **k):
        raise MemoryError("cannot allocate")

    monkeypatch.setattr(forge.lm.model, "build_model", boom)
    r = GpuMeasuredBackend(device="cpu").evaluate([tiny()], Workload(weight_bits=32, act_bits=32, kv_bits=32))
    assert not r.feasible[0] and np.isinf(r.tpot_ms[0]) and "out of memory" in r.reason[0]


def test_clear_errors_without_cuda_or_with_int8():
    import torch

    b = build_backend("gpu-measured")
    if not torch.cuda.is_available():
        with pytest.raises(BackendError, match="needs a CUDA GPU"):
            b.evaluate([tiny()], Workload())
    with pytest.raises(BackendError, match="all 16 \\(bf16\\) or all 32"):
        GpuMeasuredBackend(device="cpu").evaluate([tiny()], Workload(weight_bits=8, act_bits=8, kv_bits=8))
