"""`forge-* --help` and `--version` answer from the config alone: no torch, Lightning, pymoo or scipy import
(seconds each), so every command's help comes back in about a second."""
from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# app: its console script "module:function" (forge/shell/entry.py, or the package's own entry.py for a command above the core)
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
HEAVY = ("torch", "lightning", "pymoo", "scipy", "matplotlib", "pandas", "sklearn", "transformers")
PROBE = """
import contextlib, importlib, io, json, sys
out = {}
for app, script in %r.items():
    module, fn = script.split(":")
    for flag in ("--help", "--version"):
        sys.argv = [app, flag]
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            try:
                getattr(importlib.import_module(module), fn)()
            except SystemExit as e:
                assert not e.code, (app, flag, e.code)
        out[app + " " + flag] = buf.getvalue()
print(json.dumps({"text": out, "heavy": [m for m in %r if m in sys.modules]}))
""" % (SCRIPTS, HEAVY)


def test_help_and_version_of_every_command_import_nothing_heavy():
    # what this asserts is the imports, not the time: how long the 20 answers take is bench/bench_help.py's figure
    res = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=1800)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout.splitlines()[-1])
    assert got["heavy"] == []
    for app in SCRIPTS:
        assert got["text"][f"{app} --help"].startswith(f"{app}: ")  # the command's own help header
        assert got["text"][f"{app} --version"].startswith(f"{app} (forge-nas) ")


@pytest.mark.parametrize("app", sorted(SCRIPTS))
def test_each_entry_names_a_real_command(app):
    import importlib

    module, fn = SCRIPTS[app].split(":")
    light = getattr(importlib.import_module(module), fn)
    assert light.app == app and fn == app.replace("-", "_")
    target_module, target_fn = light.target.split(":")
    assert callable(getattr(importlib.import_module(target_module), target_fn))


def test_the_installed_scripts_point_at_the_light_entries():
    """Each script is an `entry` in forge/shell/entry.py or in its own package's entry.py (the core names no command
    above it), and the installed metadata agrees with pyproject.toml (else: pip install --no-deps -e .)."""
    from importlib.metadata import distribution

    assert len(SCRIPTS) == 10
    for app, script in SCRIPTS.items():
        module, fn = script.split(":")
        light = __import__(module, fromlist=[fn])
        assert module.endswith(".entry") and getattr(light, fn).target.split(".")[0] == module.split(".")[0]
    installed = {e.name: e.value for e in distribution("forge-nas").entry_points if e.group == "console_scripts"}
    assert installed == SCRIPTS



def test_help_piped_into_a_reader_that_leaves_is_not_a_bug(tmp_path):
    """`forge-export --help | head -2` printed a BrokenPipeError traceback and "this is a bug in Forge": here the
    reader is gone before the command starts (the pipe's read end closed), so every write fails alike."""
    import os

    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([str(Path(sys.executable).with_name("forge-export")), "--help"], stdout=w,
                           stderr=subprocess.PIPE, text=True, timeout=600, cwd=tmp_path)
    finally:
        os.close(w)
    assert p.returncode == 0 and "Traceback" not in p.stderr and "bug" not in p.stderr, p.stderr[-2000:]
