"""The Timeloop-like analytical mapper: one GEMM (M×K)·(K×N) on one template, vectorized over shapes.

For each shape it searches mappings — the spatial dataflow (ws/os/is/rs), temporal tile sizes
(tm, tk, tn) at the buffer level that fit every buffer's capacity (halved where double-buffered),
and the loop order (which of m/n/k is innermost; with three loops only the innermost decides reuse)
— and keeps the fastest (ties: least energy). Per mapping:

    cycles = max(compute cycles, DRAM bytes / DRAM bandwidth, max over buffers of bytes / port bandwidth)
    (`rank: edp` ranks by cycles × energy instead, as the release's mapper.yaml `optimization_metrics:
    [edp, delay, energy]` does; buffers are listed outermost first: the last one holding an operand feeds the array and takes its
    per-fold reads and partial sums; an outer one only stages what passes through it. A buffer with a
    write port of its own, or a duplex DRAM, is busy for max(reads / read bw, writes / write bw).
    Weights that stream past a resident weight memory are staged in it, so they can be reused.)
    energy = DRAM + buffer reads/writes (+ resident-memory reads) + MACs·(mac + register) + leakage·cycles

Compute cycles for a fold-based R×C array with F folds streaming T rows each (with `spatial: divisor`, R and
C shrink to the largest exact factors of the dimensions they split, as Timeloop's 'uber' mapspace does):
    overlapped (default): R + (F−1)·max(T, R) + T + R + C − 2  (next fold's weights load while streaming)
    scalesim:             F·(2R + C + T − 2)                   (SCALE-Sim analytical mode, no overlap;
                          cycles are compute-only, as SCALE-Sim reports, taking the first dataflow)
Because the candidate set never depends on capacities or bandwidths, a bigger buffer only adds
candidates and more bandwidth only lowers each candidate: latency never rises (property-tested).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from backends.interface import BackendError
from backends.systolic.template import DATAFLOWS, Template

TILE_M = (1, 4, 16, 64, 256, 1024)  # buffer-tile candidates (× 1 for m, × R for k, × C for n), plus full dims
TILE_KN = (1, 4, 16, 64)
INNER = ("m", "n", "k")
MODES = ("overlapped", "scalesim")


@dataclass(frozen=True)
class GemmCost:
    """Cost of `batch` independent GEMMs of one shape under the best mapping found."""

    cycles: float
    energy_pj: float
    dram_bytes: float
    utilization: float
    macs: float
    compute_cycles: float
    accesses: dict[str, float] = field(default_factory=dict)
    mapping: dict[str, Any] = field(default_factory=dict)


def _ceil(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.ceil(a / b)


def _options(dim: np.ndarray, base: int, mults: tuple[int, ...]) -> np.ndarray:
    """(S, n) tile candidates min(dim, base·mult) plus the full dim; deduplicated when dim is constant."""
    opts = np.minimum(dim[:, None], np.array([base * m for m in mults] + [10**12])[None, :]).astype(float)
    if np.all(dim == dim[0]):
        opts = np.unique(opts[0])[None, :].repeat(len(dim), axis=0)
    return opts


def _largest_divisor(x: np.ndarray, cap: float) -> np.ndarray:
    """Largest d ≤ cap that divides x (x itself when x ≤ cap): Timeloop's 'uber' mapspace only splits a
    dimension into exact factors, so a 576-wide dimension uses 12 of 14 PE columns."""
    c = np.arange(1, int(cap) + 1, dtype=float)
    return np.max(np.where(np.mod(x[:, None], c[None, :]) == 0, c[None, :], 1.0), axis=1)


def _kpe(t: Template, K: np.ndarray, w_b: float) -> np.ndarray:
    """rs: K-elements each PE keeps in its weight scratchpad (divisor spatial: the rows split K exactly)."""
    cap = t.pe_weight_bytes // max(w_b, 1e-9)
    if t.spatial == "divisor":  # rows take the largest exact factor of K; each PE the largest one of the rest
        return _largest_divisor(K / _largest_divisor(K, t.rows), cap)
    return np.maximum(1.0, np.minimum(cap, _ceil(K, float(t.rows))))


def _geometry(t: Template, df: str, M, K, N, w_b: float) -> tuple:
    """(rows_dim, cols_dim, T, rows used, cols used, kpe) of one dataflow for shapes (S,)."""
    kpe = _kpe(t, K, w_b) if df == "rs" else np.ones_like(K)
    rows_dim, cols_dim, T = {"ws": (K, N, M), "os": (M, N, K), "is": (K, M, N), "rs": (K / kpe, N, M * kpe)}[df]
    R, C = np.full_like(K, float(t.rows)), np.full_like(K, float(t.cols))
    if t.spatial == "divisor":
        R, C = _largest_divisor(np.ceil(rows_dim), t.rows), _largest_divisor(cols_dim, t.cols)
    return rows_dim, cols_dim, T, R, C, kpe


def _compute_cycles(t: Template, df: str, M, K, N, w_b: float, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """(cycles, folds) of one dataflow for shapes (S,)."""
    rows_dim, cols_dim, T, R, C, _ = _geometry(t, df, M, K, N, w_b)
    F = _ceil(rows_dim, R) * _ceil(cols_dim, C)
    if mode == "scalesim":
        return F * (2 * R + C + T - 2), F
    return R + (F - 1) * np.maximum(T, R) + T + R + C - 2, F


def map_many(t: Template, M: Any, K: Any, N: Any, a_b: float = 1.0, w_b: float = 1.0, o_b: float = 1.0,
             on_chip: frozenset = frozenset(), resident: str | None = None, mode: str = "overlapped") -> dict[str, np.ndarray]:
    """Best mapping per shape; returns (S,) arrays cycles, energy_pj, dram_bytes, compute_cycles, macs, buffer bytes."""
    if mode not in MODES:
        raise BackendError(f"mapper mode {mode!r} is unknown; allowed: {', '.join(MODES)}")
    M, K, N = (np.atleast_1d(np.asarray(x, dtype=float)) for x in (M, K, N))
    if np.any(M < 1) or np.any(K < 1) or np.any(N < 1):
        raise BackendError("map_gemm: M, K and N must be >= 1")
    on_chip = frozenset(on_chip) | ({"weight"} if resident else frozenset())
    g = _tilings(t, M, K, N, a_b, w_b, o_b, on_chip, resident)
    macs = M * K * N
    best = None
    for df in t.dataflows[:1] if mode == "scalesim" else t.dataflows:
        cand = _dataflow_costs(t, df, M, K, N, g, resident, w_b, mode, macs)
        cand["cycles"] = np.where(g["fits"], cand["cycles"], np.inf)
        cand.update(tm=g["tm"], tk=g["tk"], tn=g["tn"], inner=g["ii"] + 0 * g["tm"],
                    df=np.full_like(g["tm"], DATAFLOWS.index(df)))
        r = _best(cand, t.rank)
        if best is not None:  # by the template's ranking objective, then least energy, across dataflows
            c0, c1 = _score(best, t.rank), _score(r, t.rank)
            better = (c1 < c0 * (1 - 1e-12)) | ((c1 <= c0 * (1 + 1e-12)) & (r["energy"] < best["energy"]))
            r = {k: np.where(better, v, best[k]) for k, v in r.items()}
        best = r
    best.update(_accesses(best, t, resident))
    return _finish(best, macs, t)


def _tilings(t: Template, M, K, N, a_b, w_b, o_b, on_chip, resident) -> dict[str, Any]:
    """(S, T) buffer-level tilings × innermost loop: trip counts, DRAM traffic per operand, capacity fit."""
    om, ok, on = _options(M, 1, TILE_M), _options(K, t.rows, TILE_KN), _options(N, t.cols, TILE_KN)
    grids = np.meshgrid(np.arange(om.shape[1]), np.arange(ok.shape[1]), np.arange(on.shape[1]), np.arange(3), indexing="ij")
    im, ik, in_, ii = (a.ravel() for a in grids)
    tm, tk, tn = om[:, im], ok[:, ik], on[:, in_]  # (S, T)
    Mc, Kc, Nc = M[:, None], K[:, None], N[:, None]
    Tm, Tk, Tn = _ceil(Mc, tm), _ceil(Kc, tk), _ceil(Nc, tn)
    inner = np.array(INNER)[ii][None, :]
    size = {"input": Mc * Kc * a_b, "weight": Kc * Nc * w_b, "output": Mc * Nc * o_b}
    tile = {"input": tm * tk * a_b, "weight": tk * tn * w_b, "output": tm * tn * t.psum_bytes}
    mult = {"input": Tn, "weight": Tm, "output": Tk}
    reuse_dim = {"input": "n", "weight": "m", "output": "k"}
    dram, out_rd = {}, 0.0
    store = t.resident_bytes("weight") if not resident else 0  # streamed weights are staged in the weight memory
    staged = {x: t.buffer_for(x) is not None or (x == "weight" and store > 0) for x in size}
    for x in size:  # an operand is re-fetched once per trip of the loop it does not index, unless that loop is innermost
        m = np.where(inner == reuse_dim[x], 1.0, mult[x]) if staged[x] else mult[x]
        if x in on_chip:
            dram[x] = 0.0 * m
        elif x == "output":  # partial sums spill (write + read back) once per extra k trip
            dram[x] = Mc * Nc * (o_b + (m - 1) * 2 * t.psum_bytes)
            out_rd = Mc * Nc * (m - 1) * t.psum_bytes
        else:
            dram[x] = size[x] * m
    fits = tile["weight"] <= store if store > 0 and t.buffer_for("weight") is None else np.ones_like(tm, dtype=bool)
    for b in t.buffers:
        need = sum(tile[x] for x in b.holds if not (x == "weight" and resident))
        fits &= need * (2 if b.double_buffered else 1) <= b.bytes
    total = dram["input"] + dram["weight"] + dram["output"]
    writes = dram["output"] - out_rd
    return {"tm": tm, "tk": tk, "tn": tn, "ii": ii[None, :], "Mc": Mc, "Kc": Kc, "Nc": Nc, "Tm": Tm, "Tn": Tn,
            "size": size, "dram": dram, "dram_total": total, "dram_rw": (total - writes, writes), "fits": fits}


def _dataflow_costs(t, df, M, K, N, g, resident, w_b, mode, macs):
    """(S, T) cycles, energy and traffic of every tiling under one dataflow."""
    Mc, Kc, Nc, Tm, Tn = g["Mc"], g["Kc"], g["Nc"], g["Tm"], g["Tn"]
    size, dram, dram_total = g["size"], g["dram"], g["dram_total"]
    comp, _ = _compute_cycles(t, df, M, K, N, w_b, mode)
    comp = comp[:, None]
    R, C, kpe = (a[:, None] for a in _geometry(t, df, M, K, N, w_b)[3:])
    f = {"ws": (_ceil(Nc, C), Tm, _ceil(Kc, R)), "os": (_ceil(Nc, C), _ceil(Mc, R), 1.0 + 0 * Mc),
         "is": (Tn, _ceil(Mc, C), _ceil(Kc, R)), "rs": (_ceil(Nc, C), Tm, _ceil(Kc, R * kpe))}[df]
    reads = {"input": size["input"] * f[0], "weight": size["weight"] * f[1]}
    psum_rw = Mc * Nc * t.psum_bytes * (2 * f[2] - 1)
    energy = dram_total * t.dram_pj_per_byte + (macs * (t.mac_pj + t.reg_pj_per_mac))[:, None]
    rd, wr = g["dram_rw"]
    dram_busy = (np.maximum(rd / t.dram_bytes_per_cycle, wr / t.dram_write_bytes_per_cycle)
                 if t.dram_write_bytes_per_cycle > 0 else dram_total / t.dram_bytes_per_cycle)
    cycles = np.maximum(comp, dram_busy) if mode == "overlapped" else comp + 0 * dram_total
    terms = {"reads_input": reads["input"], "reads_weight": reads["weight"], "psum": psum_rw / 2,
             "size_output": size["output"], **{f"dram_{x}": v for x, v in dram.items()}}
    coef: dict[str, float] = {}
    for b, pairs in _ports(t, resident):
        rd_all = wr_all = 0.0
        for r, w in pairs:
            coef[r] = coef.get(r, 0.0) + b.read_pj_per_byte
            coef[w] = coef.get(w, 0.0) + b.write_pj_per_byte * (w != "none")
            if mode == "overlapped":
                rd_all, wr_all = rd_all + terms[r], wr_all + terms.get(w, 0.0)
        if mode == "overlapped":  # a dual-ported buffer reads and writes at once, else they share the port
            duplex = b.write_bytes_per_cycle > 0
            busy = (np.maximum(rd_all / b.bytes_per_cycle, wr_all / b.write_bytes_per_cycle) if duplex
                    else (rd_all + wr_all) / b.bytes_per_cycle)
            cycles = np.maximum(cycles, busy)
    for k, c in coef.items():
        if c and k in terms:
            energy = energy + terms[k] * c
    if resident:
        energy = energy + reads["weight"] * t.resident_pj(resident)
    energy = energy + cycles * t.leak_pj_per_cycle
    out = {"cycles": cycles, "energy": energy, "dram": dram_total, "comp": comp, "dram_wr": wr + 0 * cycles}
    out.update({f"term:{k}": v for k, v in terms.items()})
    return {k: np.broadcast_to(v, cycles.shape) for k, v in out.items()}


def _ports(t: Template, resident: str | None) -> list[tuple[Any, list[tuple[str, str]]]]:
    """Per buffer its (read, write) traffic terms. Buffers are listed outermost first: the last one holding an
    operand feeds the array (per-fold reads, partial sums); an outer one only stages what passes through it."""
    feeder = {x: [b.name for b in t.buffers if x in b.holds][-1:] for x in ("input", "weight", "output")}
    out = []
    for b in t.buffers:
        pairs = []
        for x in b.holds:
            if x == "weight" and resident:
                continue
            if b.name not in feeder[x]:
                pairs.append((f"dram_{x}", "size_output" if x == "output" else f"dram_{x}"))
            elif x == "output":
                pairs += [("psum", "psum"), ("dram_output", "none")]
            else:
                pairs.append((f"reads_{x}", f"dram_{x}"))
        out.append((b, pairs))
    return out


def _accesses(r: dict[str, np.ndarray], t: Template, resident: str | None) -> dict[str, np.ndarray]:
    """Bytes through each buffer's ports for the picked mappings, from their traffic terms."""
    return {f"buf:{b.name}": sum((r[f"term:{x}"] + (r[f"term:{w}"] if w != "none" else 0.0) for x, w in pairs),
                                 np.zeros_like(r["cycles"])) for b, pairs in _ports(t, resident)}


