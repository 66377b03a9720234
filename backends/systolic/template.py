"""Accelerator templates for the systolic mapper: every constant is a field of one YAML config.

A template (the `template:` block of conf/backend/<name>.yaml) describes a PE array, its on-chip
buffers, the DRAM link and an energy table, so a new accelerator is a new YAML file, no code:

    rows, cols            PE array shape (R × C MACs)
    clock_ghz             clock, for cycles → seconds
    dataflows             spatial mappings the mapper may pick: ws | os | is | rs
    pe_weight_bytes       per-PE weight scratchpad (rs: weights kept along K in each PE)
    dram_bytes_per_cycle  off-chip bandwidth; dram_pj_per_byte its access energy
    dram_write_bytes_per_cycle  > 0: writes on a channel of their own (Timeloop's DRAM read_bandwidth and
                          write_bandwidth); 0: one half-duplex bus (LPDDR4) for reads and writes
    buffers               list of {name, bytes, holds: [input|weight|output], bytes_per_cycle,
                          write_bytes_per_cycle, read_pj_per_byte, write_pj_per_byte, double_buffered};
                          write_bytes_per_cycle > 0: a separate write port (Timeloop's read_bandwidth /
                          write_bandwidth, a dual-ported SRAM), else reads and writes share bytes_per_cycle
    spatial               ceil: a partial fold pads the array (hardware) | divisor: each spatial factor
                          divides its dimension (Timeloop's 'uber' mapspace factorizes dimensions exactly)
    rank                  the mapper's objective: delay (fastest, ties least energy) | edp (least energy ×
                          delay: the release's mapper.yaml `optimization_metrics: [edp, delay, energy]`)
    resident              operands preloaded on chip, {weight|kv: {bytes, read_pj_per_byte}}: weights or
                          the KV cache living there never cross DRAM (DXE), if the model fits
    fused_attention       QKᵀ → softmax → PV fused on chip: scores never go to DRAM (FLAT)
    activations_on_chip   layer activations stay in on-chip buffers between operators (DXE)
    mac_pj, reg_pj_per_mac, psum_bytes   MAC energy, PE register energy per MAC, partial-sum width
    vector_lanes, vector_pj              elementwise unit (norms, softmax, activation) per cycle / element
    leak_pj_per_byte_cycle               SRAM leakage per byte per cycle
    mac_area_um2, sram_area_um2_per_byte area model for the extras (MACs + SRAM only)
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from backends.interface import BackendError

OPERANDS = ("input", "weight", "output")
DATAFLOWS = ("ws", "os", "is", "rs")
SPATIAL = ("ceil", "divisor")
RANKS = ("delay", "edp")


@dataclass(frozen=True)
class Buffer:
    name: str
    bytes: int
    holds: tuple[str, ...]
    bytes_per_cycle: float
    read_pj_per_byte: float
    write_pj_per_byte: float
    double_buffered: bool = False
    write_bytes_per_cycle: float = 0.0  # 0: one port shared by reads and writes


@dataclass(frozen=True)
class Template:
    """Hashable, so mapper results cache by (template, GEMM shape)."""

    name: str
    rows: int
    cols: int
    clock_ghz: float
    dataflows: tuple[str, ...]
    dram_bytes_per_cycle: float
    dram_pj_per_byte: float
    buffers: tuple[Buffer, ...]
    mac_pj: float
    reg_pj_per_mac: float = 0.086  # 2 × 8-bit + 1 × 32-bit register access (hardware.md: 0.0144 / 0.0575 pJ)
    psum_bytes: int = 4
    pe_weight_bytes: int = 0
    resident: tuple[tuple[str, int, float], ...] = ()  # (weight|kv, bytes, read_pj_per_byte)
    fused_attention: bool = False
    activations_on_chip: bool = False
    vector_lanes: int = 16
    vector_pj: float = 0.5
    leak_pj_per_byte_cycle: float = 5.907e-7
    mac_area_um2: float = 135.685
    sram_area_um2_per_byte: float = 0.711316
    spatial: str = "ceil"
    dram_write_bytes_per_cycle: float = 0.0
    rank: str = "delay"

    @property
    def macs(self) -> int:
        return self.rows * self.cols

    @property
    def sram_bytes(self) -> int:
        return sum(b.bytes for b in self.buffers) + sum(r[1] for r in self.resident)

    @property
    def leak_pj_per_cycle(self) -> float:
        return self.leak_pj_per_byte_cycle * self.sram_bytes

    @property
    def area_mm2(self) -> float:
        return (self.macs * self.mac_area_um2 + self.sram_bytes * self.sram_area_um2_per_byte) / 1e6

    def resident_bytes(self, what: str) -> int:
        return next((r[1] for r in self.resident if r[0] == what), 0)

    def resident_pj(self, what: str) -> float:
        return next((r[2] for r in self.resident if r[0] == what), 0.0)

    def buffer_for(self, operand: str) -> Buffer | None:
        return next((b for b in self.buffers if operand in b.holds), None)


def template_names() -> list[str]:
    """Backends in conf/backend whose config has a `template:` block."""
    import yaml

    from forge.runtime.config import conf_dir

    out = []
    for p in sorted((conf_dir() / "backend").glob("*.yaml")):
        try:
            if "template" in (yaml.safe_load(p.read_text()) or {}):
                out.append(p.stem)
        except yaml.YAMLError:
            continue
    return out


def _fail(field: str, value: Any, allowed: str) -> BackendError:
    return BackendError(f"template.{field} = {value!r} is invalid; allowed: {allowed}")


def _buffer(i: int, d: Any) -> Buffer:
    d = dict(d)
    allowed = {f.name for f in fields(Buffer)}
    bad = sorted(set(d) - allowed)
    if bad:
        raise BackendError(f"template.buffers[{i}].{bad[0]} is unknown; allowed: {', '.join(sorted(allowed))}")
    holds = tuple(d.get("holds", ()))
    if not holds or set(holds) - set(OPERANDS):
        raise _fail(f"buffers[{i}].holds", list(holds), f"a non-empty subset of {list(OPERANDS)}")
    if int(d.get("bytes", 0)) <= 0 or float(d.get("bytes_per_cycle", 0)) <= 0:
        raise _fail(f"buffers[{i}].bytes/bytes_per_cycle", (d.get("bytes"), d.get("bytes_per_cycle")), "positive numbers")
    return Buffer(name=str(d.get("name", f"buf{i}")), bytes=int(d["bytes"]), holds=holds,
                  bytes_per_cycle=float(d["bytes_per_cycle"]), read_pj_per_byte=float(d.get("read_pj_per_byte", 0)),
                  write_pj_per_byte=float(d.get("write_pj_per_byte", 0)), double_buffered=bool(d.get("double_buffered", False)),
                  write_bytes_per_cycle=float(d.get("write_bytes_per_cycle", 0)))


def make_template(spec: Any) -> Template:
    """A Template from a name in conf/backend, a mapping (a YAML `template:` block) or a Template."""
    if isinstance(spec, Template):
        return spec
    if isinstance(spec, str):
        from backends.registry import backend_config

        if spec not in template_names():
            raise BackendError(f"template {spec!r} is unknown; allowed: {', '.join(template_names())}")
        spec = backend_config(spec)["template"]
    from forge.runtime.config import to_container

    d = dict(to_container(spec))
    allowed = {f.name for f in fields(Template)}
    bad = sorted(set(d) - allowed)
    if bad:
        raise BackendError(f"template.{bad[0]} is unknown; allowed: {', '.join(sorted(allowed))}")
    for k in ("rows", "cols", "clock_ghz", "dram_bytes_per_cycle", "mac_pj"):
        if k not in d or not float(d[k]) > 0:
            raise _fail(k, d.get(k), "a positive number")
    dfs = tuple(d.get("dataflows") or ())
    if not dfs or set(dfs) - set(DATAFLOWS):
        raise _fail("dataflows", list(dfs), f"a non-empty subset of {list(DATAFLOWS)}")
    if d.get("spatial", "ceil") not in SPATIAL:
        raise _fail("spatial", d.get("spatial"), " | ".join(SPATIAL))
    if d.get("rank", "delay") not in RANKS:
        raise _fail("rank", d.get("rank"), " | ".join(RANKS))
    if "rs" in dfs and int(d.get("pe_weight_bytes", 0)) <= 0:
        raise _fail("pe_weight_bytes", d.get("pe_weight_bytes"), "a positive byte count for dataflow rs")
    res = d.get("resident") or {}
    if set(res) - {"weight", "kv"}:
        raise _fail("resident", sorted(res), "keys weight, kv")
    d["resident"] = tuple((k, int(v["bytes"]), float(v.get("read_pj_per_byte", 0))) for k, v in sorted(res.items()))
    d["buffers"] = tuple(_buffer(i, b) for i, b in enumerate(d.get("buffers") or ()))
    d["dataflows"] = dfs
    d["rows"], d["cols"] = int(d["rows"]), int(d["cols"])
    d.setdefault("name", "custom")
    return Template(**d)
