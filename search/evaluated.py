"""Any genome a run evaluated or verified, by id prefix: what `forge-export select=id:<prefix>` falls back to when
the prefix names no Pareto member (a near-front pick or a control that `forge-verify` trained better, say).

Where it looks, in order: the run's `archive.jsonl` (every genome the search evaluated; the last record of an id
is its latest evaluation) and each `verified.jsonl` that `forge-verify` wrote beside its weights. Both are data:
the row's genome is checked against its id by the caller (search.export.checked_id) before anything is written.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Sequence

from search.errors import ExportError
from search.state import read_jsonl
from forge.disk import run_folder

VERIFIED = run_folder.VERIFIED  # search.verify writes it beside verify.json and weights/


def _rows(path: Path) -> list[dict[str, Any]]:
    return [r for r in read_jsonl(path) if isinstance(r, dict) and isinstance(r.get("id"), str)] if path.is_file() else []


def off_front(run_dir: Path, prefix: str, verify_dirs: Sequence[Path]) -> tuple[dict[str, Any], str]:
    """(row, note) of the one genome off the front whose id starts with `prefix`; refused naming what was searched
    when none or several match."""
    found: dict[str, tuple[dict[str, Any], str]] = {}
    for r in _rows(run_dir / run_folder.ARCHIVE):
        if r["id"].startswith(prefix):
            gen = r.get("generation")
            how = "" if r.get("feasible", True) else ", infeasible under the run's constraints"
            found[r["id"]] = (r, f"evaluated by the search in generation {gen} (archive.jsonl){how}")
    for d in dict.fromkeys(Path(v) for v in verify_dirs):
        for r in _rows(d / VERIFIED):
            if r["id"].startswith(prefix) and r["id"] not in found:
                found[r["id"]] = (r, f"trained by forge-verify as its {r.get('role', '?')} ({d / VERIFIED})")
    if len(found) != 1:
        raise ExportError(f"select=id:{prefix}: {len(found)} genomes of the run have this id prefix (the front, "
                          "archive.jsonl, verify/verified.jsonl); allowed: the id (or a unique prefix) of one "
                          "genome the run evaluated or verified")
    row, where = next(iter(found.values()))
    return row, f"{row['id'][:8]} is not on the run's Pareto front: {where}"


def chosen_rows(run_dir: Path, rows: list[dict[str, Any]], spec: str, weights: Path | None,
                on_front: Callable[[], list[dict[str, Any]]]) -> tuple[list[dict[str, Any]], str | None]:
    """`select=` rows, and a note when `id:` named a genome off the front (one the search evaluated or forge-verify
    trained, found beside `weights=` or in the run's verify/); `on_front` selects among the front's rows."""
    m = re.fullmatch(r"id:([0-9a-f]{4,64})", spec)
    if m and rows and not any(str(r["id"]).startswith(m.group(1)) for r in rows):
        row, note = off_front(run_dir, m.group(1), [*([weights.parent] if weights else []), run_dir / run_folder.VERIFY_DIR])
        return [row], note
    return on_front(), None
