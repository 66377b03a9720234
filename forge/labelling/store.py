"""The label store: one database reached through one URL (the way Optuna's storage works).

- embedded default: a SQLite file in WAL mode (`sqlite:///labels.db`, or just a path);
- clusters: a PostgreSQL URL, e.g. `postgresql+psycopg://user@host/db` (the `postgres` extra).

A row is keyed by (genome id, protocol fingerprint), so labels made under another protocol, budget or
corpus are never reused. Its status is `running` (claimed: a lease with an expiry), `done`, `diverged`
(a NaN loss: a real outcome, kept) or `failed` (timeout, crash, lost worker, config error: not a
result, claimable again by the next run; `attempts` counts tries and `reason` keeps the last one).
Claiming is one atomic upsert, so two labellers on one store never train the same genome while the
lease lives; a killed labeller stops renewing and its claims lapse. Every write is its own committed
transaction (synchronous=FULL on SQLite), so a `kill -9` loses at most the genome being trained.
Stores from before the fingerprint (table `forge_labels`) are migrated on open (`forge.labelling.migrate`).
Opening the database behind the URL (engine, table, refusing a file that is not a store) is
`forge.labelling.store_db`.
"""
from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from sqlalchemy import Float, and_, cast, extract, func, or_, select, update
from sqlalchemy.engine import Engine

from forge.genomes.genome import Genome
from forge.genomes.labels import Label, read_labels, write_labels
from forge.disk.redact import mask
from forge.labelling.rows import UNKNOWN, label_of, row_of, worker_name
from forge.labelling.store_db import T, StoreError, labels_table, normalize_url, open_engine

RESULTS = ("done", "diverged")           # a label: never retrained
PARTIAL = "stopped"                      # a training the stopping rule ended at a rung: continued by a promotion
KEPT = (*RESULTS, "failed", PARTIAL)     # every settled row (not a live claim)
RETRY = {"none": (), "failed": ("failed",), "all": ("failed", "diverged")}


def _insert(dialect: str):
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    else:
        from sqlalchemy.dialects.postgresql import insert
    return insert


def db_now(dialect: str):
    """The database's clock in epoch seconds: every lease is set and compared on one clock, never a client's
    (a node whose clock runs ahead would otherwise take over live claims)."""
    if dialect == "sqlite":
        return (func.julianday("now") - 2440587.5) * 86400.0
    return cast(extract("epoch", func.clock_timestamp()), Float)


def _key(genome_id: str, protocol: str):
    return and_(T.genome_id == genome_id, T.protocol == protocol)


