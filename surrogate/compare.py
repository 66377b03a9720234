"""Train every model on the same seeded architecture-level splits and tabulate the metrics (Table 1).

Models are built from `conf/surrogate/<name>.yaml` with `forge.plugins.instantiate` (Hydra's, allowlisted); each has
`fit(train, val)` and `predict(genomes)`. All models see the same training rows; the validation carve
is only used for epoch selection by the neural models (the forest and the law ignore it). Splits are
independent units of work, so `workers` runs them in parallel processes without changing the table.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from omegaconf import OmegaConf

from forge.errors import UserError
from forge import plugins
from forge.runtime.config import conf_dir, is_name
from forge.runtime.parallel import map_spawned
from surrogate.dataset import LabelSet, train_val_test
from surrogate.fit import train_forgeformer
from surrogate.generic import build_model
from surrogate.conformal import coverage_cv
from surrogate.decision import decision_table
from surrogate.metrics import METRICS, evaluate, summarize
from surrogate.recipe import Recipe

PAPER = {  # LLMForge Table 1, IHA column (n_test = 411), means only
    "forgeformer": {"mae": 0.213, "mae_at_5": 0.057, "spearman": 0.754, "kendall": 0.582, "k_at_1": 96.8, "k_at_5": 261.8},
    "mlp": {"mae": 0.483, "mae_at_5": 0.268, "spearman": 0.345, "kendall": 0.235, "k_at_1": 198.2, "k_at_5": 360.6},
    "rf": {"mae": 0.424, "mae_at_5": 0.255, "spearman": 0.538, "kendall": 0.378, "k_at_1": 131.8, "k_at_5": 348.4},
}


class ForgeFormerModel:
    """Forge-Former behind the common fit/predict interface (config keys = `Recipe` fields)."""

    def __init__(self, space: str = "iha-paper", L_max: int = 40, **recipe: Any) -> None:
        self.recipe = Recipe(**recipe)
        self.space, self.L_max = space, L_max
        self.predictor = None

    def fit(self, train: LabelSet, val: LabelSet | None) -> "ForgeFormerModel":
        self.predictor = train_forgeformer(train, val, self.recipe, self.space, self.L_max)
        return self

    def predict(self, genomes) -> np.ndarray:
        return self.predictor.predict(genomes)[0]

    def as_predictor(self) -> Any:
        """The search side (surrogate.interface): the trained ForgeFormerPredictor itself."""
        return self.predictor

    def save(self, stem: str | Path) -> Path:
        return self.predictor.save(stem)


def model_config(name: str) -> Any:
    """conf/surrogate/<name>.yaml, or a YAML file of the user's with a `_target_` (any TrainableSurrogate)."""
    path = conf_dir() / "surrogate" / (f"{name}.yaml" if is_name(name) else ".")  # a name, or the user's file
    if not path.is_file() and str(name).endswith((".yaml", ".yml")) and Path(name).is_file():
        path = Path(name)
        node = OmegaConf.load(path)
        plugins.trust_file(node)  # the user named this file on their command line
        return node
    if not path.is_file():
        avail = sorted(p.stem for p in (conf_dir() / "surrogate").glob("*.yaml"))
        raise UserError(f"model={name!r} is unknown; allowed: {' | '.join(avail)} or a YAML file with _target_")
    return OmegaConf.load(path)


def build(name: str, seed: int, overrides: dict | None = None) -> Any:
    return build_model(OmegaConf.merge(model_config(name), overrides or {}), seed=seed)


def compare(data: LabelSet, models: list[str], seeds: int, seed0: int = 0, test_frac: float = 0.2,
            overrides: dict | None = None, log=print, save_dir: Path | None = None,
            workers: int = 1, step: Callable[..., None] | None = None) -> dict[str, Any]:
    """{model: {"runs": [...per seed metrics], "summary": {metric: {mean, std}}, "fit_s": ...}}.

    workers > 1 runs the splits in that many spawned processes with one torch thread each (forge.runtime.parallel);
    every fit is seeded by its split, so the table equals a one-process run with torch.set_num_threads(1).
    `step(note, n=...)` counts fits as they end (forge.runtime.steps.Steps.step): each fit here, each split's in workers."""
    jobs = [(data, models, s, test_frac, overrides, save_dir) for s in range(seed0, seed0 + seeds)]
    if workers == 1:
        def log_fit(line: str) -> None:
            log(line)
            if step is not None:
                step(line.split(":")[0])

        per_split = [_split_job(*job, log=log_fit) for job in jobs]  # log lines as each fit ends
    else:
        tick = None if step is None else (lambda i: step(f"seed {seed0 + i}", n=len(models)))
        per_split = map_spawned(_split_job, jobs, workers, done=tick)
        for line in (ln for res in per_split for ln in res["log"]):
            log(line)
    out: dict[str, Any] = {m: {"runs": [], "fit_s": []} for m in models}
    for res in per_split:
        for name in models:
            out[name]["runs"].append(res["runs"][name])
            out[name]["fit_s"].append(res["fit_s"][name])
    for name in models:
        out[name]["summary"] = summarize(out[name]["runs"]) | _extra_summary(out[name]["runs"])
    return out


