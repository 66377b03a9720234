"""The stopping rule: at each rung, a training goes on only while it can still enter the front.

A candidate's costs are exact (the backend), so only its final loss Y is uncertain. `CurveModel` maps the
partial curve (and, where given, the surrogate's prior mean for the genome) to a predicted final loss with a
Gaussian interval: per rung, a least-squares map fit on collected full curves, its spread the leave-one-out
residual (measured on curves the map was not fit on). The candidate enters the front when no member whose
costs are all <= its own has a loss <= Y, i.e. when Y < y* (the best loss among those members); so
P(enter) = Phi((y* - mean) / sd). `FrontRule` stops when P(enter) < threshold, naming the member holding y*.

Baselines through the same interface (`decide(rung index, losses, context)`): `NoStop`; `AshaRule` (top
1/eta at each rung on loss alone, asynchronous: among the rung's results so far); `MoashaRule`, syne-tune's
own MOASHA scheduler fed the same results (optional extra `moasha`). Live trainings build their context from
the label store (forge.labelling.curves.decider); the bench replays committed curves through the same rules.
No torch here: the search imports this module.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
from scipy.stats import norm

from forge.fidelity.context import Context, StopError

KINDS = ("last", "slope", "prior", "slope+prior")
RULES = ("none", "front", "asha", "moasha", "pause")
Z90 = float(norm.ppf(0.95))  # the logged interval is the central 90%


def _features(kind: str, losses: Sequence[float], r: int, prior: float | None) -> list[float]:
    f = [1.0, float(losses[r])]
    if "slope" in kind:
        f.append(float(losses[r]) - float(losses[r - 1]) if r > 0 else 0.0)
    if "prior" in kind:
        if prior is None:
            raise StopError(f"curve model {kind!r} needs the surrogate's prior; allowed without one: last | slope")
        f.append(float(prior))
    return f


@dataclass(frozen=True)
class CurveModel:
    """Per rung r below the last: final ~ coef[r] . features(curve[:r+1], prior), residual sd `sd[r]`."""

    kind: str
    coef: tuple[tuple[float, ...], ...]
    sd: tuple[float, ...]
    n: int = 0  # curves it was fit on
    span: tuple[tuple[float, float], ...] = ()  # per rung: the rung losses it was fit on (min, max); () = any

    def covers(self, r: int, losses: Sequence[float]) -> bool:
        """A rung loss inside what the model was fit on (a transient spike far outside it is not extrapolated)."""
        if not self.span:
            return True
        lo, hi = self.span[r]
        return lo - 0.5 * (hi - lo) <= float(losses[r]) <= hi + 0.5 * (hi - lo)

    def predict(self, r: int, losses: Sequence[float], prior: float | None = None) -> tuple[float, float]:
        if not 0 <= r < len(self.coef):
            raise StopError(f"rung index {r}; allowed: 0..{len(self.coef) - 1} (the model's rungs)")
        return float(np.dot(self.coef[r], _features(self.kind, losses, r, prior))), float(self.sd[r])

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "coef": [list(c) for c in self.coef], "sd": list(self.sd), "n": self.n,
                "span": [list(x) for x in self.span]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CurveModel":
        """Numbers only (a model read from disk names no code); refused in one line when malformed."""
        try:
            kind, coef, sd = str(d["kind"]), tuple(tuple(float(x) for x in c) for c in d["coef"]), \
                tuple(float(x) for x in d["sd"])
            span = tuple((float(a), float(b)) for a, b in d.get("span") or ())
        except (KeyError, TypeError, ValueError) as e:
            raise StopError(f"curve model is malformed ({e}); allowed: {{kind, coef: [[...]], sd: [...]}}") from None
        ok = kind in KINDS and len(coef) == len(sd) and all(math.isfinite(x) for c in coef for x in c) \
            and all(math.isfinite(s) and s > 0 for s in sd) and len(span) in (0, len(sd))
        if not ok:
            raise StopError(f"curve model: kind {kind!r}, {len(coef)} rungs, sd {sd}; allowed: kind in {KINDS}, "
                            "one finite coefficient row and one positive sd per rung")
        return cls(kind, coef, sd, int(d.get("n", 0)), span)


def fit_curve_model(curves: np.ndarray, kind: str = "last", priors: Sequence[float] | None = None) -> CurveModel:
    """Least squares per rung on full curves (rows: genomes, columns: rungs, the last = final label), trimmed once:
    curves whose leave-one-out residual is beyond 4 robust sigmas (a loss spike at that rung) are left out of the fit and of
    the model's span. sd = root mean square of the leave-one-out residuals (PRESS): an out-of-sample spread."""
    if kind not in KINDS:
        raise StopError(f"curve model kind {kind!r}; allowed: {', '.join(KINDS)}")
    curves = np.asarray(curves, dtype=float)
    coef, sd, span = [], [], []
    for r in range(curves.shape[1] - 1):
        X = np.array([_features(kind, row, r, None if priors is None else priors[i]) for i, row in enumerate(curves)])
        keep = _inliers(X, curves[:, -1])
        w, loo = _ols_loo(X[keep], curves[keep, -1])
        coef.append(tuple(round(float(v), 8) for v in w))
        sd.append(round(max(float(np.sqrt(np.mean(loo ** 2))), 1e-6), 8))
        span.append((round(float(curves[keep, r].min()), 6), round(float(curves[keep, r].max()), 6)))
    return CurveModel(kind, tuple(coef), tuple(sd), len(curves), tuple(span))


