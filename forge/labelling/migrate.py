"""Open a store written before labels were keyed by protocol: table `forge_labels` (genome id only).

Each old row moves to `forge_labels_v2` under the fingerprint its provenance implies (real labels
record `protocol_config` and the corpus hash, so shipped cpu-proxy labels land under cpu-proxy's
fingerprint) or `unknown`; its status is derived (finite = done, "non-finite ..." = diverged, any other
inf = failed, so old timeouts and crashes are retried). The old table is then renamed
`forge_labels_v1`, in the same transaction, so the migration runs once even with many openers.
"""
from __future__ import annotations

from typing import Any, Callable

from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from forge.genomes.genome import genome_from_dict
from forge.genomes.labels import Label
from forge.labelling.rows import UNKNOWN, row_of
from forge.disk.io import loads

OLD, DONE = "forge_labels", "forge_labels_v1"


def _old_label(m: Any) -> Label:
    lab = float("inf") if m["label"] is None else float(m["label"])
    return Label(genome=genome_from_dict(loads(m["genome"])), label=lab,
                 provenance=loads(m["provenance"]), reason=m["reason"])


def migrate_v1(engine: Engine, upsert: Callable[[list[dict[str, Any]]], Any]) -> int:
    """Move old rows into the keyed table (once); returns how many moved (0 when there is nothing to do)."""
    try:
        if not inspect(engine).has_table(OLD):
            return 0
    except DBAPIError:
        return 0
    try:
        with engine.begin() as conn:
            if engine.dialect.name == "postgresql":
                conn.execute(text(f"LOCK TABLE {OLD} IN ACCESS EXCLUSIVE MODE"))
            elif not conn.execute(text("SELECT 1 FROM sqlite_master WHERE type='table' AND name=:n"),
                                  {"n": OLD}).first():
                return 0  # another opener migrated it while we waited for the lock
            rows = [r._mapping for r in conn.execute(text(f"SELECT * FROM {OLD}"))]
            for m in rows:
                lab = _old_label(m)
                conn.execute(upsert([row_of(lab, lab.protocol_fp or UNKNOWN, created=float(m["created"]))]))
            conn.execute(text(f"ALTER TABLE {OLD} RENAME TO {DONE}"))
        return len(rows)
    except DBAPIError:  # a concurrent opener renamed it first (PostgreSQL: LOCK on a missing table)
        return 0
