"""Resume: stopped, interrupted (Ctrl-C) and killed runs continue to the uninterrupted result."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from search.cli import run
from search.errors import SearchConfigError
from search.state import ResumeError, config_diff, load_checkpoint, require_complete, run_status
from tests.search.conftest import tiny_cfg
from tests.search.fakes import FakeBackend

FILES = ("pareto.jsonl", "archive.jsonl", "history.jsonl")


def _same(a: Path, b: Path) -> None:
    for f in FILES:
        assert (a / f).read_text() == (b / f).read_text(), f


def test_stop_and_resume_equals_uninterrupted(make_search, tmp_path):
    make_search(tmp_path / "full").run()
    s = make_search(tmp_path / "part")
    assert s.run(stop_after=1)["status"] == "stopped"
    assert load_checkpoint(tmp_path / "part")["generation"] == 1
    for stop in (2, None):
        s = make_search(tmp_path / "part")
        s.load()
        s.run(stop_after=stop)
    _same(tmp_path / "full", tmp_path / "part")


class InterruptingBackend(FakeBackend):
    """Raises KeyboardInterrupt (as Ctrl-C would) on its n-th call."""

    def __init__(self, at: int):
        super().__init__()
        self.at = at

    def evaluate(self, genomes, workload):
        if self.calls + 1 == self.at:
            self.calls += 1
            raise KeyboardInterrupt
        return super().evaluate(genomes, workload)


def test_ctrl_c_saves_and_resumes(make_search, tmp_path):
    make_search(tmp_path / "full").run()
    s = make_search(tmp_path / "cc", backend=InterruptingBackend(at=4))
    summary = s.run()
    assert summary["status"] == "interrupted" and summary["generations_done"] >= 1
    # log lines of the interrupted generation may exist; resume drops them
    s = make_search(tmp_path / "cc")
    s.load()
    assert s.run()["status"] == "complete"
    _same(tmp_path / "full", tmp_path / "cc")


SCRIPT = """
import json, os, sys, time
sys.path.insert(0, {root!r})
from tests.search.fakes import FakeBackend, FakePredictor
from tests.search.conftest import tiny_cfg
from search.cli import run
from backends.interface import Workload
from forge.spaces.space import load_space
from search.evaluators import LossEvaluator

def done():  # the generation the run's checkpoint holds (-1: none yet)
    try:
        return json.loads(open({out!r} + "/state/checkpoint.json").read())["generation"]
    except (OSError, ValueError, KeyError):
        return -1

class Slow(FakeBackend):  # holds (until killed) once the checkpoint reaches generation {hold}: where the run
                          # stops is decided here, not by how soon the test notices on a busy machine
    def evaluate(self, genomes, workload):
        time.sleep(0.05)
        if os.path.exists({out!r} + "/config.yaml") and done() >= {hold}:
            time.sleep(3600)
        return super().evaluate(genomes, workload)

cfg = tiny_cfg(out_dir={out!r}, progress=False)
cfg["search"]["generations"] = 8
summary = run(cfg, {{"space": load_space("iha-tiny"), "evaluator": LossEvaluator(FakePredictor()), "backend": Slow(),
                    "workload": Workload(), "coevolution": None}})
