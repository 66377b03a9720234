"""`forge-search -m ...`: after the sweep, one table of its jobs (what varies, status, front size, hypervolume,
folder) and the `next:` report over them all. Every launcher's jobs end here, on the driver: the submitit and
Ray launchers run each job's last screen elsewhere (submitit's log files; Ray's forwarded, prefixed lines).

A Hydra callback (conf/forge-search.yaml's `hydra.callbacks.sweep_end`), reading the summary.json and
`.hydra/overrides.yaml` each job wrote under the sweep folder.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

from backends.side_by_side import jobs, varying


class SweepEnd(Callback):
    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        from rich.console import Console
        from rich.table import Table

        from search.suggest import print_commands, quote, rel

        sweep = Path(str(config.hydra.sweep.dir))
        done = jobs(sweep) if sweep.is_dir() else []
        if not done:
            return
        keys = varying(done)
        t = Table(title=f"sweep: {len(done)} jobs in {rel(sweep)}", title_justify="left")
        for h in (*keys, "status", "front", "hypervolume", "run folder"):
            t.add_column(h, justify="right" if h in ("front", "hypervolume") else "left")
        for kv, s in done:
            hv = s.get("hypervolume")
            t.add_row(*(kv.get(k, "") for k in keys), str(s.get("status", "?")), str(s.get("archive_size", "?")),
                      f"{hv:.4f}" if isinstance(hv, (int, float)) else "?", rel(s.get("run_dir") or "?"))
        console = Console()
        console.print(t)
        print_commands(console, "next", [f"forge-report runs={quote(rel(sweep))}"])