def _split_job(data: LabelSet, models: list[str], s: int, test_frac: float, overrides: dict | None,
               save_dir: Path | None, log=None) -> dict[str, Any]:
    """Every model fit and scored on split s: one unit of `compare`'s work."""
    train, val, test = train_val_test(data, s, test_frac)
    res: dict[str, Any] = {"runs": {}, "fit_s": {}, "log": []}
    for name in models:
        t0 = time.perf_counter()
        model = build(name, s, (overrides or {}).get(name)).fit(train, val)
        pred = np.asarray(model.predict(test.genomes), dtype=float)
        metrics = evaluate(test.y, pred)
        res["runs"][name] = {**metrics, **decision_and_intervals(test.y, pred, test.ids, s), "n_test": len(test)}
        res["fit_s"][name] = round(time.perf_counter() - t0, 2)
        if save_dir is not None and callable(getattr(model, "save", None)):
            if getattr(model, "predictor", None) is not None:  # the sidecar records its held-out split
                model.predictor.meta.update(metrics=metrics, test={"seed": s, "test_frac": test_frac,
                                                                   "n_test": len(test)})
            model.save(Path(save_dir) / f"{Path(name).stem}-seed{s}")
        line = f"seed {s} {name}: " + ", ".join(f"{k}={metrics[k]:.3f}" for k in METRICS)
        if log is not None:
            log(line)
        res["log"].append(line)
    return res


DECISION = ("regret_at_10", "overlap_at_10", "optimism_best10")  # surrogate.decision, each with a bootstrap CI
INTERVAL = ("below", "above", "width", "coverage_best10", "width_best10")  # 90 % interval, grouped cross-conformal


def decision_and_intervals(y: np.ndarray, pred: np.ndarray, ids: list[str], seed: int) -> dict[str, Any]:
    """Issue 35 §3 on one test split: the decision metrics (value and bootstrap 95 % CI over architectures) and
    the two-tailed 90 % interval's per-tail misses, width and best-10 % coverage/width, calibrated by 5-fold
    cross-conformal over the test rows grouped by architecture (every model the same way, so they compare)."""
    dec = decision_table(y, pred, ids, reps=200, seed=seed)
    iv = coverage_cv(y, pred, None, None, 0.9, seed=seed, ids=ids)["conformal-residual"]
    return ({k: dec[k]["value"] for k in DECISION} | {f"{k}_ci95": dec[k]["ci95"] for k in DECISION}
            | {f"iv90_{k}": float(iv[k]) for k in INTERVAL})


def _extra_summary(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    keys = [*DECISION, *(f"iv90_{k}" for k in INTERVAL)]
    return {k: {"mean": float(np.mean([r[k] for r in runs])), "std": float(np.std([r[k] for r in runs])),
                **({"ci95_mean": [float(np.mean([r[f"{k}_ci95"][j] for r in runs])) for j in (0, 1)]}
                   if f"{k}_ci95" in runs[0] else {})} for k in keys if k in runs[0]}


def markdown(results: dict[str, Any], n_test: int, seeds: int) -> str:
    """Table 1 layout: one column per model, mean ± std over seeds; paper values for reference."""
    names = list(results)
    head = "| metric | " + " | ".join(names) + " | paper Forge-Former | paper MLP | paper RF |"
    lines = [f"Test split: {n_test} rows, {seeds} seeded 80/20 architecture-level splits (mean ± std).", "",
             head, "|" + "---|" * (len(names) + 4)]
    for k in METRICS:
        fmt = "{:.1f}" if k.startswith("k_at") else "{:.3f}"
        cells = [f"{fmt.format(results[n]['summary'][k]['mean'])} ± {fmt.format(results[n]['summary'][k]['std'])}"
                 for n in names]
        paper = [fmt.format(PAPER[m][k]) for m in ("forgeformer", "mlp", "rf")]
        lines.append(f"| {k} | " + " | ".join(cells + paper) + " |")
    for k in (*DECISION, *(f"iv90_{k}" for k in INTERVAL)):
        got = [results[n]["summary"].get(k) for n in names]
        ci = lambda g: f" (CI {g['ci95_mean'][0]:.3f}, {g['ci95_mean'][1]:.3f})" if "ci95_mean" in g else ""  # noqa: E731
        cells = [f"{g['mean']:.3f} ± {g['std']:.3f}{ci(g)}" if g else "–" for g in got]
        lines.append(f"| {k} | " + " | ".join(cells + ["–"] * 3) + " |")
    return "\n".join(lines) + "\n" + LEGEND


LEGEND = ("\nregret_at_10: true loss of the best of the 10 best-predicted rows minus the true best; overlap_at_10: "
          "share of the true top 10 among the predicted top 10; optimism_best10: mean (true − predicted) over the "
          "best-predicted 10 % (CI: mean over splits of each split's bootstrap 95 % interval, architectures "
          "resampled). iv90_*: the 90 % two-tailed interval, 5-fold cross-conformal over the test rows grouped by "
          "architecture: share below lo / above hi, mean width, coverage and width among the best-predicted 10 %.\n")


def write_markdown(path: Path, results: dict[str, Any], n_test: int, seeds: int) -> None:
    from forge.disk.io import atomic_write_text

    atomic_write_text(path, markdown(results, n_test, seeds))
