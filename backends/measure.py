"""Timing real KV-cached generation of the IHA model: the code every measured backend shares.

`gpu-measured` (backends/gpu/measured.py, CUDA events, NVML energy) and `cpu-measured` (backends/host.py,
wall clock, a fixed torch thread count) differ only in their device, timer and energy meter; the rest is
here: build the model (random weights: latency does not depend on them), run warm-up passes, take the
median TTFT and TPOT over repeats, report the spread, and cache every result by (genome id, workload)
so a search never times the same genome twice. The timer is injected, so tests use a fake one.

TTFT = the prompt's forward pass plus picking the first token; TPOT = mean over the L_d decode steps of
one run (the cache grows as in the roofline).
"""
from __future__ import annotations

import math
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from backends.interface import CostTable, Workload
from forge.genomes.genome import Genome

Timer = Callable[[Callable[[], Any]], tuple[Any, float]]  # fn → (its result, milliseconds)
DTYPES = {16: "bfloat16", 32: "float32"}
CORE = ("ttft_ms", "tpot_ms", "energy_per_token_uj", "feasible", "reason")


def wall_timer(fn: Callable[[], Any]) -> tuple[Any, float]:
    """Wall-clock milliseconds (CPU work is synchronous, so this is the work's time)."""
    t = time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - t) * 1e3


