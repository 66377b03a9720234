"""Issue 42 §4: a damaged newest checkpoint, a checkpoint without a ledger, a damaged loss cache, a torn row.

The run of tests/search/run/test_ledger.py's `crashed` fixture (stopped at generation 4, durable checkpoint of
generation 2): a newest checkpoint zeroed, cut or bit-flipped is replaced by the durable copy and the run ends
with exactly the uninterrupted run's files; where the durable copy's logs are damaged too it is refused in one
line, changing nothing.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from search.ledger import DURABLE, LOSS_CACHE
from search.state import CHECKPOINT, ResumeError, load_checkpoint, saved_config
from tests.search.run.test_ledger import CFG, FILES, _finish, _tree, crashed  # noqa: F401  (crashed: a fixture)

RESULTS = ("pareto.jsonl", "archive.jsonl", "history.jsonl", "front.csv", "archive.csv")  # history.csv has times


def _damage(data: bytes, how: str, rng: np.random.Generator) -> bytes:
    at = int(rng.integers(1, len(data) - 1))
    if how == "zeroed":
        return b"\0" * len(data)
    if how == "cut":
        return data[:at]
    return data[:at] + bytes([data[at] ^ (1 << int(rng.integers(0, 8)))]) + data[at + 1:]  # one bit flipped


@pytest.mark.parametrize("how", ["zeroed", "cut", "flipped"])
def test_a_damaged_newest_checkpoint_is_rebuilt_from_the_durable_copy(make_search, crashed, how, capsys):
    full, part, _ = crashed
    path = part / CHECKPOINT
    path.write_bytes(_damage(path.read_bytes(), how, np.random.default_rng(len(how))))
    _finish(make_search, part)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{CHECKPOINT} is damaged" in err[0] and "generation 2" in err[0]
    for f in FILES:
        assert (full / f).read_bytes() == (part / f).read_bytes(), f


def test_every_bit_flip_of_a_checkpoint_is_found(tmp_path, make_search):
    """A flip that keeps the JSON valid (a digit of the population) would resume silently from other data."""
    make_search(tmp_path, CFG).run(stop_after=1)
    data, rng = (tmp_path / CHECKPOINT).read_bytes(), np.random.default_rng(42)
    for at in rng.integers(0, len(data) - 1, size=60):
        (tmp_path / CHECKPOINT).write_bytes(data[:at] + bytes([data[at] ^ (1 << int(rng.integers(0, 8)))]) +
                                            data[at + 1:])
        with pytest.raises(ResumeError, match="corrupt checkpoint"):
            load_checkpoint(tmp_path)


def test_a_damaged_checkpoint_whose_durable_logs_are_cut_too_is_refused(make_search, crashed):
    from search.cli import run

    _, part, covered = crashed
    (part / CHECKPOINT).write_bytes(b"\0" * 100)
    data = (part / "archive.jsonl").read_bytes()
    (part / "archive.jsonl").write_bytes(data[:covered["archive.jsonl"] // 2])
    before = _tree(part)
    with pytest.raises(ResumeError, match=r"archive.jsonl holds \d+ of the \d+ rows") as e:
        run({"resume": str(part), "progress": False, "plugins": {"backend": ["tests.search.fakes.FakeBackend"]}})
    assert "\n" not in str(e.value)
    assert _tree(part) == before


def _drop_ledger(run_dir: Path) -> None:
    """The checkpoint as an older Forge wrote it: no `logs` record."""
    for name in (CHECKPOINT, DURABLE):
        st = json.loads((run_dir / name).read_text())
        st.pop("logs"), st.pop("checksum", None)
        (run_dir / name).unlink()
        (run_dir / name).write_text(json.dumps(st))


def test_a_checkpoint_without_a_ledger_checks_the_archive_against_its_row_count(make_search, crashed):
    _, part, _ = crashed
    _drop_ledger(part)
    lines = (part / "archive.jsonl").read_bytes().splitlines(keepends=True)
    n = load_checkpoint(part)["n_evaluated"]
    (part / "archive.jsonl").write_bytes(b"".join(lines[:n - 5]))  # whole rows lost: every line still parses
    before = _tree(part)
    with pytest.raises(ResumeError, match=rf"archive.jsonl holds {n - 5} of the {n} rows the checkpoint counts"):
        make_search(part, CFG).load()
    assert _tree(part) == before


def test_a_checkpoint_without_a_ledger_and_whole_logs_resumes_exactly(make_search, crashed):
    full, part, _ = crashed
    _drop_ledger(part)
    _finish(make_search, part)
    for f in FILES:
        assert (full / f).read_bytes() == (part / f).read_bytes(), f


@pytest.mark.parametrize("how", ["zeroed", "cut", "flipped"])
def test_a_damaged_loss_cache_is_rebuilt_not_refused(make_search, crashed, how, capsys):
    full, part, covered = crashed
    data = (part / LOSS_CACHE).read_bytes()
    rng = np.random.default_rng(len(how) + 7)
    (part / LOSS_CACHE).write_bytes(_damage(data[:covered[LOSS_CACHE]], how, rng) + data[covered[LOSS_CACHE]:])
    _finish(make_search, part)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{LOSS_CACHE} is damaged" in err[0] and "rebuilt" in err[0]
    for f in RESULTS:
        assert (full / f).read_bytes() == (part / f).read_bytes(), f
    rows = {(r["v"], r["id"]): r["y"] for r in map(json.loads, (part / LOSS_CACHE).read_text().splitlines())}
    assert rows == {(r["v"], r["id"]): r["y"] for r in map(json.loads, (full / LOSS_CACHE).read_text().splitlines())}


def test_a_row_torn_inside_a_log_is_named(make_search, crashed):
    _, part, covered = crashed
    data = (part / "archive.jsonl").read_bytes()
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == ord("\n")]
    row = 5  # bytes cut out of the middle of line 6: the file keeps every newline
    cut = data[:starts[row] + 40] + data[starts[row] + 90:]
    (part / "archive.jsonl").write_bytes(cut)
    with pytest.raises(ResumeError, match=r"holds (\d+) of the \1 rows .*its line 6 is torn"):
        make_search(part, CFG).load()


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_config_that_is_not_a_file_is_named_for_what_it_is(tmp_path, kind):
    from forge.errors import UserError

    (tmp_path / "state").mkdir()
    if kind == "fifo":
        os.mkfifo(tmp_path / "config.yaml")
    else:
        (tmp_path / "config.yaml").mkdir()
    with pytest.raises((UserError, IsADirectoryError), match="FIFO" if kind == "fifo" else "folder"):
        saved_config(tmp_path)


@pytest.mark.parametrize("log", ["archive.jsonl", LOSS_CACHE])
def test_a_row_broken_after_what_the_durable_copy_covers_is_recomputed(make_search, crashed, log, capsys):
    """Not the last line (a torn tail): a row in the middle of what only the lost checkpoint covered."""
    full, part, covered = crashed
    data = (part / log).read_bytes()
    at = covered[log] + 10  # inside the first row after the durable copy's
    (part / log).write_bytes(data[:at] + b"\xff{" + data[at + 2:])
    _finish(make_search, part)
    assert "continuing from generation 2" in capsys.readouterr().err
    for f in FILES:
        assert (full / f).read_bytes() == (part / f).read_bytes(), f
