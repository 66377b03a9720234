"""The database behind a label store's URL: the table, the engine (SQLite in WAL mode with a lock wait, or
PostgreSQL) and the check that refuses, before writing anything, a database that is not a label store.

Its own module because opening and checking a database is a concern apart from the store's label operations
(claim, renew, finish, reads) in forge.labelling.store, which only asks this module for an engine.
"""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any, Callable

from sqlalchemy import Column, Float, Integer, MetaData, String, Table, Text, create_engine, event, inspect
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError

from forge.disk.redact import mask
from forge.errors import ForgeError

ALLOWED_URLS = "a path (SQLite file), sqlite:///file.db or postgresql+psycopg://user@host/db"


class StoreError(ForgeError):
    """A store URL that cannot be opened, a file that is not a database, or a missing driver."""


META = MetaData()
labels_table = Table(
    "forge_labels_v2", META,
    Column("genome_id", String(32), primary_key=True),
    Column("protocol", String(32), primary_key=True),      # fingerprint (forge.genomes.labels.fingerprint)
    Column("protocol_name", String(200), nullable=False, default=""),
    Column("genome", Text, nullable=False),
    Column("status", String(16), nullable=False),          # running | done | diverged | failed
    Column("label", Float, nullable=True),                 # NULL = inf (non-finite never reaches the database)
    Column("reason", Text, nullable=False, default=""),
    Column("attempts", Integer, nullable=False, default=0),
    Column("provenance", Text, nullable=False, default="{}"),
    Column("worker", String(200), nullable=False, default=""),
    Column("owner", String(40), nullable=False, default=""),  # token of the live claim
    Column("lease_until", Float, nullable=True),
    Column("created", Float, nullable=False),
    Column("updated", Float, nullable=False),
)
T = labels_table.c


def normalize_url(url: str | os.PathLike) -> str:
    """A bare path means a SQLite file; anything with `://` is an SQLAlchemy URL."""
    s = str(url)
    if "://" in s:
        return s
    return f"sqlite:///{Path(s).expanduser().resolve()}"


