"""Search spaces: per-field grids, uniform sampling, repair and the integer codec for pymoo.

A genome is encoded as a flat integer vector of L_max × n_genes grid *indices*, layer-major:
`[active, attn, i_nh, i_nkv, i_dqk, i_dv, i_dmlp]` per slot, then one index per registered gene the space
lists a grid for (forge.genes; `window: [0, 64, ...]` adds `i_window`), so a space without one keeps 7. Repair works on that matrix, vectorized:
it clips and rounds to the grid, snaps n_kv to the nearest divisor of n_h present in the n_kv grid
(ties go to the smaller divisor: fewer KV heads, cheaper), and re-activates slot 0 when every layer
is pruned. Repair is idempotent by construction (each step maps valid input to itself).

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
from forge.genes import LAYER_GENES, LEGACY, extra_genes, grid_genes
from forge.genome import Genome, GenomeError, LayerGene
from forge.precision import TENSORS, PrecisionError, PrecisionGenes, parse_format

N_GENES = 7  # per layer slot in a space that searches no gene beyond the original seven
GRID_FIELDS = ("n_h", "n_kv", "d_qk", "d_v", "d_mlp")  # grids every space lists (SearchSpace fields)


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
    """Grids and fixed globals of one search space (built from `conf/space/<name>.yaml`)."""

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

    # ------------------------------------------------------------ grids
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
    def n_var(self) -> int:
        return self.n_layer_var + self.n_prec

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        hi = [1, 1, *(len(self.grid(k)) - 1 for k in self.codec_genes[2:])]
        if self.attention == "gqa":
            hi[4] = hi[5] = 0  # d_qk, d_v: derived from n_h
        tail = [len(self.precision[t]) - 1 for t in TENSORS] if self.precision else []
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
        return np.concatenate([X.reshape(len(genomes), -1), self._encode_precision(genomes)], axis=1)

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
            out["precision"] = X[:, self.n_layer_var:]
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
        full = lambda x: np.full(P, x)  # noqa: E731
        v = dict(v)
        prec = v.pop("precision", None)
        if prec is not None:  # per-genome bytes from the precision genes (shared MX scales included)
            for j, (t, k) in enumerate(zip(TENSORS, ("weight_bytes", "act_bytes", "kv_bytes"))):
                v[k] = np.array([parse_format(f).bytes for f in self.precision[t]])[prec[:, j]]
        genes = {g.name: v.pop(g.name) for g in extra_genes() if g.name in v}
        return PopArrays(**v, genes=genes, d_model=full(self.d_model), block_size=full(self.block_size),
                         vocab_size=full(self.vocab_size), swiglu=full(self.mlp == "swiglu"),
                         learned_pos=full(self.pos == "learned"), tied=full(self.tied),
                         bias_qkv=full(self.bias in ("qkv", "all")), bias_all=full(self.bias == "all"),
                         layernorm=full(self.norm == "layernorm")).masked()

    def decode(self, X: np.ndarray) -> list[Genome]:
        return self.genomes_from_values(self.values(X))

    def genomes_from_values(self, v: dict[str, np.ndarray]) -> list[Genome]:
        """`values(X)` → Genomes (one per row), built without re-validation: codec values are on-grid and
        repaired, so every check `LayerGene` would run holds by construction (the hot path of a search)."""
        n, L = v["active"].shape
        names = [k for k in LEGACY if k not in ("active", "attn")] + [g.name for g in extra_genes() if g.name in v]
        slots = list(zip(*(v[k].ravel().tolist() for k in (*names, "active", "attn"))))
        cache = self._tables.setdefault("layers", {})  # equal slots share one immutable LayerGene
        flat = [cache.get(t) or cache.setdefault(t, self._layer(names, t)) for t in slots]
        template = self.genome((LayerGene(1, 1, 1, 1, 1),))
        out = []
        for p in range(n):
            layers = tuple(flat[p * L:(p + 1) * L])
            prec = None
            if "precision" in v:
                prec = PrecisionGenes(*(self.precision[t][int(i)] for t, i in zip(TENSORS, v["precision"][p])))
            out.append(template.trusted_copy(layers, prec))
        return out

    @staticmethod
    def _layer(names: list[str], t: tuple) -> LayerGene:
        """A trusted LayerGene from one decoded slot: `names` values, then the active and attn flags."""
        vals = dict(zip(names, t))
        legacy = {k: vals.pop(k) for k in LEGACY if k in vals}
        extra = tuple(sorted((k, x) for k, x in vals.items() if x != LAYER_GENES[k].default))
        return LayerGene.trusted({**legacy, "active": bool(t[-2]), "attn": bool(t[-1])}, extra)

    def genome(self, layers: Sequence[LayerGene], name: str = "", precision: Any = None) -> Genome:
        return Genome(d_model=self.d_model, block_size=self.block_size, layers=tuple(layers),
                      vocab_size=self.vocab_size, mlp=self.mlp, norm=self.norm, bias=self.bias,
                      tied=self.tied, pos=self.pos, name=name, precision=precision)

    # ------------------------------------------------------------ validation
    def validate(self, genome: Genome) -> None:
        """Raise GenomeError naming the first field that lies outside this space."""
        for k in ("d_model", "block_size", "vocab_size", "mlp", "norm", "bias", "tied", "pos"):
            if getattr(genome, k) != getattr(self, k):
                raise GenomeError(f"{k} = {getattr(genome, k)!r} is invalid for space {self.name}; allowed: {getattr(self, k)!r}")
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
        return {"name": self.name, "attention": self.attention, "d_model": self.d_model,
                "block_size": self.block_size, "L_max": self.L_max, "vocab_size": self.vocab_size,
                "mlp": self.mlp, "norm": self.norm, "bias": self.bias, "tied": self.tied, "pos": self.pos,
                "ranges": {k: ("d_model/n_h" if self.attention == "gqa" and k in ("d_qk", "d_v") else _fmt(self.grid(k)))
                           for k in self.codec_genes[2:]},
                "configs_per_layer": self.configs_per_layer(), "n_var": self.n_var,
                **({"precision": {t: list(v) for t, v in self.precision.items()}} if self.precision else {})}


def _fmt(grid: Sequence[int]) -> str:
    """Compact text of a grid: `64:32:512` when evenly spaced, else the list."""
    g = list(grid)
    if len(g) > 2 and len({b - a for a, b in zip(g, g[1:])}) == 1:
        return f"{g[0]}:{g[1] - g[0]}:{g[-1]}"
    return str(g)


class _Grid(dict):
    """A hashable {tensor: formats} (the space is a frozen, hashable dataclass)."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items())))


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
