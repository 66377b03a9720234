"""Measured GPU backend (`backend=gpu-measured`): build the IHA model, time a KV-cached prefill + decode.

TTFT = the prompt's forward pass plus picking the first token; TPOT = mean over the L_d decode steps
(the cache grows as in the roofline). Times come from CUDA events; energy from NVML's cumulative
energy counter when `pynvml` is installed and the board exposes it, else NaN with a note. The
measuring logic (`measure_generation`) takes any timer, so it is tested on CPU with a fake one.
Use it to check and calibrate the roofline: `backends.gpu.calibrate.calibrate(samples)`.
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable, Sequence

import numpy as np

from backends.interface import BackendError, CostTable, Workload
from forge.genome import Genome

Timer = Callable[[Callable[[], Any]], tuple[Any, float]]  # fn → (its result, milliseconds)


def wall_timer(fn: Callable[[], Any]) -> tuple[Any, float]:
    """CPU fallback: wall-clock milliseconds."""
    t = time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - t) * 1e3


def cuda_timer(fn: Callable[[], Any]) -> tuple[Any, float]:
    """CUDA-event milliseconds of everything `fn` enqueues (synchronises at the end)."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    out = fn()
    end.record()
    torch.cuda.synchronize()
    return out, start.elapsed_time(end)


class NvmlEnergy:
    """Joules between start() and stop() from NVML's energy counter; None where it is not readable."""

    def __init__(self, index: int = 0) -> None:
        self.handle, self.t0 = None, None
        try:
            import pynvml

            pynvml.nvmlInit()
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            pynvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)
        except Exception:  # noqa: BLE001 - missing package, no driver or unsupported board
            self.handle = None

    def _mj(self) -> float | None:
        if self.handle is None:
            return None
        import pynvml

        return float(pynvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))

    def start(self) -> None:
        self.t0 = self._mj()

    def stop(self) -> float | None:
        now = self._mj()
        return None if now is None or self.t0 is None else (now - self.t0) / 1e3


def measure_generation(prefill: Callable[[], Any], decode: Callable[[Any], Any], n_decode: int, timer: Timer,
                       warmup: int = 1, repeats: int = 3, energy: Any = None) -> dict[str, float]:
    """Median TTFT and TPOT over `repeats` runs after `warmup`; energy (J) of one run where measurable."""
    ttfts, tpots, joules = [], [], []
    for r in range(warmup + repeats):
        if energy is not None:
            energy.start()
        tok, ttft = timer(prefill)
        steps = []
        for _ in range(n_decode):
            tok, ms = timer(lambda t=tok: decode(t))
            steps.append(ms)
        j = energy.stop() if energy is not None else None
        if r >= warmup:
            ttfts.append(ttft), tpots.append(float(np.mean(steps)))
            joules.append(np.nan if j is None else j)
    return {"ttft_ms": float(np.median(ttfts)), "tpot_ms": float(np.median(tpots)),
            "energy_j": float(np.median(joules)), "ttft_spread_ms": float(np.ptp(ttfts)),
            "tpot_spread_ms": float(np.ptp(tpots))}


DTYPES = {16: "bfloat16", 32: "float32"}


class GpuMeasuredBackend:
    """Times real KV-cached generation of each genome (random weights: latency does not depend on them)."""

    def __init__(self, device: str = "cuda", warmup: int = 1, repeats: int = 3, seed: int = 0,
                 precision: dict | None = None, timer: Timer | None = None, energy_meter: Any = None,
                 name: str = "gpu-measured") -> None:
        self.name, self.device, self.warmup, self.repeats, self.seed = name, device, int(warmup), int(repeats), int(seed)
        p = dict(precision or {})
        self.default_bits = (int(p.get("weight_bits", 16)), int(p.get("act_bits", 16)), int(p.get("kv_bits", 16)))
        self.timer, self.energy_meter = timer, energy_meter

    def _setup(self, wl: Workload) -> tuple[Any, Timer, Any]:
        import torch

        bits = {wl.weight_bits, wl.act_bits, wl.kv_bits}
        if len(bits) != 1 or wl.weight_bits not in DTYPES:
            raise BackendError(f"gpu-measured runs one dtype for weights, activations and KV; got bits {sorted(bits)}; "
                               f"allowed: all 16 (bf16) or all 32 (fp32)")
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise BackendError("backend=gpu-measured needs a CUDA GPU and none is visible (torch.cuda.is_available() "
                               "is False); allowed: run on a CUDA machine, or use backend=roofline")
        timer = self.timer or (cuda_timer if self.device.startswith("cuda") else wall_timer)
        energy = self.energy_meter if self.energy_meter is not None else (
            NvmlEnergy() if self.device.startswith("cuda") else None)
        return getattr(torch, DTYPES[wl.weight_bits]), timer, energy

    def evaluate(self, genomes: Sequence[Genome], workload: Workload | None = None) -> CostTable:
        if workload is None:  # the backend's own default precision
            workload = Workload(**dict(zip(("weight_bits", "act_bits", "kv_bits"), self.default_bits)))
        dtype, timer, energy = self._setup(workload)
        rows = [self._one(g, workload, dtype, timer, energy) for g in genomes]
        col = lambda k: np.array([r[k] for r in rows], dtype=float)  # noqa: E731
        feas = np.array([r["feasible"] for r in rows], bool)
        extras = [{k: v for k, v in r.items() if k not in ("ttft_ms", "tpot_ms", "energy_per_token_uj", "feasible", "reason")}
                  for r in rows]
        return CostTable(col("ttft_ms"), col("tpot_ms"), col("energy_per_token_uj"), feas, [r["reason"] for r in rows], extras)

    def _one(self, genome: Genome, wl: Workload, dtype: Any, timer: Timer, energy: Any) -> dict[str, Any]:
        import torch

        from forge.model import build_model  # lazily: torch model code only when measuring

        try:
            model = build_model(genome, dtype=dtype, device=self.device, seed=self.seed).eval()
            gen = torch.Generator(device="cpu").manual_seed(self.seed)
            idx = torch.randint(genome.vocab_size, (wl.batch, wl.prefill), generator=gen).to(self.device)
            with torch.inference_mode():
                cache = model.new_kv_cache(wl.batch, wl.prefill + wl.decode)

                def prefill() -> Any:
                    cache.reset()
                    return model.prefill(idx, cache)[:, -1].argmax(-1)

                m = measure_generation(prefill, lambda tok: model.decode_step(tok, cache).argmax(-1), wl.decode,
                                       timer, self.warmup, self.repeats, energy)
        except (torch.cuda.OutOfMemoryError, MemoryError) as e:
            return {"ttft_ms": math.inf, "tpot_ms": math.inf, "energy_per_token_uj": math.inf, "feasible": False,
                    "reason": f"out of memory on {self.device}: {str(e)[:120]}"}
        e_tok = m["energy_j"] / (wl.prefill + wl.decode) * 1e6
        return {"ttft_ms": m["ttft_ms"], "tpot_ms": m["tpot_ms"], "energy_per_token_uj": e_tok, "feasible": True,
                "reason": "", "device": self.device, "energy_source": "nvml" if np.isfinite(e_tok) else "unavailable",
                "ttft_spread_ms": m["ttft_spread_ms"], "tpot_spread_ms": m["tpot_spread_ms"]}
