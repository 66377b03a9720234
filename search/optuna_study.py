"""A run written as an Optuna study (`<run>/study.db`), so `optuna-dashboard sqlite:///<run>/study.db` shows it live:
Pareto plots, history, trial selection (the optional extra `optuna`: pip install -e '.[optuna]').

One trial per evaluated genome (its latest evaluation), numbered in evaluation order: the run's objectives as the
trial's values (minimized, or maximized where the run maximizes), the genome id, generation, loss interval, every
metric and the constraint values as user attributes, and `label: real` with `real_loss` where co-evolution or a
train-mode run really trained it. A genome that fails a constraint (or that the backend cannot map) is a FAIL
trial with its metrics and why: it is not a candidate, so the dashboard's Pareto front, taken over the complete
trials, is the run's front (the non-dominated feasible genomes, what pareto.jsonl holds).

`forge-search optuna_study=true` writes it as the run goes, once per generation (read incrementally from
archive.jsonl, the one record of what was evaluated; a changed evaluation or a new real label rebuilds it);
`python -m search.optuna_study <run>` writes it for a finished run. The study is a view: nothing reads it back.
"""
from __future__ import annotations

import json
import math
import sys
import warnings
from pathlib import Path
from typing import Any, Sequence

from search.errors import SearchConfigError
from search.state import read_jsonl
from forge.disk import run_folder

STUDY_FILE = run_folder.STUDY
MISSING = ("optuna_study=true needs the optional packages optuna and optuna-dashboard: pip install -e '.[optuna]' in "
           "the Forge clone")


def _optuna() -> Any:
    try:
        import optuna
    except ImportError:
        raise SearchConfigError(MISSING) from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


