"""Issue 19 §1: a failure is not a result. Failed (crash, timeout, lost worker) vs diverged labels, retry
modes, labels keyed by protocol fingerprint (old stores and shipped files read as their protocol), claims
with a lease on SQLite and PostgreSQL, and labelling-side bad input."""
from __future__ import annotations

import json
import math
import sqlite3
import time
from dataclasses import asdict

import pytest
import yaml

from forge.runtime.config import conf_dir, data_dir
from forge.genomes.genome import GenomeError
from forge.genomes.labels import Label, LabelFileError, fingerprint, load_any, read_labels, write_labels
from forge.labelling.dispatch import DispatchError, LocalTrainer
from forge.labelling.store import LabelStore
from forge.labelling.store_db import StoreError
from forge.labelling.train import Protocol, protocol_fingerprint
from tests.forge.labelling._store_helpers import fake_labels, pg_url  # noqa: F401
from tests.forge.labelling._train_helpers import TINY_CORPUS, TINY_PROTOCOL, tiny_genomes

FAST = {**TINY_PROTOCOL, "tokens": 4 * 32 * 2, "val_tokens": 128}
SHIPPED = data_dir() / "labels" / "iha-tiny-cpu-proxy.jsonl"


def _local(store, **kw) -> LocalTrainer:
    return LocalTrainer(protocol=FAST, corpus=TINY_CORPUS, store=store, workers=2, poll_s=0.1, **kw)


@pytest.mark.slow
def test_failed_is_retried_with_count_and_reason_diverged_is_kept(tmp_path):
    a, b, c = tiny_genomes(3)
    store = LabelStore(tmp_path / "f.db")
    labs = _local(store, fault={"kind": "raise", "ids": [a.id]}).train([a, b])
    assert labs[0].status == "failed" and labs[1].status == "done"
    _local(store, fault={"kind": "diverge", "ids": [c.id]}).train([c])
    fp = _local(store).fingerprint()
    assert store.get(a.id, fp).attempts == 1 and "injected failure" in store.get(a.id, fp).reason
    assert store.get(c.id, fp).status == "diverged" and len(store) == 2  # b and c are results, a is not
    again: list[Label] = []
    labs = _local(store, on_label=again.append, fault={"kind": "hang", "ids": [a.id]}, timeout_s=1).train([a, b, c])
    assert [lab.genome_id for lab in again] == [a.id]  # only the failed one is trained again
    got = store.get(a.id, fp)
    assert got.status == "failed" and got.attempts == 2 and got.reason.startswith("timeout")  # the last reason
    assert labs[2].status == "diverged" and labs[2].label == math.inf
    fixed = _local(store, retry="failed").train([a, b, c])
    assert fixed[0].status == "done" and store.get(a.id, fp).attempts == 3 and len(store) == 3
    retried: list[Label] = []
    _local(store, retry="all", on_label=retried.append).train([a, b, c])
    assert [lab.genome_id for lab in retried] == [c.id] and store.get(c.id, fp).finite  # diverged retrained


def test_labels_are_keyed_by_protocol_fingerprint(tmp_path):
    g = tiny_genomes(1)[0]
    store = LabelStore(tmp_path / "p.db")
    small = _local(store)
    big = LocalTrainer(protocol={**FAST, "tokens": 2 * FAST["tokens"]}, corpus=TINY_CORPUS, store=store, poll_s=0.1)
    renamed = LocalTrainer(protocol={**FAST, "name": "other-name"}, corpus=TINY_CORPUS, store=store)
    other_corpus = LocalTrainer(protocol=FAST, corpus={**TINY_CORPUS, "max_bytes": 500_000}, store=store)
    assert small.fingerprint() == renamed.fingerprint()  # the name does not change a label
    assert len({small.fingerprint(), big.fingerprint(), other_corpus.fingerprint()}) == 3
    x, y = small.train([g])[0], big.train([g])[0]  # the second protocol is trained, not reused
    assert x.label != y.label and len(store) == 2
    assert store.get(g.id, small.fingerprint()).label == x.label and store.get(g.id, big.fingerprint()).label == y.label
    store.export_jsonl(tmp_path / "big.jsonl", protocol=big.fingerprint())
    back = list(read_labels(tmp_path / "big.jsonl"))
    assert [(lab.protocol_fp, lab.label) for lab in back] == [(big.fingerprint(), y.label)]
    store.export_jsonl(tmp_path / "all.jsonl")
    with pytest.raises(LabelFileError, match="2 protocols"):  # a consumer never mixes two objectives
        load_any(tmp_path / "all.jsonl")
    assert [lab.label for lab in load_any(tmp_path / "all.jsonl", protocol=small.fingerprint())[0]] == [x.label]


