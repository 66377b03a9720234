"""One GPU preset (`Hardware`: peak FLOP/s per operand width, bandwidth, memory, power, energy per FLOP and byte)
and reading it from conf/hardware/<name>.yaml with this machine's calibrated overlay (`load_hardware`). Kept
apart from backends/gpu/roofline.py, which prices genomes on a preset: this side describes the device and
validates a preset read from disk (unknown or missing fields refused by name); that side is operator arithmetic.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from backends.interface import BackendError


@dataclass(frozen=True)
class Hardware:
    """One GPU preset (conf/hardware/<name>.yaml); units in the field names."""

    name: str
    peak_tflops_16: float
    peak_tops_8: float
    mem_bw_gbs: float
    mem_gb: float
    tdp_w: float
    static_w: float
    e_byte_pj: float
    e_flop_pj: float | None = None

    def peak_flops(self, weight_bits: Any, act_bits: Any) -> Any:
        """Peak FLOP/s of operands of these element widths (scalars, or arrays for a population).

        The 8-bit tensor-core peak when both operands are ≤ 8 bit, else the 16-bit peak; fp32 at half of it.
        Assumptions (A100/H100 presets, hardware.md): int4/MXINT4/MXFP4 (and 6-bit) operands run at the int8
        peak (H100 has no int4 tensor cores; A100's 2× int4 rate is not used); MX formats run at their element
        width's peak with the shared scale applied per K block in the fp32 accumulator (no native block-scaled
        MMA before Blackwell: optimistic); fp8 gets the 8-bit peak (H100: fp8 = int8 peak; A100 has no fp8
        tensor cores: optimistic). Weight-only quantization (W ≤ 8, A 16) dequantizes to the 16-bit peak.
        """
        w, a = np.asarray(weight_bits, dtype=float), np.asarray(act_bits, dtype=float)
        out = np.where((w <= 8) & (a <= 8), self.peak_tops_8 * 1e12,
                       self.peak_tflops_16 * 1e12 * np.where(a > 16, 0.5, 1.0))
        return float(out) if out.ndim == 0 else out

    def flop_energy_pj(self, peak: float) -> float:
        """Dynamic energy per FLOP: the configured value, else (TDP − P_static) / peak."""
        return self.e_flop_pj if self.e_flop_pj is not None else (self.tdp_w - self.static_w) / peak * 1e12


def hardware_names() -> list[str]:
    from forge.runtime.config import group_names

    return group_names("hardware")


def load_hardware(spec: Any) -> Hardware:
    """A preset name from conf/hardware or a mapping with the Hardware fields."""
    if isinstance(spec, Hardware):
        return spec
    if isinstance(spec, str):
        from forge.runtime.config import group_yaml

        name, spec = spec, group_yaml("hardware", spec)
        if spec is None:
            raise BackendError(f"hardware preset {name!r} is unknown; allowed: {', '.join(hardware_names())}")
        spec.update(group_yaml("calibrated/hardware", name) or {})  # this machine's own (forge-hw mode=calibrate)
    from forge.runtime.config import to_container

    # `defaults` merges a calibrated preset under Hydra; `roofline` holds backend settings conf/backend/roofline.yaml reads
    d = {k: v for k, v in dict(to_container(spec)).items() if k not in ("defaults", "roofline")}
    allowed = {f.name for f in fields(Hardware)}
    bad = sorted(set(d) - allowed)
    if bad:
        raise BackendError(f"hardware.{bad[0]} is unknown; allowed: {', '.join(sorted(allowed))}")
    missing = sorted(allowed - set(d) - {"e_flop_pj"})
    if missing:
        raise BackendError(f"hardware.{missing[0]} is missing; required: {', '.join(sorted(allowed - {'e_flop_pj'}))}")
    return Hardware(**d)
