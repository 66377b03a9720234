"""Tabular views of a search run, beside its JSONL, for a spreadsheet or pandas (`pd.read_csv`).

- `front.csv`: the Pareto archive (`pareto.jsonl`), one row per genome;
- `archive.csv`: every evaluation (`archive.jsonl`), one row per evaluated genome;
- `history.csv`: one row per generation (HV, feasible count, front size, evaluation seconds), appended as the
  search runs, so `tail -f` or a notebook can follow it.

Genome rows: id, generation, feasible, the objectives, the loss interval (loss_lo, loss_hi, mu, sigma), the key
totals (params, layers, every other metric) and the backend's reason. Written with the stdlib `csv` module: the
search path imports neither pandas nor Lightning. `history.jsonl` stays free of wall-clock fields (a resumed run
writes it byte for byte as an uninterrupted one); the evaluation seconds live in `history.csv` only.
"""
from __future__ import annotations

import csv
import io
import logging
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

from forge.disk.confined import open_append
from forge.disk.io import _UMASK, atomic_write_text, loads
from search.state import read_jsonl
from forge.disk import run_folder

log = logging.getLogger("forge.search")
FIRST = ("id", "generation", "feasible")
INTERVAL = ("loss_lo", "loss_hi", "mu", "sigma")
HISTORY = ("generation", "evaluations", "new", "hv", "hv_loss_params", "n_feasible", "front_size", "eval_s",
           "wall_s")


def genome_row(rec: dict[str, Any], objectives: Sequence[str]) -> dict[str, Any]:
    """One flat row of a JSONL record: first the id and objectives, then the interval and every other total."""
    m = rec.get("metrics", {})
    layers = rec.get("genome", {}).get("layers")
    row = {"id": rec["id"], "generation": rec.get("generation"), "feasible": rec.get("feasible")}
    row |= {k: m.get(k) for k in (*objectives, *INTERVAL)}
    row |= {k: v for k, v in sorted(m.items()) if k not in row}
    row |= {"layers": len(layers) if layers is not None else None}
    row |= {f"design.{k}": v for k, v in sorted((rec.get("design") or {}).items())}
    return row | {"reason": rec.get("reason", "")}


def to_csv(rows: Sequence[dict[str, Any]], first: Iterable[str] = ()) -> str:
    """CSV text of dict rows: the union of their keys as columns (`first` in front), missing cells empty."""
    cols = list(dict.fromkeys([*first, *(k for r in rows for k in r)]))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def with_odds(rows: list[dict[str, Any]], odds: Any) -> list[dict[str, Any]]:
    """front.csv's `p_best` (P that the best-predicted member trains better than this one; empty for that member)
    and `loss_group` (search.odds), when the predictor carries pairwise odds (surrogate.pairwise.PairwiseOdds)."""
    from search.odds import loss_groups, p_best
    from surrogate.pairwise import PairwiseOdds

    if not isinstance(odds, PairwiseOdds) or not rows:
        return rows
    p, g = p_best(rows, odds), loss_groups(rows, odds)
    return [r | {"p_best": "" if p[j] != p[j] else f"{p[j]:.2f}", "loss_group": int(g[j])} for j, r in enumerate(rows)]


def write_tables(run_dir: Path, objectives: Sequence[str], archive_rows: Sequence[dict[str, Any]] | None = None,
                 blind: Sequence[str] = (), odds: Any = None) -> dict[str, Path]:
    """front.csv and archive.csv from pareto.jsonl and archive.jsonl (atomically, so a reader never sees half).

    `archive_rows`: archive.jsonl's rows already as `genome_row`s, when the caller holds them all (a search
    that logged every row itself), so the file is not parsed again. `blind`: genes the loss predictor never saw
    (search.blind, allowed by the user): every row says so in `loss_blind_to`."""
    out = {}
    first = (*FIRST, *objectives, *(("loss_blind_to",) if blind else ()))
    for src, name in ((run_folder.PARETO, run_folder.FRONT_CSV), (run_folder.ARCHIVE, run_folder.ARCHIVE_CSV)):
        out[name] = run_dir / name
        if src == run_folder.ARCHIVE and archive_rows is None and (run_dir / src).is_file():
            _stream_csv(run_dir / src, run_dir / name, objectives, blind, first)  # every evaluation: never all in memory
            continue
        if src == run_folder.ARCHIVE and archive_rows is not None:
            rows = list(archive_rows)
        else:
            rows = [genome_row(r, objectives) for r in read_jsonl(run_dir / src)] if (run_dir / src).is_file() else []
        if blind:
            rows = [r | {"loss_blind_to": ";".join(blind)} for r in rows]
        odd = name == run_folder.FRONT_CSV and odds is not None
        rows = with_odds(rows, odds) if odd else rows
        cols = (*FIRST, *objectives, *(("p_best", "loss_group") if odd and rows and "p_best" in rows[0] else ()),
                *(("loss_blind_to",) if blind else ()))
        atomic_write_text(run_dir / name, to_csv(rows, cols))
    return out


