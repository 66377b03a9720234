"""Small synthetic label sets on the iha-tiny space: fast, and learnable enough to test behaviour."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from forge.genomes.labels import Label, write_labels
from forge.spaces.space import load_space
from forge.lm.workload import model_totals
from forge.spaces.arrays import PopArrays


def synth_labels(n: int, seed: int = 0) -> list[Label]:
    """Loss falls with log-params and with attention layers: a smooth target a surrogate can rank."""
    space = load_space("iha-tiny")
    genomes = space.sample(n, np.random.default_rng(seed))
    tot = model_totals(PopArrays.from_genomes(genomes))
    y = 6.0 - 0.25 * np.log(tot["params"]) - 0.1 * tot["n_attn_layers"]
    y = y + np.random.default_rng(seed + 1).normal(0, 0.01, n)
    return [Label(g, float(v), {"protocol": "synthetic", "seed": seed}) for g, v in zip(genomes, y)]


@pytest.fixture(autouse=True)
def _threads():
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_jsonl(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("labels") / "tiny.jsonl"
    write_labels(path, synth_labels(160))
    return path
