"""Issue 34 §1: a run folder never supplies a shell line, a host or a path outside it (forge.runtime.launch_only).

Each attack of the issue is replayed on a shared copy of a finished run: its saved trainer options name a shell
line (`local_setup`, `slurm_setup`), a folder outside the run, a Ray cluster, a store URL, a weights folder or a
logger; `forge-search resume=` and `forge-verify run=` refuse in one line naming the key, nothing runs, and
nothing changes inside or outside the run folder.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from forge import plugins
from forge.errors import ForgeError
from forge.runtime.launch_only import LaunchOnlyError, check_saved
from tests.test_security import _cli, _tree, finished_run  # noqa: F401  (the module-scoped fixture)

SUBMITIT = "forge.labelling.dispatch.SubmititTrainer"
RAY = "forge.labelling.dispatch.RayTrainer"
FAKES = {"backend": ["tests.search.fakes.FakeBackend"], "surrogate": ["tests.search.fakes.FakePredictor"]}


def _attacks(witness: Path, outside: Path) -> dict[str, tuple[str, dict]]:
    """name -> (the dotted key the refusal names, the saved trainer node at `dispatch`)."""
    touch = [f"touch {witness}"]
    return {
        "local_setup": ("dispatch.parameters.local_setup",
                        {"_target_": SUBMITIT, "cluster": None, "parameters": {"local_setup": touch}}),
        "slurm_setup": ("dispatch.parameters.slurm_setup",
                        {"_target_": SUBMITIT, "cluster": None, "parameters": {"slurm_setup": touch}}),
        "folder": ("dispatch.folder", {"_target_": SUBMITIT, "folder": str(outside / "%j")}),
        "cluster": ("dispatch.cluster", {"_target_": SUBMITIT, "cluster": "slurm"}),
        "address": ("dispatch.address", {"_target_": RAY, "address": "ray://attacker.example:10001"}),
        "init_kwargs": ("dispatch.init_kwargs.runtime_env.pip",
                        {"_target_": RAY, "init_kwargs": {"runtime_env": {"pip": ["evil-package"]}}}),
        "store": ("dispatch.store", {"_target_": "forge.labelling.dispatch.LocalTrainer",
                                     "store": "postgresql://attacker.example/labels"}),
        "weights_dir": ("dispatch.weights_dir", {"_target_": "forge.labelling.dispatch.LocalTrainer",
                                                 "weights_dir": str(outside)}),
        "logger": ("dispatch.logger.save_dir", {"_target_": "forge.labelling.dispatch.LocalTrainer",
                                                "logger": {"save_dir": str(outside)}}),
        "fault": ("dispatch.fault.dir", {"_target_": "forge.labelling.dispatch.LocalTrainer",
                                         "fault": {"dir": str(outside)}}),
    }


def _hostile(finished_run: Path, dest: Path, node: dict, where: str = "dispatch") -> Path:
    """The run as an attacker shares it: train mode on the CPU protocol (so resume and verify build the trainer
    and could train here), the trainer node above."""
    conf = Path(__file__).resolve().parents[1] / "conf"
    cpu = {k: yaml.safe_load((conf / k / f"{v}.yaml").read_text()) for k, v in (("protocol", "cpu-proxy"),
                                                                                  ("corpus", "stdlib"))}
    shutil.copytree(finished_run, dest)
    ck = json.loads((dest / "state/checkpoint.json").read_text())
    for cfg in (ck["config"], c := yaml.safe_load((dest / "config.yaml").read_text())):
        cfg["evaluator"]["kind"] = "train"
        cfg.update(cpu)
        parent = cfg
        *head, last = where.split(".")
        for part in head:
            parent = parent.setdefault(part, {})
        parent[last] = node
    (dest / "state/checkpoint.json").write_text(json.dumps(ck))
    (dest / "config.yaml").write_text(yaml.safe_dump(c))
    return dest


@pytest.mark.parametrize("attack", list(_attacks(Path("w"), Path("o"))))
@pytest.mark.parametrize("command", ["resume", "verify"])
def test_a_saved_launch_option_is_refused_and_nothing_runs_or_is_written(finished_run, tmp_path, attack, command):
    from search.cli import run as run_search
    from search.verify import run as run_verify

    witness, outside = tmp_path / "pwned", tmp_path / "outside"
    key, node = _attacks(witness, outside)[attack]
    hostile = _hostile(finished_run, tmp_path / "shared-run", node)
    before, around = _tree(hostile), sorted(p.name for p in tmp_path.iterdir())
    live = {"resume": str(hostile), "progress": False} if command == "resume" else {"run": str(hostile),
                                                                                      "measure": "none", "k": 1, "control": 0}
    live["plugins"] = FAKES  # the run's fake backend and predictor: the user's own, named at launch
    plugins.trust(live)
    with pytest.raises(LaunchOnlyError, match=rf"the saved {key} = .* is refused.*allowed: pass it yourself") as e:
        (run_search if command == "resume" else run_verify)(live)
    assert "\n" not in str(e.value) and isinstance(e.value, ForgeError)
    assert not witness.exists() and not outside.exists()
    assert _tree(hostile) == before and sorted(p.name for p in tmp_path.iterdir()) == around


@pytest.mark.parametrize("where", ["evaluator.trainer", "search.coevolve.trainer"])
def test_every_place_a_run_config_holds_a_trainer_is_checked(finished_run, tmp_path, where):
    from search.cli import run as run_search

    witness = tmp_path / "pwned"
    node = {"_target_": SUBMITIT, "parameters": {"local_setup": [f"touch {witness}"]}}
    hostile = _hostile(finished_run, tmp_path / "shared-run", node, where)
    before = _tree(hostile)
    with pytest.raises(LaunchOnlyError, match=rf"the saved {where}.parameters.local_setup"):
        run_search({"resume": str(hostile), "progress": False})
    assert not witness.exists() and _tree(hostile) == before


def test_shipped_defaults_and_the_launched_configs_own_values_pass():
    shipped = yaml.safe_load((Path(__file__).resolve().parents[1] / "conf/dispatch/submitit.yaml").read_text())
    launched = {"dispatch": "submitit"}  # the kind is the launched command's choice (issue 50 §2), its options too
    check_saved({"dispatch": shipped}, launched, "resume=x", "forge-search resume=x")  # the default folder, cluster
    check_saved({"dispatch": "submitit"}, launched, "resume=x", "forge-search resume=x")  # a shipped name
    with pytest.raises(LaunchOnlyError, match="the saved dispatch .* never chooses the kind of trainer"):
        check_saved({"dispatch": "submitit"}, {}, "resume=x", "forge-search resume=x")  # not launched: refused
    node = {**shipped, "parameters": {"slurm_partition": "gpu", "local_setup": ["module load cuda"]}}
    check_saved({"dispatch": node}, {"dispatch": node}, "resume=x", "forge-search resume=x")  # passed again
    with pytest.raises(LaunchOnlyError, match="dispatch.parameters.local_setup"):
        check_saved({"dispatch": node}, {"dispatch": {**node, "parameters": {"slurm_partition": "gpu"}}},
                    "resume=x", "forge-search resume=x")


@pytest.mark.slow  # a fresh interpreter (torch, Hydra)
@pytest.mark.parametrize("app, arg", [("forge-search", "resume"), ("forge-verify", "run")])
def test_the_cli_refuses_a_shared_runs_shell_line_in_one_line(finished_run, tmp_path, app, arg):
    witness = tmp_path / "pwned"
    node = {"_target_": SUBMITIT, "cluster": "local", "folder": str(tmp_path / "logs" / "%j"),
            "parameters": {"local_setup": [f"touch {witness}"]}}
    hostile = _hostile(finished_run, tmp_path / "shared-run", node)
    before = _tree(hostile)
    p = _cli(app, f"{arg}={hostile}", "measure=none" if app == "forge-verify" else "progress=false",
             *(f"+plugins.{k}=[{v[0]}]" for k, v in FAKES.items()), cwd=tmp_path)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr[-2000:]
    assert "the saved dispatch." in lines[0] and "is refused" in lines[0]
    assert not witness.exists() and not (tmp_path / "logs").exists() and _tree(hostile) == before


def test_the_python_apis_verify_refuses_a_shared_runs_shell_line(finished_run, tmp_path):
    import forge
    from search.api import SearchResult

    witness = tmp_path / "pwned"
    node = {"_target_": SUBMITIT, "cluster": "local", "parameters": {"local_setup": [f"touch {witness}"]}}
    hostile = _hostile(finished_run, tmp_path / "shared-run", node)
    before = _tree(hostile)
    res = SearchResult(hostile, json.loads((hostile / "summary.json").read_text()))
    with pytest.raises(forge.errors.ForgeError, match=r"the saved dispatch.parameters.local_setup"):
        res.verify(measure="none", k=1, control=0, plugins=FAKES)
    assert not witness.exists() and _tree(hostile) == before