from search.cli import exit_code
sys.exit(exit_code(summary))
"""


def _components():
    from backends.interface import Workload
    from forge.spaces.space import load_space
    from search.evaluators import LossEvaluator
    from tests.search.fakes import FakePredictor

    return {"space": load_space("iha-tiny"), "evaluator": LossEvaluator(FakePredictor()), "backend": FakeBackend(),
            "workload": Workload(), "coevolution": None}


def test_killed_subprocess_resumes_to_the_same_archive(tmp_path):
    root = str(Path(__file__).resolve().parents[3])
    killed, full = tmp_path / "killed", tmp_path / "full"
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT.format(root=root, out=str(killed), hold=2)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpt = killed / "state" / "checkpoint.json"
    deadline = time.time() + 600  # the run holds at its generation: this only bounds a broken one
    while time.time() < deadline and not (ckpt.is_file() and load_checkpoint(killed)["generation"] >= 2):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    gen = load_checkpoint(killed)["generation"]
    assert 2 <= gen < 8, "the run was not killed mid-way"
    cfg = tiny_cfg(out_dir=str(full), progress=False)
    cfg["search"]["generations"] = 8
    run(cfg, _components())
    resumed = dict(cfg, out_dir=str(full), resume=str(killed))
    assert run(resumed, _components())["status"] == "complete"
    _same(full, killed)


def test_resume_with_a_different_config_is_refused(tmp_path):
    cfg = tiny_cfg(out_dir=str(tmp_path), progress=False)
    run(cfg, _components())
    other = tiny_cfg(resume=str(tmp_path), progress=False, seed=5)
    other["search"]["pop_size"] = 9
    with pytest.raises(ResumeError, match=r"differs from the run.s in search.pop_size, seed;"):
        run(other, _components())
    assert config_diff({"a": 1, "b": {"c": 2}, "resume": "x"}, {"a": 1, "b": {"c": 3}, "resume": "y"}) == ["b.c"]
    with pytest.raises(SearchConfigError, match="already holds a search; allowed: resume="):
        run(tiny_cfg(out_dir=str(tmp_path), progress=False), _components())
    with pytest.raises(ResumeError, match="no search state"):
        run(tiny_cfg(resume=str(tmp_path / "nope")), _components())


def test_a_torn_log_line_from_a_kill_is_dropped_on_resume(make_search, tmp_path):
    make_search(tmp_path / "full").run()
    make_search(tmp_path / "part").run(stop_after=2)
    with open(tmp_path / "part" / "archive.jsonl", "a") as f:
        f.write('{"generation": 3, "id": "abc", "metr')  # killed mid-append
    s = make_search(tmp_path / "part")
    s.load()
    s.run()
    _same(tmp_path / "full", tmp_path / "part")
    (tmp_path / "bad.jsonl").write_text('{"a": 1}\nnot json\n{"b": 2}\n')
    with pytest.raises(ResumeError, match="bad.jsonl:2: corrupt line"):
        from search.state import read_jsonl

        read_jsonl(tmp_path / "bad.jsonl")


def test_cli_resume_compares_only_the_overrides_given_again(tmp_path):
    from search.cli import resume_config

    saved = tiny_cfg(progress=False)
    saved["space"] = {"name": "iha-tiny"}
    new = tiny_cfg(resume=str(tmp_path), progress=True, stop_after=None)
    new["space"], new["seed"] = {"name": "iha-paper"}, 7  # what a bare `forge-search resume=DIR` composes
    out = resume_config(new, saved, tmp_path, ["resume=" + str(tmp_path), "progress=true"])
    assert out["space"] == {"name": "iha-tiny"} and out["seed"] == 0 and out["progress"] is True
    with pytest.raises(ResumeError, match="differs from the run.s in space, seed, which"):
        resume_config(new, saved, tmp_path, ["space=iha-paper", "seed=7", "resume=x"])


def test_sigterm_stops_cleanly_with_a_summary(tmp_path):
    root = str(Path(__file__).resolve().parents[3])
    d = tmp_path / "term"
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT.format(root=root, out=str(d), hold=1)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 600  # the run holds at its generation: this only bounds a broken one
    while time.time() < deadline and not ((d / "state" / "checkpoint.json").is_file()
                                          and load_checkpoint(d)["generation"] >= 1):
        time.sleep(0.05)
    assert run_status(d)["status"] == "running"  # what a consumer sees while it runs (or after a SIGKILL)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=600) == 143  # 128 + SIGTERM: an interrupted run is not a finished one
    import json

    s = json.loads((d / "summary.json").read_text())
    assert s["status"] == "interrupted" and s["generations_done"] == load_checkpoint(d)["generation"] < 8
    assert s["interrupted_by"] == "SIGTERM" and b"resume=" in proc.stderr.read()
    with pytest.raises(ResumeError, match=r"interrupted at generation \d+ of 8, not complete; allowed: .*allow_partial"):
        require_complete(d, False, "run")


def _start(out: Path, hold: int = -1) -> subprocess.Popen:
    """The slow run, held in its first evaluation (before any checkpoint) unless `hold` says later."""
    root = str(Path(__file__).resolve().parents[3])
    return subprocess.Popen([sys.executable, "-c", SCRIPT.format(root=root, out=str(out), hold=hold)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _wait_for(cond, timeout: float = 600.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline and not cond():
        time.sleep(0.01)
    assert cond(), "timed out"


@pytest.mark.slow
def test_a_run_killed_before_its_first_checkpoint_resumes_from_its_config(tmp_path):
    killed, full = tmp_path / "killed", tmp_path / "full"
    proc = _start(killed)
    _wait_for(lambda: (killed / "config.yaml").is_file())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (killed / "state" / "checkpoint.json").is_file(), "killed too late for this test"
    (killed / "state").mkdir(exist_ok=True)
    (killed / "state" / ".checkpoint.json.x1y2.tmp").write_text('{"generation": 0, "tor')  # a torn temporary
    (killed / "archive.jsonl").write_text('{"generation": 0, "id": "partial"}\n')  # a log line of generation 0
    cfg = tiny_cfg(out_dir=str(full), progress=False)
    cfg["search"]["generations"] = 8
    run(cfg, _components())
    summary = run(dict(cfg, resume=str(killed)), _components())  # from the run's own config.yaml
    assert summary["status"] == "complete" and summary["generations_done"] == 8
    _same(full, killed)
    assert not list((killed / "state").glob(".*.tmp"))
    with pytest.raises(SearchConfigError, match="already holds a search"):
        run(dict(cfg, out_dir=str(killed)), _components())


CLI_ARGS = ["space=iha-tiny", "evaluator.predictor=forgeformer-iha-tiny", "search.pop_size=6", "search.offspring=8",
            "search.generations=6", "progress=false"]


def _cli(args: list[str], cwd: Path, **kw) -> subprocess.Popen:
    root = str(Path(__file__).resolve().parents[3])
    code = "import sys; sys.argv[0] = 'forge-search'; from search.cli import search_main; search_main()"
    env = {**os.environ, "PYTHONPATH": root}
    return subprocess.Popen([sys.executable, "-c", code, *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, **kw)


@pytest.mark.slow
def test_cli_ctrl_c_exits_130_and_resume_stays_in_its_own_folder(tmp_path):
    """The real forge-search: SIGINT mid-run → exit 130 and `status: interrupted`; forge-export refuses it;
    `resume=DIR` from another folder writes only into DIR (no outputs/search/<stamp>, .hydra untouched),
    sweeps its stale temporaries and ends identical to an uninterrupted run."""
    full, cut, cwd = tmp_path / "full", tmp_path / "cut", tmp_path / "cwd"
    cwd.mkdir()
    assert _cli([*CLI_ARGS, f"hydra.run.dir={full}"], cwd).wait(timeout=600) == 0
    proc = _cli([*CLI_ARGS, f"hydra.run.dir={cut}"], cwd)
    _wait_for(lambda: (cut / "state" / "checkpoint.json").is_file() and load_checkpoint(cut)["generation"] >= 1, 300)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=600) == 130
    st = run_status(cut)
    assert st["status"] == "interrupted" and 1 <= st["generations_done"] < 6
    assert "continue with: forge-search resume=" in proc.stderr.read()
    hydra_before = (cut / ".hydra" / "overrides.yaml").read_bytes()
    (cut / "state" / ".checkpoint.json.dead.tmp").write_text("{")
    (cut / ".pareto.jsonl.dead.tmp").write_text("")
    resumed = _cli([f"resume={cut}"], cwd)
    assert resumed.wait(timeout=600) == 0, resumed.stderr.read()
    assert run_status(cut)["status"] == "complete"
    _same(full, cut)
    assert list(cwd.iterdir()) == [] and (cut / ".hydra" / "overrides.yaml").read_bytes() == hydra_before
    assert not [*cut.glob(".*.tmp"), *(cut / "state").glob(".*.tmp")]


def test_a_run_killed_before_config_yaml_resumes_from_hydras_record(tmp_path):
    """Killed while starting up: only Hydra's `.hydra/config.yaml` is there; resume= starts from it."""
    from omegaconf import OmegaConf

    full, early = tmp_path / "full", tmp_path / "early"
    cfg = tiny_cfg(out_dir=str(full), progress=False)
    run(cfg, _components())
    (early / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create(dict(cfg, out_dir=None)), early / ".hydra" / "config.yaml")
    assert run(dict(cfg, resume=str(early)), _components())["status"] == "complete"
    _same(full, early)
    assert (early / "config.yaml").is_file()


