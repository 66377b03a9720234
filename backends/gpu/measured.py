"""Measured GPU backend (`backend=gpu-measured`): build the IHA model, time a KV-cached prefill + decode.

Times come from CUDA events; energy from NVML's cumulative energy counter when `pynvml` is installed and
the board exposes it, else NaN with a note. The measuring itself (warm-up, medians, spread, caching by
genome id) is `backends.measure`, shared with `cpu-measured`; this module adds only the CUDA timer, the
NVML meter and the GPU checks. Use it to check and calibrate the roofline: `backends.gpu.calibrate`.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from backends.interface import BackendError, Workload
from backends.measure import DTYPES, MeasuredBackend, Timer, measure_generation, wall_timer

__all__ = ["GpuMeasuredBackend", "NvmlEnergy", "cuda_timer", "measure_generation", "wall_timer"]


def cuda_timer(fn: Any) -> tuple[Any, float]:
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


class GpuMeasuredBackend(MeasuredBackend):
    """Times real KV-cached generation of each genome on a GPU (random weights: latency does not depend on them)."""

    def __init__(self, device: str = "cuda", warmup: int = 1, repeats: int = 3, seed: int = 0,
                 precision: dict | None = None, timer: Timer | None = None, energy_meter: Any = None,
                 interleave: int = 1, name: str = "gpu-measured") -> None:
        super().__init__(warmup, repeats, seed, precision)
        self.name, self.device, self.interleave = name, device, int(interleave)
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

    def _energy_source(self, row: dict[str, Any]) -> str:
        return "nvml" if np.isfinite(row["energy_per_token_uj"]) else "unavailable"
