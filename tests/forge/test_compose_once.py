"""forge.runtime.compose_once: a plain run composes its config once; every multirun path stays Hydra's own."""
from __future__ import annotations

import sys
from pathlib import Path

import hydra
import pytest
from hydra._internal.hydra import Hydra

from forge.runtime.compose_once import compose_once


def _app(tmp_path: Path, argv: list[str], config: str = "x: 1\n") -> tuple[list, list[int]]:
    """Run a tiny Hydra app (its own config folder) under compose_once; (jobs' x values, compositions)."""
    conf = tmp_path / "conf"
    conf.mkdir(exist_ok=True)
    (conf / "app.yaml").write_text(config)
    seen, compositions = [], []
    compose = Hydra.compose_config

    def counted(self, *a, **k):
        compositions.append(1)
        return compose(self, *a, **k)

    @hydra.main(config_path=str(conf), config_name="app", version_base="1.3")
    def task(cfg):
        seen.append(cfg.x)

    old = sys.argv
    sys.argv = ["app", *argv, f"hydra.run.dir={tmp_path / 'run'}", f"hydra.sweep.dir={tmp_path / 'multi'}"]
    Hydra.compose_config = counted  # counts what compose_once hands on to Hydra's own composition
    try:
        with compose_once(sys.argv[1:]):
            task()
    finally:
        sys.argv, Hydra.compose_config = old, compose
    return seen, compositions


def test_a_plain_run_composes_once_and_restores_hydra(tmp_path):
    before = (Hydra.get_mode, Hydra.compose_config)
    seen, compositions = _app(tmp_path, ["x=5"])
    assert seen == [5] and len(compositions) == 1  # Hydra alone composes twice (get_mode, then run)
    assert (Hydra.get_mode, Hydra.compose_config) == before
    hydra_yaml = (tmp_path / "run" / ".hydra" / "hydra.yaml").read_text()
    assert "mode: RUN" in hydra_yaml and "- x=5" in (tmp_path / "run" / ".hydra" / "overrides.yaml").read_text()


@pytest.mark.parametrize("argv, config", [(["-m", "x=1,2"], "x: 0\n"),  # the flag
                                          (["x=1,2"], "x: 0\nhydra:\n  mode: MULTIRUN\n")])  # a config's mode
def test_multiruns_take_hydras_own_path(tmp_path, argv, config):
    seen, compositions = _app(tmp_path, argv, config)
    assert sorted(seen) == [1, 2] and len(compositions) >= 2


def test_a_sweep_without_multirun_is_refused_as_hydra_refuses_it(tmp_path, monkeypatch):
    from hydra.errors import ConfigCompositionException

    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")  # as every forge command sets it (forge.runtime.app.user_errors)
    with pytest.raises(ConfigCompositionException, match="Ambiguous value for argument 'x=1,2'"):
        _app(tmp_path, ["x=1,2"])