def _score(c: dict[str, np.ndarray], rank: str) -> np.ndarray:
    """The ranking objective: delay (cycles) or energy-delay product (Timeloop's `edp`)."""
    return c["cycles"] * c["energy"] if rank == "edp" else c["cycles"]


def _best(c: dict[str, np.ndarray], rank: str = "delay") -> dict[str, np.ndarray]:
    """Per shape, the best tiling by `rank` (ties: least energy) of one dataflow's (S, T) candidates."""
    cyc = _score(c, rank)
    cmin = cyc.min(axis=1, keepdims=True)
    j = np.argmin(np.where(cyc <= cmin * (1 + 1e-12), c["energy"], np.inf), axis=1)
    rows = np.arange(cyc.shape[0])
    return {k: v[rows, j] for k, v in c.items()}


def _finish(out: dict[str, np.ndarray], macs: np.ndarray, t: Template) -> dict[str, np.ndarray]:
    if np.any(~np.isfinite(out["cycles"])):
        raise BackendError(f"template {t.name!r}: no tiling fits its buffers even at the smallest tile; "
                           "allowed: buffers of at least one array fold (rows × cols) per operand")
    out["macs"] = macs
    out["utilization"] = macs / (t.macs * out["cycles"])
    return out


def cost_from_row(r: dict[str, np.ndarray], i: int, batch: int) -> GemmCost:
    acc = {k[4:]: float(v[i]) * batch for k, v in r.items() if k.startswith("buf:")}
    acc["dram"] = float(r["dram"][i]) * batch
    acc["mac"] = float(r["macs"][i]) * batch
    mapping = {"dataflow": DATAFLOWS[int(r["df"][i])], "tile_m": int(r["tm"][i]), "tile_k": int(r["tk"][i]),
               "tile_n": int(r["tn"][i]), "innermost": INNER[int(r["inner"][i])]}
    return GemmCost(mapping=mapping, cycles=float(r["cycles"][i]) * batch, energy_pj=float(r["energy"][i]) * batch,
                    dram_bytes=float(r["dram"][i]) * batch, utilization=float(r["utilization"][i]),
                    macs=float(r["macs"][i]) * batch, compute_cycles=float(r["comp"][i]) * batch, accesses=acc)
