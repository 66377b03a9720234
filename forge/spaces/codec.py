"""The integer codec of a search space: genomes ↔ (n, n_var) grid-index rows, and rows → per-layer values,
the analyzer's arrays (`PopArrays`) or genomes, vectorized over the population.

A mixin of `forge.spaces.space.SearchSpace` (layout of a row: that module's docstring); it reads the space's grids,
`codec_genes`, searched globals and precision lists. Decoding builds genomes without re-validating them (the
codec only yields valid, repaired values) and shares equal layers between genomes and calls, so `Genome.id`
hashes each distinct layer's canonical text once.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from forge.spaces import links
from forge.spaces.arrays import PopArrays, global_columns
from forge.genomes.genes import GLOBAL_GENES, LAYER_GENES, BUILTIN, extra_genes
from forge.genomes.genome import Genome, GenomeError, LayerGene
from forge.genomes.precision import TENSORS, PrecisionGenes, parse_format

LAYER_CACHE = 16384  # distinct layers decoded before the shared-LayerGene table starts afresh (~3 MiB)


class Codec:
    """Encode, convert and decode rows of grid indices (mixed into SearchSpace)."""

    @staticmethod
    def _snap(grid: Sequence[int], values: np.ndarray) -> np.ndarray:
        g = np.asarray(grid)
        return np.abs(values[..., None] - g).argmin(axis=-1)

    def nearest(self, name: str, value: int) -> int:
        """The value of gene `name`'s grid nearest to `value`, the lower on a tie (as `encode` snaps a value)."""
        return int(min(self.grid(name), key=lambda g: (abs(g - value), g)))

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
                rule = self._tables["ratios"].get(k)  # a ratio of a searched global: snap w / this genome's global
                X[p, :n, j] = self._snap(self.index_grid(k), raw[:, j] / g.get(rule[0]) if rule else raw[:, j])
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
            rule = self._tables["ratios"].get(k)  # r * each row's searched global (forge.spaces.links)
            out[k] = links.scaled(rule, X3[:, :, j], out[rule[0]]) if rule else np.asarray(self.grid(k))[X3[:, :, j]]
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
        names = [k for k in BUILTIN if k not in ("active", "attn")] + [g.name for g in extra_genes() if g.name in v]
        slots = zip(*(v[k].ravel().tolist() for k in (*names, "active", "attn")))
        cache = self._tables.setdefault("layers", {})  # equal slots share one immutable LayerGene
        if len(cache) > LAYER_CACHE:  # a long search meets ever new layers: memory flat with its length (issue 53)
            cache.clear()
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
        builtin = dict(zip(names[:5], t))  # names: the five shape genes in BUILTIN order, then extras
        builtin["active"], builtin["attn"] = bool(t[-2]), bool(t[-1])
        extra = tuple(sorted((k, bool(x) if LAYER_GENES[k].kind == "bool" else x)  # a bool gene holds a bool,
                             for k, x in zip(names[5:], t[5:-2]) if x != LAYER_GENES[k].default))  # as validated
        return LayerGene.trusted(builtin, extra)