def _composed(*overrides: str) -> dict:
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        return OmegaConf.to_container(compose("forge-search", overrides=list(overrides)), resolve=True)


def test_resume_takes_where_to_run_from_the_command_and_its_refusal_advice_works(tmp_path):
    """Issue 54 (6b): `dispatch=ray dispatch.address=auto` continues a Ray run on a cluster (the run's other
    dispatch keys kept); a key that changes what is trained is refused, and the command the refusal gives works."""
    import shlex

    from search.cli import resume_config

    saved = _composed("experiment=coevolve-tiny", "dispatch=ray", "dispatch.num_gpus=1")
    given = [f"resume={tmp_path}", "dispatch=ray", "dispatch.address=auto", "dispatch.workers=8"]
    out = resume_config(_composed(*given), saved, tmp_path, given)
    assert out["dispatch"] == {**saved["dispatch"], "address": "auto", "workers": 8}  # num_gpus=1 kept
    assert {**out, "dispatch": None} == {**saved, "dispatch": None, "resume": str(tmp_path)}
    given = [f"resume={tmp_path}", "dispatch=submitit", "+dispatch.parameters.slurm_partition=gpu"]
    out = resume_config(_composed(*given), saved, tmp_path, given)  # another dispatcher: its node as launched
    assert out["dispatch"]["_target_"].endswith("SubmititTrainer") and out["dispatch"]["parameters"] == {
        "slurm_partition": "gpu"}
    bad = [f"resume={tmp_path}", "dispatch=ray", "dispatch.address=auto", "seed=7", "protocol.batch=8"]
    with pytest.raises(ResumeError, match="differs from the run.s in seed, protocol.batch, which") as e:
        resume_config(_composed(*bad), saved, tmp_path, bad)
    advice = str(e.value).split("continue it as it was with: ", 1)[1].rsplit(" (or start", 1)[0]
    argv = shlex.split(advice)
    assert argv[0] == "forge-search" and "seed=7" not in argv
    pasted = [a for a in argv[1:] if not a.startswith("resume=")]
    assert resume_config(_composed(*argv[1:]), saved, tmp_path, argv[1:])["dispatch"]["address"] == "auto"
    assert pasted == ["dispatch=ray", "dispatch.address=auto"]


