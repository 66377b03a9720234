"""The loss side of a search: what scores a genome's validation loss (surrogate or real training).

`LossEvaluator` (surrogate mode) wraps a predictor: μ − β·σ, a calibrated interval, and the quantization
penalty of the genome's precision; `TrainEvaluator` (train mode) really trains every candidate. Both are
called with a batch of genomes and return (loss, μ, σ); `ForgeProblem` caches their results by genome id and
evaluator `version` (co-evolution swaps the predictor through the narrow `search.coevolution.SurrogateSlot`).
"""
from __future__ import annotations

from contextlib import contextmanager
from statistics import NormalDist
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from forge.spaces.arrays import GenomeBatch
from forge.genomes.genome import Genome
from forge.genomes.labels import Label
from forge.genomes.precision import QuantPenalty
from search.blind import covers, guard
from search.errors import ResumeError, SearchConfigError


def strip_precision(genomes: Sequence[Genome]) -> list[Genome]:
    """The architectures the loss model sees (precision genes removed); a GenomeBatch keeps its arrays."""
    out = [g.with_precision(None) if g.precision is not None else g for g in genomes]
    arrays = getattr(genomes, "arrays", None)
    return GenomeBatch(out, arrays.with_bytes(weight_bytes=None, act_bytes=None, kv_bytes=None)) if arrays else out


SELECT = ("mu", "upper")  # evaluator.select: the loss objective is μ (− β·σ), or the interval's upper bound


