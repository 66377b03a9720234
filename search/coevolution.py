"""Surrogate co-evolution (LLMForge §3.3.1, Appendix C.2, Algorithm 3 lines 17–27).

After generation g with g mod K = 0: score the survived population with n_mc MC-dropout passes,
pick b/2 *exploit* genomes (lowest μ on the first front, capped by its size) and the rest as
*explore* genomes (highest σ off the front), never re-picking a genome already labelled (`acquire=paper`;
`acquire=widest` spends all b on the front members with the widest calibrated interval instead). They are
really trained through the dispatcher; non-finite labels are dropped; the predictor is fine-tuned
from the frozen base checkpoint on the whole label buffer with ρ:1 replay of its original corpus,
and hot-swapped so the next generation is evaluated by it. Every event is logged with the
surrogate's error on the picks before and after the refit.

The plug-in sees the search through two narrow things only: the survived population (`Survivors`:
genomes, F, CV) and the evaluator's surrogate slot (`SurrogateSlot`: the current predictor, its version,
`swap`), plus the run folder it logs into; never the whole `Search`.
"""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from forge.disk.io import json_num
from forge.genomes.labels import Label
from search.archive import non_dominated
from search.evaluators import label_hook, seed_torch
from search.errors import SearchConfigError
from forge.disk import run_folder

log = logging.getLogger(__name__)
from search.state import append_jsonl
from surrogate.metrics import mae


class SurrogateSlot(Protocol):
    """What co-evolution needs of the evaluator (`search.evaluators.LossEvaluator` is one)."""

    predictor: Any
    version: int

    def swap(self, predictor: Any) -> None:
        """Use `predictor` from now on and bump `version` (cached losses of older versions are not reused)."""


@dataclass(frozen=True)
class Survivors:
    """The survived population of one generation: its genomes, objective rows F and violations CV."""

    genomes: Sequence[Any]
    F: np.ndarray
    CV: np.ndarray


def first_front(F: np.ndarray, CV: np.ndarray) -> np.ndarray:
    """Boolean mask of the first front under constraint-dominance (least-violating set when none is feasible)."""
    CV = np.asarray(CV, float).reshape(-1)
    mask = np.zeros(len(CV), dtype=bool)
    feas = np.flatnonzero(CV <= 0)
    if len(feas):
        mask[feas[non_dominated(np.asarray(F)[feas])]] = True
    elif len(CV):
        mask[CV == CV.min()] = True
    return mask