class StudyWriter:
    """Keeps `<run>/study.db` in step with the run's archive.jsonl and labels.jsonl; `sync()` after each
    generation adds the genomes evaluated since the last call."""

    def __init__(self, run_dir: str | Path, objectives: Sequence[str], maximize: Sequence[str] = (),
                 constraints: Sequence[Any] = ()) -> None:
        self.optuna = _optuna()
        self.run_dir, self.objectives = Path(run_dir), list(objectives)
        self.directions = ["maximize" if o in maximize else "minimize" for o in self.objectives]
        self.constraints = list(constraints)  # search.constraints.Constraint
        self.url = f"sqlite:///{(self.run_dir / STUDY_FILE).resolve()}"
        self.name = self.run_dir.resolve().name
        self.study: Any = None
        self.offset, self.seen, self.labelled = 0, {}, set()

    def _fresh(self) -> None:
        """A new study (any earlier one of this run dropped: a resumed run rewinds its files first)."""
        optuna = self.optuna
        storage = self._storage()
        if any(s.study_name == self.name for s in optuna.get_all_study_summaries(storage)):
            optuna.delete_study(study_name=self.name, storage=storage)
        self.study = optuna.create_study(storage=storage, study_name=self.name, directions=self.directions)
        with warnings.catch_warnings():  # "experimental" since optuna 3.2, and what the dashboard labels axes by
            warnings.simplefilter("ignore")
            self.study.set_metric_names(self.objectives)
        self.study.set_user_attr("forge_run", str(self.run_dir.resolve()))
        self.study.set_user_attr("constraints", [str(c) for c in self.constraints])
        self.offset, self.seen = 0, {}

    def _storage(self) -> Any:
        """The RDB storage, its SQLite connections unsynced (a view rebuilt from the run's own files: losing its
        last writes to a power cut costs nothing), so a generation's trials are not one fsync each."""
        from sqlalchemy import event
        from sqlalchemy.pool import NullPool

        def unsynced(con: Any, _: Any) -> None:
            con.execute("PRAGMA synchronous=OFF")

        storage = self.optuna.storages.RDBStorage(self.url, engine_kwargs={"poolclass": NullPool})
        event.listen(storage.engine, "connect", unsynced)
        return storage

    def _new_records(self) -> list[dict[str, Any]]:
        """Records appended to archive.jsonl since the last call (whole lines only: a torn tail waits)."""
        path = self.run_dir / run_folder.ARCHIVE
        if not path.is_file():
            return []
        with open(path, "rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        whole = chunk[:chunk.rfind(b"\n") + 1]
        self.offset += len(whole)
        return [r for r in (json.loads(ln) for ln in whole.splitlines() if ln.strip()) if isinstance(r, dict)]

    def _labels(self) -> dict[str, float]:
        p = self.run_dir / run_folder.LABELS
        rows = read_jsonl(p, True) if p.is_file() else []
        return {r["genome_id"]: float(r["label"]) for r in rows if isinstance(r, dict) and "genome_id" in r
                and _num(r.get("label")) is not None}

    def sync(self) -> int:
        """Add what was evaluated since the last call; rebuild when an added genome was re-evaluated or got a real
        label since. Returns the number of trials the study holds."""
        labels = self._labels()
        if self.study is None:
            self._fresh()
        recs = self._new_records()
        stale = any(r["id"] in self.seen and self.seen[r["id"]] != _key(r) for r in recs)
        if stale or (set(labels) - self.labelled) & set(self.seen):
            self._fresh()
            recs = self._new_records()
        latest = {r["id"]: r for r in recs}  # the last evaluation of each id, in first-evaluation order
        trials = [self._trial(r, labels.get(gid)) for gid, r in latest.items() if gid not in self.seen]
        self.study.add_trials(trials)
        self.seen.update({gid: _key(r) for gid, r in latest.items()})
        self.labelled = set(labels) & set(self.seen)
        return len(self.seen)

    def _trial(self, rec: dict[str, Any], real: float | None) -> Any:
        optuna = self.optuna
        m = rec.get("metrics") or {}
        values = [_num(m.get(o)) for o in self.objectives]
        g = [c.g(float(_num(m.get(c.name)) if _num(m.get(c.name)) is not None else math.inf)) for c in self.constraints]
        feasible = bool(rec.get("feasible", True)) and None not in values
        attrs = {"genome_id": rec["id"], "generation": rec.get("generation"), "feasible": feasible,
                 "loss_interval": [m.get("loss_lo"), m.get("loss_hi")], "metrics": m,
                 "label": "real" if real is not None else "predicted",
                 **({"real_loss": real} if real is not None else {}),
                 **({"why_not_a_candidate": rec.get("reason") or "fails a constraint"} if not feasible else {})}
        return optuna.trial.create_trial(
            state=optuna.trial.TrialState.COMPLETE if feasible else optuna.trial.TrialState.FAIL,
            values=values if feasible else None, user_attrs=attrs,
            system_attrs={"constraints": [float(v) for v in g]} if g else {})


def _key(rec: dict[str, Any]) -> tuple:
    """What a trial shows of an evaluation: the same genome evaluated again alike (a duplicate offspring) is not
    a change; a refitted surrogate's new prediction is."""
    return rec.get("surrogate_version"), json.dumps(rec.get("metrics"), sort_keys=True)


def for_run(run_dir: str | Path) -> StudyWriter:
    """The writer for a run folder, its objectives, directions and constraints read from its summary.json."""
    from search.constraints import parse_constraint
    from search.run_files import read_summary

    s = read_summary(Path(run_dir))
    return StudyWriter(run_dir, s.get("objectives") or [], s.get("maximize") or [],
                       [parse_constraint(c) for c in s.get("constraints") or []])


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m search.optuna_study <run>`: write <run>/study.db for a run folder."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        sys.exit("usage: python -m search.optuna_study <forge-search run folder>")
    n = for_run(args[0]).sync()
    print(f"{Path(args[0]) / STUDY_FILE}: {n} trials; view: optuna-dashboard sqlite:///{Path(args[0]) / STUDY_FILE}")


if __name__ == "__main__":
    main()
