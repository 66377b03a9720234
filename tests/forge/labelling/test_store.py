"""The label store: unique ids, transactions that survive kill -9, resume, concurrent writers
(SQLite WAL and a real PostgreSQL server), JSONL import/export."""
from __future__ import annotations

import math
import multiprocessing as mp
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from forge.genomes.labels import Label, read_labels
from forge.labelling.store import LabelStore
from forge.labelling.store_db import StoreError, normalize_url
from tests.forge.labelling._store_helpers import fake_labels, pg_url  # noqa: F401

N_WRITERS, PER_WRITER, STRIDE = 4, 30, 10  # writer k puts labels k*10 .. k*10+29 → 60 unique ids


def _writer(url: str, k: int, q) -> None:
    store = LabelStore(url)
    labs = fake_labels(N_WRITERS * STRIDE + PER_WRITER)[k * STRIDE:k * STRIDE + PER_WRITER]
    q.put(sum(store.put(lab) for lab in labs))  # one transaction per label


def _concurrent(url: str) -> None:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(url, k, q)) for k in range(N_WRITERS)]
    for p in procs:
        p.start()
    new = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    unique = (N_WRITERS - 1) * STRIDE + PER_WRITER
    store = LabelStore(url)
    stored = {lab.genome_id: lab for lab in store.labels()}
    assert sum(new) == unique == len(store) == len(stored)  # every id exactly once, no lost write
    want = {lab.genome_id: lab for lab in fake_labels(N_WRITERS * STRIDE + PER_WRITER)[:unique]}
    assert stored.keys() == want.keys()
    assert all(stored[i].label == want[i].label and stored[i].genome == want[i].genome for i in want)


def _roundtrip(url: str, tmp_path) -> None:
    store = LabelStore(url)
    a, b = fake_labels(2)
    bad = Label(b.genome, float("nan"), {"protocol": "fake"}, reason="diverged at step 3", status="diverged")
    assert store.put(a, "P") and not store.put(Label(a.genome, 9.0), "P")  # first result wins
    assert store.put(bad, "P")
    assert len(store) == 2 and store.get(a.genome_id, "P").label == a.label
    got = store.get(b.genome_id, "P")
    assert got.label == math.inf and got.reason == "diverged at step 3" and got.status == "diverged"
    assert store.pending([b.genome, a.genome], "P") == [] and store.get("0" * 16) is None
    # another protocol is another label: never reused, and asking without a protocol is ambiguous
    assert store.pending([a.genome], "Q") == [a.genome] and store.put(Label(a.genome, 3.0), "Q")
    assert store.get(a.genome_id, "Q").label == 3.0
    with pytest.raises(StoreError, match="2 protocols"):
        store.get(a.genome_id)
    path = tmp_path / "out.jsonl"
    assert store.export_jsonl(path, protocol="P") == 2
    assert store.export_jsonl(tmp_path / "fin.jsonl", finite_only=True, protocol="P") == 1
    back = {lab.genome_id: lab for lab in read_labels(path)}
    assert back[a.genome_id].provenance == a.provenance and back[b.genome_id].label == math.inf
    assert {lab.protocol_fp for lab in back.values()} == {"P"} and back[b.genome_id].status == "diverged"
    other = LabelStore(tmp_path / "other.db")
    assert other.import_jsonl(path) == (2, 0) and other.import_jsonl(path) == (0, 2)
    assert other.get(a.genome_id, "P").label == a.label


def test_sqlite_roundtrip_and_unique_ids(tmp_path):
    _roundtrip(str(tmp_path / "s.db"), tmp_path)
    con = sqlite3.connect(tmp_path / "s.db")
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_postgres_roundtrip_and_unique_ids(pg_url, tmp_path):  # noqa: F811
    _roundtrip(pg_url, tmp_path)


def test_sqlite_concurrent_writers(tmp_path):
    _concurrent(normalize_url(tmp_path / "c.db"))


def test_postgres_concurrent_writers(pg_url):  # noqa: F811
    _concurrent(pg_url)


def test_pending_keeps_order_and_drops_duplicates(tmp_path):
    labs = fake_labels(5)
    store = LabelStore(tmp_path / "p.db")
    store.put(labs[1])
    gs = [lab.genome for lab in labs]
    assert [g.id for g in store.pending(gs + [gs[0]])] == [gs[i].id for i in (0, 2, 3, 4)]


def test_store_pickles_by_url(tmp_path):
    import pickle

    store = LabelStore(tmp_path / "k.db")
    store.put(fake_labels(1)[0])
    clone = pickle.loads(pickle.dumps(store))
    assert clone.url == store.url and len(clone) == 1


def test_bad_urls_are_clear_errors(tmp_path):
    with pytest.raises(StoreError, match="driver is missing"):
        len(LabelStore("postgresql+nosuchdriver://u@h/db"))
    with pytest.raises(StoreError, match="'mysql' is not supported; allowed: a path"):
        len(LabelStore("mysql://u@h/db"))
    not_db = tmp_path / "notes.txt"
    not_db.write_text("these are my notes, not a database\n" * 200)
    with pytest.raises(StoreError, match=r"notes.txt.*file is not a database\); allowed: a path"):
        len(LabelStore(not_db))
    with pytest.raises(ValueError):  # the shared CLI wrapper turns ValueErrors into one line and exit 2
        len(LabelStore(tmp_path))
    with pytest.raises(StoreError, match="not a valid SQLAlchemy URL"):
        len(LabelStore("://nonsense"))
    assert normalize_url("x.db").startswith("sqlite:////")


def test_unreachable_server_is_a_clear_error():
    pytest.importorskip("psycopg", reason="the postgres extra")
    with pytest.raises(StoreError, match="cannot open the store"):
        len(LabelStore("postgresql+psycopg://u:p@127.0.0.1:1/db", timeout_s=3))


_KILL_SCRIPT = """
import sys, time
from forge.labelling.store import LabelStore
from tests.forge.labelling._store_helpers import fake_labels
store = LabelStore(sys.argv[1])
labs = fake_labels(int(sys.argv[2]))
todo = {g.id for g in store.pending([l.genome for l in labs])}
print("start", len(todo), flush=True)
for lab in labs:
    if lab.genome_id in todo:
        store.put(lab)
print("done", flush=True)
"""


def test_kill9_mid_write_then_resume(tmp_path):
    """kill -9 a writer at an arbitrary moment: the database stays intact, nothing written is lost,
    and a resumed writer finishes the rest without duplicates."""
    db, n = tmp_path / "k.db", 400
    script = tmp_path / "w.py"
    script.write_text(_KILL_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    p = subprocess.Popen([sys.executable, str(script), str(db), str(n)], env=env, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().startswith("start")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        con = sqlite3.connect(db, timeout=30)
        c = con.execute("SELECT count(*) FROM forge_labels_v2 WHERE status IN ('done','diverged')").fetchone()[0]
        con.close()
        if c >= 20:
            break
        time.sleep(0.05)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    assert p.returncode == -signal.SIGKILL
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    store = LabelStore(db)
    before = {lab.genome_id: lab.label for lab in store.labels()}
    assert 20 <= len(before) < n  # killed mid-run, every committed row readable
    r = subprocess.run([sys.executable, str(script), str(db), str(n)], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and f"start {n - len(before)}" in r.stdout
    after = {lab.genome_id: lab.label for lab in store.labels()}
    assert len(after) == len(store) == n and all(after[k] == v for k, v in before.items())
