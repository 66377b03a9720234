"""Shared fixtures for the search tests: a tiny config and a Search factory wired to the fakes."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from backends.interface import Workload
from forge.spaces.space import load_space
from search.evaluators import LossEvaluator
from search.build import build_search
from search.runner import Search
from tests.search.fakes import FakeBackend, FakePredictor

BASE_CFG: dict[str, Any] = {
    "seed": 0,
    "objectives": ["val_loss", "ttft_ms", "tpot_ms", "energy_per_token_uj"],
    "constraints": ["val_loss < 3.8"],
    "search": {"algorithm": "nsga", "pop_size": 8, "offspring": 12, "generations": 4},
}


def tiny_cfg(**over: Any) -> dict[str, Any]:
    cfg = copy.deepcopy(BASE_CFG)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(cfg.get(k), dict):
            cfg[k].update(v)
        else:
            cfg[k] = v
    return cfg


@pytest.fixture(scope="session")
def tiny_space():
    return load_space("iha-tiny")


@pytest.fixture
def make_search(tiny_space):
    def make(run_dir: Path, cfg: dict[str, Any] | None = None, backend: Any = None, predictor: Any = None,
             coevolution: Any = None, space: Any = None) -> Search:
        cfg = cfg or tiny_cfg()
        ev = LossEvaluator(predictor or FakePredictor(), beta=float(cfg.get("beta", 0.0)), n_mc=int(cfg.get("n_mc", 0)))
        return build_search(cfg, run_dir, {"space": space or tiny_space, "evaluator": ev, "backend": backend or FakeBackend(),
                                           "workload": Workload(), "coevolution": coevolution})
    return make
