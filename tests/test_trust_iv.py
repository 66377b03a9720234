"""Issue 50 §2, §3, §5, §7 replayed on a shared copy of a finished run (fakes; fast, in process):

- §2 a received run chooses nothing about how or on what a command trains: a saved corpus path, a remote corpus
  name, another trainer kind, another logger class are each refused in one line naming the key and how to pass
  it, before anything is read, started or reported; the same choice passed on the command line is accepted;
- §3 no input hangs a command: a YAML alias bomb in config.yaml, cli.log replaced by a FIFO, a genome deeper
  than any space's L_max, and YAML/JSON beyond their bounds are refused at once;
- §5 (crafted predictor checkpoints) lives in tests/surrogate/test_sidecar_trust.py;
- §7 full-disk wording (forge-space never advises a search's resume=, a store's disk error never the URL syntax)
  and an unknown top-level key in a config-only resume.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import yaml

from forge.errors import ForgeError, UserError
from forge.runtime.launch_only import LaunchOnlyError, check_saved
from tests.test_launch_only import _hostile
from tests.test_run_folder_links import _live
from tests.test_security import _tree, finished_run  # noqa: F401  (the module-scoped fixture)

TEXT, HF = "forge.labelling.corpus.text_corpus", "forge.labelling.corpus.hf_corpus"


def _watchdog(fn: Callable[[], Any], seconds: float = 60) -> Any:
    """`fn()` in a daemon thread: a call that hangs (a blocking open, hours of YAML) fails the test instead."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            box["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s: it hangs"
    if "error" in box:
        raise box["error"]
    return box.get("value")


# ------------------------------------------------------------------ §2 a received run chooses nothing
def _record(monkeypatch, where: str) -> list:
    """Replace the callable at `where` by one that records its calls (and builds nothing)."""
    import importlib

    mod, name = where.rsplit(".", 1)
    calls: list = []
    monkeypatch.setattr(importlib.import_module(mod), name, lambda *a, **k: calls.append((a, k)))
    return calls


CHOSEN = {  # id -> (command, saved key, saved value, what it would build, the words of the refusal)
    "verify-corpus-path": ("verify", "corpus", lambda s: {"_target_": TEXT, "path": str(s), "tokenizer": "byte"},
                           TEXT, "never chooses the data a command trains on"),
    "resume-corpus-path": ("resume", "corpus", lambda s: {"_target_": TEXT, "path": str(s), "tokenizer": "byte"},
                           TEXT, "never chooses the data"),
    "verify-remote-name": ("verify", "corpus", lambda s: {**yaml.safe_load((_conf() / "corpus/hf.yaml").read_text()),
                                                          "name": "attacker/exfiltrate"}, HF, "corpus.name="),
    "resume-trainer-kind": ("resume", "dispatch", lambda s: "submitit", "forge.labelling.dispatch.SubmititTrainer",
                            "never chooses the kind of trainer"),
    "verify-trainer-kind": ("verify", "dispatch", lambda s: "ray", "forge.labelling.dispatch.RayTrainer",
                            "dispatch=ray"),
    "resume-logger-class": ("resume", "logger", lambda s: {"_target_": "lightning.pytorch.loggers.WandbLogger"},
                            "forge.shell.tracking.build", "never chooses the logger's class"),
}


def _conf() -> Path:
    return Path(__file__).resolve().parents[1] / "conf"


@pytest.mark.parametrize("case", list(CHOSEN))
def test_a_received_run_never_chooses_its_corpus_trainer_kind_or_logger(finished_run, tmp_path, monkeypatch, case):
    from search.cli import run as run_search
    from search.verify import run as run_verify

    command, key, value, built, says = CHOSEN[case]
    secret = tmp_path / "secret.txt"
    secret.write_bytes(os.urandom(64 << 10))  # a 64 KiB file outside the run
    hostile = _hostile(finished_run, tmp_path / "shared-run", value(secret), key)
    calls = _record(monkeypatch, built)
    before, around = _tree(hostile), sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(LaunchOnlyError) as e:
        (run_search if command == "resume" else run_verify)(_live(command, hostile))
    line = str(e.value)
    assert "\n" not in line and f"the saved {key} (" in line and says in line and isinstance(e.value, ForgeError)
    assert f"{'forge-search resume' if command == 'resume' else 'forge-verify run'}={hostile} {key}=" in line
    assert calls == [] and _tree(hostile) == before and sorted(p.name for p in tmp_path.iterdir()) == around


