"""Bad input to every forge-* command, by category, in process: corrupt run state, corrupt stores and weights,
config mistakes and range messages (issue 25 §2-3). Each refused command exits 2 with one line and changes
nothing (`tests.bad_input_kit.refused`); the rest of the bad-input tests: tests/test_bad_inputs.py."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

from forge.runtime.config import data_dir

from tests.bad_input_kit import Variant, refused, world  # noqa: F401  (world: a fixture)


def _write(rel: str, text: str) -> Callable[[Path], None]:
    return lambda r: (r / rel).write_text(text)


def _ckpt(text: str) -> Callable[[Path], None]:
    """The checkpoint and its durable copy damaged alike: in a run folder they are one file (a hard link, which a
    copy of the folder splits); a damaged checkpoint beside an intact copy is rebuilt (tests/search/
    test_ledger_fallback.py)."""
    def damage(r: Path) -> None:
        for name in ("checkpoint.json", "checkpoint.durable.json"):
            (r / "state" / name).write_text(text)
    return damage


def _ckpt_dir(r: Path) -> None:
    (r / "state" / "checkpoint.json").unlink()
    (r / "state" / "checkpoint.json").mkdir()


def _ckpt_garbage_pop(r: Path) -> None:
    st = json.loads((r / "state" / "checkpoint.json").read_text())
    (r / "state" / "checkpoint.json").write_text(json.dumps({**st, "pop": {"X": "not an array"}}))


CORRUPT_STATE = [
    Variant("search-ckpt-empty", "forge-search", ("resume={r}",), "corrupt checkpoint", _ckpt("")),
    Variant("search-ckpt-list", "forge-search", ("resume={r}",), "a JSON list", _ckpt("[1, 2]")),
    Variant("search-ckpt-missing-keys", "forge-search", ("resume={r}",), "missing or mistyped",
            _ckpt('{"generation": 3, "config": {}}')),
    Variant("search-ckpt-directory", "forge-search", ("resume={r}",), "not a file", _ckpt_dir),
    Variant("search-ckpt-deleted", "forge-search", ("resume={r}",), "is missing but history.jsonl records 4",
            lambda r: (r / "state" / "checkpoint.json").unlink()),
    Variant("search-ckpt-garbage-pop", "forge-search", ("resume={r}",), "cannot restore it", _ckpt_garbage_pop),
    Variant("export-summary-list", "forge-export", ("run={r}", "out={c}/exp"), "summary.json", _write("summary.json", "[]")),
    Variant("verify-summary-string", "forge-verify", ("run={r}", "k=1"), "summary.json", _write("summary.json", '"done"')),
    Variant("export-summary-dir", "forge-export", ("run={r}", "out={c}/exp"), "summary.json",
            lambda r: ((r / "summary.json").unlink(), (r / "summary.json").mkdir())),
]


@pytest.mark.slow
@pytest.mark.parametrize("v", CORRUPT_STATE, ids=lambda v: v.id)
def test_corrupt_run_state_is_refused_and_changes_nothing(v, world, tmp_path, monkeypatch, capsys):
    refused(v, world, tmp_path, monkeypatch, capsys)


def _sqlite(sql: str) -> Callable[[Path], None]:
    def make(r: Path) -> None:
        import sqlite3

        con = sqlite3.connect(r / "store.db")
        con.executescript(sql)
        con.commit()
        con.close()
    return make


def _bad_weights(suffix: str, data: bytes) -> Callable[[Path], None]:
    def make(r: Path) -> None:
        (r / "weights").mkdir()
        for row in (json.loads(x) for x in (r / "pareto.jsonl").read_text().splitlines()):
            (r / "weights" / f"{row['id']}{suffix}").write_bytes(data)
    return make


CORRUPT_STORES = [
    Variant("label-sqlite-other-tables", "forge-label", ("store={r}/store.db", "n=1"), "not a Forge label store",
            _sqlite("CREATE TABLE users (name TEXT); INSERT INTO users VALUES ('ada');")),
    Variant("label-sqlite-wrong-columns", "forge-label", ("store={r}/store.db", "n=1"), "lacks column",
            _sqlite("CREATE TABLE forge_labels_v2 (genome_id TEXT, label REAL);")),
    Variant("label-status-wrong-schema", "forge-label", ("action=status", "store={r}/store.db"), "not a Forge label store",
            _sqlite("CREATE TABLE t (x INTEGER);")),
    Variant("export-corrupt-pt", "forge-export", ("run={r}", "weights={r}/weights", "out={c}/exp"),
            "not a readable weights file", _bad_weights(".pt", b"PK\x03\x04 not a torch file" * 4)),
    Variant("export-corrupt-safetensors", "forge-export", ("run={r}", "weights={r}/weights", "out={c}/exp"),
            "not a readable weights file", _bad_weights(".safetensors", b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")),
]


@pytest.mark.slow
@pytest.mark.parametrize("v", CORRUPT_STORES, ids=lambda v: v.id)
def test_corrupt_stores_and_weights_are_refused(v, world, tmp_path, monkeypatch, capsys):
    refused(v, world, tmp_path, monkeypatch, capsys)


def _dup_yaml(r: Path) -> None:
    (r / "dup.yaml").write_text((data_dir() / "archs" / "gpt2.yaml").read_text() + "\nd_model: 512\n")


CONFIG_MISTAKES = [
    Variant("arch-duplicate-key", "forge-arch", ("arch={r}/dup.yaml",), "given twice", _dup_yaml),
    Variant("label-duplicate-key", "forge-label", ("genomes={r}/dup.yaml", "store={r}/s.db"), "given twice", _dup_yaml),
    Variant("search-duplicate-key", "forge-search", ("search.sampling={r}/dup.yaml", "hydra.run.dir={c}/new"),
            "given twice", _dup_yaml),
    Variant("label-empty-genomes", "forge-label", ("genomes={r}/empty.jsonl", "store={r}/s.db"), "holds no genome",
            _write("empty.jsonl", "")),
    Variant("label-blank-genomes", "forge-label", ("genomes={r}/blank.jsonl", "store={r}/s.db"), "holds no genome",
            _write("blank.jsonl", "\n\n")),
    Variant("report-top-0", "forge-report", ("runs={r}", "top=0", "out={c}/rep"), "top=0"),
    Variant("search-seed-negative", "forge-search", ("seed=-1",), "seed=-1"),
    Variant("search-pop-1e9", "forge-search", ("search.pop_size=1000000000",), "search.pop_size=1000000000"),
    Variant("search-offspring-1e9", "forge-search", ("search.offspring=1000000000",), "what fits in"),
    Variant("label-n-1e9", "forge-label", ("n=1000000000", "store={r}/s.db"), "n=1000000000"),
    Variant("label-seed-negative", "forge-label", ("seed=-1", "store={r}/s.db"), "seed=-1"),
    Variant("hw-calibrate-n-0", "forge-hw", ("mode=calibrate", "calibrate.n=0"), "calibrate.n=0"),
    Variant("surrogate-seed-negative", "forge-surrogate", ("seed=-1",), "seed=-1"),
    Variant("verify-k-0", "forge-verify", ("run={r}", "k=0"), "k=0"),
    Variant("serve-seed-negative", "forge-serve", ("seed=-5",), "seed=-5"),
]


@pytest.mark.slow
@pytest.mark.parametrize("v", CONFIG_MISTAKES, ids=lambda v: v.id)
def test_config_mistakes_and_ranges_are_refused(v, world, tmp_path, monkeypatch, capsys):
    refused(v, world, tmp_path, monkeypatch, capsys)


@pytest.mark.parametrize("v", [v for v in CONFIG_MISTAKES if v.id in ("arch-duplicate-key", "search-seed-negative")],
                         ids=lambda v: v.id)
def test_config_mistakes_fast_subset(v, world, tmp_path, monkeypatch, capsys):
    refused(v, world, tmp_path, monkeypatch, capsys)


def test_range_messages_name_the_key_and_the_memory_bound():
    from forge.errors import RangeError
    from forge.runtime.limits import check_range, genome_limit

    check_range("forge-search", "search.pop_size", genome_limit())
    for app, key, value in (("forge-search", "seed", -1), ("forge-label", "n", 0), ("forge-hw", "calibrate.n", 0),
                            ("forge-search", "search.pop_size", genome_limit() + 1), ("forge-report", "top", 0)):
        with pytest.raises(RangeError, match=f"^{key}={value!r} is out of range; allowed: an integer"):
            check_range(app, key, value)


