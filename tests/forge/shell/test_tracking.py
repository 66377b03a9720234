"""Training runs are tracked: one logger choice (logger=csv|tensorboard|mlflow|none) for every training, into
the run folder; a logger whose package is missing is refused in one line before any work."""
from __future__ import annotations

import importlib.util
import json

import pytest
from hydra import compose, initialize_config_module

from forge.shell import tracking


def _cfg(app: str, overrides: list[str]):
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        return compose(config_name=app, overrides=overrides)


@pytest.mark.parametrize("app", ["forge-label", "forge-surrogate", "forge-search", "forge-verify"])
def test_every_training_command_takes_the_same_logger_choice(app):
    from forge.runtime.config import to_container

    assert to_container(_cfg(app, []).logger)["_target_"] == tracking.DEFAULT  # CSV by default
    for name, cls in (("tensorboard", "TensorBoardLogger"), ("mlflow", "MLFlowLogger")):
        assert to_container(_cfg(app, [f"logger={name}"]).logger)["_target_"].endswith(cls)
    assert not _cfg(app, ["logger=none"]).get("logger") and tracking.node_for({}, "r", app) is None


def test_a_missing_package_is_refused_in_one_line(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda m, *a: None if m in ("tensorboard", "tensorboardX")
                        else real(m, *a))
    with pytest.raises(tracking.TrackingError) as e:
        tracking.node_for({"_target_": "lightning.pytorch.loggers.TensorBoardLogger"}, "r", "forge-x")
    assert "needs the package tensorboard" in str(e.value) and "logger=csv" in str(e.value) and "\n" not in str(e.value)
    assert tracking.node_for(None, "r", "forge-x") is None
    node = tracking.node_for({"_target_": tracking.DEFAULT, "save_dir": None}, "r", "forge-x")
    assert node["save_dir"].endswith("r/logs")


def test_forge_label_refuses_a_missing_logger_before_training_anything(tmp_path, monkeypatch):
    from forge.labelling.cli import run

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda m, *a: None if m == "mlflow" else real(m, *a))
    db = tmp_path / "l.db"
    with pytest.raises(tracking.TrackingError, match="forge-label: logger MLFlowLogger needs the package mlflow"):
        run(_cfg("forge-label", [f"store={db}", "n=2", "logger=mlflow", f"out_dir={tmp_path / 'o'}"]))
    assert not db.exists()  # refused before the store was opened: no failed label stored


def test_verify_and_coevolution_trainings_log_into_the_run_folder(tmp_path):
    """The dispatch trainer of verify and of co-evolution gets the logger node; their refits run inside it."""
    from forge.spaces.space import load_space
    from search.components import build_coevolution
    from search.settings import settle_config
    from tests.search.conftest import tiny_cfg

    cfg = tiny_cfg(space="iha-tiny", logger={"_target_": tracking.DEFAULT, "save_dir": None},
                   protocol={"_target_": "forge.labelling.train.Protocol", "name": "cpu-proxy"},
                   corpus={"_target_": "forge.labelling.corpus.stdlib_corpus"}, dispatch="local",
                   evaluator={"kind": "surrogate", "predictor": "forgeformer-iha-tiny"})
    cfg["search"]["coevolve"] = {"every": 2}
    co = build_coevolution(settle_config(cfg), load_space("iha-tiny"), tmp_path / "run")
    assert co.trainer.logger["save_dir"] == str((tmp_path / "run" / "logs").resolve())
    seen = []

    def fit(*a, **k):
        seen.append(tracking.current())

    from forge.shell.tracking import logged

    logged(fit, co.trainer.logger)()
    assert seen == [co.trainer.logger] and tracking.current() is None


def test_a_surrogate_fit_logs_through_the_active_logger(tmp_path):
    from surrogate.training import _logger

    assert _logger() is False
    with tracking.log_to({"_target_": tracking.DEFAULT, "save_dir": str(tmp_path)}):
        lg = _logger()
    assert type(lg).__name__ == "CSVLogger" and lg.save_dir == str(tmp_path) and lg.name == "surrogate"
    json.dumps(tracking.current())  # nothing left active