def test_a_choice_passed_on_the_command_line_is_the_users_own():
    text = {"_target_": TEXT, "path": "/data/my.txt", "tokenizer": "byte", "val_fraction": 0.05}
    check_saved({"corpus": text}, {"corpus": text}, "run=x", "forge-verify run=x")  # passed again: accepted
    check_saved({"corpus": {**text, "val_fraction": 0.1}}, {"corpus": text}, "run=x", "forge-verify run=x")  # a size
    check_saved({"corpus": "stdlib"}, {}, "run=x", "forge-verify run=x")  # a shipped corpus as shipped reads no path
    check_saved({"dispatch": "submitit"}, {"dispatch": "submitit"}, "resume=x", "forge-search resume=x")
    wandb = {"_target_": "lightning.pytorch.loggers.WandbLogger"}
    check_saved({"logger": wandb}, {"logger": wandb}, "resume=x", "forge-search resume=x")
    check_saved({"logger": None}, {}, "resume=x", "forge-search resume=x")  # no logger: reports nowhere
    with pytest.raises(LaunchOnlyError, match=r"corpus.path=/elsewhere"):
        check_saved({"corpus": {**text, "path": "/elsewhere"}}, {"corpus": text}, "run=x", "forge-verify run=x")


# ------------------------------------------------------------------ §3 no input hangs a command
BOMB = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, "
    f"*a{i - 1}]\n" for i in range(1, 10))  # ~0.5 KB: 9^10 = 3.5e9 nodes once expanded


def test_yaml_is_bounded_aliases_expanded_and_a_cycle_refused():
    from forge.disk.io import load_yaml

    assert load_yaml("base: &b {lr: 0.1}\nlist: [*b, *b]\n", "ok.yaml")["list"][1]["lr"] == 0.1  # a usual alias
    with pytest.raises(UserError, match=r"bomb.yaml:\d+: this YAML expands to more than 200,000 nodes"):
        _watchdog(lambda: load_yaml(BOMB, "bomb.yaml"), 30)
    with pytest.raises(UserError, match="more than .* or 100 levels"):
        load_yaml("[" * 150 + "]" * 150, "deep.yaml")
    with pytest.raises(UserError, match="refers to its own node"):
        load_yaml("a: &a [1, *a]\n", "cycle.yaml")


def test_json_is_bounded_in_depth():
    from forge.disk.io import loads

    assert loads('{"a": [1, {"b": "[[[[[[[["}]}' + " " * 10) == {"a": [1, {"b": "[[[[[[[["}]}  # brackets in text
    for text in ("[" * 100_000 + "]" * 100_000, "[0," * 1000 + "0" + "]" * 1000):
        with pytest.raises(json.JSONDecodeError, match="nested deeper than 64 levels"):
            loads(text)


@pytest.mark.parametrize("command", ["resume", "verify"])
def test_an_alias_bomb_in_config_yaml_is_refused_at_once(finished_run, tmp_path, command):
    from search.cli import run as run_search
    from search.verify import run as run_verify

    run = tmp_path / "shared-run"
    shutil.copytree(finished_run, run)
    if command == "resume":  # a config-only resume (killed before its first checkpoint)
        for name in ("state", "history.jsonl", "archive.jsonl", "pareto.jsonl", "summary.json"):
            shutil.rmtree(run / name) if (run / name).is_dir() else (run / name).unlink(missing_ok=True)
    (run / "config.yaml").write_text(BOMB)
    before = _tree(run)
    with pytest.raises(UserError, match="config.yaml:.*expands to more than"):
        _watchdog(lambda: (run_search if command == "resume" else run_verify)(_live(command, run)), 60)
    assert _tree(run) == before


def test_a_fifo_for_cli_log_is_refused_before_hydra_opens_it(finished_run, tmp_path, monkeypatch, capsys):
    from tests.bad_input_kit import cli

    run = tmp_path / "shared-run"
    shutil.copytree(finished_run, run)
    (run / "cli.log").unlink(missing_ok=True)
    os.mkfifo(run / "cli.log")  # Hydra's FileHandler would block in open() forever
    (tmp_path / "cwd").mkdir()
    code, err = _watchdog(lambda: cli("forge-search", [f"resume={run}", "progress=false"], tmp_path / "cwd",
                                      monkeypatch, capsys), 60)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "cli.log: not a regular file (a FIFO" in lines[0], err
    assert (run / "cli.log").exists() and not (run / "cli.log").is_file()  # left as it was


def test_a_fifo_anywhere_in_the_run_folder_is_refused(finished_run, tmp_path):
    from search.cli import run as run_search

    run = tmp_path / "shared-run"
    shutil.copytree(finished_run, run)
    (run / "summary.json").unlink()
    os.mkfifo(run / "summary.json")
    with pytest.raises(UserError, match="summary.json: not a regular file"):
        _watchdog(lambda: run_search(_live("resume", run)), 60)


