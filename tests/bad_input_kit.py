"""The shared world of the bad-input tests (tests/test_bad_inputs*.py): a finished and a stopped search and a
folder of broken files, and the helpers that run a console entry point on them and check that a refused command
changed nothing. Not a test module: its fixture `world` is imported by the modules that use it."""
from __future__ import annotations

import csv
import io
import json
import shutil
import sys
import tomllib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import pytest

from forge.runtime.config import data_dir
from forge.genomes.labels import Label, write_labels

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def _make_runs(w: Path) -> None:
    """A finished and a stopped search (fakes injected, so no start-up cost in the subprocesses' worlds)."""
    from tests.search.run.test_resume import _components
    from tests.search.conftest import tiny_cfg
    from search.cli import run

    cfg = tiny_cfg(out_dir=str(w / "done"), progress=False)
    cfg["search"]["generations"] = 3
    run(cfg, _components())
    run(dict(cfg, out_dir=str(w / "stopped"), stop_after=1), _components())
    for d in ("done", "stopped"):  # what Hydra leaves in a run directory
        (w / d / ".hydra").mkdir()
        (w / d / ".hydra" / "overrides.yaml").write_text("- seed=0\n")
        (w / d / "cli.log").write_text("")


def _make_files(w: Path) -> None:
    from tests.surrogate.conftest import synth_labels

    write_labels(w / "labels.jsonl", synth_labels(40))
    lines = (w / "labels.jsonl").read_text().splitlines()
    (w / "torn.jsonl").write_text("\n".join(lines[:2]) + "\n" + lines[2][: len(lines[2]) // 2] + "\n")
    row = json.loads(lines[0])
    (w / "strlabel.jsonl").write_text(json.dumps({**row, "label": str(row["label"])}) + "\n")
    src = data_dir() / "surrogate"
    shutil.copy(src / "forgeformer-iha-tiny.json", w / "trunc.json")
    (w / "trunc.safetensors").write_bytes((src / "forgeformer-iha-tiny.safetensors").read_bytes()[:1000])
    (w / "binary.yaml").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe" * 8)
    (w / "binary.jsonl").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe" * 8)
    (w / "latin1.yaml").write_bytes("name: caf\xe9\nd_model: 64\n".encode("latin-1"))
    (w / "afile").write_text("a file, not a folder\n")
    from forge.spaces.space import load_space
    import numpy as np

    paper = load_space("iha-paper").sample(12, np.random.default_rng(0))
    write_labels(w / "paper.jsonl", [Label(g, 3.5 + 0.01 * i, {"protocol": "synthetic"}) for i, g in enumerate(paper)])
    text = _llmforge_csv(w)
    (w / "allnan.csv").write_text(text.replace(",3.5,", ",nan,"))
    rows = list(csv.reader(io.StringIO(text)))
    drop = rows[0].index("global_n_embd")
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([c for i, c in enumerate(r) if i != drop] for r in rows)
    (w / "nocol.csv").write_text(buf.getvalue())


def _llmforge_csv(w: Path) -> str:
    """A two-row LLMForge-format CSV (val_loss 3.5) of iha-tiny genomes."""
    import numpy as np
    from forge.spaces.space import load_space

    gs = load_space("iha-tiny").sample(2, np.random.default_rng(1))
    n = max(len(g.layers) for g in gs)
    head = ["#idx", "global_n_embd", "global_block_size", "global_layer_mask", "val_loss", "params"]
    for i in range(n):
        head += [f"layer{i}_{k}" for k in ("n_head", "n_kv_group", "n_qk_head_dim", "n_v_head_dim", "mlp_size",
                                            "attention_variant")]
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(head)
    for j, g in enumerate(gs):
        cells = [str(j), str(g.d_model), str(g.block_size), str([lay.active for lay in g.layers]), "3.5", "1000"]
        for lay in g.layers:
            cells += [str(lay.n_h), str(lay.n_kv), str(lay.d_qk), str(lay.d_v), str(lay.d_mlp),
                      "infinite" if lay.attn else "identity"]
        out.writerow(cells)
    return buf.getvalue()


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    w = tmp_path_factory.mktemp("world")
    _make_runs(w)
    _make_files(w)
    return w


def _state(w: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(w)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(w.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------------------------------------------------
# Issue 25 §2-3, by category: each category is one parametrized test over several variants per CLI, run in
# process (the real console entry, sys.argv set) so a variant costs a Hydra compose, not an interpreter start.
# `unchanged` asserts the refused command left every file byte- and mtime-identical and added nothing.


@contextmanager
def unchanged(*folders: Path) -> Iterator[None]:
    """Every file under `folders` is byte- and mtime-identical afterwards; no file or folder added or removed."""
    def tree(f: Path) -> dict[str, tuple[bytes, int] | str]:
        return {**{str(p.relative_to(f)): "dir" for p in f.rglob("*") if p.is_dir()}, **_state(f)}

    before = {f: tree(f) for f in folders}
    yield
    for f in folders:
        after = tree(f)
        changed = sorted(k for k in set(before[f]) | set(after) if before[f].get(k) != after.get(k))
        assert changed == [], f"{f}: changed {changed}"


@dataclass(frozen=True)
class Variant:
    id: str
    app: str
    args: tuple[str, ...]  # "{r}" = the variant's own copy of a finished run, "{w}" = the world, "{c}" = its cwd
    says: str
    prepare: Callable[[Path], None] | None = None  # corrupts the run copy


def cli(app: str, args: Sequence[str], cwd: Path, monkeypatch, capsys) -> tuple[int, str]:
    """Run a console entry point in process; (exit code, stderr)."""
    import importlib

    mod, fn = SCRIPTS[app].split(":")
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", [app, *args])
    monkeypatch.delenv("FORGE_DEBUG", raising=False)
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    capsys.readouterr()
    try:
        getattr(importlib.import_module(mod), fn)()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return code, capsys.readouterr().err


def refused(v: Variant, world: Path, tmp: Path, monkeypatch, capsys) -> str:
    """Run a variant on a fresh copy of the finished run: exit 2, one line naming the problem, nothing changed."""
    run, cwd = tmp / "run copy", tmp / "cwd"
    shutil.copytree(world / "done", run)
    cwd.mkdir()
    if v.prepare:
        v.prepare(run)
    args = [a.format(r=run, w=world, c=cwd) for a in v.args]
    with unchanged(run, world):
        code, err = cli(v.app, args, cwd, monkeypatch, capsys)
    lines = err.strip().splitlines()
    assert code == 2, f"{v.id}: rc {code}\n{err[-3000:]}"
    assert len(lines) == 1 and lines[0].startswith(f"{v.app}: error: ") and v.says in lines[0], f"{v.id}: {err[-3000:]}"
    assert sorted(cwd.rglob("*")) == [], f"{v.id}: left {sorted(cwd.rglob('*'))}"
    return lines[0]


