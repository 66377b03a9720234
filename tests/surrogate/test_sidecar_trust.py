"""Issue 50 §5: a crafted predictor sidecar or checkpoint (unknown config key, a list, no norm, 200,000 deep, NaN
weights, outputs that overflow, a malformed `pairwise` curve) is refused in one line when it loads, on the command
line too."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

def _tiny(tmp_path: Path) -> Path:
    from forge.runtime.config import data_dir

    for ext in (".json", ".safetensors"):
        shutil.copy(data_dir() / "surrogate" / f"forgeformer-iha-tiny{ext}", tmp_path / f"c{ext}")
    return tmp_path / "c"


def _sidecar(change: Callable[[dict], Any]) -> Callable[[Path], None]:
    def make(stem: Path) -> None:
        meta = json.loads(stem.with_suffix(".json").read_text())
        out = change(meta)
        text = out if isinstance(out, str) else json.dumps(meta)
        stem.with_suffix(".json").write_text(text)
    return make


def _tensors(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def make(stem: Path) -> None:
        from safetensors.numpy import load_file, save_file

        t = load_file(str(stem.with_suffix(".safetensors")))
        change(t)
        save_file(t, str(stem.with_suffix(".safetensors")))
    return make


def _deep(meta: dict) -> str:
    text = json.dumps(meta)
    return text.replace('"config": {', '"config": ' + "{\"x\": " * 200_000 + "1" + "}" * 200_000 + ', "c": {', 1)


def _first_float(t: dict, value: float) -> None:
    k = sorted(t)[0]
    t[k] = np.full_like(t[k], value)


def _overflow(stem: Path) -> None:
    """Finite weights and a finite target map whose product is not: the head's bias at float32's largest."""
    _tensors(lambda t: t.__setitem__("m0.head.bias", np.full_like(t["m0.head.bias"], 3e38)))(stem)
    _sidecar(lambda m: m["target"].update(std=1e300))(stem)


CRAFTED = {
    "config-unknown-key": (_sidecar(lambda m: m["config"].update(evil=1)), "config has unknown key(s) evil"),
    "config-a-list": (_sidecar(lambda m: m.update(config=[1, 2])), "config is a list; allowed: a mapping"),
    "no-norm": (_sidecar(lambda m: m.pop("norm")), "norm is missing; allowed"),
    "config-200000-deep": (_sidecar(_deep), "unreadable sidecar (JSONDecodeError)"),
    "norm-nan": (_sidecar(lambda m: m["norm"]["lo"].__setitem__(0, float("nan"))), "norm.lo is not a list of finite"),
    "dropout-text": (_sidecar(lambda m: m["config"].update(dropout="high")), "config.dropout = 'high'"),
    "nan-weights": (_tensors(lambda t: _first_float(t, float("nan"))), "holds NaN or inf"),
    "outputs-overflow": (_overflow, "its prediction is not finite"),
}


@pytest.mark.parametrize("case", list(CRAFTED))
def test_a_crafted_predictor_checkpoint_is_refused_in_one_line_when_it_loads(tmp_path, case):
    from surrogate.checkpoints import CheckpointError
    from surrogate.loading import load_predictor

    make, says = CRAFTED[case]
    stem = _tiny(tmp_path)
    make(stem)
    with pytest.raises(CheckpointError) as e:
        load_predictor(stem)
    assert says in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_sidecar_pairwise_curve_is_read_or_refused_in_one_line(tmp_path):
    from surrogate.checkpoints import CheckpointError
    from surrogate.loading import load_predictor
    from surrogate.sidecar import OPTIONAL

    stem = _tiny(tmp_path)
    _sidecar(lambda m: m.update(pairwise={"x": [0.0, 0.2], "p": [0.5, 0.9]}))(stem)
    assert "pairwise" in OPTIONAL and load_predictor(stem).pairwise.prob([0.1])[0] == 0.7
    _sidecar(lambda m: m.update(pairwise={"kind": "future"}))(stem)
    with pytest.raises(CheckpointError, match="pairwise is not a calibration curve") as e:
        load_predictor(stem)
    assert "\n" not in str(e.value)


def test_the_cli_refuses_a_crafted_predictor_in_one_line(tmp_path, monkeypatch, capsys):
    from tests.bad_input_kit import cli

    stem = _tiny(tmp_path)
    CRAFTED["config-unknown-key"][0](stem)
    code, err = cli("forge-search", ["space=iha-tiny", f"evaluator.predictor={stem}", "search.generations=1",
                                     f"hydra.run.dir={tmp_path / 'out'}", "progress=false"], tmp_path, monkeypatch,
                    capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "config has unknown key(s) evil" in lines[0], err


# ------------------------------------------------------------------ §7 wording and a config-only resume