def pick(mu: np.ndarray, sigma: np.ndarray, front: np.ndarray, b: int,
         taken: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(exploit, explore) indices: min(b//2, |front|) lowest-μ front members, then highest-σ others."""
    taken = np.zeros(len(mu), dtype=bool) if taken is None else np.asarray(taken, bool)
    cand_f = np.flatnonzero(front & ~taken)
    cand_r = np.flatnonzero(~front & ~taken)
    n_exp = min(b // 2, len(cand_f))
    exploit = cand_f[np.argsort(mu[cand_f], kind="stable")[:n_exp]]
    explore = cand_r[np.argsort(-sigma[cand_r], kind="stable")[: min(b - n_exp, len(cand_r))]]
    return exploit, explore


ACQUIRE = ("paper", "widest")


def pick_widest(lo: np.ndarray, hi: np.ndarray, front: np.ndarray, b: int, ids: Sequence[str],
                taken: np.ndarray | None = None) -> np.ndarray:
    """Indices of b picks where a label most narrows the front's uncertainty: the front members with the widest
    calibrated interval hi − lo first, then (front exhausted) the widest others; ties by genome id. Widths are
    rounded to 1e-9 so the same run picks the same genomes on any machine (NaN widths rank last)."""
    taken = np.zeros(len(lo), dtype=bool) if taken is None else np.asarray(taken, bool)
    width = np.round(np.nan_to_num(np.asarray(hi, float) - np.asarray(lo, float), nan=-np.inf, posinf=np.inf), 9)
    order = np.lexsort((np.asarray(ids, dtype=str), -width, ~np.asarray(front, bool)))  # last key sorts first
    return order[~taken[order]][:b]


def _interval(slot: Any, mu: np.ndarray, sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The slot's calibrated interval (LossEvaluator.interval); uncalibrated: μ ± σ, so widest = highest σ."""
    if hasattr(slot, "interval"):
        lo, hi = (np.asarray(a, float) for a in slot.interval(mu, sigma))
        if np.all(np.isfinite(lo)) or np.all(np.isfinite(hi)):
            return lo, hi
    return mu - sigma, mu + sigma


class CoEvolution:
    """State and events of the co-evolving surrogate; plugged into `search.runner.Search`."""

    def __init__(self, every: int, trainer: Any, finetune: Callable[..., Any], base: Any, replay: Any,
                 batch: int = 8, n_mc: int = 10, ratio: float = 5.0, epochs: int = 10, lr: float = 1e-4,
                 batch_size: int = 32, seed: int = 0, load: Callable[[str], Any] | None = None,
                 acquire: str = "paper", stop: Any = None):
        if acquire not in ACQUIRE:
            raise SearchConfigError(f"search.coevolve.acquire = {acquire!r}; allowed: {' | '.join(ACQUIRE)}")
        self.acquire, self.stop = acquire, stop  # stop: search.coevolution_stop.CoStop (issue 52) or None
        self.every, self.trainer, self.finetune, self.base, self.replay = int(every), trainer, finetune, base, replay
        self.b, self.n_mc, self.seed, self.load = int(batch), int(n_mc), int(seed), load
        self.ft_args = {"ratio": float(ratio), "epochs": int(epochs), "lr": float(lr), "batch": int(batch_size)}
        self.buffer: list[Label] = []  # finite real labels, grown across events
        self.events: list[dict[str, Any]] = []
        self.predictor_path: str | None = None
        self.note: Callable[[str], None] = lambda text: None  # the search's progress display sets it (runner)

    def _tell(self, text: str) -> None:
        """A co-evolution step to Python logging (the run's cli.log, with progress=false too) and to the display."""
        log.info("%s", text)
        self.note(text)

    def due(self, g: int) -> bool:
        return self.every > 0 and g > 0 and g % self.every == 0

    def _choose(self, g: int, pop: Survivors, slot: SurrogateSlot, n: int) -> tuple[list[Any], np.ndarray, dict]:
        """The n picks of an event (never a genome labelled or picked before), their indices into the population,
        and what the event logs of them: μ, σ, exploit and explore ids."""
        genomes = list(pop.genomes)
        seed_torch(self.seed + 104729 * g)
        mu, sigma = (np.asarray(a, float) for a in slot.predictor.predict(genomes, n_mc=self.n_mc))
        front = first_front(pop.F, pop.CV)
        have = {lab.genome.id for lab in self.buffer} | {i for e in self.events for i in e["picked"]}
        taken = np.array([x.id in have for x in genomes], dtype=bool)
        if self.acquire == "widest":  # every label on the widest calibrated interval (issue 35 §5)
            lo, hi = _interval(slot, mu, sigma)
            exploit, explore = pick_widest(lo, hi, front, n, [x.id for x in genomes], taken), np.zeros(0, int)
        else:
            exploit, explore = pick(mu, sigma, front, n, taken)
        idx = np.concatenate([exploit, explore]).astype(int)
        seen = {"mu": mu[idx], "sigma": sigma[idx], "exploit": [genomes[i].id for i in exploit],
                "explore": [genomes[i].id for i in explore]}
        return [genomes[i] for i in idx], idx, seen

    def fire(self, g: int, pop: Survivors, slot: SurrogateSlot, run_dir: Path) -> dict[str, Any]:
        picks, idx, seen = self._choose(g, pop, slot, self.b)
        if self.stop is not None:  # the real-label front so far, the picks' exact costs and priors
            self.stop.arm(self.trainer, picks, pop.F[idx], seen["mu"], self.buffer)
        labels = self._train(g, picks)
        event = self._fold(g, slot, Path(run_dir), labels, seen["mu"])
        dropped = event.pop("dropped")  # the key order of today's coevolution.jsonl
        event.update(picked=[x.id for x in picks], exploit=seen["exploit"], explore=seen["explore"],
                     labels=[json_num(lab.label) for lab in labels], dropped=dropped,
                     sigma=[float(v) for v in seen["sigma"]],
                     **({"stopped": self.stop.log(labels, run_dir)} if self.stop is not None else {}))
        return self._log_event(event, run_dir)

    def _fold(self, g: int, slot: SurrogateSlot, run_dir: Path, labels: list[Label], mu: np.ndarray) -> dict[str, Any]:
        """Real labels into labels.jsonl and (finite ones) the buffer, then the refit; `mu`: their μ when picked."""
        append_jsonl(run_dir / run_folder.LABELS, [{**json.loads(lab.to_json()), "generation": g} for lab in labels])
        fin = [(k, lab) for k, lab in enumerate(labels) if lab.finite]
        self.buffer += [lab for _, lab in fin]
        self._tell(f"generation {g}: co-evolution refits the surrogate on {len(self.buffer)} real labels")
        event = self._refit(g, slot, run_dir, np.asarray(mu, float), [lab for _, lab in fin], [k for k, _ in fin])
        event["dropped"] = len(labels) - len(fin)
        return event

    def _log_event(self, event: dict[str, Any], run_dir: Path) -> dict[str, Any]:
        self.events.append(event)
        append_jsonl(Path(run_dir) / run_folder.COEVOLUTION, [event])
        return event

    def finish(self, g: int, slot: SurrogateSlot, run_dir: Path) -> dict[str, Any] | None:
        """At the end of a complete run: nothing left to fold in here (every event waited for its picks)."""
        return None

    def close(self, wait: bool = True) -> None:
        """When the run stops, however it stops: nothing in flight here."""

    def _train(self, g: int, picks: list[Any]) -> list[Label]:
        """Real labels of the picks, a progress note per trained genome (what, how many of how many)."""
        if not picks:
            return []
        self._tell(f"generation {g}: co-evolution trains {len(picks)} picks")
        done: list[Label] = []

        def on_label(lab: Label) -> None:
            done.append(lab)
            self._tell(f"generation {g}: co-evolution trained {len(done)}/{len(picks)} ({lab.genome_id[:8]}: "
                      f"loss {lab.label:.3f})")
        with label_hook(self.trainer, on_label):
            return self.trainer.train(picks)

    def _refit(self, g: int, ev: SurrogateSlot, run_dir: Path, mu_picks: np.ndarray, fin: list[Label],
               k: list[int]) -> dict[str, Any]:
        y = np.array([lab.label for lab in fin])
        event = {"generation": g, "buffer_size": len(self.buffer), "mae_before": mae(y, mu_picks[k])}
        if not self.buffer:
            event.update(mae_after=None, surrogate_version=ev.version, refit=False)
            return event
        seed_torch(self.seed + g)
        new = self.finetune(self.base, list(self.buffer), self.replay, seed=self.seed + g, **self.ft_args)
        after = np.asarray(new.predict([lab.genome for lab in fin], n_mc=0)[0], float) if fin else np.zeros(0)
        ev.swap(new)  # hot-swap: the next generation is evaluated by the refitted surrogate
        if hasattr(new, "save"):
            stem = run_dir / run_folder.STATE_DIR / run_folder.REFIT_STEM.format(version=ev.version)
            new.save(stem)
            self.predictor_path = str(stem)
        event.update(mae_after=mae(y, after), surrogate_version=ev.version, refit=True)
        return event

    # ------------------------------------------------------------ resume
    def state(self) -> dict[str, Any]:
        return {"buffer": [json.loads(lab.to_json()) for lab in self.buffer], "events": self.events,
                "predictor_path": self.predictor_path, **({"costs": self.stop.costs} if self.stop is not None else {})}

    def restore(self, st: dict[str, Any], slot: SurrogateSlot, run_dir: Path | None = None) -> None:
        """Continue from a checkpoint's state; its refitted surrogate is read from `run_dir`'s own state/."""
        self.buffer = [Label.from_json(json.dumps(d)) for d in st["buffer"]]
        if self.stop is not None:
            self.stop.costs = dict(st.get("costs") or {})
        path = saved_predictor(run_dir, st.get("predictor_path")) if run_dir is not None else st.get("predictor_path")
        self.events, self.predictor_path = list(st["events"]), (str(path) if path else None)
        version = max([e["surrogate_version"] for e in self.events], default=0)
        if version == 0:
            return
        if self.predictor_path and self.load is not None:
            pred = self.load(self.predictor_path)
        else:  # no saved weights: refit again (deterministic: same buffer, same seed)
            g = self.events[-1]["generation"]
            pred = self.finetune(self.base, list(self.buffer), self.replay, seed=self.seed + g, **self.ft_args)
        slot.swap(pred)
        slot.version = version  # the version the checkpoint recorded (cached losses are keyed by it)

    def summary(self) -> dict[str, Any]:
        return {"every": self.every, "events": len(self.events), "labels": len(self.buffer),
                "dropped": sum(e["dropped"] for e in self.events),
                "mae_before": [e["mae_before"] for e in self.events], "mae_after": [e["mae_after"] for e in self.events]}


def saved_predictor(run_dir: Path, value: Any) -> Path | None:
    """The refitted surrogate a checkpoint names: `state/surrogate-v<N>` of this run folder, wherever the path was
    written from (a run folder moves). Any other value is refused: a checkpoint never picks a file to load."""
    if not value:
        return None
    name = Path(str(value)).name
    if not isinstance(value, str) or not re.fullmatch(r"surrogate-v\d+", name):
        raise SearchConfigError(f"{Path(run_dir) / run_folder.CHECKPOINT}: coevolution.predictor_path = "
                                f"{str(value)[:60]!r} is refused; allowed: state/surrogate-v<N>, the refitted "
                                "surrogate Forge saved in the run folder")
    return Path(run_dir) / run_folder.STATE_DIR / name


def replay_labels(spec: Any, space_name: str) -> Sequence[Label] | str:
    """The original training corpus for replay: a path (CSV or JSONL, or relative to data/); for iha-paper/gqa-paper the LLMForge
    CSV by default. Other spaces without `replay` fine-tune on the new labels alone (no replay)."""
    from pathlib import Path

    from forge.runtime.config import data_dir
    from forge.disk.io import shared_data_dir

    if spec:
        shipped = data_dir() / str(spec)  # a path relative to the shipped data/ folder works too
        return str(shipped if not Path(str(spec)).exists() and shipped.exists() else spec)
    if space_name in ("iha-paper", "gqa-paper"):
        return str(shared_data_dir() / "llmforge_iha_200M.csv")
    return []