class LabelStore:
    """Labels keyed by (genome id, protocol fingerprint); picklable (carries only the URL) for workers."""

    def __init__(self, url: str | os.PathLike, timeout_s: float = 60.0) -> None:
        self.url, self.timeout_s = normalize_url(url), float(timeout_s)
        self._engine: Engine | None = None
        self._pid = -1

    def __getstate__(self) -> dict[str, Any]:
        return {"url": self.url, "timeout_s": self.timeout_s}

    def __setstate__(self, d: dict[str, Any]) -> None:
        self.__init__(d["url"], d["timeout_s"])

    def __repr__(self) -> str:
        return f"LabelStore({mask(self.url)!r})"

    @property
    def engine(self) -> Engine:
        """One engine per process (a forked child never reuses its parent's connections)."""
        if self._engine is None or self._pid != os.getpid():
            self._engine, self._pid = open_engine(self.url, self.timeout_s, repr(self)), os.getpid()
            from forge.labelling.migrate import migrate_v1

            migrate_v1(self._engine, self._upsert_stmt)
        return self._engine

    # ------------------------------------------------------------------ writes
    def _upsert_stmt(self, rows: list[dict[str, Any]]):
        """Insert, or overwrite a row that holds no result (failed, or a lapsed claim)."""
        ins = _insert(self.engine.dialect.name)(labels_table).values(rows)
        now = db_now(self.engine.dialect.name)
        free = or_(T.status.in_(("failed", PARTIAL)), and_(T.status == "running", T.lease_until < now))
        cols = ("genome", "status", "label", "reason", "provenance", "worker", "protocol_name", "updated")
        return ins.on_conflict_do_update(index_elements=["genome_id", "protocol"], where=free,
                                         set_={c: ins.excluded[c] for c in cols}).returning(T.genome_id)

    def put(self, label: Label, protocol: str | None = None) -> bool:
        """Store one label (its own transaction); False if a result was already stored for its key."""
        return self.put_many([label], protocol) == 1

    def put_many(self, labels: Iterable[Label], protocol: str | None = None) -> int:
        """Store labels under `protocol` (default: each label's own fingerprint); returns how many were written."""
        rows = [row_of(lab, protocol or lab.protocol_fp or UNKNOWN) for lab in labels]
        with self.engine.begin() as conn:
            return sum(len(conn.execute(self._upsert_stmt([r])).all()) for r in rows)

    def claim(self, genome: Genome, protocol: str, name: str = "", lease_s: float = 60.0,
              retry: str = "failed", promote: bool = False) -> str | Label | None:
        """Claim a genome before training it: a token when claimed, the stored Label when a result exists
        (not retried), None while another worker's lease lives. A `stopped` row is claimed only to
        `promote` it (continue its training from its checkpoint); otherwise it is returned as stored."""
        now, token = db_now(self.engine.dialect.name), uuid.uuid4().hex
        row = {**row_of(Label(genome, float("inf"), status="failed"), protocol), "status": "running",
               "protocol_name": name, "owner": token, "lease_until": now + lease_s, "attempts": 1, "reason": ""}
        ins = _insert(self.engine.dialect.name)(labels_table).values(row)
        again = (*RETRY[retry], PARTIAL) if promote else RETRY[retry]
        free = or_(T.status.in_(again), and_(T.status == "running", T.lease_until < now))
        stmt = ins.on_conflict_do_update(
            index_elements=["genome_id", "protocol"], where=free,
            set_={"status": "running", "owner": token, "lease_until": now + lease_s, "attempts": T.attempts + 1,
                  "worker": row["worker"], "updated": time.time(), "protocol_name": name}).returning(T.genome_id)
        with self.engine.begin() as conn:
            if conn.execute(stmt).first():
                return token
            r = conn.execute(select(labels_table).where(_key(genome.id, protocol))).first()
        return None if r is None or r._mapping["status"] == "running" else label_of(r)

    def renew(self, claims: Sequence[tuple[str, str, str]], lease_s: float) -> int:
        """Extend live claims [(genome id, protocol, token)]; returns how many are still ours."""
        if not claims:
            return 0
        n, until = 0, db_now(self.engine.dialect.name) + lease_s
        with self.engine.begin() as conn:
            for gid, fp, token in claims:
                n += conn.execute(update(labels_table).where(_key(gid, fp), T.owner == token, T.status == "running")
                                  .values(lease_until=until)).rowcount
        return n

    def count_attempt(self, genome_id: str, protocol: str, token: str) -> bool:
        """One more try of a genome we hold (a lost worker retried, a job resubmitted): `attempts` counts
        every try, not only claims. False when the claim is no longer ours."""
        with self.engine.begin() as conn:
            return conn.execute(update(labels_table).where(_key(genome_id, protocol), T.owner == token,
                                                           T.status == "running")
                                .values(attempts=T.attempts + 1)).rowcount > 0

    def finish(self, label: Label, protocol: str, token: str) -> bool:
        """Store the outcome of a claimed genome. A result whose claim lapsed is still kept when nobody
        stored one meanwhile; a failure whose claim lapsed is dropped (the new owner is training it)."""
        r = row_of(label, protocol)
        vals = {k: r[k] for k in ("genome", "status", "label", "reason", "provenance", "worker", "updated")}
        vals.update(owner="", lease_until=None)
        with self.engine.begin() as conn:
            n = conn.execute(update(labels_table).where(_key(label.genome_id, protocol), T.owner == token,
                                                        T.status == "running").values(vals)).rowcount
            if n == 0 and label.status in (*RESULTS, PARTIAL):
                n = conn.execute(update(labels_table).where(_key(label.genome_id, protocol),
                                                            T.status.in_(("running", "failed", PARTIAL)))
                                 .values(vals)).rowcount
        return n > 0

    # ------------------------------------------------------------------- reads
    def _rows(self, protocol: str | None, statuses: Sequence[str], genome_id: str | None = None) -> list[Label]:
        q = select(labels_table).where(T.status.in_(tuple(statuses)))
        if protocol is not None:
            q = q.where(T.protocol == protocol)
        if genome_id is not None:
            q = q.where(T.genome_id == genome_id)
        with self.engine.connect() as conn:
            return [label_of(r) for r in conn.execute(q.order_by(T.created, T.genome_id, T.protocol))]

    def __len__(self) -> int:
        """Results stored (done + diverged), all protocols."""
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(labels_table)
                                    .where(T.status.in_(RESULTS))).scalar_one())

    def __contains__(self, genome_id: object) -> bool:
        return isinstance(genome_id, str) and bool(self._rows(None, RESULTS, genome_id))

    def get(self, genome_id: str, protocol: str | None = None) -> Label | None:
        """The stored label (any status but running) of a genome under `protocol`; without one, the only
        protocol that has it (several is an error: labels of different protocols never stand in for each other)."""
        rows = self._rows(protocol, KEPT, genome_id)
        if len(rows) > 1:
            raise StoreError(f"genome {genome_id} has labels under {len(rows)} protocols "
                             f"({', '.join(r.protocol_fp for r in rows)}); allowed: ask for one protocol")
        return rows[0] if rows else None

    def done_ids(self, protocol: str | None = None) -> set[str]:
        return {lab.genome_id for lab in self._rows(protocol, RESULTS)}

    def pending(self, genomes: Sequence[Genome], protocol: str | None = None) -> list[Genome]:
        """Genomes without a result (failed ones included), first occurrence of each id, order kept."""
        done, seen, out = self.done_ids(protocol), set(), []
        for g in genomes:
            if g.id not in done and g.id not in seen:
                seen.add(g.id)
                out.append(g)
        return out

    def labels(self, protocol: str | None = None, statuses: Sequence[str] = KEPT) -> Iterator[Label]:
        """Stored labels in insertion-time order (then id), optionally of one protocol; partial (`stopped`)
        ones carry an inf label, so every consumer that keeps finite labels drops them."""
        return iter(self._rows(protocol, statuses))

    def counts(self) -> list[dict[str, Any]]:
        """Per protocol: its name and how many rows are done / diverged / failed / running (live or lapsed)."""
        lapsed = (T.lease_until < db_now(self.engine.dialect.name)).label("lapsed")
        q = select(T.protocol, T.protocol_name, T.status, lapsed, func.count(), func.sum(T.attempts))
        with self.engine.connect() as conn:
            rows = conn.execute(q.group_by(T.protocol, T.protocol_name, T.status, lapsed)).all()
        out: dict[str, dict[str, Any]] = {}
        for fp, name, status, lapsed, n, att in rows:
            d = out.setdefault(fp, {"protocol": fp, "name": "", "done": 0, "diverged": 0, "failed": 0,
                                    "running": 0, "lapsed": 0, "stopped": 0, "attempts": 0})
            d["name"] = d["name"] or name
            d["lapsed" if status == "running" and lapsed else status] += int(n)
            d["attempts"] += int(att or 0)
        return sorted(out.values(), key=lambda d: (d["name"], d["protocol"]))

    # ------------------------------------------------------------ JSONL I/O
    def export_jsonl(self, path: str | Path, finite_only: bool = False, protocol: str | None = None) -> int:
        """Write the store (or one protocol of it) as JSONL; each line carries `protocol_fp` and `status`."""
        labs = [lab for lab in self.labels(protocol) if lab.finite or not finite_only]
        return write_labels(path, labs)

    def import_jsonl(self, path: str | Path) -> tuple[int, int]:
        """(new, already present) after importing a JSONL label file (each line keeps its own protocol)."""
        labs = list(read_labels(path))
        new = self.put_many(labs)
        return new, len(labs) - new

    def dispose(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None


__all__ = ["LabelStore", "KEPT", "PARTIAL", "RESULTS", "RETRY", "worker_name"]
