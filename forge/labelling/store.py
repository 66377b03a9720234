"""The label store: one database reached through one URL (the way Optuna's storage works).

- embedded default: a SQLite file in WAL mode (`sqlite:///labels.db`, or just a path);
- clusters: any SQLAlchemy URL, e.g. `postgresql+psycopg://user@host/db` (the `postgres` extra).

Guarantees: the genome id is the primary key (a duplicate is impossible: first write wins, later
ones are skipped); every write is its own committed transaction (synchronous=FULL on SQLite), so a
`kill -9` at any moment loses at most the label being written and resuming skips what is done; many
processes on many hosts may write at once (SQLite waits on its lock up to `timeout_s`; PostgreSQL
uses INSERT ... ON CONFLICT DO NOTHING). Import/export speak the shared JSONL label format.
"""
from __future__ import annotations

import json
import math
import os
import platform
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from sqlalchemy import Column, Float, MetaData, String, Table, Text, create_engine, event, func, inspect, select
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError

from forge.genome import Genome, genome_from_dict
from forge.labels import Label, read_labels, write_labels


class StoreError(RuntimeError):
    """A store URL that cannot be opened, or a driver that is missing."""


_meta = MetaData()
labels_table = Table(
    "forge_labels", _meta,
    Column("genome_id", String(32), primary_key=True),
    Column("genome", Text, nullable=False),
    Column("label", Float, nullable=True),  # NULL = inf (non-finite never reaches the database)
    Column("reason", Text, nullable=False, default=""),
    Column("provenance", Text, nullable=False, default="{}"),
    Column("worker", String(200), nullable=False, default=""),
    Column("created", Float, nullable=False),
)


def normalize_url(url: str | os.PathLike) -> str:
    """A bare path means a SQLite file; anything with `://` is an SQLAlchemy URL."""
    s = str(url)
    if "://" in s:
        return s
    return f"sqlite:///{Path(s).expanduser().resolve()}"


