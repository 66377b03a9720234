"""Issue 34 §2: a crash never leaves a silently short archive (search.ledger).

A power loss can keep a checkpoint whose logs lost their tail (the runner fsyncs every few seconds). Simulated
here: a run stopped at generation 4 whose last durable checkpoint is generation 2's, then each covered log cut or
torn at random points. Behind the durable checkpoint the resume recomputes the lost generations and ends with
exactly the uninterrupted run's files; inside what the durable checkpoint covers it refuses in one line and
changes nothing.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from search.ledger import DURABLE, LOSS_CACHE, LogLedger, mismatch
from search.state import CHECKPOINT, ResumeError
from tests.search.conftest import tiny_cfg

FILES = ("pareto.jsonl", "archive.jsonl", "history.jsonl", LOSS_CACHE)
CFG = tiny_cfg(search={"generations": 6}, evaluator={"n_mc": 2})


def _tree(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.fixture
def crashed(make_search, tmp_path):
    """(uninterrupted run, the run at generation 4 whose durable checkpoint is generation 2's, covered bytes)."""
    make_search(tmp_path / "full", CFG).run()
    part = tmp_path / "part"
    make_search(part, CFG).run(stop_after=2)
    durable2 = (part / DURABLE).read_bytes()
    s = make_search(part, CFG)
    s.load()
    s.run(stop_after=4)
    (part / DURABLE).unlink()  # a hard link to the checkpoint: replaced, not written through
    (part / DURABLE).write_bytes(durable2)  # the disk saw only generation 2's fsync
    logs = {k: json.loads(durable2)["logs"][k]["bytes"] for k in ("archive.jsonl", LOSS_CACHE)}
    return tmp_path / "full", part, logs


def _finish(make_search, run_dir: Path) -> None:
    s = make_search(run_dir, CFG)
    s.load()
    s.run()


@pytest.mark.parametrize("log", ["archive.jsonl", LOSS_CACHE])
@pytest.mark.parametrize("damage", ["truncate", "tear"])
def test_a_log_cut_behind_the_durable_checkpoint_is_rebuilt_exactly(make_search, crashed, log, damage, capsys):
    full, part, covered = crashed
    data = (part / log).read_bytes()
    rng = np.random.default_rng(len(log) + len(damage))
    at = int(rng.integers(covered[log] + 1, len(data) - 1))
    if damage == "truncate":
        (part / log).write_bytes(data[:at])
    else:  # a torn page: zeros where the lost bytes were, the file length kept
        (part / log).write_bytes(data[:at] + b"\0" * (len(data) - at - 1) + b"\n")
    _finish(make_search, part)
    assert "continuing from generation 2" in capsys.readouterr().err
    for f in FILES:
        assert (full / f).read_bytes() == (part / f).read_bytes(), f


@pytest.mark.parametrize("log", ["archive.jsonl"])  # the loss cache is rebuilt instead (test_ledger_fallback.py)
@pytest.mark.parametrize("damage", ["truncate", "tear", "edit"])
def test_a_log_cut_inside_what_every_checkpoint_covers_is_refused_and_nothing_changes(make_search, crashed, log,
                                                                                       damage):
    from search.cli import run

    _, part, covered = crashed
    data = (part / log).read_bytes()
    at = int(np.random.default_rng(len(log) * 7 + len(damage)).integers(1, covered[log] - 2))
    damaged = {"truncate": data[:at], "tear": data[:at] + b"\0" * (len(data) - at),
               "edit": data[:at] + (b"9" if data[at:at + 1] != b"9" else b"8") + data[at + 1:]}[damage]
    (part / log).write_bytes(damaged)
    before = _tree(part)
    with pytest.raises(ResumeError, match=rf"resume={part}: {log} (holds \d+ of the \d+ rows|differs from)") as e:
        run({"resume": str(part), "progress": False, "plugins": {"backend": ["tests.search.fakes.FakeBackend"]}})
    assert "\n" not in str(e.value)
    with pytest.raises(ResumeError):
        make_search(part, CFG).load()
    assert _tree(part) == before


def test_the_checkpoint_records_each_logs_rows_bytes_and_hash(crashed):
    _, part, _ = crashed
    logs = json.loads((part / CHECKPOINT).read_text())["logs"]
    for name in ("archive.jsonl", LOSS_CACHE):
        data = (part / name).read_bytes()
        assert logs[name]["bytes"] == len(data) and logs[name]["rows"] == data.count(b"\n")
    assert mismatch(part, logs) is None
    ledger = LogLedger(part, ["archive.jsonl"])  # incremental hashing gives the whole file's hash
    assert ledger.update()["archive.jsonl"]["sha256"] == logs["archive.jsonl"]["sha256"]


@pytest.mark.parametrize("name", ["labels.jsonl", "coevolution.jsonl"])
def test_every_cut_or_tear_of_a_covered_log_is_found_and_appends_are_not(tmp_path, name):
    """The co-evolution logs (written only by a run that trains) under the same ledger: 200 random damages."""
    rng = np.random.default_rng(34)
    path = tmp_path / name
    path.write_text("".join(json.dumps({"generation": g, "y": float(rng.random())}) + "\n" for g in range(40)))
    logs = LogLedger(tmp_path, [name]).update()
    data = path.read_bytes()
    for at in rng.integers(0, len(data) - 1, size=100):
        path.write_bytes(data[:at])
        assert "holds" in mismatch(tmp_path, logs)
        path.write_bytes(data[:at] + bytes([data[at] ^ 0x20]) + data[at + 1:])
        assert "differs" in mismatch(tmp_path, logs)
    path.write_bytes(data + b'{"generation": 41}\n')
    assert mismatch(tmp_path, logs) is None  # lines newer than the checkpoint are dropped by resume, not refused
