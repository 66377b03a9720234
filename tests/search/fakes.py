"""Small deterministic stand-ins for the search's plug-ins (Predictor, Backend, Trainer, fine-tune)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from backends.interface import CostTable, Workload
from forge.spaces.arrays import PopArrays
from forge.genomes.genome import Genome
from forge.genomes.labels import Label
from forge.lm.workload import model_totals


def _jitter(genomes: Sequence[Genome], salt: str = "") -> np.ndarray:
    """A per-genome number in [0, 1) derived from its id (stable across runs and processes)."""
    return np.array([int((salt + g.id)[-6:], 16) / 16**6 if not salt else
                     (int(g.id[:6], 16) * 7 % 16**6) / 16**6 for g in genomes])


def fake_loss(genomes: Sequence[Genome], offset: float = 0.0) -> np.ndarray:
    """Bigger networks → lower loss, saturating; plus a small id-derived wiggle."""
    t = model_totals(PopArrays.from_genomes(list(genomes)))
    d = np.array([g.d_model for g in genomes], dtype=float)
    return 3.0 + 1.5 / (1.0 + t["non_embedding_params"] / (24 * d**2)) + 0.05 * _jitter(genomes) + offset


class FakePredictor:
    """Predictor protocol: μ from `fake_loss`, σ > 0 only with MC passes (id-derived)."""

    def __init__(self, offset: float = 0.0, space: dict[str, Any] | None = None):
        self.offset, self.calls = offset, 0
        if space is not None:
            self.space = space

    def predict(self, genomes: Sequence[Genome], n_mc: int = 0) -> tuple[np.ndarray, np.ndarray]:
        self.calls += 1
        mu = fake_loss(genomes, self.offset)
        sigma = 0.02 + 0.1 * _jitter(genomes, salt="s") if n_mc > 0 else np.zeros(len(genomes))
        return mu, sigma


class FakeBackend:
    """Backend protocol from forge.lm.workload totals; genomes above `max_params` do not fit (inf, reason)."""

    name = "fake"

    def __init__(self, max_params: float = np.inf):
        self.max_params, self.calls = max_params, 0

    def evaluate(self, genomes: Sequence[Genome], workload: Workload) -> CostTable:
        self.calls += 1
        t = model_totals(PopArrays.from_genomes(list(genomes)))
        ok = t["params"] <= self.max_params
        inf = np.where(ok, 1.0, np.inf)
        ttft = t["flops_per_token"] * workload.prefill / 1e11 * inf
        tpot = (2 * t["params"] + t["kv_bytes_per_token"] * (workload.prefill + workload.decode)) / 1e9 * inf
        energy = (t["flops_per_token"] * 1e-6 + t["kv_bytes_per_token"] * 1e-4) * inf
        reasons = ["" if o else "too many parameters for the fake chip" for o in ok]
        extras = [{"area_mm2": float(p / 1e6), "note": "fake"} for p in t["params"]]
        return CostTable(ttft, tpot, energy, ok, reasons, extras)


class FakeTrainer:
    """Trainer protocol: 'real' labels = fake loss + 0.1; genomes whose id starts with 0-3 diverge (inf)."""

    def __init__(self):
        self.trained: list[str] = []

    def train(self, genomes: Sequence[Genome]) -> list[Label]:
        y = fake_loss(genomes, 0.1)
        out = []
        for g, v in zip(genomes, y):
            self.trained.append(g.id)
            bad = g.id[0] in "0123"
            out.append(Label(g, float("inf") if bad else float(v), {"protocol": "fake"}, "diverged" if bad else ""))
        return out


def fake_finetune(base_ckpt: Any, new_labels: Sequence[Label], replay_data: Any, ratio: float = 5.0,
                  epochs: int = 10, lr: float = 1e-4, batch: int = 32, seed: int = 0) -> FakePredictor:
    """'Fine-tuning' moves the fake predictor's offset toward the new labels' mean residual."""
    res = np.array([lab.label for lab in new_labels]) - fake_loss([lab.genome for lab in new_labels])
    return FakePredictor(offset=float(res.mean()))
