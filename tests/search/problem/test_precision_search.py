"""Precision genes in the search: codec, operators, the loss evaluator's strip + penalty, export."""
from __future__ import annotations

import numpy as np
import pytest

from backends.interface import Workload
from forge.runtime.config import group_yaml
from forge.genomes.genome import GenomeError
from forge.genomes.precision import PrecisionGenes, QuantPenalty
from forge.spaces.space import load_space, space_from_config
from search.export import chosen_design, export_one, load_exported
from search.operators import (MutationParams, delete, duplicate, layer_crossover, mutate, mutate_precision,
                              perturb, rotate_reflect)
from search.evaluators import LossEvaluator
from search.build import build_search
from tests.search.conftest import tiny_cfg
from tests.search.fakes import FakeBackend, FakePredictor

GRID = {"weights": ["bf16", "mxint8", "mxint4"], "acts": ["bf16", "mxint8"], "kv": ["bf16", "mxint8", "mxint4", "mxfp4"]}


@pytest.fixture(scope="module")
def mx_space():
    return space_from_config({**dict(group_yaml("space", "iha-tiny")), "name": "iha-tiny-mx", "precision": GRID})


def test_codec_round_trips_precision_genes(mx_space):
    plain = load_space("iha-tiny")
    assert mx_space.n_var == plain.n_var + 3 and plain.n_prec == 0
    X = mx_space.sample_x(40, np.random.default_rng(1))
    gs = mx_space.decode(X)
    assert all(g.precision is not None for g in gs) and len({str(g.precision) for g in gs}) > 5
    np.testing.assert_array_equal(mx_space.encode(gs), X)
    np.testing.assert_array_equal(mx_space.repair_x(X), X)
    pop = mx_space.to_arrays(X)
    assert pop.kv_bytes.tolist() == [g.precision.bytes()[2] for g in gs]
    assert all(g.precision is None for g in plain.decode(plain.sample_x(5, np.random.default_rng(1))))
    base = gs[0].with_precision(None)  # a seed without genes encodes to each list's first format
    assert mx_space.encode([base])[0, -3:].tolist() == [0, 0, 0]
    mx_space.validate(gs[0])
    with pytest.raises(GenomeError, match="precision.kv = 'fp8' is invalid.*allowed: bf16, mxint8"):
        mx_space.validate(gs[0].with_precision("bf16/bf16/fp8"))
    with pytest.raises(GenomeError, match="int3.*allowed: fp32"):
        space_from_config({**dict(group_yaml("space", "iha-tiny")), "precision": {**GRID, "kv": ["int3"]}})


def test_layer_operators_keep_precision_genes_and_precision_mutation_keeps_layers(mx_space):
    rng = np.random.default_rng(2)
    X = mx_space.sample_x(16, rng)
    tail = X[:, -3:]
    for op in (delete, duplicate, rotate_reflect, perturb):
        np.testing.assert_array_equal(op(X, mx_space, np.random.default_rng(3))[:, -3:], tail)
    A, B = X[:8], X[8:]
    c1, c2 = layer_crossover(A, B, mx_space, np.random.default_rng(4))
    np.testing.assert_array_equal(c1[:, -3:], B[:, -3:])
    np.testing.assert_array_equal(c2[:, -3:], A[:, -3:])
    Y = mutate_precision(X, mx_space, np.random.default_rng(5), p=1.0)
    np.testing.assert_array_equal(Y[:, :-3], X[:, :-3])
    assert (np.abs(Y[:, -3:] - tail) <= 1).all() and (Y[:, -3:] != tail).any()
    _, xu = mx_space.bounds()
    assert (Y[:, -3:] <= xu[-3:]).all() and (Y >= 0).all()


def test_plain_space_mutation_draws_exactly_as_before():
    sp = load_space("iha-tiny")
    X = sp.sample_x(12, np.random.default_rng(0))
    r1, r2, p = np.random.default_rng(9), np.random.default_rng(9), MutationParams()
    manual = sp.repair_x(perturb(rotate_reflect(duplicate(delete(X, sp, r1, p.p_delete), sp, r1, p.p_duplicate), sp, r1,
                                                p.p_rotate), sp, r1, p.max_step, p.p_gene))
    np.testing.assert_array_equal(mutate(X, sp, r2, p), manual)


class _Recorder(FakePredictor):
    def predict(self, genomes, n_mc=0):
        self.seen = list(genomes)
        return super().predict(genomes, n_mc)


def test_loss_evaluator_strips_precision_then_adds_the_penalty(mx_space):
    gs = mx_space.decode(mx_space.sample_x(6, np.random.default_rng(7)))
    pred = _Recorder()
    loss, mu, _ = LossEvaluator(pred)(gs)
    assert all(g.precision is None for g in pred.seen)
    bare, _ = FakePredictor().predict([g.with_precision(None) for g in gs])
    np.testing.assert_allclose(mu, bare + [QuantPenalty()(g.precision) for g in gs])
    off, _, _ = LossEvaluator(FakePredictor(), penalty=QuantPenalty(scale=0.0))(gs)
    np.testing.assert_allclose(off, bare)


def test_search_export_and_reload_carry_precision(mx_space, tmp_path):
    cfg = tiny_cfg(space="iha-tiny-mx")
    s = build_search(cfg, tmp_path / "run", {"space": mx_space, "evaluator": LossEvaluator(FakePredictor()),
                                             "backend": FakeBackend(), "workload": Workload()})
    s.run()
    chosen = chosen_design(tmp_path / "run")
    assert chosen["precision"].count("/") == 2
    from search.state import read_jsonl

    row = next(r for r in read_jsonl(tmp_path / "run" / "pareto.jsonl") if r["id"] == chosen["id"])
    info = export_one(row, tmp_path / "exp", "yaml", 0, None, {}, {})
    genome, _ = load_exported(tmp_path / "exp")
    assert genome.id == row["id"] == info["id"] and str(genome.precision) == chosen["precision"]
    assert isinstance(genome.precision, PrecisionGenes) and "precision (weights/acts/kv)" in (tmp_path / "exp" / "MODEL_CARD.md").read_text()
