"""Search spaces: per-field grids, uniform sampling, repair and the integer codec for pymoo.

A genome is encoded as a flat integer vector of L_max × n_genes grid *indices*, layer-major:
`[active, attn, i_nh, i_nkv, i_dqk, i_dv, i_dmlp]` per slot, then one index per registered gene the space
lists a grid for (forge.genomes.genes; `window: [0, 64, ...]` adds `i_window`), so a space without one keeps 7. Repair works on that matrix, vectorized:
it clips and rounds to the grid, snaps n_kv to the nearest divisor of n_h present in the n_kv grid
(ties go to the smaller divisor: fewer KV heads, cheaper), and re-activates slot 0 when every layer
is pruned. Repair is idempotent by construction (each step maps valid input to itself).

A global gene (forge.genomes.genes.GLOBAL_GENES) is fixed by one value (`d_model: 128`) or, where the registry lets a
space search it, listed as a grid (`d_model: [128, 192]`, `{start, stop, step}`) or several choices
(`mlp: [gelu, swiglu]`): each searched one adds a column after the layer slots (`global_genes` names them, in
registry order), an index into its grid. The operators treat those columns like the precision genes (handed
on by crossover, stepped by one by the tail mutation), so a space that searches none keeps its codec.

`precision: {weights: [...], acts: [...], kv: [...]}` (format names, forge.genomes.precision) makes precision a
search variable: three more genes after the layer slots, `[i_w, i_a, i_kv]` indices into those lists,
decoded into `Genome.precision`. Without it the codec and every genome are exactly as before.

A yaml's `_target_` names the space class (`space_class`): SearchSpace or a user's subclass.
The codec itself (encode, values, arrays, decode) is `forge.spaces.codec.Codec`, a mixin of SearchSpace; parsing the
YAML grids is `forge.spaces.grids`.

`attention: gqa` restricts the space to grouped-query attention: n_h must divide d_model and
d_qk = d_v = d_model / n_h, so the d_qk / d_v genes are fixed at index 0 and derived on decode.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping, Sequence

import numpy as np

from forge.spaces import links
from forge.spaces.codec import Codec
from forge.genomes.genes import BUILTIN, GLOBAL_GENES, LAYER_GENES, SHAPE_GENES, extra_genes, grid_genes
from forge.genomes.genome import Genome, GenomeError, LayerGene
from forge.genomes.genome_checks import GENE_HINT
from forge.spaces.grids import Grid, fmt_grid, global_grid_values, make_grid, precision_grid, range_text
from forge.genomes.precision import TENSORS

__all__ = ["N_GENES", "GRID_FIELDS", "GLOBAL_FIELDS", "SearchSpace", "make_grid", "space_class",
           "space_from_config", "load_space"]

N_GENES = len(BUILTIN)  # per layer slot in a space that searches no gene beyond the built-in ones
GRID_FIELDS = SHAPE_GENES  # grids every space lists (SearchSpace fields)


@dataclass(frozen=True)
class SearchSpace(Codec):
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
    genes: Any = None  # {gene: grid} for registered genes beyond the five (forge.genomes.genes), e.g. window
    global_genes: Any = None  # {global gene: value or grid} beyond the fields above (parallel, registered ones)
    links: Any = None  # {gene: source}: tied genes (forge.spaces.links; `n_kv: {same_as: n_h}` in a space yaml)
    _tables: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        extra = dict(self.genes or {})
        specs = {**{k: getattr(self, k) for k in GRID_FIELDS}, **extra}
        ties, self._tables["ratios"] = links.resolve(
            specs, {**dict(self.global_genes or {}), **{k: getattr(self, k) for k in GLOBAL_FIELDS}}, self.links)
        extra = {k: specs[k] for k in extra}
        object.__setattr__(self, "links", dict(ties) or None)
        for k in GRID_FIELDS:
            object.__setattr__(self, k, make_grid(specs[k], k))
        for k in extra:
            if k not in LAYER_GENES or not LAYER_GENES[k].grid or k in GRID_FIELDS:
                raise GenomeError(f"space.genes.{k} is unknown; allowed: a registered gene "
                                  f"({', '.join(g.name for g in extra_genes() if g.grid) or 'none'})")
        object.__setattr__(self, "genes", Grid({k: make_grid(v, k, LAYER_GENES[k].lo) for k, v in extra.items()})
                           if extra else None)
        self._tables["codec"] = ("active", "attn", *(g.name for g in grid_genes()
                                                     if g.name in GRID_FIELDS or g.name in extra))
        if self.attention not in ("iha", "gqa"):
            raise GenomeError(f"space.attention = {self.attention!r} is invalid; allowed: iha | gqa")
        self._init_globals()
        if 1 not in self.n_kv and "n_kv" not in (self.links or {}):
            raise GenomeError(f"space.n_kv = {self.n_kv} is invalid; allowed: a grid containing 1")
        if self.attention == "gqa":
            heads = tuple(h for h in self.n_h if self.d_model % h == 0)
            if not heads:
                raise GenomeError(f"space.n_h = {self.n_h}: no head count divides d_model={self.d_model}")
            object.__setattr__(self, "n_h", heads)
        self._tables["kv_snap"] = self._kv_snap_table()
        if self.precision is not None:
            object.__setattr__(self, "precision", precision_grid(self.precision))

    def _init_globals(self) -> None:
        """Split every global gene into a fixed value or a searched grid (registry order = column order)."""
        given = dict(self.global_genes or {})
        unknown = [k for k in given if k not in GLOBAL_GENES]
        if unknown:
            raise GenomeError(f"space.{unknown[0]} is unknown; allowed: a registered global gene ({', '.join(GLOBAL_GENES)})")
        fixed, grids = {}, {}
        for gene in GLOBAL_GENES.values():
            spec = given.get(gene.name, getattr(self, gene.name) if gene.name in GLOBAL_FIELDS else gene.default)
            grid = global_grid_values(gene, spec)
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
        object.__setattr__(self, "global_genes", Grid({**keep, **grids}) if keep or grids else None)
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

    def index_grid(self, name: str) -> tuple[Any, ...]:
        """What the gene's codec column indexes: its grid, or its ratios when it follows a searched global."""
        rule = self._tables["ratios"].get(name)
        return rule[1] if rule else self.grid(name)

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
        hi = [1, 1, *(len(self.index_grid(k)) - 1 for k in self.codec_genes[2:])]
        if self.attention == "gqa":
            hi[4] = hi[5] = 0  # d_qk, d_v: derived from n_h
        tail = [len(g) - 1 for g in self._tables["ggrids"].values()]
        tail += [len(self.precision[t]) - 1 for t in TENSORS] if self.precision else []
        return (np.zeros(self.n_var, dtype=np.int64),
                np.concatenate([np.tile(np.array(hi, dtype=np.int64), self.L_max), np.array(tail, dtype=np.int64)]))

    def configs_per_layer(self) -> dict[str, int]:
        """Per-layer attention configurations (LLMForge App. A: 27 under GQA, 11,250 under IHA), ties honoured."""
        return links.attention_configs({k: self.grid(k) for k in ("n_h", "n_kv", "d_qk", "d_v")}, self.links or {},
                                       self.d_model, self.attention)

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
        X3[:, :, 3] = self._tables["kv_snap"][X3[:, :, 2], X3[:, :, 3]]  # n_kv | n_h (forge.genomes.genes)
        links.tie_columns(X3, self.codec_genes, self.links or {})  # tied genes take their source's index
        dead = X3[:, :, 0].sum(axis=1) == 0
        X3[dead, 0, 0] = 1
        X[:, :self.n_layer_var] = X3.reshape(X.shape[0], -1)
        return X

    def repair(self, genome: Genome) -> Genome:
        return self.decode(self.repair_x(self.encode([genome])))[0]

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
                allowed = repr(grid[0]) if len(grid) == 1 else fmt_grid(grid)
                raise GenomeError(f"{k} = {genome.get(k)!r} is invalid for space {self.name}; allowed: {allowed}")
        if len(genome.layers) > self.L_max:
            raise GenomeError(f"layers has {len(genome.layers)} slots; allowed: at most {self.L_max}")
        for i, gene in enumerate(genome.layers):
            for k in self.codec_genes[2:]:
                rule = self._tables["ratios"].get(k)  # a gene following a searched global: r * this genome's
                val, grid = gene.get(k), links.products(rule, genome.get(rule[0])) if rule else self.grid(k)
                if self.attention == "gqa" and k in ("d_qk", "d_v"):
                    grid = (self.d_model // gene.n_h,)
                if val not in grid:
                    raise GenomeError(f"layers[{i}].{k} = {val} is invalid for space {self.name}; allowed: {fmt_grid(grid)}")
        links.check(genome, self.links or {}, self.name)
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
                "ranges": {k: "d_model/n_h" if self.attention == "gqa" and k in ("d_qk", "d_v") else
                           range_text(self.grid(k), getattr(LAYER_GENES.get(k), "kind", "int"),  # an unregistered: int
                                      (self.links or {}).get(k), self._tables["ratios"].get(k))
                           for k in self.codec_genes[2:]},
                "configs_per_layer": self.configs_per_layer(), "n_var": self.n_var,
                **({"precision": {t: list(v) for t, v in self.precision.items()}} if self.precision else {})}