def _sqlite_pragmas(timeout_s: float) -> Callable[[Any, Any], None]:
    def on_connect(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (below) so the lock wait is honoured
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=FULL")
        cur.close()

    return on_connect


def make_engine(url: str, timeout_s: float) -> Engine:
    try:
        u = make_url(url)
    except ArgumentError as e:
        raise StoreError(f"store URL {mask(url)!r} is not a valid SQLAlchemy URL ({e}); allowed: {ALLOWED_URLS}") from None
    try:
        if u.get_backend_name() == "sqlite":
            if u.database and u.database != ":memory:":
                Path(u.database).parent.mkdir(parents=True, exist_ok=True)
            eng = create_engine(u, connect_args={"timeout": timeout_s})
            event.listen(eng, "connect", _sqlite_pragmas(timeout_s))
            event.listen(eng, "begin", lambda conn: conn.exec_driver_sql("BEGIN IMMEDIATE"))
            event.listen(eng, "handle_error", _corrupt_file(u.database or ""))
            return eng
        if u.get_backend_name() != "postgresql":
            raise StoreError(f"store URL {mask(url)!r}: database {u.get_backend_name()!r} is not "
                             f"supported; allowed: {ALLOWED_URLS}")
        return create_engine(u, connect_args={"connect_timeout": int(timeout_s)}, pool_pre_ping=True)
    except (NoSuchModuleError, ModuleNotFoundError, ImportError) as e:
        raise StoreError(f"store URL {mask(url)!r}: its database driver is missing ({e}); for "
                         "PostgreSQL install the extra: pip install -e '.[postgres]' in the Forge clone") from None


def cannot_open(who: str, detail: str) -> StoreError:
    """The one line for a store that cannot be opened: a full disk or an I/O error is said as such (its URL is
    fine), anything else with the URLs a store may have."""
    low = detail.lower()
    if "full" in low or "i/o error" in low or "no space" in low:
        return StoreError(f"{who}: cannot write the store ({detail}); allowed: free some disk space (or check the "
                          "disk), then run the command again (stored labels are kept)")
    return StoreError(f"{who}: cannot open the store ({detail}); allowed: {ALLOWED_URLS}")


def _corrupt_file(db: str) -> Callable[[Any], None]:
    """SQLAlchemy's error hook: a SQLite file found damaged on a read or write (`database disk image is
    malformed`, `file is not a database`, a full disk) is bad input in one line, not a DatabaseError traceback."""
    def on_error(context: Any) -> None:
        e = context.original_exception
        text = str(e).strip()
        if isinstance(e, sqlite3.DatabaseError) and any(w in text for w in ("malformed", "not a database")):
            raise StoreError(f"{db}: a damaged SQLite label store ({text}); allowed: a store Forge wrote (restore it "
                             "from a copy, or label into a new store=)") from None
        if isinstance(e, sqlite3.OperationalError) and ("full" in text or "I/O error" in text):
            raise cannot_open(db, text) from None
    return on_error


def open_engine(url: str, timeout_s: float, who: str) -> Engine:
    """An engine on a label store: the database refused in one line unless it is (or can become) a store, and
    the table created where it is missing. A refused SQLite file gets no `-wal`/`-shm` files left beside it."""
    engine = make_engine(url, timeout_s)
    db = engine.url.database if engine.dialect.name == "sqlite" and engine.url.database != ":memory:" else None
    before = {p for p in _sidecars(db) if p.exists()}
    try:
        check_schema(engine, who)
        try:
            META.create_all(engine, checkfirst=True)
        except DBAPIError as e:  # e.g. another process created the table at the same moment
            if not _has_table(engine):
                raise cannot_open(who, str(e.orig).strip()) from None
    except StoreError:
        engine.dispose()
        for p in set(_sidecars(db)) - before:
            p.unlink(missing_ok=True)
        raise
    return engine


def _sidecars(db: str | None) -> list[Path]:
    return [Path(f"{db}{s}") for s in ("-wal", "-shm", "-journal")] if db else []


def check_schema(engine: Engine, who: str) -> None:
    """Refuse, before writing anything, a database that is not a label store: our table with other columns,
    or a SQLite file holding only someone else's tables (Forge would add its table to it)."""
    from forge.labelling.migrate import DONE, OLD

    try:
        names, columns = _tables(engine)
        if labels_table.name in names:
            missing = sorted(set(T.keys()) - columns(labels_table.name))
            if missing:
                raise StoreError(f"{who}: table {labels_table.name} lacks column(s) {', '.join(missing)}; allowed: a "
                                 f"Forge label store ({ALLOWED_URLS})")
        elif engine.dialect.name == "sqlite" and names - {OLD, DONE}:
            raise StoreError(f"{who}: a SQLite database with other tables ({', '.join(sorted(names)[:5])}), not a "
                             f"Forge label store; allowed: {ALLOWED_URLS} (a new or a Forge file)")
    except DBAPIError as e:
        raise cannot_open(who, str(e.orig).strip()) from None
    except sqlite3.DatabaseError as e:
        raise cannot_open(who, str(e)) from None


def _tables(engine: Engine) -> tuple[set[str], Callable[[str], set[str]]]:
    """Table names and a column lookup; an existing SQLite file is read through a read-only connection, so a
    refused file keeps its bytes and mtime (the engine's first connection would switch it to WAL)."""
    db = engine.url.database if engine.dialect.name == "sqlite" else None
    if db and db != ":memory:" and Path(db).is_file() and Path(db).stat().st_size:
        con = sqlite3.connect(f"{Path(db).resolve().as_uri()}?mode=ro", uri=True)
        try:
            names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            cols = {n: {r[1] for r in con.execute(f'PRAGMA table_info("{n}")')} for n in names}
        finally:
            con.close()
        return names, lambda n: cols.get(n, set())
    insp = inspect(engine)
    return set(insp.get_table_names()), lambda n: {c["name"] for c in insp.get_columns(n)}


def _has_table(engine: Engine) -> bool:
    try:
        return inspect(engine).has_table(labels_table.name)
    except DBAPIError:
        return False
