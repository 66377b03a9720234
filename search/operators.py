"""Genetic operators over the integer genome matrix (LLMForge §3.3.1), as pure numpy functions.

Every function takes the random generator explicitly, so one seed drives the whole search. Rows of X
are genomes encoded by `SearchSpace.encode` (L_max slots × `space.n_genes` genes, layer-major: the two
masks, then one grid index per searched gene of the registry, forge.genomes.genes); operators move whole
layer slots or grid indices and never produce off-grid values. The pymoo classes at the bottom are
thin adapters whose `_do` calls these functions with pymoo's own `random_state` (seeded from the run
seed), and every offspring is repaired by `space.repair_x`.

With a precision-searching space the rows end in three precision genes (forge.spaces.space), after one column per
searched global gene (d_model from a grid, ...): the layer operators leave that tail alone, crossover hands it
on with the right-hand side of the cut, and `mutate_precision` moves each tail gene by one step along its
list with probability p_precision.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pymoo.core.crossover import Crossover
from pymoo.core.mutation import Mutation
from pymoo.core.repair import Repair
from pymoo.core.sampling import Sampling

from forge.genomes.genome import Genome
from forge.spaces.space import SearchSpace

# Gene columns inside one layer slot (see forge.spaces.space): active, attn, then one grid index per searched gene.
ACTIVE, ATTN, FIRST_GRID = 0, 1, 2


def _layers(X: np.ndarray, space: SearchSpace) -> np.ndarray:
    """(n, L_max, n_genes) copy of X's layer genes, so callers never alias their parents' rows."""
    return np.array(np.asarray(X)[:, :space.n_layer_var], dtype=np.int64).reshape(len(X), space.L_max, space.n_genes)


def _join(Y: np.ndarray, X: np.ndarray, space: SearchSpace) -> np.ndarray:
    """Layer genes Y (n, L_max, n_genes) + the precision genes of X (none in a plain space) → rows."""
    return np.concatenate([Y.reshape(len(Y), -1), np.array(np.asarray(X)[:, space.n_layer_var:], dtype=np.int64)], axis=1)


# ------------------------------------------------------------------ sampling
def sample_uniform(space: SearchSpace, n: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform over every grid with Bernoulli masks (the space's own sampler), repaired."""
    return space.sample_x(n, rng)


def sample_around(space: SearchSpace, seed: Genome, n: int, rng: np.random.Generator,
                  max_step: int = 2) -> np.ndarray:
    """n genomes near `seed`: row 0 is the seed itself, the others perturb it by ±max_step grid steps."""
    base = space.encode([space.repair(seed)])
    X = np.repeat(base, n, axis=0)
    if n > 1:
        X[1:] = perturb(X[1:], space, rng, max_step=max_step, p_gene=0.3)
    return space.repair_x(X)