def thread_timer(fn: Callable[[], Any]) -> tuple[Any, float]:
    """CPU milliseconds of the calling thread: the time the work took on its core, not counting the spells
    another process held that core (a shared machine). Exact for single-threaded torch (threads=1)."""
    t = time.thread_time()
    out = fn()
    return out, (time.thread_time() - t) * 1e3


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run with `n` torch intra-op threads (None: leave as is); restores the previous count."""
    import torch

    old = torch.get_num_threads()
    if n:
        torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(old)


def one_run(prefill: Callable[[], Any], decode: Callable[[Any], Any], n_decode: int, timer: Timer,
            energy: Any = None) -> tuple[float, float, float]:
    """(TTFT ms, TPOT ms = mean of the n_decode step times, joules or NaN) of one prefill + decode run."""
    if energy is not None:
        energy.start()
    tok, ttft = timer(prefill)
    steps = []
    for _ in range(n_decode):
        tok, ms = timer(lambda t=tok: decode(t))
        steps.append(ms)
    j = energy.stop() if energy is not None else None
    return ttft, float(np.mean(steps)), np.nan if j is None else float(j)


def measure_rounds(jobs: Sequence[tuple[Callable[[], Any], Callable[[Any], Any]]], n_decode: int, timer: Timer,
                   warmup: int = 1, repeats: int = 3, energy: Any = None,
                   on_round: Callable[[str], None] | None = None) -> list[dict[str, float]]:
    """Median TTFT and TPOT of each (prefill, decode) job over `repeats` runs after `warmup` runs.

    Runs go in rounds, every job once per round: a slow spell of a shared machine then slows all jobs of
    that round alike instead of a run of consecutive genomes, and the median drops it. Spread = max − min
    over the repeats; energy (J) of one run (median) where the meter reads, else NaN.
    """
    runs: list[list[tuple[float, float, float]]] = [[] for _ in jobs]
    for r in range(warmup + repeats):
        for j, (prefill, decode) in enumerate(jobs):
            x = one_run(prefill, decode, n_decode, timer, energy)
            if r >= warmup:
                runs[j].append(x)
        if on_round is not None:  # forge-hw's progress: a measured genome can take minutes on a busy machine
            on_round(f"{'warm-up' if r < warmup else 'timed'} run {r + 1} of {warmup + repeats}")
    out = []
    for rs in runs:
        ttfts, tpots, joules = (np.array(v) for v in zip(*rs))
        out.append({"ttft_ms": float(np.median(ttfts)), "tpot_ms": float(np.median(tpots)),
                    "energy_j": float(np.median(joules)), "ttft_spread_ms": float(np.ptp(ttfts)),
                    "tpot_spread_ms": float(np.ptp(tpots))})
    return out


def measure_generation(prefill: Callable[[], Any], decode: Callable[[Any], Any], n_decode: int, timer: Timer,
                       warmup: int = 1, repeats: int = 3, energy: Any = None) -> dict[str, float]:
    """`measure_rounds` of one job: median TTFT and TPOT over `repeats` runs after `warmup`, spread, energy."""
    return measure_rounds([(prefill, decode)], n_decode, timer, warmup, repeats, energy)[0]


def prepare(genome: Genome, wl: Workload, *, device: str, dtype: Any, seed: int = 0) -> tuple[Callable, Callable]:
    """(prefill, decode) closures of one genome's model with a KV cache of exactly L_p + L_d tokens.

    Call under `torch.inference_mode()`. Random weights: latency does not depend on them.
    """
    import torch

    from forge.lm.model import build_model  # lazily: torch model code only when measuring

    model = build_model(genome, dtype=dtype, device=device, seed=seed).eval()
    gen = torch.Generator(device="cpu").manual_seed(seed)
    idx = torch.randint(genome.vocab_size, (wl.batch, wl.prefill), generator=gen).to(device)
    cache = model.new_kv_cache(wl.batch, wl.prefill + wl.decode)

    def prefill() -> Any:
        cache.reset()
        return model.prefill(idx, cache)[:, -1].argmax(-1)

    return prefill, lambda tok: model.decode_step(tok, cache).argmax(-1)


def out_of_memory(device: str, e: BaseException) -> dict[str, Any]:
    return {"ttft_ms": math.inf, "tpot_ms": math.inf, "energy_per_token_uj": math.inf, "feasible": False,
            "reason": f"out of memory on {device}: {str(e)[:120]}"}


class MeasuredBackend:
    """A Backend that times each genome for real; subclasses say how (`_setup`) and label the energy.

    Results are cached by (genome id, workload): measuring is the expensive part of a search step.
    """

    name = "measured"
    device = "cpu"
    threads: int | None = None  # torch intra-op threads while timing (None: leave as is)
    interleave = 1  # genomes timed together in rounds (their models held in memory at once) ...
    interleave_gb = math.inf  # ... as long as their weights fit this many GB
    on_round: Callable[[str], None] | None = None  # called after each round of runs (forge-hw's progress)

    def __init__(self, warmup: int = 1, repeats: int = 3, seed: int = 0, precision: dict | None = None) -> None:
        self.warmup, self.repeats, self.seed = int(warmup), int(repeats), int(seed)
        p = dict(precision or {})
        self.default_bits = (int(p.get("weight_bits", 16)), int(p.get("act_bits", 16)), int(p.get("kv_bits", 16)))
        self.cache: dict[tuple[str, Workload], dict[str, Any]] = {}

    def _setup(self, wl: Workload) -> tuple[Any, Timer, Any]:
        """(torch dtype, timer, energy meter or None) for this workload; raise BackendError when it cannot run."""
        raise NotImplementedError

    def _energy_source(self, row: dict[str, Any]) -> str:
        return "unavailable"

    def _groups(self, genomes: list[Genome], bytes_per_param: int) -> list[list[Genome]]:
        """Consecutive groups of at most `interleave` genomes whose weights total at most `interleave_gb`."""
        from forge.spaces.arrays import PopArrays
        from forge.lm.workload import model_totals

        gb = model_totals(PopArrays.from_genomes(genomes))["params"] * bytes_per_param / 1e9
        out: list[list[Genome]] = [[]]
        size = 0.0
        for g, b in zip(genomes, gb):
            if out[-1] and (len(out[-1]) >= max(int(self.interleave), 1) or size + b > self.interleave_gb):
                out.append([])
                size = 0.0
            out[-1].append(g)
            size += float(b)
        return out

    def _measure(self, genomes: list[Genome], wl: Workload, dtype: Any, timer: Timer, energy: Any) -> None:
        """Time `genomes` together in rounds and cache their rows; out of memory → infeasible."""
        import torch

        oom = (torch.cuda.OutOfMemoryError, MemoryError)
        jobs, ready = [], []
        for g in genomes:
            try:
                jobs.append(prepare(g, wl, device=self.device, dtype=dtype, seed=self.seed)), ready.append(g)
            except oom as e:
                self.cache[(g.id, wl)] = out_of_memory(self.device, e)
        try:
            ms = measure_rounds(jobs, wl.decode, timer, self.warmup, self.repeats, energy, self.on_round)
        except oom as e:
            ms = [out_of_memory(self.device, e)] * len(ready)
        for g, m in zip(ready, ms):
            self.cache[(g.id, wl)] = self._row(m, wl) if "energy_j" in m else m

    def _row(self, m: dict[str, float], wl: Workload) -> dict[str, Any]:
        e_tok = m["energy_j"] / (wl.prefill + wl.decode) * 1e6
        row = {"ttft_ms": m["ttft_ms"], "tpot_ms": m["tpot_ms"], "energy_per_token_uj": e_tok, "feasible": True,
               "reason": "", "device": self.device, "ttft_spread_ms": m["ttft_spread_ms"],
               "tpot_spread_ms": m["tpot_spread_ms"], "repeats": self.repeats, "threads": self.threads}
        row["energy_source"] = self._energy_source(row)
        return row

    def evaluate(self, genomes: Sequence[Genome], workload: Workload | None = None) -> CostTable:
        if workload is None:  # the backend's own default precision
            workload = Workload(**dict(zip(("weight_bits", "act_bits", "kv_bits"), self.default_bits)))
        todo = list({g.id: g for g in genomes if (g.id, workload) not in self.cache}.values())
        if todo:
            import torch

            dtype, timer, energy = self._setup(workload)
            with torch_threads(self.threads), torch.inference_mode():
                for group in self._groups(todo, torch.finfo(dtype).bits // 8):
                    self._measure(group, workload, dtype, timer, energy)
        rows = [self.cache[(g.id, workload)] for g in genomes]
        col = lambda k: np.array([r[k] for r in rows], dtype=float)  # noqa: E731
        extras = [{k: v for k, v in r.items() if k not in CORE} for r in rows]
        return CostTable(col("ttft_ms"), col("tpot_ms"), col("energy_per_token_uj"),
                         np.array([r["feasible"] for r in rows], bool), [r["reason"] for r in rows], extras)
