"""What only reads a surrogate (`mode=eval`, `mode=calibrate`) or fits one without Lightning (a random forest) does
not import Lightning: its imports cost about 5 CPU-seconds a process (bench/RESULTS.md, issue 56: CI budget)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LABELS = ROOT / "data" / "labels" / "iha-tiny-cpu-proxy.jsonl"
PROBE = """
import sys
from surrogate.entry import forge_surrogate
sys.argv = ["forge-surrogate", *sys.argv[1:]]
try:
    forge_surrogate()
finally:
    print("LIGHTNING", "lightning" in sys.modules)
"""


@pytest.mark.parametrize("args", [
    ["mode=eval", "ckpt=CKPT"],
    ["mode=calibrate", "ckpt=CKPT"],  # calibrate writes into the checkpoint's sidecar: a copy, not the shipped one
    ["mode=train", "surrogate=rf", "surrogate.n_estimators=10"],
], ids=["eval", "calibrate", "train-rf"])
def test_reading_or_fitting_a_forest_imports_no_lightning(args, tmp_path):
    for suffix in (".json", ".safetensors"):
        shutil.copy(ROOT / "data" / "surrogate" / f"forgeformer-iha-tiny{suffix}", tmp_path / f"ckpt{suffix}")
    args = [a.replace("CKPT", str(tmp_path / "ckpt")) for a in args]
    res = subprocess.run([sys.executable, "-c", PROBE, *args, f"data={LABELS}", "space=iha-tiny",
                          f"hydra.run.dir={tmp_path / 'out'}"], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=900)  # this checkout's code
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.splitlines()[-1] == "LIGHTNING False"


def test_training_a_forge_former_still_finds_lightning():
    """The Lightning loop is imported where it runs (surrogate.fit → surrogate.training), and the old import path of
    `Recipe` still works."""
    from surrogate.recipe import Recipe
    from surrogate.training import Recipe as Old, fit_members

    assert Old is Recipe and callable(fit_members) and "lightning" in sys.modules