GLOBAL_FIELDS = tuple(f.name for f in fields(SearchSpace) if f.name in GLOBAL_GENES)  # global genes with a field


def space_class(target: Any) -> type:
    """The space class a config's `_target_` names ('package.module.Class', a SearchSpace subclass): Forge's own,
    or an allowed `space` plug-in (`forge.plugins`: one the user named in the config they launched)."""
    from forge import plugins

    if target in (None, "", "forge.spaces.space.SearchSpace"):
        return SearchSpace
    try:
        cls = plugins.resolve("space", target)
    except plugins.PluginError as e:
        raise GenomeError(f"space._target_: {e}") from None
    if not (isinstance(cls, type) and issubclass(cls, SearchSpace)):
        raise GenomeError(f"space._target_ = {target!r} is invalid; allowed: forge.spaces.space.SearchSpace or a "
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
    names = sorted(f.name for f in fields(cls) if not f.name.startswith("_"))
    if set(d) - set(names):  # a gene no imported module registers: one line saying how to import it
        raise GenomeError(f"space config: {min(set(d) - set(names))} is neither a field of {cls.__name__} nor a "
                          f"registered gene; allowed: {', '.join(names)}{GENE_HINT}")
    try:
        return cls(**d)
    except TypeError as e:
        raise GenomeError(f"space config: {e}") from None


def space_config(space: SearchSpace) -> dict[str, Any]:
    """The plain config node that builds `space` again (`space_from_config`): a space object handed to the Python
    API is written into the run's config.yaml like a space yaml, so export, report and verify rebuild it."""
    cls = type(space)
    node: dict[str, Any] = {"_target_": f"{cls.__module__}.{cls.__qualname__}"}
    for f in fields(space):
        value = getattr(space, f.name)
        if f.name.startswith("_") or value is None:
            continue
        node[f.name] = list(value) if isinstance(value, tuple) else value
    for key in ("genes", "global_genes"):  # written flat, as a space yaml lists them
        node.update({k: list(v) if isinstance(v, tuple) else v for k, v in dict(node.pop(key, None) or {}).items()})
    node.update({k: {"ratio": list(r), "of": of} for k, (of, r) in space._tables["ratios"].items()})
    return node


def load_space(name: str) -> SearchSpace:
    """Load `conf/space/<name>.yaml` by name (used outside Hydra: tests, notebooks)."""
    from forge.runtime.config import group_names, group_yaml

    node = group_yaml("space", name)
    if node is None:
        raise GenomeError(f"space = {name!r} is unknown; allowed: {', '.join(group_names('space'))}")
    return space_from_config(node)
