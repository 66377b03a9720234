"""Issue 55 §5: an export whose genome uses an installed plug-in's gene loads from Python as its card says, in a
process of its own; without the plug-in imported, the one line names the Python call (forge.plugins.load_modules)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from forge.runtime.config import group_yaml
from tests.forge.shell.test_plugin_use import PKG, _search, site  # noqa: F401 (site: the fixture)

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def exported(tmp_path, site):
    """A run of a space with the installed package's gene, and the export of a front genome that sets it."""
    space = {**group_yaml("space", "iha-tiny"), "name": "iha-tiny-lowrank", "lowrank": [0, 1]}
    res = _search(tmp_path / "run", space=space)
    front = [json.loads(ln) for ln in (res.run_dir / "pareto.jsonl").read_text().splitlines()]
    gid = next(r["id"] for r in front if any(lay.get("lowrank") for lay in r["genome"]["layers"]))
    res.export(select=f"id:{gid}", format="safetensors", out=tmp_path / "exported")
    return tmp_path / "exported" / gid, site


def _python(code: str, cwd: Path, *path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, path), str(ROOT)])}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_cards_snippet_loads_a_plugin_export_in_a_fresh_process(exported, tmp_path):
    folder, site = exported
    card = (folder / "MODEL_CARD.md").read_text()
    snippet = re.search(r"## Load\n```python\n(.*?)```", card, re.S).group(1)
    assert f"load_modules([{PKG!r}])" in snippet
    check = "\nprint(sum(lay.lowrank for lay in genome.layers), model.num_params())"
    for code in (snippet, "\n".join(ln for ln in snippet.splitlines() if "load_modules" not in ln)):
        proc = _python(code + check, tmp_path / "site", site)  # the entry point alone loads it too
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert int(proc.stdout.split()[0]) >= 1


def test_without_the_plugin_the_python_error_names_the_python_call(exported, tmp_path):
    folder, _ = exported
    proc = _python(f"from search.export import load_exported\nload_exported({str(folder)!r})", tmp_path)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode != 0 and "lowrank" in last and "plugins.modules=" not in last
    assert last.endswith(f"(import it first: forge.plugins.load_modules([{PKG!r}]))")
