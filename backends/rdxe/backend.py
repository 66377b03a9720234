"""`backend=rdxe`: the rDXE multi-chip ring with per-genome chip co-search (LLMForge §3.3.2, App. E.3).

For each genome: (1) profile every active layer (profile.py); (2) for each of the 45 chip
templates (n_MAC × w_core × ring cap) derive the chip size: the smallest power-of-two core count
whose capacities let the layers be packed into at most `n_chips_max` stages, split into tiles ×
cores with cores ≥ tiles (ring.split_cores); (3) pack with Algorithm 1 around Algorithm 2
(pack.py); (4) simulate the ring (ring.py); (5) keep the jointly non-dominated configs on
(TTFT, TPOT, energy per token, total area) and report the top K in the order of pareto.py.
The CostTable row holds the first pick (the one a search consumes); all K are in extras["top_k"].
A genome with no feasible chip gets inf costs and a reason naming the binding limit.

Packing does not depend on n_MAC, so one genome needs at most 15 packings. Profiles are cached by
(genome id, workload), packings by (profile, chip capacities), finished rows by (genome id, workload).
Costs use each genome's own precision genes where it has them, else the workload's; `default_bits` (int8 weights/activations/KV: the DXE MAC array is
INT8) is what `backends.registry.resolve_workload` fills in where the workload leaves bits null.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from backends.interface import BackendError, CostTable, Workload
import backends.rdxe.llmforge as lf
from backends.rdxe.pack import ChipCaps, Packing, balanced_pack, capacity_cores, min_stages
from backends.rdxe.pareto import RANK_BY, dedupe, in_envelope, top_k
from backends.rdxe.profile import LayerProfile, pop_key_rows, profile_population
from backends.rdxe.ring import RingConstants, chip_area_mm2, scratchpad_bytes, simulate, split_cores
from forge.spaces.arrays import PopArrays

KB = 1024
OPTIONS = ("name", "conventions", "llmforge", "n_mac", "w_core_kb", "n_chips_max", "k_core_kb", "min_cores_per_chip", "max_cores_per_chip", "top_k",
           "rank_by", "precision", "area_envelope_mm2", "power_envelope_mw", "pack_method", "cache_size")
METRICS = ("ttft_ms", "tpot_ms", "energy_per_token_uj", "area_mm2", "mac_utilization", "power_mw", "prefill_energy_uj")


@dataclass(frozen=True)
class ChipPick:
    """One feasible chip template for one genome: the derived core count and its packing."""

    n_mac: int
    w_core_kb: int
    n_chips_max: int
    cores: int
    packing: Packing


def _ints(name: str, v: Any, pow2: bool = False) -> tuple[int, ...]:
    vals = tuple(v) if hasattr(v, "__iter__") and not isinstance(v, str) else (v,)
    ok = vals and all(not isinstance(x, bool) and isinstance(x, (int, np.integer)) and x > 0 for x in vals)
    if not ok or (pow2 and any(x & (x - 1) for x in vals)):
        allowed = "a power of two >= 1" if pow2 else "positive integers (a non-empty list for grid keys)"
        raise BackendError(f"backend.{name} = {v!r} is invalid; allowed: {allowed}")
    return tuple(int(x) for x in vals)


def _choice(name: str, v: Any, allowed: Sequence[str]) -> str:
    if v not in allowed:
        raise BackendError(f"backend.{name} = {v!r} is invalid; allowed: {' | '.join(allowed)}")
    return v


def _envelope(name: str, v: Any) -> Optional[tuple[float, float]]:
    if v is None:
        return None
    vals = tuple(v) if hasattr(v, "__iter__") else ()
    if len(vals) != 2 or not all(isinstance(x, (int, float)) for x in vals) or not 0 <= vals[0] <= vals[1]:
        raise BackendError(f"backend.{name} = {v!r} is invalid; allowed: null or [low, high] with 0 <= low <= high")
    return float(vals[0]), float(vals[1])


def _constants(kw: dict[str, Any]) -> RingConstants:
    bad = sorted(set(kw) - set(RingConstants.names()))
    if bad:
        raise BackendError(f"backend.{bad[0]} is unknown; allowed: {', '.join(OPTIONS + tuple(RingConstants.names()))}")
    for key, v in kw.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v < 0:
            raise BackendError(f"backend.{key} = {v!r} is invalid; allowed: a finite number >= 0")
    k = RingConstants(**kw)
    if k.clock_mhz <= 0 or k.link_bytes_per_cycle <= 0:
        raise BackendError("backend.clock_mhz and backend.link_bytes_per_cycle must be > 0")
    return k


def _bits(precision: Any) -> tuple[int, int, int]:
    p = dict(precision or {})
    if set(p) - {"weight_bits", "act_bits", "kv_bits"}:
        raise BackendError(f"backend.precision = {p!r} is invalid; allowed keys: weight_bits, act_bits, kv_bits")
    return tuple(int(p.get(k, 8)) for k in ("weight_bits", "act_bits", "kv_bits"))  # type: ignore[return-value]


class RDXEBackend:
    """rDXE ring cost model; every argument is a plain config value (conf/backend/rdxe.yaml)."""

    def __init__(self, n_mac: Sequence[int] = (16, 32, 64), w_core_kb: Sequence[int] = (24, 48, 96, 192, 384),
                 n_chips_max: Sequence[int] = (8, 16, 32), k_core_kb: int = 8, max_cores_per_chip: int = 4096,
                 min_cores_per_chip: int = 1, top_k: int = 3, rank_by: str = "balanced", precision: Any = None,
                 area_envelope_mm2: Any = None, power_envelope_mw: Any = None, pack_method: str = "candidates",
                 cache_size: int = 20_000, name: str = "rdxe", conventions: str = "physical", llmforge: Any = None,
                 **constants: Any) -> None:
        self.name = name
        self.conventions = _choice("conventions", conventions, ("physical", "llmforge"))
        self.lf = lf.LLMForgeConventions.build(llmforge)
        self.n_mac, self.w_core_kb = _ints("n_mac", n_mac), _ints("w_core_kb", w_core_kb)
        self.n_chips_max = tuple(sorted(_ints("n_chips_max", n_chips_max)))
        self.k_core_kb, self.top_k = _ints("k_core_kb", k_core_kb)[0], _ints("top_k", top_k)[0]
        self.max_cores = _ints("max_cores_per_chip", max_cores_per_chip, pow2=True)[0]
        self.min_cores = _ints("min_cores_per_chip", min_cores_per_chip, pow2=True)[0]
        if self.min_cores > self.max_cores:
            raise BackendError(f"backend.min_cores_per_chip = {min_cores_per_chip} > max_cores_per_chip = {max_cores_per_chip}")
        self.rank_by = _choice("rank_by", rank_by, RANK_BY)
        self.pack_method = _choice("pack_method", pack_method, ("candidates", "integer"))
        self.default_bits = _bits(precision)
        self.area_env = _envelope("area_envelope_mm2", area_envelope_mm2)
        self.power_env = _envelope("power_envelope_mw", power_envelope_mw)
        self.k = _constants(constants)
        self.cache_size = int(cache_size)
        self._profiles: dict = {}
        self._packings: dict = {}
        self._rows: dict = {}

    @property
    def grid_size(self) -> int:
        return len(self.n_mac) * len(self.w_core_kb) * len(self.n_chips_max)

    # ------------------------------------------------------------------ evaluate
    def evaluate(self, genomes: Any, workload: Workload) -> CostTable:
        """Cost a population (a list of Genomes or a PopArrays); infeasible genomes get inf + reason."""
        if workload.batch != 1:
            raise BackendError(f"workload.batch = {workload.batch} is invalid for backend=rdxe; allowed: 1 (one stream)")
        if isinstance(genomes, PopArrays):
            src, keys = genomes, pop_key_rows(genomes)
        else:
            src = list(genomes)
            if not src:
                raise BackendError("evaluate() got an empty population; allowed: a non-empty list of Genomes or a PopArrays")
            keys = [g.id for g in src]
        wkey = (workload.prefill, workload.decode, workload.precision)
        self._bound()  # before the hits are counted: a clear after it dropped rows the batch was about to read
        miss = [i for i, key in enumerate(keys) if (key, wkey) not in self._rows]
        if miss:
            self._fill(src, keys, miss, workload, wkey)
        rows = [self._rows[(key, wkey)] for key in keys]
        col = lambda j: np.array([r[j] for r in rows])  # noqa: E731
        return CostTable(col(0), col(1), col(2), col(3), [r[4] for r in rows], [dict(r[5]) for r in rows])

    def _bound(self) -> None:
        """Memory stays bounded: a cache past `cache_size` entries starts over (rebuilt exactly on a miss)."""
        for cache in (self._profiles, self._packings, self._rows):
            if len(cache) > self.cache_size:
                cache.clear()

    def _fill(self, src: Any, keys: list, miss: list[int], wl: Workload, wkey: tuple) -> None:
        need = [i for i in miss if (keys[i], wkey) not in self._profiles]
        if need:
            sub = src.take(np.array(need)) if isinstance(src, PopArrays) else PopArrays.from_genomes([src[i] for i in need])
            for i, prof in zip(need, profile_population(sub, wl.prefill, wl.decode, wl.precision, self.k)):
                self._profiles[(keys[i], wkey)] = prof
        for i in miss:
            self._rows[(keys[i], wkey)] = self.evaluate_profile(self._profiles[(keys[i], wkey)], wl)

    # ------------------------------------------------------------------ chip co-search
    def _pack(self, prof: LayerProfile, caps: ChipCaps) -> Optional[Packing]:
        key = (prof.key, caps)
        if key not in self._packings:
            self._packings[key] = balanced_pack(prof.w, prof.kT, prof.o, prof.a, caps, self.pack_method)
        return self._packings[key]

    def _smallest_cores(self, prof: LayerProfile, w_b: int) -> int:
        """Smallest power-of-two core count on which every single layer fits (weights, KV, scratchpad)."""
        k_b = self.k_core_kb * KB
        need = max(max(-(-x // w_b) for x in prof.w), max(-(-x // k_b) for x in prof.kT), self.min_cores)
        cores = 1 << int(need - 1).bit_length()
        while cores <= self.max_cores and scratchpad_bytes(cores, self.k) < max(prof.a):
            cores *= 2
        return cores

    def candidates(self, prof: LayerProfile) -> tuple[list[ChipPick], list[str]]:
        """The feasible chip picks of the grid, and why the other templates are infeasible."""
        picks, why, k_b = [], [], self.k_core_kb * KB
        for wkb in self.w_core_kb:
            w_b, cores, pending = wkb * KB, self._smallest_cores(prof, wkb * KB), list(self.n_chips_max)
            if cores > self.max_cores:
                why.append(self._too_big(prof, wkb))
                continue
            while pending and cores <= self.max_cores:
                s = min_stages(prof.w, prof.kT, cores * w_b, cores * k_b)
                for cap in [c for c in pending if s <= c]:
                    pending.remove(cap)
                    packing = self._pack(prof, ChipCaps(cores * w_b, cores * k_b, scratchpad_bytes(cores, self.k), cap))
                    picks += [ChipPick(m, wkb, cap, cores, packing) for m in self.n_mac]
                cores *= 2
            why += [f"w_core={wkb} KB needs more than n_chips_max={c} chips even with max_cores_per_chip="
                    f"{self.max_cores}" for c in pending]
        return picks, why

    def _too_big(self, prof: LayerProfile, wkb: int) -> str:
        caps = (("weight", prof.w, self.max_cores * wkb * KB), ("KV (kappa*T)", prof.kT, self.max_cores * self.k_core_kb * KB),
                ("activation", prof.a, scratchpad_bytes(self.max_cores, self.k)))
        for i in range(prof.n):
            for what, vals, cap in caps:
                if vals[i] > cap:
                    return (f"layer {int(prof.slots[i])} needs {vals[i]} {what} bytes > the largest chip's {cap} "
                            f"(max_cores_per_chip={self.max_cores}, w_core={wkb} KB, k_core={self.k_core_kb} KB)")
        return f"w_core={wkb} KB: no chip fits"

    # ------------------------------------------------------------------ one genome
    def evaluate_profile(self, prof: LayerProfile, wl: Workload) -> tuple:
        """(ttft, tpot, energy, feasible, reason, extras) of one profiled genome."""
        if prof.n == 0:
            return np.inf, np.inf, np.inf, False, "no active layers", {}
        if self.conventions == "llmforge":
            return self._evaluate_llmforge(prof, wl)
        picks, why = self.candidates(prof)
        n_templates = len({(p.n_mac, p.w_core_kb, p.n_chips_max) for p in picks})
        picks = [picks[i] for i in dedupe([(p.n_mac, p.w_core_kb, p.cores, p.packing.partition) for p in picks])]
        if not picks:
            return np.inf, np.inf, np.inf, False, f"no feasible rDXE chip in the {self.grid_size}-config grid: {why[-1]}", {}
        sim = simulate(prof, np.array([p.n_mac for p in picks]), np.array([p.cores for p in picks]),
                       np.array([p.w_core_kb * KB for p in picks]), self.k_core_kb * KB,
                       [p.packing.partition for p in picks], wl.prefill, wl.decode, self.k)
        ok = in_envelope(sim, self.area_env, self.power_env)
        if not ok.any():
            reason = f"no rDXE chip inside the envelope: area {self.area_env} mm2, power {self.power_env} mW"
            return np.inf, np.inf, np.inf, False, reason, {}
        chosen, n_front = top_k(sim, ok, self.top_k, self.rank_by)
        top = [self._describe(prof, picks[i], sim, i) for i in chosen]
        best = top[0]
        extras = {"chip": best["chip"], "assignment": best["assignment"], "n_chips": best["chip"]["n_chips"],
                  **{m: best[m] for m in METRICS[3:]}, "top_k": top, "n_feasible_templates": n_templates,
                  "n_feasible_chips": int(ok.sum()), "n_pareto": n_front,
                  "precision": dict(zip(("weight_bits", "act_bits", "kv_bits"), (8 * b for b in prof.bytes_wak)))}
        return best["ttft_ms"], best["tpot_ms"], best["energy_per_token_uj"], True, "", extras

    # ------------------------------------------------------------------ conventions=llmforge
    def _llmforge_picks(self, prof: LayerProfile, h: lf.Homogeneous) -> list[ChipPick]:
        """Grid in the release's sweep order (n_MAC, n_chips_max, w_core): smallest cores that pack into the cap."""
        c, k_b = self.lf, self.k_core_kb * KB
        w, kT = tuple(h.w), tuple(h.kv * c.kv_context)
        picks = []
        for m in self.n_mac:
            for cap in self.n_chips_max:
                for wkb in self.w_core_kb:
                    key = ("llmforge", w, kT, wkb, cap, self.min_cores, self.max_cores, c.capacity_overhead)
                    if key not in self._packings:
                        self._packings[key] = capacity_cores(w, kT, wkb * KB, k_b, cap, self.min_cores, self.max_cores,
                                                             c.capacity_overhead)
                    if self._packings[key] is not None:
                        cores, part = self._packings[key]
                        picks.append(ChipPick(m, wkb, cap, cores, Packing(part, int(max(h.ops)))))
        return picks

    def _evaluate_llmforge(self, prof: LayerProfile, wl: Workload) -> tuple:
        h = lf.release_profile(prof, self.lf)
        picks = self._llmforge_picks(prof, h)
        if not picks:
            return np.inf, np.inf, np.inf, False, f"no rDXE chip in the {self.grid_size}-config grid packs it (llmforge)", {}
        sim = lf.simulate(prof, h, np.array([p.n_mac for p in picks]), np.array([p.cores for p in picks]),
                          np.array([p.w_core_kb * KB for p in picks]), self.k_core_kb * KB,
                          [p.packing.partition for p in picks], wl.prefill, self.k, self.lf)
        order, n_ok = lf.select(sim, self.lf)
        if not n_ok:
            return np.inf, np.inf, np.inf, False, "no rDXE chip inside the llmforge envelope", {}
        top = [self._describe(prof, picks[i], sim, i) for i in order[: self.top_k]]
        best = top[0]
        extras = {"chip": best["chip"], "assignment": best["assignment"], "n_chips": best["chip"]["n_chips"],
                  **{m: best[m] for m in METRICS[3:]}, "top_k": top, "n_feasible_templates": len(picks),
                  "n_feasible_chips": n_ok, "n_pareto": n_ok, "conventions": "llmforge",
                  "precision": dict(zip(("weight_bits", "act_bits", "kv_bits"), (8 * b for b in prof.bytes_wak)))}
        return best["ttft_ms"], best["tpot_ms"], best["energy_per_token_uj"], True, "", extras

    def _describe(self, prof: LayerProfile, p: ChipPick, sim: dict, i: int) -> dict[str, Any]:
        """One (model, chip) pair as plain JSON-ready values: metrics, chip and layer-slot assignment."""
        n_dxt, n_vac = (int(x[0]) for x in split_cores(np.array([p.cores])))
        bounds = (0,) + p.packing.partition
        stages = [[int(s) for s in prof.slots[a:b]] for a, b in zip(bounds[:-1], bounds[1:])]
        chip = {"n_mac": p.n_mac, "w_core_kb": p.w_core_kb, "k_core_kb": self.k_core_kb, "n_dxt": n_dxt, "n_vac": n_vac,
                "tiles_x_cores": f"{n_dxt}x{n_vac}", "cores": p.cores, "n_chips": len(stages), "n_chips_max": p.n_chips_max,
                "chip_area_mm2": float(chip_area_mm2(p.cores, p.n_mac, p.w_core_kb * KB, self.k_core_kb * KB, self.k)),
                "area_mm2": float(sim["area_mm2"][i])}
        return {**{m: float(sim[m][i]) for m in METRICS}, "chip": chip, "assignment": stages,
                "stage_ops_budget": p.packing.budget}
