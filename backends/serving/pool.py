"""Pools of LLMShare (paper 003): the Table I design space, the device a template describes, and its cost.

A pool is `servers` × `devices` identical devices. A device (LLMCompass-style template, 003 §II-B) has
`cores` × `lanes` systolic arrays of `array_height`² MACs (square: Table I gives one side), a vector unit
of `vector_width` per lane, a local buffer per core, a global buffer, `hbm_gb` of HBM and `links` links.
Performance numbers for Forge's roofline (backends/serving/latency.py):
    peak FLOP/s = cores · lanes · array_height² · 2 · clock;   HBM bandwidth = hbm_gb · hbm_gbs_per_gb;
    link bandwidth = links · link_gbs.
Under the roofline the buffers and the vector width change only area and cost, not latency; under
`serve.pools.latency=systolic` (the systolic mapper, latency.py) they change latency too.

Cost (conf/serve/cost/*.yaml, every constant an assumption documented there):
    area = uncore + cores·(lanes·(ah²·mac + vw·vector_lane) + local_buffer·sram + core_fixed)
           + global_buffer·sram + links·link_phy + hbm_gb/16·hbm_phy
    die $ = wafer $ / (dies per wafer · yield),  dies per wafer = π(d/2)²/A − πd/√(2A),
    yield = (1 + A·D0/α)^−α (negative binomial);   device $ = die $ + hbm_gb · HBM $/GB;
    pool $ = servers · (devices · device $ + server $).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from forge.errors import ForgeError

FIELDS = ("servers", "devices", "links", "hbm_gb", "global_buffer_mb", "cores", "local_buffer_kb", "lanes",
          "array_height", "vector_width")


class PoolError(ForgeError):
    """Bad pool input; the message names the field and what is allowed."""


@dataclass(frozen=True)
class PoolSpace:
    """Allowed values of every Table I field, for one pool (both pools share it)."""

    values: tuple[tuple[float, ...], ...]

    @classmethod
    def from_config(cls, d: Any) -> "PoolSpace":
        d = checked(d, "pool space")
        vals = tuple(tuple(float(v) for v in d[f]) for f in FIELDS)
        if any(len(v) == 0 or min(v) <= 0 for v in vals):
            raise PoolError("pool space values must be non-empty lists of positive numbers")
        return cls(vals)

    @property
    def sizes(self) -> np.ndarray:
        return np.array([len(v) for v in self.values])

    @property
    def size(self) -> int:
        """Designs per pool (Table I: 29,491,200)."""
        return int(np.prod(self.sizes, dtype=np.int64))

    def decode(self, idx: np.ndarray) -> np.ndarray:
        """Index rows (n, 10) → value rows (n, 10)."""
        idx = np.asarray(idx, dtype=np.int64)
        return np.stack([np.asarray(self.values[j])[idx[:, j]] for j in range(len(FIELDS))], axis=1)


def checked(d: Any, what: str) -> dict[str, Any]:
    """A mapping with exactly the Table I fields, else a one-line PoolError naming the field."""
    d = dict(d)
    bad = sorted(set(d) - set(FIELDS))
    if bad:
        raise PoolError(f"pool field {bad[0]!r} is unknown; allowed: {', '.join(FIELDS)}")
    missing = [f for f in FIELDS if f not in d]
    if missing:
        raise PoolError(f"{what} lacks field {missing[0]!r}; required: {', '.join(FIELDS)}")
    return d


def design(d: Any) -> np.ndarray:
    """One pool as a value row from a mapping with exactly the Table I fields (the baseline presets)."""
    d = checked(d, "pool")
    return np.array([float(d[f]) for f in FIELDS])


def col(v: np.ndarray, name: str) -> np.ndarray:
    return np.asarray(v)[..., FIELDS.index(name)]


def device_perf(v: np.ndarray, c: dict[str, Any]) -> dict[str, np.ndarray]:
    """Peak bf16 FLOP/s, HBM bytes/s and capacity, link bytes/s of each device row."""
    macs = col(v, "cores") * col(v, "lanes") * col(v, "array_height") ** 2
    return {"flops": macs * 2 * float(c["clock_ghz"]) * 1e9, "bw": col(v, "hbm_gb") * float(c["hbm_gbs_per_gb"]) * 1e9,
            "mem": col(v, "hbm_gb") * 1e9, "link": col(v, "links") * float(c["link_gbs"]) * 1e9}


def die_area_mm2(v: np.ndarray, c: dict[str, Any]) -> np.ndarray:
    lane = col(v, "array_height") ** 2 * c["mac_um2"] + col(v, "vector_width") * c["vector_lane_um2"]
    core = (col(v, "lanes") * lane + col(v, "local_buffer_kb") * 1024 * c["sram_um2_per_byte"]) * 1e-6 + c["core_fixed_mm2"]
    return (c["uncore_mm2"] + col(v, "cores") * core + col(v, "global_buffer_mb") * 2**20 * c["sram_um2_per_byte"] * 1e-6
            + col(v, "links") * c["link_phy_mm2"] + col(v, "hbm_gb") / 16 * c["hbm_phy_mm2_per_16gb"])


def device_cost(v: np.ndarray, c: dict[str, Any]) -> np.ndarray:
    """Die (wafer cost over good dies) plus HBM, in dollars."""
    a = die_area_mm2(v, c)
    d = float(c["wafer_mm"])
    per_wafer = np.maximum(np.pi * (d / 2) ** 2 / a - np.pi * d / np.sqrt(2 * a), 1e-3)
    y = (1 + a / 100 * float(c["defect_per_cm2"]) / float(c["yield_alpha"])) ** -float(c["yield_alpha"])
    return float(c["wafer_usd"]) / (per_wafer * y) + col(v, "hbm_gb") * float(c["hbm_usd_per_gb"])


def pool_cost(v: np.ndarray, c: dict[str, Any]) -> np.ndarray:
    return col(v, "servers") * (col(v, "devices") * device_cost(v, c) + float(c.get("server_usd", 0.0)))


def total_memory_gb(pre: np.ndarray, dec: np.ndarray) -> np.ndarray:
    """Paper 003 Eq. 2: the serving system's total main memory, the key of memory-centric initialization."""
    return (col(pre, "servers") * col(pre, "devices") * col(pre, "hbm_gb")
            + col(dec, "servers") * col(dec, "devices") * col(dec, "hbm_gb"))
