"""Packaging: every subpackage is in the wheel, one version, and CI runs exactly the README's test command."""
from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

import forge

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
ROOT = Path(__file__).resolve().parents[1]
CODE = ("forge", "surrogate", "backends", "search", "forge_hf")


def _setup() -> dict:
    return runpy.run_path(str(ROOT / "setup.py"), run_name="setup")  # not __main__: setup() is not called


def test_every_code_folder_is_a_found_package():
    """A folder holding .py files needs an __init__.py, and then find_packages lists it (plena was missed once)."""
    found = set(_setup()["packages"]())
    folders = {p.parent for c in CODE for p in (ROOT / c).rglob("*.py") if "__pycache__" not in p.parts}
    for folder in sorted(folders):
        assert (folder / "__init__.py").is_file(), f"{folder} has modules but no __init__.py"
        assert ".".join(folder.relative_to(ROOT).parts) in found, folder
    assert {"backends.plena", "forge_hf", "forge_conf", "forge_data"} <= found


def test_a_new_subpackage_is_found_without_editing_the_package_list(tmp_path):
    for d in ("backends", "backends/newfamily", "tests"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "__init__.py").write_text("")
    assert set(_setup()["packages"](tmp_path)) == {"backends", "backends.newfamily", "forge_conf", "forge_data"}


def test_version_lives_in_one_place_and_the_changelog_names_it():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in meta["project"] and "version" in meta["project"]["dynamic"]
    assert meta["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "forge.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", forge.__version__)
    top = re.search(r"^## \[(\d+\.\d+\.\d+)\]", (ROOT / "CHANGELOG.md").read_text(), flags=re.M)
    assert top and top.group(1) == forge.__version__


def _readme_test_command() -> str:
    text = (ROOT / "README.md").read_text()
    block = text[text.index("## Two commands"):]
    cmds = [c.strip() for c in re.findall(r"```bash\n(.*?)```", block, flags=re.S) if "pytest" in c]
    return cmds[0]


def test_ci_runs_exactly_the_readme_test_command_with_pytest_last():
    cmd = _readme_test_command()
    run = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln.strip()
           and not ln.lstrip().startswith("#")]
    assert cmd in run, f"README's test command {cmd!r} is not a line of .ci/run"
    assert run[-1] == cmd and cmd.split("&&")[-1].strip().startswith(".venv/bin/pytest")
    assert ".ci/wheel_smoke.sh" in cmd and os.access(ROOT / ".ci" / "wheel_smoke.sh", os.X_OK)


def test_extras_cover_what_ci_exercises():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {re.split(r"[<>=\[ ]", r)[0] for r in extras["test"]}
    assert {"transformers", "hydra-submitit-launcher", "build", "twine"} <= names
    assert any(r.startswith("transformers") for r in extras["transformers"])


@pytest.mark.slow
def test_wheel_smoke_fails_when_a_subpackage_is_missing_from_the_wheel():
    """The smoke test is not vacuous: a wheel without backends/plena fails at `forge-hw backend=plena` (~1 min)."""
    env = {**os.environ, "WHEEL_SMOKE_DROP": "backends/plena", "PYTHON": sys.executable}
    p = subprocess.run([str(ROOT / ".ci" / "wheel_smoke.sh")], capture_output=True, text=True, env=env, timeout=600)
    out = p.stdout + p.stderr
    assert p.returncode != 0 and "No module named 'backends.plena'" in out, out[-2000:]
    assert "[wheel-smoke] PASS" not in out


def test_license_file_matches_the_metadata_and_ships_with_the_data_licences():
    """MIT in the metadata, a LICENSE file the sdist and wheel carry (license-files), and a licence beside the
    shipped labels and checkpoints, which package-data includes (.ci/wheel_smoke.sh checks the built wheel)."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["license"] == "MIT" and meta["project"]["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    globs = meta["tool"]["setuptools"]["package-data"]["forge_data"]
    for folder in ("labels", "surrogate"):
        lic = ROOT / "data" / folder / "LICENSE.md"
        assert "MIT" in lic.read_text() and any(lic.match(g.replace("**/", "")) for g in globs), lic
    assert "Copyright (c) 2026 Anonymous" in (ROOT / "data" / "surrogate" / "LICENSE.md").read_text()  # LLMForge's
    assert "licenses/LICENSE" in (ROOT / ".ci" / "wheel_smoke.sh").read_text()