def test_a_ray_run_saved_with_one_address_resumes_under_another(tmp_path):
    """Issue 54: the dispatch keys a resume gives again replace the run's, so a saved non-default Ray address (a
    host the run folder may not pick) is not refused when the command names the new one; left out, it still is."""
    import yaml

    from forge.runtime.launch_only import LaunchOnlyError
    from search.cli import resumed_config

    saved = _composed("experiment=coevolve-tiny", "dispatch=ray", "dispatch.address=ray://10.0.0.1:10001",
                      "+dispatch.init_kwargs.namespace=old")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({**saved, "resume": None}, sort_keys=False))
    given = [f"resume={tmp_path}", "dispatch=ray", "dispatch.address=ray://10.0.0.2:10001",
             "+dispatch.init_kwargs.namespace=new"]
    out = resumed_config(_composed(*given), tmp_path, None, given)
    assert out["dispatch"]["address"] == "ray://10.0.0.2:10001" and out["dispatch"]["init_kwargs"] == {"namespace": "new"}
    given = [f"resume={tmp_path}", "dispatch=ray", "dispatch.address=ray://10.0.0.2:10001"]
    with pytest.raises(LaunchOnlyError, match="saved dispatch.init_kwargs.namespace = 'old' is refused"):
        resumed_config(_composed(*given), tmp_path, None, given)  # a saved host option not given again: refused