def test_a_genome_deeper_than_any_space_is_refused_before_anything_is_built(tmp_path):
    from omegaconf import OmegaConf

    from forge.genomes.genome import GenomeError
    from forge.labelling.cli import _genomes
    from forge.spaces.space import load_space

    g = load_space("iha-tiny").sample(1, np.random.default_rng(0))[0].to_dict()
    g["layers"] = [next(lay for lay in g["layers"] if lay.get("active", True))] * 10_000
    (tmp_path / "deep.jsonl").write_text(json.dumps(g) + "\n")
    cfg = OmegaConf.create({"genomes": str(tmp_path / "deep.jsonl"), "space": {"name": "iha-tiny", "L_max": 12}})
    with pytest.raises(GenomeError, match="genome 1 has 10,000 layers; allowed: at most 40"):
        _watchdog(lambda: _genomes(cfg), 60)


# ------------------------------------------------------------------ §5 crafted predictor checkpoints
def test_full_disk_wording_names_the_path_and_only_a_search_is_told_to_resume():
    from forge.labelling.store_db import cannot_open
    from forge.shell.app import describe_error

    e = OSError(errno.ENOSPC, "No space left on device", "/full/out")
    space, search = describe_error(e, "forge-space"), describe_error(e, "forge-search")
    assert space.startswith("no space left on /full/out") and "resume=" not in space
    assert "resume=<run dir>" in search
    line = str(cannot_open("forge-label", "database or disk is full"))
    assert "free some disk space" in line and "sqlite:///" not in line
    assert "sqlite:///" in str(cannot_open("forge-label", "unable to open database file"))


def test_an_unknown_top_level_key_in_a_config_only_resume_is_refused(finished_run, tmp_path):
    from search.cli import run as run_search
    from search.state import ResumeError

    run = tmp_path / "shared-run"
    shutil.copytree(finished_run, run)
    for name in ("state", "history.jsonl", "archive.jsonl", "pareto.jsonl", "summary.json"):
        shutil.rmtree(run / name) if (run / name).is_dir() else (run / name).unlink(missing_ok=True)
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    (run / "config.yaml").write_text(yaml.safe_dump({**cfg, "evaluatr": {"kind": "train"}}))
    before = _tree(run)
    with pytest.raises(ResumeError, match="unknown key.s. evaluatr; allowed: the keys of forge-search's config"):
        run_search(_live("resume", run))
    assert _tree(run) == before


def test_an_open_mapping_given_whole_is_told_its_entries_not_itself(tmp_path, monkeypatch, capsys):
    from tests.bad_input_kit import cli

    code, err = cli("forge-search", ["hv.anchor_values={val_loss:3.0}", f"hydra.run.dir={tmp_path / 'o'}"],
                    tmp_path, monkeypatch, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "allowed: its entries one at a time: +hv.anchor_values.val_loss=3.0" \
        in lines[0] and "did you mean" not in lines[0], err


def test_verify_given_its_own_corpus_never_reads_the_saved_one(finished_run, tmp_path):
    from search.verify import Verify

    hostile = _hostile(finished_run, tmp_path / "shared-run", {"_target_": TEXT, "path": "/etc/passwd"}, "corpus")
    v = Verify({**_live("verify", hostile), "corpus": "stdlib"})  # chosen on the command line: the saved one unused
    assert v.trainer.corpus["_target_"] == "forge.labelling.corpus.stdlib_corpus"


def test_a_damaged_label_store_is_one_line_and_leaves_no_wal_beside_it(tmp_path):
    import gc

    from forge.labelling.store import LabelStore
    from forge.labelling.store_db import StoreError
    from tests.surrogate.conftest import synth_labels

    store = LabelStore(tmp_path / "s.db")
    for lab in synth_labels(200):
        store.put(lab)
    del store
    gc.collect()
    data = bytearray((tmp_path / "s.db").read_bytes())
    data[5000:20000] = np.random.default_rng(0).integers(0, 256, 15000, dtype=np.uint8).tobytes()
    (tmp_path / "s.db").write_bytes(bytes(data))
    with pytest.raises(StoreError, match="s.db: a damaged SQLite label store .*allowed: a store Forge wrote") as e:
        store = LabelStore(tmp_path / "s.db")
        len(store), list(store.labels())
    assert "\n" not in str(e.value)
    del store, e
    gc.collect()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.db"]


def test_ctrl_c_in_the_teardown_of_a_finished_command_is_ignored(tmp_path):
    """A library's atexit function (registered while the command ran) meets Ctrl-C after the work is done."""
    import subprocess
    import sys

    code = ("import atexit, os, signal, time\n"
            "atexit.register(lambda: (os.kill(os.getpid(), signal.SIGINT), time.sleep(0.2)))  # torch's, say\n"
            "from forge.shell.app import quiet_teardown\n"
            "quiet_teardown()  # what forge_main does once the command returned\n")
    root = Path(__file__).resolve().parents[1]
    p = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONPATH": str(root)})
    assert p.returncode == 0 and "Exception ignored" not in p.stderr and "KeyboardInterrupt" not in p.stderr, p.stderr
