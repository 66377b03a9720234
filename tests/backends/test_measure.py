"""backends.measure and backend=cpu-measured with a fake timer: medians, warm-up, spread, rounds, caching,
threads; plus one real short measurement (slow)."""
from __future__ import annotations

import numpy as np
import pytest

import backends.measure as measure
from backends.host import CpuMeasuredBackend
from backends.interface import BackendError, Workload
from backends.measure import measure_rounds
from backends.registry import build_backend
from forge.genomes.genome import Genome, LayerGene
from forge.lm.workload import analyze

WL = Workload(prefill=4, decode=3, weight_bits=32, act_bits=32, kv_bits=32)


def genome(d_mlp: int = 64) -> Genome:
    layers = (LayerGene(2, 1, 16, 16, d_mlp), LayerGene(2, 2, 16, 16, 64, attn=False))
    return Genome(d_model=32, block_size=64, vocab_size=64, layers=layers)


class ScriptTimer:
    """Returns `values` in turn as milliseconds (cycling), recording the torch thread count of every call."""

    def __init__(self, values):
        self.values, self.i, self.threads = list(values), 0, []

    def __call__(self, fn):
        import torch

        self.threads.append(torch.get_num_threads())
        out, ms = fn(), self.values[self.i % len(self.values)]
        self.i += 1
        return out, float(ms)


def test_rounds_take_medians_after_warmup_and_report_spread():
    calls = []
    job = lambda name: (lambda: calls.append(name) or 0, lambda tok: tok)  # noqa: E731
    # one run = prefill + 2 decode steps = 3 timer calls; runs go a, b, a, b, ...
    # a's runs: warm-up (100 | 100, 100), then (10 | 1, 3), (30 | 5, 5), (20 | 2, 2)
    # b's runs: warm-up (100 | 100, 100), then (40 | 4, 4), (40 | 6, 6), (40 | 8, 8)
    t = ScriptTimer([100, 100, 100, 100, 100, 100, 10, 1, 3, 40, 4, 4, 30, 5, 5, 40, 6, 6, 20, 2, 2, 40, 8, 8])
    a, b = measure_rounds([job("a"), job("b")], 2, t, warmup=1, repeats=3)
    assert calls == ["a", "b"] * 4  # interleaved rounds, warm-up round included
    assert a["ttft_ms"] == 20.0 and a["tpot_ms"] == 2.0 and a["ttft_spread_ms"] == 20.0 and a["tpot_spread_ms"] == 3.0
    assert b["ttft_ms"] == 40.0 and b["tpot_ms"] == 6.0 and b["ttft_spread_ms"] == 0.0 and np.isnan(b["energy_j"])


def test_cpu_measured_runs_the_real_model_with_an_injected_timer():
    t = ScriptTimer([10.0, 1.0, 2.0, 3.0])  # prefill 10 ms, decode steps 1, 2, 3 ms
    r = CpuMeasuredBackend(timer=t, warmup=1, repeats=2).evaluate([genome()], WL)
    assert r.feasible[0] and r.ttft_ms[0] == 10.0 and r.tpot_ms[0] == pytest.approx(2.0)
    assert t.i == 3 * (1 + WL.decode)  # warm-up + 2 repeats, each prefill + 3 steps
    e = r.extras[0]
    assert np.isnan(r.energy_per_token_uj[0]) and e["energy_source"] == "unavailable"
    assert e["tpot_spread_ms"] == 0.0 and e["repeats"] == 2 and e["threads"] == 1 and e["device"] == "cpu"


def test_energy_is_an_estimate_from_power_and_time_and_says_so():
    from backends.host import TimeEnergy

    meter = TimeEnergy(20.0)
    meter.now = iter([1.0, 1.5]).__next__  # half a second of the clock
    meter.start()
    assert meter.stop() == pytest.approx(10.0)
    b = CpuMeasuredBackend(power_w=15.0, timer=ScriptTimer([1.0]), warmup=0, repeats=1)
    r = b.evaluate([genome()], WL)
    assert np.isfinite(r.energy_per_token_uj[0]) and r.energy_per_token_uj[0] > 0
    assert r.extras[0]["energy_source"] == "estimate: 15 W x thread time"
    assert build_backend("cpu-measured").power_w == 15.0  # the shipped config estimates (default objectives run)