# ------------------------------------------------------------------ crossover
def layer_crossover(A: np.ndarray, B: np.ndarray, space: SearchSpace,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Single-point crossover at a layer boundary: child1 = A[:c] + B[c:], child2 = B[:c] + A[c:]."""
    n, L = len(A), space.L_max
    cut = rng.integers(1, L, size=n) if L > 1 else np.ones(n, dtype=np.int64)
    left = (np.arange(L)[None, :] < cut[:, None])[:, :, None]
    a, b = _layers(A, space), _layers(B, space)
    c1, c2 = np.where(left, a, b), np.where(left, b, a)
    return _join(c1, B, space), _join(c2, A, space)


# ------------------------------------------------------------------ mutation (four operators)
def delete(X: np.ndarray, space: SearchSpace, rng: np.random.Generator, p: float = 1.0) -> np.ndarray:
    """Deletion: flip the mask of one random slot per row (with probability p); re-activation is allowed."""
    Y = _layers(X, space)
    rows = np.flatnonzero(rng.random(len(Y)) < p)
    slots = rng.integers(0, space.L_max, size=len(rows))
    Y[rows, slots, ACTIVE] = 1 - Y[rows, slots, ACTIVE]
    return _join(Y, X, space)


def duplicate(X: np.ndarray, space: SearchSpace, rng: np.random.Generator, p: float = 1.0) -> np.ndarray:
    """Duplication: a random slot i > 0 becomes an active copy of the nearest active slot before it."""
    Y = _layers(X, space)
    L = space.L_max
    rows = np.flatnonzero(rng.random(len(Y)) < p)
    slots = np.minimum(rng.integers(1, max(L, 2), size=len(rows)), L - 1)
    before = Y[rows, :, ACTIVE].astype(bool) & (np.arange(L)[None, :] < slots[:, None])  # active slots before i
    has = before.any(axis=1)
    prev = L - 1 - np.argmax(before[:, ::-1], axis=1)  # the nearest of them
    Y[rows[has], slots[has]] = Y[rows[has], prev[has]]  # fancy indexing copies: rows never share storage
    return _join(Y, X, space)


def rotate_reflect(X: np.ndarray, space: SearchSpace, rng: np.random.Generator, p: float = 1.0) -> np.ndarray:
    """Rotation/reflection: roll (by 1..len-1) or reverse a random contiguous block of ≥ 2 slots."""
    Y = _layers(X, space)
    L = space.L_max
    if L < 2:
        return _join(Y, X, space)
    rows = np.flatnonzero(rng.random(len(Y)) < p)
    for r in rows:
        a = int(rng.integers(0, L - 1))
        b = int(rng.integers(a + 2, L + 1))
        block = Y[r, a:b].copy()
        if rng.random() < 0.5:
            Y[r, a:b] = block[::-1]
        else:
            Y[r, a:b] = np.roll(block, int(rng.integers(1, b - a)), axis=0)
    return _join(Y, X, space)


def perturb(X: np.ndarray, space: SearchSpace, rng: np.random.Generator, max_step: int = 2,
            p_gene: float = 0.1) -> np.ndarray:
    """Numeric perturbation: each grid gene moves by ±1..max_step grid steps with probability p_gene."""
    Y = _layers(X, space)
    hit = rng.random(Y[:, :, FIRST_GRID:].shape) < p_gene
    step = rng.integers(1, max_step + 1, size=hit.shape) * rng.choice([-1, 1], size=hit.shape)
    Y[:, :, FIRST_GRID:] += np.where(hit, step, 0)
    flip = rng.random(Y[:, :, ATTN].shape) < p_gene / 2  # the attention gate is a gene too
    Y[:, :, ATTN] = np.where(flip, 1 - Y[:, :, ATTN], Y[:, :, ATTN])
    _, xu = space.bounds()
    return np.clip(_join(Y, X, space), 0, xu)


def mutate_precision(X: np.ndarray, space: SearchSpace, rng: np.random.Generator, p: float = 0.2) -> np.ndarray:
    """Precision mutation: each (W, A, KV) gene steps ±1 along its format list with probability p
    (a neighbouring format: one accuracy/bytes notch), clipped at the ends. No-op in a plain space."""
    Y = np.array(X, dtype=np.int64)
    if space.n_var == space.n_layer_var:
        return Y
    tail = Y[:, space.n_layer_var:]
    hit = rng.random(tail.shape) < p
    step = rng.choice([-1, 1], size=tail.shape)
    _, xu = space.bounds()
    Y[:, space.n_layer_var:] = np.clip(tail + np.where(hit, step, 0), 0, xu[space.n_layer_var:])
    return Y


@dataclass(frozen=True)
class MutationParams:
    """Per-operator probabilities inside one mutation (the 0.3 rate itself is pymoo's `prob`)."""

    p_delete: float = 0.5
    p_duplicate: float = 0.5
    p_rotate: float = 0.5
    p_gene: float = 0.1
    max_step: int = 2
    p_precision: float = 0.2


def mutate(X: np.ndarray, space: SearchSpace, rng: np.random.Generator,
           params: MutationParams = MutationParams()) -> np.ndarray:
    """The four operators in sequence (deletion, duplication, rotation/reflection, perturbation), then the
    precision mutation when the space has precision genes (so a plain space draws exactly as before), repaired."""
    Y = delete(X, space, rng, params.p_delete)
    Y = duplicate(Y, space, rng, params.p_duplicate)
    Y = rotate_reflect(Y, space, rng, params.p_rotate)
    Y = perturb(Y, space, rng, params.max_step, params.p_gene)
    if space.n_var > space.n_layer_var:  # precision or searched global genes
        Y = mutate_precision(Y, space, rng, params.p_precision)
    return space.repair_x(Y)


# ------------------------------------------------------------------ pymoo adapters
class SpaceSampling(Sampling):
    """Uniform sampling, or `around` a seed genome (LLMForge's seeded rDXE searches)."""

    def __init__(self, space: SearchSpace, seed_genome: Genome | None = None, max_step: int = 2):
        super().__init__()
        self.space, self.seed_genome, self.max_step = space, seed_genome, max_step

    def _do(self, problem, n_samples, *args, random_state=None, **kwargs):
        if self.seed_genome is None:
            return sample_uniform(self.space, n_samples, random_state)
        return sample_around(self.space, self.seed_genome, n_samples, random_state, self.max_step)


class LayerCrossover(Crossover):
    """Two parents → two children by single-point layer crossover; pymoo applies it with `prob`."""

    def __init__(self, space: SearchSpace, prob: float = 0.6):
        super().__init__(2, 2, prob=prob)
        self.space = space

    def _do(self, problem, X, *args, random_state=None, **kwargs):
        c1, c2 = layer_crossover(X[0], X[1], self.space, random_state)
        return np.stack([c1, c2])


class LayerMutation(Mutation):
    """The four-operator mutation; pymoo applies it to each offspring with probability `prob`."""

    def __init__(self, space: SearchSpace, rate: float = 0.3, **params: float):
        super().__init__(prob=rate)
        self.space, self.params = space, MutationParams(**params)  # conf/search/mutation/llmforge.yaml

    def _do(self, problem, X, *args, random_state=None, **kwargs):
        return mutate(X, self.space, random_state, self.params)


class SpaceRepair(Repair):
    """The space's vectorized, idempotent repair."""

    def __init__(self, space: SearchSpace):
        super().__init__()
        self.space = space

    def _do(self, problem, X, **kwargs):
        return self.space.repair_x(X)