def _stream_csv(src: Path, dst: Path, objectives: Sequence[str], blind: Sequence[str], first: Sequence[str]) -> None:
    """`to_csv` of src's rows, read twice line by line (the columns, then the rows) into a temp file renamed over
    `dst`: the same bytes, in memory one row at a time (issue 53 §3)."""
    import os
    import tempfile

    extra = {"loss_blind_to": ";".join(blind)} if blind else {}

    def rows() -> Iterable[dict[str, Any]]:
        with open(src, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield genome_row(loads(line), objectives) | extra

    cols = list(dict.fromkeys([*first, *(k for r in rows() for k in r)]))
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # as atomic_write_text's files
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols, lineterminator="\n")
            w.writeheader()
            w.writerows(rows())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class GenerationLog:
    """history.csv, one row per generation, and the same line to Python logging (`cli.log` under Hydra)."""

    def __init__(self, run_dir: Path) -> None:
        self.path, self._eval_seen, self._t0 = Path(run_dir) / run_folder.HISTORY_CSV, 0.0, time.perf_counter()

    def truncate(self, last_generation: int, history: Sequence[dict[str, Any]] | None = None) -> None:
        """On resume: drop rows of generations after the checkpoint (they are run again). A damaged table (it is
        derived from the logs) is rebuilt from `history` (the checkpoint's rows), said in one line; only its
        timings, which live here alone, are then left blank. Without `history` a damaged one is raised."""
        if not self.path.is_file():
            return
        try:
            rows = [r for r in csv.DictReader(io.StringIO(self.path.read_text()))
                    if int(r["generation"]) <= last_generation]
        except (KeyError, ValueError, TypeError) as e:
            if history is None:
                raise
            rows = [_flat(r, "", "") for r in history if int(r["generation"]) <= last_generation]
            print(f"resume: {self.path} is damaged ({type(e).__name__}); rebuilt from the checkpoint's history "
                  "(eval_s and wall_s of those generations are unknown: left blank)", file=sys.stderr)
        atomic_write_text(self.path, to_csv(rows, HISTORY) if rows else "")

    def log(self, row: dict[str, Any], eval_total_s: float) -> None:
        """Append one generation; `eval_total_s` is the problem's cumulative evaluation time."""
        flat = _flat(row, round(eval_total_s - self._eval_seen, 4), round(time.perf_counter() - self._t0, 3))
        self._eval_seen = eval_total_s
        new = not self.path.is_file() or self.path.stat().st_size == 0
        text = to_csv([flat], HISTORY)
        with open_append(self.path) as f:  # never through a link planted in the run folder
            f.write(text if new else text.split("\n", 1)[1])
        log.info("generation %d: HV %.4f, feasible %d, front %d, evaluations %d (%.2f s)", flat["generation"],
                 flat["hv"], flat["n_feasible"], flat["front_size"], flat["evaluations"], flat["eval_s"])


def _flat(row: dict[str, Any], eval_s: Any, wall_s: Any) -> dict[str, Any]:
    """history.csv's row of a history record (history.jsonl's), with its timings."""
    flat = {"generation": row["generation"], "evaluations": row["evaluations"], "new": row["new"], "hv": row["hv"],
            "hv_loss_params": row["hv_loss_params"], "n_feasible": row["n_feasible"], "front_size": row["archive_size"],
            "eval_s": eval_s, "wall_s": wall_s}
    return flat | {f"best.{k}": v for k, v in (row.get("best") or {}).items()}


def read_front(run_dir: Path) -> list[dict[str, str]]:
    """A run's front.csv rows (derived from pareto.jsonl for runs made before the CSVs existed)."""
    path = Path(run_dir) / run_folder.FRONT_CSV
    if path.is_file():
        return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))
    objectives = loads((Path(run_dir) / run_folder.SUMMARY).read_text()).get("objectives", [])
    text = to_csv([genome_row(r, objectives) for r in read_jsonl(Path(run_dir) / run_folder.PARETO)])
    return list(csv.DictReader(io.StringIO(text)))


def compare_runs(run_dirs: Sequence[Path], summaries: Sequence[dict[str, Any]], path: Path) -> list[dict[str, Any]]:
    """runs.csv: one row per run (status, HV, evaluations, front size, the front's best value per objective)."""
    rows = []
    for d, s in zip(run_dirs, summaries):
        front = read_front(d)
        best = {}
        for o in s.get("objectives", []):
            vals = [float(r[o]) for r in front if r.get(o) not in (None, "")]
            best[f"best.{o}"] = min(vals) if vals else None
        rows.append({"run": str(d), "algorithm": s.get("algorithm"), "space": s.get("space"),
                     "backend": s.get("backend"), "seed": s.get("seed"), "status": s.get("status"),
                     "generations_done": s.get("generations_done"), "evaluations": s.get("evaluations"),
                     "hypervolume": s.get("hypervolume"), "front_size": len(front), **best})
    atomic_write_text(path, to_csv(rows))
    return rows
