"""Search spaces: per-field grids, uniform sampling, repair and the integer codec for pymoo.

A genome is encoded as a flat integer vector of L_max × n_genes grid *indices*, layer-major:
`[active, attn, i_nh, i_nkv, i_dqk, i_dv, i_dmlp]` per slot, then one index per registered gene the space
lists a grid for (forge.genes; `window: [0, 64, ...]` adds `i_window`), so a space without one keeps 7. Repair works on that matrix, vectorized:
it clips and rounds to the grid, snaps n_kv to the nearest divisor of n_h present in the n_kv grid
(ties go to the smaller divisor: fewer KV heads, cheaper), and re-activates slot 0 when every layer
is pruned. Repair is idempotent by construction (each step maps valid input to itself).

A global gene (forge.genes.GLOBAL_GENES) is fixed by one value (`d_model: 128`) or, where the registry lets a
space search it, listed as a grid (`d_model: [128, 192]`, `{start, stop, step}`) or several choices
(`mlp: [gelu, swiglu]`): each searched one adds a column after the layer slots (`global_genes` names them, in
registry order), an index into its grid. The operators treat those columns like the precision genes (handed
on by crossover, stepped by one by the tail mutation), so a space that searches none keeps its codec.

`precision: {weights: [...], acts: [...], kv: [...]}` (format names, forge.precision) makes precision a
search variable: three more genes after the layer slots, `[i_w, i_a, i_kv]` indices into those lists,
decoded into `Genome.precision`. Without it the codec and every genome are exactly as before.

A yaml's `_target_` names the space class (`space_class`): SearchSpace or a user's subclass.
Decoding builds genomes without re-validating them (the codec only yields valid, repaired values).

`attention: gqa` restricts the space to grouped-query attention: n_h must divide d_model and
d_qk = d_v = d_model / n_h, so the d_qk / d_v genes are fixed at index 0 and derived on decode.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from forge.arrays import PopArrays
from forge.arrays import global_columns
from forge.genes import GLOBAL_GENES, LAYER_GENES, LEGACY, GlobalGene, extra_genes, grid_genes
from forge.genome import Genome, GenomeError, LayerGene, _check_gene
from forge.precision import TENSORS, PrecisionError, PrecisionGenes, parse_format

N_GENES = 7  # per layer slot in a space that searches no gene beyond the original seven
GRID_FIELDS = ("n_h", "n_kv", "d_qk", "d_v", "d_mlp")  # grids every space lists (SearchSpace fields)
GLOBAL_FIELDS = ("d_model", "block_size", "vocab_size", "mlp", "norm", "bias", "tied", "pos")  # SearchSpace fields


def make_grid(spec: Any, name: str, lo: int = 1) -> tuple[int, ...]:
    """`{start, stop, step}` (inclusive stop), a `[a, step, b]` triple string `"a:step:b"`, or explicit `values`."""
    if isinstance(spec, Mapping) and "values" in spec:
        vals = [int(v) for v in spec["values"]]
    elif isinstance(spec, Mapping):
        a, b, s = int(spec["start"]), int(spec["stop"]), int(spec.get("step", 1))
        vals = list(range(a, b + 1, s))
    elif isinstance(spec, str) and spec.count(":") == 2:
        a, s, b = (int(x) for x in spec.split(":"))
        vals = list(range(a, b + 1, s))
    elif isinstance(spec, Sequence):
        vals = [int(v) for v in spec]
    else:
        raise GenomeError(f"space.{name} = {spec!r} is invalid; allowed: {{start, stop, step}}, 'a:step:b' or a list")
    if not vals or any(v < lo for v in vals) or sorted(set(vals)) != vals:
        raise GenomeError(f"space.{name} = {vals!r} is invalid; allowed: a strictly increasing list of ints >= {lo}")
    return tuple(vals)


@dataclass(frozen=True)
class SearchSpace:
    """Grids and globals of one search space (built from `conf/space/<name>.yaml`). A searched global field
    (`d_model: [128, 192]`) holds its grid's first value; `global_genes` holds its grid."""

    name: str
    d_model: int
    block_size: int
    L_max: int
    n_h: tuple[int, ...]
    n_kv: tuple[int, ...]
    d_qk: tuple[int, ...]
    d_v: tuple[int, ...]
    d_mlp: tuple[int, ...]
    attention: str = "iha"  # iha | gqa
    vocab_size: int = 50257
    mlp: str = "gelu"
    norm: str = "layernorm"
    bias: str = "none"
    tied: bool = True
    pos: str = "rope"
    p_active: float = 0.5
    p_attn: float = 0.5
    description: str = ""
    precision: Any = None  # {weights, acts, kv: [format, ...]} → per-genome precision genes
    genes: Any = None  # {gene: grid} for registered genes beyond the five (forge.genes), e.g. window
    global_genes: Any = None  # {global gene: value or grid} beyond the fields above (parallel, registered ones)
    _tables: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for k in GRID_FIELDS:
            object.__setattr__(self, k, make_grid(getattr(self, k), k))
        extra = dict(self.genes or {})
        for k in extra:
            if k not in LAYER_GENES or not LAYER_GENES[k].grid or k in GRID_FIELDS:
                raise GenomeError(f"space.genes.{k} is unknown; allowed: a registered gene "
                                  f"({', '.join(g.name for g in extra_genes() if g.grid) or 'none'})")
        object.__setattr__(self, "genes", _Grid({k: make_grid(v, k, LAYER_GENES[k].lo) for k, v in extra.items()})
                           if extra else None)
        self._tables["codec"] = ("active", "attn", *(g.name for g in grid_genes()
                                                     if g.name in GRID_FIELDS or g.name in extra))
        if self.attention not in ("iha", "gqa"):
            raise GenomeError(f"space.attention = {self.attention!r} is invalid; allowed: iha | gqa")
        self._init_globals()
        if 1 not in self.n_kv:
            raise GenomeError(f"space.n_kv = {self.n_kv} is invalid; allowed: a grid containing 1")
        if self.attention == "gqa":
            heads = tuple(h for h in self.n_h if self.d_model % h == 0)
            if not heads:
                raise GenomeError(f"space.n_h = {self.n_h}: no head count divides d_model={self.d_model}")
            object.__setattr__(self, "n_h", heads)
        self._tables["kv_snap"] = self._kv_snap_table()
        if self.precision is not None:
            object.__setattr__(self, "precision", _precision_grid(self.precision))

    def _init_globals(self) -> None:
        """Split every global gene into a fixed value or a searched grid (registry order = column order)."""
        given = dict(self.global_genes or {})
        unknown = [k for k in given if k not in GLOBAL_GENES]
        if unknown:
            raise GenomeError(f"space.{unknown[0]} is unknown; allowed: a registered global gene ({', '.join(GLOBAL_GENES)})")
        fixed, grids = {}, {}
        for gene in GLOBAL_GENES.values():
            spec = given.get(gene.name, getattr(self, gene.name) if gene.name in GLOBAL_FIELDS else gene.default)
            grid = _global_grid(gene, spec)
            if len(grid) > 1 and not gene.search:
                raise GenomeError(f"space.{gene.name} = {spec!r} is invalid; allowed: one value ({gene.name} is not searchable)")
            if len(grid) > 1:
                grids[gene.name] = grid
            else:
                fixed[gene.name] = grid[0]
            if gene.name in GLOBAL_FIELDS:
                object.__setattr__(self, gene.name, grid[0])
        if grids and self.attention == "gqa" and "d_model" in grids:
            raise GenomeError("space.d_model is searched; allowed: a fixed d_model with attention: gqa")
        keep = {k: v for k, v in given.items() if k not in GLOBAL_FIELDS or k in grids}
        object.__setattr__(self, "global_genes", _Grid({**keep, **grids}) if keep or grids else None)
        self._tables.update(gfixed=fixed, ggrids=grids)

    # ------------------------------------------------------------ grids
    @property
    def searched_globals(self) -> tuple[str, ...]:
        """Global genes this space searches: one codec column each, after the layer slots."""
        return tuple(self._tables["ggrids"])

    def global_grid(self, name: str) -> tuple[Any, ...]:
        """A global gene's grid in this space: its searched values, or its one fixed value."""
        grids = self._tables["ggrids"]
        return grids[name] if name in grids else (self._tables["gfixed"][name],)

    @property
    def codec_genes(self) -> tuple[str, ...]:
        """Gene names of one layer slot's columns, in order: the two masks, then every searched grid."""
        return self._tables["codec"]

    @property
    def n_genes(self) -> int:
        return len(self.codec_genes)

    def grid(self, name: str) -> tuple[int, ...]:
        """The grid of a searched gene; a registered gene this space does not search has its default only."""
        if name in GRID_FIELDS:
            return getattr(self, name)
        if self.genes and name in self.genes:
            return self.genes[name]
        return (LAYER_GENES[name].default,)

    def _kv_snap_table(self) -> np.ndarray:
        """kv_snap[i_h, i_kv] = index of the n_kv divisor of n_h[i_h] nearest to n_kv[i_kv]."""
        tab = np.zeros((len(self.n_h), len(self.n_kv)), dtype=np.int64)
        kv = np.array(self.n_kv)
        for ih, h in enumerate(self.n_h):
            ok = np.flatnonzero(h % kv == 0)
            for ik, v in enumerate(kv):
                dist = np.abs(kv[ok] - v)
                tab[ih, ik] = ok[np.argmin(dist)]  # argmin picks the first (smaller) on ties
        return tab

    @property
    def n_layer_var(self) -> int:
        return self.L_max * self.n_genes

    @property
    def n_prec(self) -> int:
        return len(TENSORS) if self.precision else 0

    @property
    def n_glob(self) -> int:
        return len(self._tables["ggrids"])

    @property
    def n_var(self) -> int:
        return self.n_layer_var + self.n_glob + self.n_prec

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        hi = [1, 1, *(len(self.grid(k)) - 1 for k in self.codec_genes[2:])]
        if self.attention == "gqa":
            hi[4] = hi[5] = 0  # d_qk, d_v: derived from n_h
        tail = [len(g) - 1 for g in self._tables["ggrids"].values()]
        tail += [len(self.precision[t]) - 1 for t in TENSORS] if self.precision else []
        return (np.zeros(self.n_var, dtype=np.int64),
                np.concatenate([np.tile(np.array(hi, dtype=np.int64), self.L_max), np.array(tail, dtype=np.int64)]))

    def configs_per_layer(self) -> dict[str, int]:
        """Per-layer attention configurations (LLMForge App. A: 27 under GQA, 11,250 under IHA)."""
        pairs = sum(1 for h in self.n_h for v in self.n_kv if h % v == 0)
        gqa = sum(1 for h in self.n_h for v in self.n_kv if h % v == 0 and self.d_model % h == 0)
        iha = pairs * len(self.d_qk) * len(self.d_v) if self.attention == "iha" else gqa
        return {"gqa": gqa, "iha": iha}

    # ------------------------------------------------------------ sampling / repair
    def sample_x(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Uniform over every grid, Bernoulli masks; then repaired."""
        xl, xu = self.bounds()
        X = rng.integers(xl, xu + 1, size=(n, self.n_var))
        X3 = X[:, :self.n_layer_var].reshape(n, self.L_max, self.n_genes)
        X3[:, :, 0] = rng.random((n, self.L_max)) < self.p_active
        X3[:, :, 1] = rng.random((n, self.L_max)) < self.p_attn
        X[:, :self.n_layer_var] = X3.reshape(n, -1)
        return self.repair_x(X)

    def sample(self, n: int, rng: np.random.Generator) -> list[Genome]:
        return self.decode(self.sample_x(n, rng))

    def repair_x(self, X: np.ndarray) -> np.ndarray:
        """Vectorized, idempotent repair of an (n, n_var) matrix of grid indices."""
        xl, xu = self.bounds()
        X = np.clip(np.rint(np.asarray(X, dtype=float)), xl, xu).astype(np.int64)
        X3 = X[:, :self.n_layer_var].reshape(X.shape[0], self.L_max, self.n_genes)
        X3[:, :, 3] = self._tables["kv_snap"][X3[:, :, 2], X3[:, :, 3]]  # n_kv | n_h (forge.genes)
        dead = X3[:, :, 0].sum(axis=1) == 0
        X3[dead, 0, 0] = 1
        X[:, :self.n_layer_var] = X3.reshape(X.shape[0], -1)
        return X

    def repair(self, genome: Genome) -> Genome:
        return self.decode(self.repair_x(self.encode([genome])))[0]

    # ------------------------------------------------------------ codec
    @staticmethod
    def _snap(grid: Sequence[int], values: np.ndarray) -> np.ndarray:
        g = np.asarray(grid)
        return np.abs(values[..., None] - g).argmin(axis=-1)

    def encode(self, genomes: Sequence[Genome]) -> np.ndarray:
        """Genomes → (n, n_var) grid indices; off-grid values snap to the nearest grid point."""
        names = self.codec_genes
        X = np.zeros((len(genomes), self.L_max, len(names)), dtype=np.int64)
        for p, g in enumerate(genomes):
            if len(g.layers) > self.L_max:
                raise GenomeError(f"layers has {len(g.layers)} slots; allowed: at most L_max={self.L_max} for space {self.name}")
            raw = np.array([[gene.get(k) for k in names] for gene in g.layers], dtype=np.int64)
            n = len(raw)
            X[p, :n, 0:2] = raw[:, 0:2]
            for j, k in enumerate(names[2:], start=2):
                X[p, :n, j] = self._snap(self.grid(k), raw[:, j])
        if self.attention == "gqa":
            X[:, :, 4:6] = 0
        return np.concatenate([X.reshape(len(genomes), -1), self._encode_globals(genomes),
                               self._encode_precision(genomes)], axis=1)

    def _encode_globals(self, genomes: Sequence[Genome]) -> np.ndarray:
        """(n, n_glob) indices of the searched global genes; an off-grid int snaps to the nearest grid value,
        an unlisted choice to the first."""
        out = np.zeros((len(genomes), self.n_glob), dtype=np.int64)
        for j, (k, grid) in enumerate(self._tables["ggrids"].items()):
            for p, g in enumerate(genomes):
                v = g.get(k)
                if v in grid:
                    out[p, j] = grid.index(v)
                elif GLOBAL_GENES[k].kind == "int":
                    out[p, j] = int(self._snap(grid, np.array(v)))
        return out

    def _encode_precision(self, genomes: Sequence[Genome]) -> np.ndarray:
        """(n, n_prec) indices; a genome without genes takes each list's first format, an off-list
        format the listed one nearest in bits per element."""
        out = np.zeros((len(genomes), self.n_prec), dtype=np.int64)
        for p, g in enumerate(genomes):
            for j, t in enumerate(TENSORS[:self.n_prec]):
                if g.precision is not None:
                    bits = np.array([parse_format(f).bits_per_element for f in self.precision[t]])
                    own = getattr(g.precision, t)
                    out[p, j] = self.precision[t].index(own) if own in self.precision[t] else \
                        int(np.abs(bits - parse_format(own).bits_per_element).argmin())
        return out

    def values(self, X: np.ndarray) -> dict[str, np.ndarray]:
        """(n, n_var) indices → raw per-layer values, each (n, L_max), without building genomes."""
        X = np.asarray(X, dtype=np.int64).reshape(-1, self.n_var)
        X3 = X[:, :self.n_layer_var].reshape(-1, self.L_max, self.n_genes)
        out = {"active": X3[:, :, 0], "attn": X3[:, :, 1]}
        if self.precision:
            out["precision"] = X[:, self.n_layer_var + self.n_glob:]
        for j, (k, grid) in enumerate(self._tables["ggrids"].items(), start=self.n_layer_var):
            out[k] = np.asarray(grid)[X[:, j]]  # (n,) values of a searched global gene
        for j, k in enumerate(self.codec_genes[2:], start=2):
            out[k] = np.asarray(self.grid(k))[X3[:, :, j]]
        for gene in extra_genes():  # registered genes this space does not search: their default
            if gene.name not in out:
                out[gene.name] = np.full(X3.shape[:2], int(gene.default), dtype=np.int64)
        if self.attention == "gqa":
            out["d_qk"] = out["d_v"] = self.d_model // out["n_h"]
        return out

    def to_arrays(self, X: np.ndarray) -> PopArrays:
        """The analyzer's struct-of-arrays straight from the codec (no Genome objects: fast path)."""
        return self.arrays_from_values(self.values(X))

    def arrays_from_values(self, v: dict[str, np.ndarray]) -> PopArrays:
        """`values(X)` → PopArrays, so a caller that also decodes converts the matrix once."""
        P = v["active"].shape[0]
        v = dict(v)
        prec = v.pop("precision", None)
        if prec is not None:  # per-genome bytes from the precision genes (shared MX scales included)
            for j, (t, k) in enumerate(zip(TENSORS, ("weight_bytes", "act_bytes", "kv_bytes"))):
                v[k] = np.array([parse_format(f).bytes for f in self.precision[t]])[prec[:, j]]
        genes = {g.name: v.pop(g.name) for g in extra_genes() if g.name in v}
        glob = {**self._tables["gfixed"], **{k: v.pop(k) for k in self._tables["ggrids"]}}
        return PopArrays(**v, genes=genes, **global_columns(glob, P)).masked()

    def decode(self, X: np.ndarray) -> list[Genome]:
        return self.genomes_from_values(self.values(X))

    def genomes_from_values(self, v: dict[str, np.ndarray]) -> list[Genome]:
        """`values(X)` → Genomes (one per row), built without re-validation: codec values are on-grid and
        repaired, so every check `LayerGene` would run holds by construction (the hot path of a search)."""
        n, L = v["active"].shape
        names = [k for k in LEGACY if k not in ("active", "attn")] + [g.name for g in extra_genes() if g.name in v]
        slots = zip(*(v[k].ravel().tolist() for k in (*names, "active", "attn")))
        cache = self._tables.setdefault("layers", {})  # equal slots share one immutable LayerGene
        flat = [cache.get(t) or cache.setdefault(t, self._layer(names, t)) for t in slots]
        template = self.genome((LayerGene(1, 1, 1, 1, 1),))
        templates = self._templates(v, template)
        out = []
        for p in range(n):
            layers = tuple(flat[p * L:(p + 1) * L])
            prec = None
            if "precision" in v:
                prec = PrecisionGenes(*(self.precision[t][int(i)] for t, i in zip(TENSORS, v["precision"][p])))
            out.append((templates[p] if templates else template).trusted_copy(layers, prec))
        return out

    def _templates(self, v: dict[str, np.ndarray], template: Genome) -> list[Genome] | None:
        """One validated genome per row's searched globals (shared by equal rows); None when none is searched."""
        names = self.searched_globals
        if not names:
            return None
        cache: dict[tuple, Genome] = {}
        rows = list(zip(*(v[k].tolist() for k in names)))
        return [cache.get(t) or cache.setdefault(t, template.replace(**dict(zip(names, t)))) for t in rows]

    @staticmethod
    def _layer(names: list[str], t: tuple) -> LayerGene:
        """A trusted LayerGene from one decoded slot: `names` values, then the active and attn flags."""
        legacy = dict(zip(names[:5], t))  # names: the five shape genes in LEGACY order, then extras
        legacy["active"], legacy["attn"] = bool(t[-2]), bool(t[-1])
        extra = tuple(sorted((k, x) for k, x in zip(names[5:], t[5:-2]) if x != LAYER_GENES[k].default))
        return LayerGene.trusted(legacy, extra)

    def genome(self, layers: Sequence[LayerGene], name: str = "", precision: Any = None, **globals_: Any) -> Genome:
        """A genome of this space's fixed globals (a searched one at its grid's first value unless given)."""
        values = {k: self.global_grid(k)[0] for k in GLOBAL_GENES}
        return Genome.build(**{**values, **globals_}, layers=tuple(layers), name=name, precision=precision)

    # ------------------------------------------------------------ validation
    def validate(self, genome: Genome) -> None:
        """Raise GenomeError naming the first field that lies outside this space."""
        for k in GLOBAL_GENES:
            grid = self.global_grid(k)
            if genome.get(k) not in grid:
                allowed = repr(grid[0]) if len(grid) == 1 else _fmt(grid)
                raise GenomeError(f"{k} = {genome.get(k)!r} is invalid for space {self.name}; allowed: {allowed}")
        if len(genome.layers) > self.L_max:
            raise GenomeError(f"layers has {len(genome.layers)} slots; allowed: at most {self.L_max}")
        for i, gene in enumerate(genome.layers):
            for k in self.codec_genes[2:]:
                val, grid = gene.get(k), self.grid(k)
                if self.attention == "gqa" and k in ("d_qk", "d_v"):
                    grid = (self.d_model // gene.n_h,)
                if val not in grid:
                    raise GenomeError(f"layers[{i}].{k} = {val} is invalid for space {self.name}; allowed: {_fmt(grid)}")
        for t in TENSORS if self.precision and genome.precision is not None else ():
            if getattr(genome.precision, t) not in self.precision[t]:
                raise GenomeError(f"precision.{t} = {getattr(genome.precision, t)!r} is invalid for space {self.name}; "
                                  f"allowed: {', '.join(self.precision[t])}")

    def summary(self) -> dict[str, Any]:
        """The space in brief: its globals (a searched one as its grid; one beyond the fields only when it is
        searched or off its default), the per-layer ranges, and the size of the codec."""
        glob = {k: (list(self.global_grid(k)) if k in self._tables["ggrids"] else self.global_grid(k)[0])
                for k, g in GLOBAL_GENES.items()
                if k in GLOBAL_FIELDS or k in self._tables["ggrids"] or self.global_grid(k)[0] != g.default}
        return {"name": self.name, "attention": self.attention, "d_model": glob.pop("d_model"),
                "block_size": glob.pop("block_size"), "L_max": self.L_max, **glob,
                "ranges": {k: ("d_model/n_h" if self.attention == "gqa" and k in ("d_qk", "d_v") else _fmt(self.grid(k)))
                           for k in self.codec_genes[2:]},
                "configs_per_layer": self.configs_per_layer(), "n_var": self.n_var,
                **({"precision": {t: list(v) for t, v in self.precision.items()}} if self.precision else {})}


def _fmt(grid: Sequence[Any]) -> str:
    """Compact text of a grid: `64:32:512` when evenly spaced, else the list."""
    g = list(grid)
    if len(g) > 2 and all(type(x) is int for x in g) and len({b - a for a, b in zip(g, g[1:])}) == 1:
        return f"{g[0]}:{g[1] - g[0]}:{g[-1]}"
    return str(g)


class _Grid(dict):
    """A hashable {tensor: formats} (the space is a frozen, hashable dataclass)."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items())))


def _global_grid(gene: GlobalGene, spec: Any) -> tuple[Any, ...]:
    """A global gene's values in a space: one value (fixed), or a grid (ints: as `make_grid`) or a list of
    distinct choices / booleans, each checked as the genome checks it."""
    where = f"space.{gene.name}"
    if gene.kind == "int" and (isinstance(spec, (Mapping, list, tuple)) or (isinstance(spec, str) and ":" in spec)):
        return make_grid(spec, gene.name, gene.lo)
    vals = list(spec) if isinstance(spec, (list, tuple)) else [spec]
    vals = [_check_gene(gene, v, where) for v in vals]
    if not vals or len(set(vals)) != len(vals):
        raise GenomeError(f"{where} = {spec!r} is invalid; allowed: one value or a list of distinct values "
                          f"({gene.allowed()})")
    return tuple(vals)


def _precision_grid(spec: Any) -> dict[str, tuple[str, ...]]:
    """{weights, acts, kv: [formats]} → normalized names; bad names raise a GenomeError listing valid ones."""
    if not isinstance(spec, Mapping) or set(spec) != set(TENSORS):
        raise GenomeError(f"space.precision = {spec!r} is invalid; allowed: a mapping with lists for {', '.join(TENSORS)}")
    out = {}
    for t in TENSORS:
        vals = [spec[t]] if isinstance(spec[t], str) else list(spec[t])
        try:
            names = [parse_format(v).name for v in vals]
        except PrecisionError as e:
            raise GenomeError(f"space.precision.{t}: {e}") from None
        if not names or len(set(names)) != len(names):
            raise GenomeError(f"space.precision.{t} = {vals!r} is invalid; allowed: a non-empty list of distinct formats")
        out[t] = tuple(names)
    return _Grid(out)


def space_class(target: Any) -> type:
    """The space class a config's `_target_` names ('package.module.Class', a SearchSpace subclass): Forge's own,
    or an allowed `space` plug-in (`forge.plugins`: one the user named in the config they launched)."""
    from forge import plugins

    if target in (None, "", "forge.space.SearchSpace"):
        return SearchSpace
    try:
        cls = plugins.resolve("space", target)
    except plugins.PluginError as e:
        raise GenomeError(f"space._target_: {e}") from None
    if not (isinstance(cls, type) and issubclass(cls, SearchSpace)):
        raise GenomeError(f"space._target_ = {target!r} is invalid; allowed: forge.space.SearchSpace or a "
                          "subclass of it ('package.module.Class')")
    return cls


def space_from_config(cfg: Mapping[str, Any]) -> SearchSpace:
    """Build from a plain mapping (a Hydra node converted to a container), as the class its `_target_` names.

    A top-level key naming a registered gene beyond the five grids (e.g. `window: [0, 64]`) is that gene's grid."""
    cls = space_class(cfg.get("_target_"))
    d = {k: v for k, v in dict(cfg).items() if not k.startswith("_")}
    extra = {k: d.pop(k) for k in list(d) if k in LAYER_GENES and k not in GRID_FIELDS}
    if extra:
        d["genes"] = {**dict(d.get("genes") or {}), **extra}
    glob = {k: d.pop(k) for k in list(d) if k in GLOBAL_GENES and k not in GLOBAL_FIELDS}
    if glob:
        d["global_genes"] = {**dict(d.get("global_genes") or {}), **glob}
    try:
        return cls(**d)
    except TypeError as e:
        raise GenomeError(f"space config: {e}") from None


def load_space(name: str) -> SearchSpace:
    """Load `conf/space/<name>.yaml` by name (used outside Hydra: tests, notebooks)."""
    from forge.config import group_names, group_yaml

    node = group_yaml("space", name)
    if node is None:
        raise GenomeError(f"space = {name!r} is unknown; allowed: {', '.join(group_names('space'))}")
    return space_from_config(node)