class LossEvaluator:
    """Surrogate mode: loss = μ − β·σ from a Predictor (σ from n_mc MC-dropout passes; 0 = deterministic; with a
    calibrated interval σ is its lower tail, see `optimism`), and a calibrated interval [lo, hi] around μ at
    `level` (the predictor's `interval`; NaN without one). `select="upper"` makes the loss objective the
    interval's upper bound hi instead (pessimistic: a genome wins on what it surely reaches, not on its tail).

    The surrogate sees each genome's architecture only (precision genes stripped, so shipped checkpoints
    predict exactly as before); μ then gains the quantization penalty of the genome's (W, A, KV) formats,
    a separate model (`forge.genomes.precision.QuantPenalty`, evaluator.quant_penalty) that a measured table replaces."""

    kind = "surrogate"

    def __init__(self, predictor: Any, beta: float = 0.0, n_mc: int = 0, seed: int = 0,
                 penalty: QuantPenalty | None = None, level: float = 0.9, select: str = "mu",
                 allow_blind: Sequence[str] | None = None, name: str = "the predictor"):
        if beta and not n_mc:
            raise SearchConfigError("evaluator.beta > 0 needs evaluator.n_mc > 0 (σ comes from MC dropout)")
        if select not in SELECT:
            raise SearchConfigError(f"evaluator.select = {select!r}; allowed: {' | '.join(SELECT)}")
        if select == "upper" and (beta or not hasattr(predictor, "interval")):
            raise SearchConfigError("evaluator.select=upper needs a calibrated predictor (one with an interval) and "
                                    "evaluator.beta=0; allowed: select=mu otherwise")
        self.select = select
        if not (isinstance(level, (int, float)) and 0.0 < float(level) < 1.0):
            raise SearchConfigError(f"evaluator.interval_level = {level!r}; allowed: a number with 0 < level < 1")
        self.predictor, self.beta, self.n_mc, self.seed = predictor, float(beta), int(n_mc), int(seed)
        self.penalty, self.level = penalty or QuantPenalty(), float(level)
        self.version = 0  # bumped by every co-evolution hot-swap
        self.allow, self.name = tuple(allow_blind or ()), name  # genes it may price blind (search.blind.guard)
        self._covers = covers(predictor)

    def interval(self, mu: np.ndarray, sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The predictor's calibrated (lo, hi) around μ (which includes any quantization penalty: the
        interval covers the surrogate's error only); NaN when the predictor has no calibration."""
        if not hasattr(self.predictor, "interval"):
            nan = np.full(len(mu), np.nan)
            return nan, nan.copy()
        lo, hi = self.predictor.interval(np.asarray(mu, float), np.asarray(sigma, float), self.level)
        return np.asarray(lo, float), np.asarray(hi, float)

    def interval_info(self) -> dict[str, Any]:
        """{level, method, source} for summary.json and the export card."""
        info = getattr(self.predictor, "interval_info", None)
        got = info(self.n_mc > 0) if info else {"method": "none", "source": "the predictor has no interval"}
        cal_mc = got["source"].get("n_mc") if isinstance(got.get("source"), dict) else None
        if got.get("method") == "conformal-sigma" and cal_mc not in (None, self.n_mc):
            got["note"] = (f"σ scores were calibrated with n_mc={cal_mc} passes, this search uses {self.n_mc}: "
                           "σ from a different pass count may be scaled differently")
        return {"level": self.level, **got}

    def swap(self, predictor: Any) -> None:
        self.predictor, self.version, self._covers = predictor, self.version + 1, covers(predictor)

    def optimism(self, mu: np.ndarray, sigma: np.ndarray) -> np.ndarray:
        """The σ that `beta` multiplies: with a calibrated interval, the calibrated lower tail in σ units,
        (μ − lo) / z (z the two-sided Gaussian quantile of `level`, so beta = z reaches the calibrated lower
        bound); raw MC-dropout σ only when the predictor has no calibration."""
        lo, _ = self.interval(mu, sigma)
        if not np.all(np.isfinite(lo)):
            return sigma
        return np.maximum(mu - lo, 0.0) / NormalDist().inv_cdf(0.5 + self.level / 2.0)

    def __call__(self, genomes: Sequence[Genome]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if getattr(self.predictor, "uses_torch_rng", True):  # the shipped Forge-Former's σ: numpy streams, no torch
            seed_torch(self.seed + 7919 * self.version)
        arch = strip_precision(genomes)
        if self._covers is not None:  # no value outside what the predictor covers, unless allowed (search.blind)
            guard(self._covers, arch, self.allow, self.name)
        mu, sigma = self.predictor.predict(arch, n_mc=self.n_mc)
        mu, sigma = np.asarray(mu, float), np.asarray(sigma, float)
        if any(g.precision is not None for g in genomes):
            mu = mu + np.array([self.penalty(g.precision) for g in genomes])
        if self.select == "upper":  # pessimistic: rank by the calibrated upper bound, never the optimistic tail
            return self.interval(mu, sigma)[1], mu, sigma
        return (mu - self.beta * self.optimism(mu, sigma) if self.beta else mu), mu, sigma


class TrainEvaluator:
    """Train mode: every candidate is really trained through a Trainer (`train(genomes) -> labels`)."""

    kind = "train"
    version = 0

    def __init__(self, trainer: Any, penalty: QuantPenalty | None = None):
        self.trainer, self.penalty = trainer, penalty or QuantPenalty()

    def __call__(self, genomes: Sequence[Genome]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Training runs in full precision on the architecture; the formats add the quantization penalty."""
        arch = strip_precision(genomes)
        labels = {lab.genome.id: float(lab.label) for lab in self.trainer.train(arch)}
        y = np.array([labels.get(a.id, np.inf) + self.penalty(g.precision) for a, g in zip(arch, genomes)], dtype=float)
        return y, y.copy(), np.zeros_like(y)

    def interval(self, mu: np.ndarray, sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A trained label is a measurement: its interval is the point itself."""
        return np.asarray(mu, float), np.asarray(mu, float).copy()

    def interval_info(self) -> dict[str, Any]:
        return {"level": 1.0, "method": "measured", "source": "real training (evaluator.kind=train)"}


def seed_torch(seed: int) -> None:
    """MC dropout draws from torch's generator: seed it so the same run gives the same σ."""
    try:
        import torch
    except ImportError:  # pragma: no cover
        return
    torch.manual_seed(seed)


@contextmanager
def label_hook(trainer: Any, fn: Callable[[Label], None]) -> Iterator[None]:
    """While inside, `fn` sees each label the trainer stores, before the trainer's own `on_label` hook (restored on
    leaving); a trainer without the hook (a user's, a test's fake) is left as it is."""
    if not hasattr(trainer, "on_label"):
        yield
        return
    hook = trainer.on_label

    def both(lab: Label) -> None:
        fn(lab)
        if hook is not None:
            hook(lab)
    trainer.on_label = both
    try:
        yield
    finally:
        trainer.on_label = hook


def check_resumed(evaluator: Any, genomes: Sequence[Genome], ids: Sequence[str],
                  cached: dict[tuple[int, str], Sequence[float]], run_dir: Any) -> None:
    """A resumed run's surrogate predicts, for a few of its population, the μ the run cached (deterministic
    surrogates: n_mc 0): one rebuilt otherwise (other arguments, another fit, changed code) is refused before the
    run goes on, instead of continuing with a different loss."""
    if getattr(evaluator, "kind", "") != "surrogate" or getattr(evaluator, "n_mc", 1):
        return
    v = evaluator.version
    pick = [(g, i, cached[(v, i)]) for g, i in zip(genomes, ids) if (v, i) in cached][:8]
    if not pick:
        return
    from forge.numeric import settle

    mu = np.asarray(settle(evaluator([g for g, _, _ in pick])[1]), float)
    want = np.array([float(y[1]) for _, _, y in pick])
    bad = np.flatnonzero(~np.isclose(mu, want, rtol=1e-5, atol=1e-8, equal_nan=True))
    if len(bad):
        j = int(bad[0])
        raise ResumeError(f"resume={run_dir} refused: its surrogate, built again, predicts {mu[j]:.6g} for genome "
                          f"{pick[j][1][:12]} where the run predicted {want[j]:.6g} (other arguments, another fit or "
                          "changed code); allowed: the run's own surrogate (from Python: hand the same object again), "
                          "or a new run")