def _ols_loo(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    w, *_ = np.linalg.lstsq(X, y, rcond=None)
    h = np.einsum("ij,jk,ik->i", X, np.linalg.pinv(X.T @ X), X)
    return w, (y - X @ w) / np.clip(1.0 - h, 1e-6, None)


def _inliers(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Curves whose leave-one-out residual is within 4 robust sigmas (a spike has high leverage: its plain
    residual is small, its leave-one-out residual is not)."""
    _, res = _ols_loo(X, y)
    mad = 1.4826 * float(np.median(np.abs(res - np.median(res))))
    keep = np.abs(res - np.median(res)) <= 4 * max(mad, 1e-9)
    return keep if keep.sum() > X.shape[1] + 1 else np.ones(len(y), bool)


def p_enter(mean: float, sd: float, costs: Sequence[float], front: Sequence[tuple[str, Sequence[float], float]]
            ) -> tuple[float, str, float]:
    """(P(the candidate enters the front), id of the member that would dominate it, that member's loss).
    Members with any cost above the candidate's can never dominate it; with none left, P = 1."""
    c = np.asarray(costs, dtype=float)
    best, who = math.inf, ""
    for gid, mc, loss in front:
        if loss < best and np.all(np.asarray(mc, dtype=float) <= c):
            best, who = float(loss), gid
    if not math.isfinite(best):
        return 1.0, "", best
    return float(norm.cdf((best - mean) / max(sd, 1e-12))), who, best


class NoStop:
    name = "none"

    def decide(self, r: int, losses: Sequence[float], ctx: Context) -> dict[str, Any] | None:
        return None


@dataclass
class FrontRule:
    """Stop when P(enter the front) < threshold, given the curve model's projection of the final loss.
    `rung_thresholds` (one per rung below the last; 0 = no decision there) replaces the one `threshold`: early
    rungs project with a wide interval and want a strict threshold, the last ones a looser one (issue 52's
    cross-validated setting on cpu-curve, bench/bench_curves_cv.py: 0.05, 0.05, 0.3 with the `prior` model)."""

    model: CurveModel
    threshold: float = 0.05
    name: str = "front"
    rung_thresholds: tuple[float, ...] = ()

    def threshold_at(self, r: int) -> float:
        return float(self.rung_thresholds[r]) if self.rung_thresholds else self.threshold

    def decide(self, r: int, losses: Sequence[float], ctx: Context) -> dict[str, Any] | None:
        if not math.isfinite(losses[r]):
            return {"rule": self.name, "reason": f"non-finite validation loss at rung {r + 1}"}
        thr = self.threshold_at(r)
        if thr <= 0 or not self.model.covers(r, losses):
            return None  # no decision at this rung, or outside the curves the model was fit on (a transient spike)
        mean, sd = self.model.predict(r, losses, ctx.prior)
        p, who, best = p_enter(mean, sd, ctx.costs, ctx.members())
        if p >= thr:
            return None
        lo, hi = mean - Z90 * sd, mean + Z90 * sd
        return {"rule": self.name, "p_enter": round(p, 6), "projected": round(mean, 6),
                "interval": [round(lo, 6), round(hi, 6)], "dominated_by": who, "dominator_loss": round(best, 6),
                "reason": f"P(enter front) = {p:.4f} < {thr:g}; projected final {mean:.4f} "
                          f"[{lo:.4f}, {hi:.4f}] (90%); dominated by {who} (loss {best:.4f}, costs <= its own)"}


@dataclass
class AshaRule:
    """ASHA's stopping variant (Li et al. 2020): go on while in the top 1/eta of the rung's results so far
    (itself included; ceil, so the first results at a rung always go on); loss alone, costs ignored."""

    eta: int = 3
    name: str = "asha"

    def decide(self, r: int, losses: Sequence[float], ctx: Context) -> dict[str, Any] | None:
        seen = [ls[r] for g, (_, ls, _) in ctx.peers.items() if g != ctx.gid and len(ls) > r]
        rank = 1 + sum(1 for v in seen if v < losses[r])
        keep = math.ceil((len(seen) + 1) / self.eta)
        if rank <= keep and math.isfinite(losses[r]):
            return None
        return {"rule": self.name, "rank": rank, "of": len(seen) + 1,
                "reason": f"rank {rank} of {len(seen) + 1} at rung {r + 1}, outside the top 1/{self.eta} ({keep})"}


@dataclass
class PauseRule:
    """A race's step (search.race): every training stops at rung index `at`, to be promoted or not by the race."""

    at: int = 0
    name: str = "pause"

    def decide(self, r: int, losses: Sequence[float], ctx: Context) -> dict[str, Any] | None:
        return {"rule": self.name, "reason": f"race: paused at rung {r + 1}"} if r >= self.at else None


def build_rule(spec: Mapping[str, Any]):
    """A rule from its spec: {rule: none|front|asha|moasha, threshold, rung_thresholds, eta, model: CurveModel dict}."""
    kind = str(spec.get("rule", "front"))
    if kind not in RULES:
        raise StopError(f"stop.rule = {kind!r}; allowed: {', '.join(RULES)}")
    if kind == "none":
        return NoStop()
    if kind == "pause":
        return PauseRule(int(spec.get("at", 0)))
    if kind == "asha":
        return AshaRule(int(spec.get("eta", 3)))
    if kind == "moasha":
        from forge.fidelity.moasha import MoashaRule

        prio = str(spec.get("priority", "rank"))
        if prio not in ("rank", "syne"):
            raise StopError(f"stop.priority = {prio!r}; allowed: rank | syne")
        return MoashaRule(int(spec.get("eta", 3)), int(spec.get("rungs", 4)), tuple(spec.get("steps") or ()), prio)
    thr = float(spec.get("threshold", 0.05))
    if not 0.0 < thr < 1.0:
        raise StopError(f"stop.threshold = {thr}; allowed: 0 < threshold < 1")
    if not spec.get("model"):
        raise StopError("stop.rule=front needs a curve model (stop.model: a file from bench/bench_curves.py fit); "
                        "allowed: a JSON CurveModel")
    model = CurveModel.from_dict(spec["model"])
    return FrontRule(model, thr, rung_thresholds=_rung_thresholds(spec.get("rung_thresholds"), len(model.coef)))


def _rung_thresholds(v: Any, rungs: int) -> tuple[float, ...]:
    """One threshold per rung below the last (0 = no decision there), or () for the single `threshold`."""
    if v is None or (isinstance(v, (list, tuple)) and not v):
        return ()
    ok = isinstance(v, (list, tuple)) and len(v) == rungs and all(
        isinstance(x, (int, float)) and not isinstance(x, bool) and 0.0 <= x < 1.0 for x in v) and any(v)
    if not ok:
        raise StopError(f"stop.rung_thresholds = {v!r}; allowed: {rungs} numbers in [0, 1), one per rung below the "
                        "last (0: no decision there), not all 0; or null for stop.threshold at every rung")
    return tuple(float(x) for x in v)


def rule_spec(rule: str, genomes: Mapping[str, Mapping[str, Any]], front: Sequence[Mapping[str, Any]] = (),
              threshold: float = 0.05, model: Mapping[str, Any] | str | None = None, eta: int = 3,
              rungs: int = 4, rung_thresholds: Sequence[float] | None = None) -> dict[str, Any]:
    """The plain-dict spec a dispatcher ships to its workers (`_Base.stop`); `model` may be a JSON file path
    given by the user on the command line. Checked here, in the caller, before anything is trained."""
    if isinstance(model, str):
        from forge.disk.io import read_text

        model = json.loads(read_text(model, "curve model"))
    spec = {"rule": rule, "threshold": float(threshold), "eta": int(eta), "rungs": int(rungs),
            "model": dict(model) if model else None, "front": [dict(m) for m in front],
            "genomes": {g: dict(v) for g, v in genomes.items()},
            "rung_thresholds": None if rung_thresholds is None else list(rung_thresholds)}
    build_rule(spec)
    return spec