def test_shipped_labels_read_as_the_default_protocol():
    labs = list(read_labels(SHIPPED))
    conf = yaml.safe_load((conf_dir() / "protocol" / "cpu-proxy.yaml").read_text())
    want = fingerprint(asdict(Protocol.from_config(conf)), labs[0].provenance)  # shipped conf + their corpus
    assert {lab.protocol_fp for lab in labs} == {want} and {lab.status for lab in labs} == {"done"}
    assert len(load_any(SHIPPED)[0]) == len(labs) == len(load_any(SHIPPED, protocol=want)[0])


def _old_store(path, rows) -> None:
    """The store layout before protocol keys: table forge_labels, primary key genome_id."""
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE forge_labels (genome_id VARCHAR(32) PRIMARY KEY, genome TEXT NOT NULL, label FLOAT, "
                "reason TEXT NOT NULL, provenance TEXT NOT NULL, worker VARCHAR(200) NOT NULL, created FLOAT NOT NULL)")
    for i, lab in enumerate(rows):
        con.execute("INSERT INTO forge_labels VALUES (?,?,?,?,?,?,?)",
                    (lab.genome_id, lab.genome.to_json(), lab.label if lab.finite else None, lab.reason,
                     json.dumps(lab.provenance), "old:1", 1000.0 + i))
    con.commit()
    con.close()


def test_an_old_store_migrates_once_under_its_protocols(tmp_path):
    real = next(read_labels(SHIPPED))
    a, b = fake_labels(2)
    timeout = Label(a.genome, math.inf, {"protocol": "cpu-proxy"}, "timeout: no result after 2 s (killed)")
    diverged = Label(b.genome, math.inf, real.provenance, "non-finite training loss (nan) at step 3")
    _old_store(tmp_path / "old.db", [real, timeout, diverged])
    store = LabelStore(tmp_path / "old.db")
    got = {lab.genome_id: lab for lab in store.labels()}
    assert got[real.genome_id].protocol_fp == real.protocol_fp and got[real.genome_id].label == real.label
    assert got[b.genome.id].status == "diverged" and got[b.genome.id].protocol_fp == real.protocol_fp
    assert got[a.genome.id].status == "failed" and got[a.genome.id].protocol_fp == "unknown"
    assert len(store) == 2 and store.pending([real.genome, b.genome], real.protocol_fp) == []
    con = sqlite3.connect(tmp_path / "old.db")
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"forge_labels_v1", "forge_labels_v2"} <= tables and "forge_labels" not in tables
    assert len(list(LabelStore(tmp_path / "old.db").labels())) == 3  # reopening migrates nothing twice


class _Clock:
    """The store's clock, moved by hand: a lease lapses when the test says so, however slow the machine."""

    def __init__(self) -> None:
        self.now = time.time()

    def time(self) -> float:
        return self.now


