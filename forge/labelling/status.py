"""`forge-label status`: what a store holds, per protocol — done / diverged / failed / running claims —
and the last reasons of failed genomes (the ones the next run retries)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig
from sqlalchemy import select
from sqlalchemy.engine import make_url

from forge.runtime.config import to_container
from forge.labelling.store import LabelStore
from forge.labelling.store_db import StoreError, labels_table

T = labels_table.c


def failures(store: LabelStore, protocol: str, limit: int = 5) -> list[dict[str, Any]]:
    """The most recently failed genomes of one protocol: id, attempts so far, last reason."""
    q = (select(T.genome_id, T.attempts, T.reason).where(T.protocol == protocol, T.status == "failed")
         .order_by(T.updated.desc()).limit(limit))
    with store.engine.connect() as conn:
        return [{"genome_id": g, "attempts": int(a), "reason": r[:200]} for g, a, r in conn.execute(q)]


def _configured_fp(cfg: DictConfig) -> str:
    """The fingerprint of the protocol/corpus in the config ("" when they do not build)."""
    from forge.labelling.train import protocol_fingerprint

    try:
        return protocol_fingerprint(to_container(cfg.protocol), to_container(cfg.corpus))
    except (ValueError, OSError):
        return ""


def status(cfg: DictConfig) -> dict[str, Any]:
    """Count a store's rows per protocol and print them as a table on stderr; returns the same as a dict."""
    store = LabelStore(cfg.store)
    u = make_url(store.url)
    if u.get_backend_name() == "sqlite" and u.database and not Path(u.database).is_file():
        raise StoreError(f"store={u.database}: no such label store (status never creates one); "
                         "allowed: an existing SQLite file or a PostgreSQL URL")
    rows = store.counts()
    current = _configured_fp(cfg)
    for r in rows:
        r["configured"] = r["protocol"] == current
        r["last_failures"] = failures(store, r["protocol"]) if r["failed"] else []
    _print(store, rows)
    return {"store": str(store), "configured_protocol_fp": current, "protocols": rows}


def _print(store: LabelStore, rows: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"label store {where(store)}")
    for col in ("protocol", "fingerprint", "done", "diverged", "failed", "stopped", "running", "lapsed", "attempts"):
        table.add_column(col, justify="left" if col in ("protocol", "fingerprint") else "right", no_wrap=True)
    for r in rows:
        name = r["name"] + (" (configured)" if r["configured"] else "")
        table.add_row(name, r["protocol"], *(str(r[k]) for k in ("done", "diverged", "failed", "stopped", "running",
                                                                 "lapsed", "attempts")))
    console = Console(stderr=True, width=None if sys.stderr.isatty() else 120)  # a log keeps the full table
    console.print(table)
    for r in rows:
        for f in r["last_failures"]:
            console.print(f"failed {r['name']}/{f['genome_id']} after {f['attempts']} attempt(s): {f['reason']}")
    if any(r["stopped"] for r in rows):
        console.print("stopped genomes are partial labels (inf, never final): forge-label without stop.rule continues "
                      "them from their rung checkpoints")
    if any(r["failed"] for r in rows):
        console.print("failed genomes are trained again by the next forge-label run (retry=failed, the default)")


def where(store: LabelStore) -> str:
    """The store as a user types it: a SQLite file relative to the working folder (when under it), else the
    file's path, else the URL with its password masked."""
    from forge.disk.redact import mask

    if not store.url.startswith("sqlite:///"):
        return mask(store.url)
    path = Path(store.url[len("sqlite:///"):])
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