def _sqlite_pragmas(timeout_s: float):
    def on_connect(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (below) so the lock wait is honoured
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=FULL")
        cur.close()

    return on_connect


def _make_engine(url: str, timeout_s: float) -> Engine:
    try:
        u = make_url(url)
    except ArgumentError as e:
        raise StoreError(f"store URL {url!r} is not a valid SQLAlchemy URL ({e}); allowed: a path, "
                         "sqlite:///file.db or postgresql+psycopg://user@host/db") from None
    try:
        if u.get_backend_name() == "sqlite":
            if u.database and u.database != ":memory:":
                Path(u.database).parent.mkdir(parents=True, exist_ok=True)
            eng = create_engine(u, connect_args={"timeout": timeout_s})
            event.listen(eng, "connect", _sqlite_pragmas(timeout_s))
            event.listen(eng, "begin", lambda conn: conn.exec_driver_sql("BEGIN IMMEDIATE"))
            return eng
        args = {"connect_timeout": int(timeout_s)} if u.get_backend_name() == "postgresql" else {}
        return create_engine(u, connect_args=args, pool_pre_ping=True)
    except (NoSuchModuleError, ModuleNotFoundError, ImportError) as e:
        raise StoreError(f"store URL {u.render_as_string()!r}: its database driver is missing ({e}); for "
                         "PostgreSQL install the extra: pip install 'forge-nas[postgres]'") from None


def _insert(dialect: str):
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    elif dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        return None
    return insert


class LabelStore:
    """Labels keyed by genome id in a database; picklable (carries only the URL) for worker processes."""

    def __init__(self, url: str | os.PathLike, timeout_s: float = 60.0) -> None:
        self.url, self.timeout_s = normalize_url(url), float(timeout_s)
        self._engine: Engine | None = None
        self._pid = -1

    def __getstate__(self) -> dict[str, Any]:
        return {"url": self.url, "timeout_s": self.timeout_s}

    def __setstate__(self, d: dict[str, Any]) -> None:
        self.__init__(d["url"], d["timeout_s"])

    def __repr__(self) -> str:
        return f"LabelStore({make_url(self.url).render_as_string()!r})"

    @property
    def engine(self) -> Engine:
        """One engine per process (a forked child never reuses its parent's connections)."""
        if self._engine is None or self._pid != os.getpid():
            self._engine, self._pid = _make_engine(self.url, self.timeout_s), os.getpid()
            try:
                _meta.create_all(self._engine, checkfirst=True)
            except DBAPIError as e:  # e.g. another process created the table at the same moment
                if not _has_table(self._engine):
                    raise StoreError(f"{self!r}: cannot open the store ({e.orig})") from None
        return self._engine

    # ------------------------------------------------------------------ writes
    def put(self, label: Label) -> bool:
        """Insert one label in its own transaction; False if this genome id was already stored."""
        return self.put_many([label]) == 1

    def put_many(self, labels: Iterable[Label]) -> int:
        """Insert labels (one transaction for the batch); returns how many were new."""
        rows = [_row(lab) for lab in labels]
        if not rows:
            return 0
        ins = _insert(self.engine.dialect.name)
        with self.engine.begin() as conn:
            if ins is not None:  # count via RETURNING: psycopg reports rowcount -1 here
                stmt = (ins(labels_table).on_conflict_do_nothing(index_elements=["genome_id"])
                        .returning(labels_table.c.genome_id))
                return sum(len(conn.execute(stmt, r).all()) for r in rows)
            new = 0  # other databases: one by one, skipping existing ids
            for r in rows:
                if conn.execute(select(labels_table.c.genome_id).where(labels_table.c.genome_id == r["genome_id"])).first():
                    continue
                conn.execute(labels_table.insert().values(r))
                new += 1
            return new

    # ------------------------------------------------------------------- reads
    def __len__(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(labels_table)).scalar_one())

    def __contains__(self, genome_id: object) -> bool:
        return isinstance(genome_id, str) and self.get(genome_id) is not None

    def get(self, genome_id: str) -> Label | None:
        with self.engine.connect() as conn:
            r = conn.execute(select(labels_table).where(labels_table.c.genome_id == genome_id)).first()
        return _label(r) if r is not None else None

    def done_ids(self) -> set[str]:
        with self.engine.connect() as conn:
            return {r[0] for r in conn.execute(select(labels_table.c.genome_id))}

    def pending(self, genomes: Sequence[Genome]) -> list[Genome]:
        """Genomes not yet labelled, first occurrence of each id only, order kept (resume)."""
        done, seen, out = self.done_ids(), set(), []
        for g in genomes:
            if g.id not in done and g.id not in seen:
                seen.add(g.id)
                out.append(g)
        return out

    def labels(self) -> Iterator[Label]:
        """Every stored label in insertion-time order (then id, for ties)."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(labels_table).order_by(labels_table.c.created, labels_table.c.genome_id)).all()
        return iter([_label(r) for r in rows])

    # ------------------------------------------------------------ JSONL I/O
    def export_jsonl(self, path: str | Path, finite_only: bool = False) -> int:
        labs = [lab for lab in self.labels() if lab.finite or not finite_only]
        return write_labels(path, labs)

    def import_jsonl(self, path: str | Path) -> tuple[int, int]:
        """(new, already present) after importing a JSONL label file."""
        labs = list(read_labels(path))
        new = self.put_many(labs)
        return new, len(labs) - new

    def dispose(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None


def _has_table(engine: Engine) -> bool:
    try:
        return inspect(engine).has_table(labels_table.name)
    except DBAPIError:
        return False


def _row(lab: Label) -> dict[str, Any]:
    return {"genome_id": lab.genome_id, "genome": lab.genome.to_json(),
            "label": lab.label if math.isfinite(lab.label) else None,
            "reason": lab.reason or ("" if math.isfinite(lab.label) else "non-finite label"),
            "provenance": json.dumps(lab.provenance, sort_keys=True, default=str),
            "worker": f"{platform.node()}:{os.getpid()}", "created": time.time()}


def _label(r: Any) -> Label:
    m = r._mapping
    lab = float("inf") if m["label"] is None else float(m["label"])
    return Label(genome=genome_from_dict(json.loads(m["genome"])), label=lab,
                 provenance=json.loads(m["provenance"]), reason=m["reason"])
