"""The face of every forge-* command (issue 28 §3): `--help` starts with what it does, its main options and an
example, then the config groups; `--version` prints Forge's version; the default main job imports no Lightning,
transformers or matplotlib, leaves front.csv / archive.csv / history.csv, and Python logging reaches cli.log."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

import pytest

import forge

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = {e.name: e for e in distribution("forge-nas").entry_points if e.group == "console_scripts"}


def _call(monkeypatch, capsys, name: str, *argv: str) -> tuple[int, str]:
    """The console script in this process; Hydra's `--help` leaves its HydraConfig set: cleared after."""
    from hydra.core.hydra_config import HydraConfig

    monkeypatch.setattr(sys, "argv", [name, *argv])
    code = 0
    try:
        SCRIPTS[name].load()()
    except SystemExit as e:
        code = e.code or 0
    finally:
        HydraConfig.instance().cfg = None  # later tests read "not under Hydra" from HydraConfig.get() raising
    return code, capsys.readouterr().out


def test_all_ten_commands_are_checked():
    assert len(SCRIPTS) == 10 and all(n.startswith("forge-") for n in SCRIPTS)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_version_prints_forges_version(monkeypatch, capsys, name):
    code, out = _call(monkeypatch, capsys, name, "--version")
    assert code == 0 and out.strip() == f"{name} (forge-nas) {forge.__version__}"
    assert "Hydra" not in out


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_help_starts_with_what_the_command_does_then_options_example_and_groups(monkeypatch, capsys, name):
    code, out = _call(monkeypatch, capsys, name, "--help")
    assert code == 0, out
    assert out.startswith(f"{name}: "), out[:200]
    assert "powered by Hydra" not in out
    options = out.find("Options:") if "Options:" in out else out.find("Main options:")
    example = out.find("Example")
    groups = out.lower().find("config groups")
    assert 0 < options < example < groups, (options, example, groups)
    assert f"\n  {name}" in out[example:groups]  # the example is a command line of this command


def _run_main_job(tmp_path: Path) -> tuple[dict, Path]:
    """A tiny default search (default space, surrogate and backend; small budget) in a fresh process."""
    probe = tmp_path / "modules.json"
    code = (
        "import atexit, json, sys\n"
        "heavy = ('lightning', 'pytorch_lightning', 'transformers', 'matplotlib', 'torchmetrics', 'sklearn',\n"
        "         'scipy.stats', 'sympy', 'torch._dynamo')\n"
        f"atexit.register(lambda: open({str(probe)!r}, 'w').write(json.dumps([m for m in heavy if m in sys.modules])))\n"
        "from search.cli import search_main\n"
        "sys.argv = ['forge-search', *sys.argv[1:]]\n"
        "search_main()\n")
    run = tmp_path / "run"
    p = subprocess.run([sys.executable, "-c", code, "search.pop_size=4", "search.offspring=4", "search.generations=1",
                        "progress=false", f"hydra.run.dir={run}"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr[-2000:]
    return {"loaded": json.loads(probe.read_text()), "stdout": p.stdout}, run


def test_default_main_job_imports_no_training_stack_and_leaves_tables_and_a_log(tmp_path):
    res, run = _run_main_job(tmp_path)
    assert res["loaded"] == [], f"the default main job imported {res['loaded']}"
    for name in ("front.csv", "archive.csv", "history.csv"):
        assert (run / name).stat().st_size > 0, name
    log = (run / "cli.log").read_text()
    assert "generation 1: HV" in log
    assert "generation 1: HV" not in res["stdout"]  # the terminal keeps the front table only
