"""`forge-* --help` and `--version` answer from the config alone: no torch, Lightning, pymoo or scipy import
(seconds each), so every command's help comes back in about a second."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from forge.entry import ENTRIES

HEAVY = ("torch", "lightning", "pymoo", "scipy", "matplotlib", "pandas", "sklearn", "transformers")
PROBE = """
import contextlib, io, json, sys
from forge import entry
out = {}
for app in entry.ENTRIES:
    for flag in ("--help", "--version"):
        sys.argv = [app, flag]
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            try:
                getattr(entry, app.replace("-", "_"))()
            except SystemExit as e:
                assert not e.code, (app, flag, e.code)
        out[app + " " + flag] = buf.getvalue()
print(json.dumps({"text": out, "heavy": [m for m in %r if m in sys.modules]}))
""" % (HEAVY,)


def test_help_and_version_of_every_command_import_nothing_heavy():
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - t0
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout.splitlines()[-1])
    assert got["heavy"] == []
    for app in ENTRIES:
        assert got["text"][f"{app} --help"].startswith(f"{app}: ")  # the command's own help header
        assert got["text"][f"{app} --version"].startswith(f"{app} (forge-nas) ")
    assert wall < 60  # 20 answers; generous for a loaded CI box (about 0.1 s each on an idle one)


@pytest.mark.parametrize("app", sorted(ENTRIES))
def test_each_entry_names_a_real_command(app):
    import importlib

    module, fn = ENTRIES[app].split(":")
    assert callable(getattr(importlib.import_module(module), fn))


def test_the_installed_scripts_point_at_the_light_entries():
    import tomllib
    from pathlib import Path

    scripts = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(scripts) == set(ENTRIES)
    assert all(v == f"forge.entry:{k.replace('-', '_')}" for k, v in scripts.items())