def test_cache_by_genome_id_and_workload(monkeypatch):
    built = []
    real = measure.prepare

    def counting(g, *a, **k):
        built.append(g.id)
        return real(g, *a, **k)

    monkeypatch.setattr(measure, "prepare", counting)
    b = CpuMeasuredBackend(timer=ScriptTimer([1.0]), warmup=0, repeats=1)
    g1, g2 = genome(64), genome(128)
    b.evaluate([g1, g2, g1], WL)  # a duplicate inside one call is timed once
    r = b.evaluate([g2, g1], WL)
    assert built == [g1.id, g2.id] and r.feasible.all()
    b.evaluate([g1], Workload(prefill=5, decode=3, weight_bits=32, act_bits=32, kv_bits=32))
    assert built == [g1.id, g2.id, g1.id]  # another workload is another measurement


def test_threads_are_set_while_timing_and_restored():
    import torch

    before = torch.get_num_threads()
    t = ScriptTimer([1.0])
    CpuMeasuredBackend(threads=2, clock="wall", timer=t, warmup=0, repeats=1).evaluate([genome()], WL)
    assert set(t.threads) == {2} and torch.get_num_threads() == before


def test_interleave_groups_hold_at_most_that_many_models(monkeypatch):
    sizes = []
    real = measure.measure_rounds
    monkeypatch.setattr(measure, "measure_rounds", lambda jobs, *a, **k: sizes.append(len(jobs)) or real(jobs, *a, **k))
    gs = [genome(64 * k) for k in range(1, 6)]
    CpuMeasuredBackend(timer=ScriptTimer([1.0]), warmup=0, repeats=1, interleave=2).evaluate(gs, WL)
    assert sizes == [2, 2, 1]
    sizes.clear()  # a memory budget of about two of these models' fp32 weights
    gb = [analyze(g)["params"] * 4 / 1e9 for g in gs]
    b = CpuMeasuredBackend(timer=ScriptTimer([1.0]), warmup=0, repeats=1, interleave_gb=gb[0] + gb[1] + 1e-12)
    b.evaluate(gs, WL)
    assert sizes[0] == 2 and sum(sizes) == 5 and max(sizes) <= 2


def test_bad_options_say_what_is_allowed():
    with pytest.raises(BackendError, match="clock.*allowed: thread"):
        CpuMeasuredBackend(threads=2)  # a thread's CPU time cannot time several threads
    with pytest.raises(BackendError, match="threads = 0"):
        CpuMeasuredBackend(threads=0)
    with pytest.raises(BackendError, match="power_w = 0.*allowed: watts > 0, or null"):
        CpuMeasuredBackend(power_w=0)
    with pytest.raises(BackendError, match="all 32 \\(fp32\\) or all 16"):
        CpuMeasuredBackend().evaluate([genome()], Workload(weight_bits=8, act_bits=8, kv_bits=8))
    b = build_backend("cpu-measured")
    assert b.name == "cpu-measured" and b.threads == 1 and b.clock == "thread" and b.default_bits == (32, 32, 32)


@pytest.mark.slow
def test_real_short_measurement_on_this_cpu():
    """The real clock on a tiny model: positive, finite times; more decode work takes longer per token."""
    wl = Workload(prefill=16, decode=8, weight_bits=32, act_bits=32, kv_bits=32)
    small = Genome(d_model=32, block_size=64, vocab_size=64, layers=(LayerGene(1, 1, 16, 16, 64),))
    big = Genome(d_model=256, block_size=64, vocab_size=64, layers=(LayerGene(8, 8, 64, 64, 1024),) * 8)
    r = build_backend("cpu-measured").evaluate([small, big], wl)
    assert r.feasible.all() and np.all(np.isfinite(r.ttft_ms)) and np.all(r.tpot_ms > 0)
    assert r.tpot_ms[1] > r.tpot_ms[0] and r.ttft_ms[1] > r.ttft_ms[0]
    assert all(e["tpot_spread_ms"] >= 0 for e in r.extras)
