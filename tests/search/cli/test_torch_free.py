"""Inference without torch (issue 45): with a shipped Forge-Former, the search and the inference commands never
import torch or Lightning. Each command runs in a fresh process whose import system refuses them and records
every attempt (a `try: import torch` that falls back would hide behind a plain block, so attempts are counted)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.search.run.test_main_job_pin import FRONT_IDS_DEFAULT, HV_DEFAULT

BLOCK = """
import sys
TRIED = {tried!r}
class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "lightning", "pytorch_lightning"):
            with open(TRIED, "a") as f:
                f.write(name + "\\n")
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked in this test)", name=name)
sys.meta_path.insert(0, NoTorch())
"""


def run_without_torch(tmp_path: Path, code: str, timeout: int = 300, status: int = 0) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter where torch/Lightning cannot load (as in a search-only install); with status 0
    it must exit 0 and never have tried to import them."""
    tried = tmp_path / "tried.txt"
    script = BLOCK.format(tried=str(tried)) + textwrap.dedent(code)
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == status, proc.stderr[-3000:]
    assert status or not tried.exists(), f"tried to import {sorted(set(tried.read_text().split()))}"
    return proc


def _command(entry: str, *args: str) -> str:
    module, fn = entry.split(":")
    return f"from {module} import {fn}\nsys.argv = [{fn!r}, *{list(args)!r}]\n{fn}()\n"


def test_the_inference_commands_never_import_torch(tmp_path):
    run = tmp_path / "run"
    run_without_torch(tmp_path, _command("search.entry:forge_search", "search.generations=2", "progress=false",
                                         f"hydra.run.dir={run}"))
    assert json.loads((run / "summary.json").read_text())["status"] == "complete"
    for cmd in (_command("search.entry:forge_report", f"runs=[{run}]", f"out_dir={tmp_path / 'report'}"),
                _command("forge.shell.entry:forge_arch"), _command("forge.shell.entry:forge_space"),
                _command("backends.entry:forge_hw"), _command("search.entry:forge_serve", "afd")):
        run_without_torch(tmp_path, cmd)


def test_the_python_api_predicts_and_costs_without_torch(tmp_path):
    out = run_without_torch(tmp_path, """
        import numpy as np
        import forge
        from forge.spaces.space import load_space
        for name, space in (("forgeformer-iha-paper-all", "iha-paper"), ("forgeformer-iha-tiny", "iha-tiny")):
            g = load_space(space).sample(6, np.random.default_rng(0))
            print(len(forge.predict(g, predictor=name, n_mc=4)))
        print(len(forge.cost(g)))
    """)
    assert out.stdout.split() == ["6", "6", "6"]


@pytest.mark.slow
def test_the_default_main_job_without_torch_gets_the_pinned_front(tmp_path):
    run = tmp_path / "run"
    run_without_torch(tmp_path, _command("search.entry:forge_search", "progress=false", f"hydra.run.dir={run}"), 600)
    ids = sorted(json.loads(ln)["id"] for ln in (run / "pareto.jsonl").read_text().splitlines() if ln.strip())
    assert ids == FRONT_IDS_DEFAULT
    assert json.loads((run / "summary.json").read_text())["hypervolume"] == pytest.approx(HV_DEFAULT, rel=1e-6)


@pytest.mark.parametrize("entry, args", [("surrogate.entry:forge_surrogate", ()),  # torch at the command's import
                                         ("search.entry:forge_search", ("backend=cpu-measured", "search.generations=1",
                                                                        "progress=false"))])  # torch inside the run
def test_a_command_that_needs_torch_names_the_train_extra_in_one_line(tmp_path, entry, args):
    proc = run_without_torch(tmp_path, _command(entry, *args, f"hydra.run.dir={tmp_path / 'run'}"), status=2)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs torch" in lines[0] and "pip install 'forge-nas[train]'" in lines[0], proc.stderr
