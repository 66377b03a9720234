"""`forge-hw -m ...`: after the sweep, one table of every job side by side (what varies, TTFT, TPOT, energy), so a
comparison of backends, presets or workloads reads at a glance instead of from one table per job.

A Hydra callback (conf/forge-hw.yaml's `hydra.callbacks.side_by_side`): it reads each job's summary.json and
`.hydra/overrides.yaml` under the sweep folder (files this sweep just wrote) and prints; it also writes
`side_by_side.csv` there.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import yaml
from hydra.experimental.callback import Callback
from forge.disk import run_folder

COLS = (("ttft_ms", "TTFT ms"), ("tpot_ms", "TPOT ms"), ("energy_per_token_uj", "energy µJ/tok"))


def jobs(sweep: Path) -> list[tuple[dict[str, str], dict[str, Any]]]:
    """(overrides as key -> value, summary) of each finished job, in job order."""
    out = []
    for d in sorted((p for p in sweep.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)):
        s, o = d / run_folder.SUMMARY, d / run_folder.HYDRA_OVERRIDES
        if s.is_file():
            over = yaml.safe_load(o.read_text()) if o.is_file() else []
            kv = dict(str(x).split("=", 1) for x in over or [] if "=" in str(x))
            out.append((kv, json.loads(s.read_text())))
    return out


def side_by_side(sweep: Path) -> list[dict[str, Any]]:
    """One row per job: the overrides that differ between jobs, then the costs (NaN-free floats as given)."""
    done = jobs(sweep)
    keys = varying(done)
    return [{**{k: kv.get(k, "") for k in keys}, **{c: s.get(c) for c, _ in COLS},
             "feasible": s.get("feasible")} for kv, s in done]


def varying(done: list[tuple[dict[str, str], dict[str, Any]]]) -> list[str]:
    """The override keys whose value differs between jobs: what the sweep compares."""
    return [k for k in dict.fromkeys(k for kv, _ in done for k in kv) if len({kv.get(k) for kv, _ in done}) > 1]


class SideBySide(Callback):
    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        from rich.console import Console
        from rich.table import Table

        sweep = Path(str(config.hydra.sweep.dir))
        rows = side_by_side(sweep) if sweep.is_dir() else []
        if len(rows) < 2:
            return
        t = Table(title=f"side by side: {len(rows)} jobs", title_justify="left")
        names = list(rows[0])
        heads = dict(COLS)
        for n in names:
            t.add_column(heads.get(n, n), justify="right" if n in heads else "left")
        for r in rows:
            t.add_row(*(f"{r[n]:.4g}" if isinstance(r[n], float) else str(r[n]) for n in names))
        Console().print(t)
        with open(sweep / run_folder.SIDE_BY_SIDE, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=names)
            w.writeheader()
            w.writerows(rows)
        Console().print(f"every job: {sweep / run_folder.SIDE_BY_SIDE}", highlight=False, soft_wrap=True)