def _claims(url: str, monkeypatch) -> None:
    import forge.labelling.store as store_mod

    clock = _Clock()
    monkeypatch.setattr(store_mod, "time", clock)
    monkeypatch.setattr(store_mod, "db_now", lambda dialect: clock.now)  # leases run on the database's clock
    g = fake_labels(1)[0].genome
    s1, s2 = LabelStore(url), LabelStore(url)
    t1 = s1.claim(g, "P", "p", lease_s=0.5)
    assert isinstance(t1, str) and s2.claim(g, "P", "p", lease_s=0.5) is None  # held: nobody else trains it
    assert s2.claim(g, "Q", "q", lease_s=0.5) not in (None,)  # another protocol is another key
    assert s1.renew([(g.id, "P", t1)], lease_s=0.5) == 1
    clock.now += 0.7  # the holder stops renewing (killed): its claim lapses
    t2 = s2.claim(g, "P", "p", lease_s=30)
    assert isinstance(t2, str) and s1.renew([(g.id, "P", t1)], 30) == 0
    late_failure = Label(g, math.inf, status="failed", reason="error: lost")
    assert not s1.finish(late_failure, "P", t1)  # a lapsed claim's failure never overwrites the new owner
    assert s1.finish(Label(g, 2.5), "P", t1)  # ... but its result is kept (nobody stored one yet)
    assert not s2.finish(Label(g, 9.9), "P", t2) and s2.get(g.id, "P").label == 2.5
    assert s2.claim(g, "P", "p") == s2.get(g.id, "P")  # a result: returned, not claimed
    assert [(c["running"], c["lapsed"]) for c in s2.counts() if c["protocol"] == "Q"] == [(0, 1)]
    h, d = fake_labels(3)[1:]
    s1.put(Label(h.genome, math.inf, reason="error: boom", status="failed"), "P")
    s1.put(Label(d.genome, math.inf, reason="non-finite training loss", status="diverged"), "P")
    assert s1.claim(h.genome, "P", retry="none").status == "failed"  # retry=none: kept as it is
    assert s1.claim(d.genome, "P", retry="failed").status == "diverged"  # a diverged label is a result
    t3 = s1.claim(h.genome, "P", retry="failed")
    assert isinstance(t3, str) and isinstance(s1.claim(d.genome, "P", retry="all"), str)
    s1.finish(Label(h.genome, math.inf, reason="error: again", status="failed"), "P", t3)
    again = s1.get(h.genome.id, "P")
    assert (again.status, again.attempts, again.reason) == ("failed", 1, "error: again")


def _claimer(url: str, k: int, q) -> None:
    genomes = [lab.genome for lab in fake_labels(40)]
    store = LabelStore(url)
    q.put([g.id for g in (genomes if k % 2 else genomes[::-1]) if isinstance(store.claim(g, "R", lease_s=60), str)])


def _racing_claims(url: str) -> None:
    """Four processes claim the same 40 genomes at once (two in each order, under a protocol nobody used
    yet): each genome is won exactly once."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_claimer, args=(url, k, q)) for k in range(4)]
    for p in procs:
        p.start()
    won = [gid for _ in procs for gid in q.get(timeout=120)]
    for p in procs:
        p.join(timeout=30)
    assert sorted(won) == sorted(lab.genome_id for lab in fake_labels(40))


def test_claims_and_leases_sqlite(tmp_path, monkeypatch):
    _claims(str(tmp_path / "c.db"), monkeypatch)
    _racing_claims(str(tmp_path / "c.db"))


def test_claims_and_leases_postgres(pg_url, monkeypatch):  # noqa: F811
    _claims(pg_url, monkeypatch)
    _racing_claims(pg_url)


def test_labelling_bad_input_is_a_value_error_naming_what_is_allowed(tmp_path):
    for bad in (0, -2, "2", 1.5, True):
        with pytest.raises(DispatchError, match="dispatch.workers .* allowed: a positive int"):
            LocalTrainer(protocol=FAST, corpus=TINY_CORPUS, workers=bad)
    with pytest.raises(DispatchError, match="retry = 'sometimes' is unknown; allowed: none | failed | all"):
        LocalTrainer(protocol=FAST, corpus=TINY_CORPUS, retry="sometimes")
    lab = fake_labels(1)[0]
    write_labels(tmp_path / "ok.jsonl", [lab, Label(lab.genome, math.inf, reason="x")])
    line = json.loads((tmp_path / "ok.jsonl").read_text().splitlines()[0])
    (tmp_path / "s.jsonl").write_text(json.dumps({**line, "label": "3.1"}) + "\n")
    with pytest.raises(LabelFileError, match=r"s.jsonl:1: .*label '3.1' is not a number; allowed: a JSON number"):
        list(read_labels(tmp_path / "s.jsonl"))
    from forge.labelling.cli import read_genomes

    with pytest.raises(GenomeError, match=r"s.jsonl:1"):
        read_genomes(tmp_path / "s.jsonl")
    assert [x.label for x in read_labels(tmp_path / "ok.jsonl")] == [lab.label, math.inf]
    assert issubclass(StoreError, ValueError) and issubclass(DispatchError, ValueError)
