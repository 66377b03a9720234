"""Issue 42 §1-3 in the bad-input replay set: a shared run folder whose config names a file by a path, whose
checkpoint carries a logger, or which holds a link, is refused by the real console entry in one line, exit 2,
and nothing changes inside the run or outside it (`tests.bad_input_kit.refused`). The deeper replays (the
planted shell line never runs; every spelling of a path; every group key): tests/test_run_folder_names.py and
tests/test_run_folder_links.py (fast: they run without a console entry; these are the slow category)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest
import yaml

from tests.bad_input_kit import Variant, refused, world  # noqa: F401  (world: a fixture)

SUBMITIT = "forge.labelling.dispatch.SubmititTrainer"


def _planted_group(key: str, spelling: Callable[[Path], str]) -> Callable[[Path], None]:
    """config.yaml and the checkpoint name `key` by a path to a trainer YAML planted in the run (a shell line)."""
    def make(r: Path) -> None:
        (r / "evil.yaml").write_text(yaml.safe_dump({"_target_": SUBMITIT, "cluster": "local", "parameters": {
            "local_setup": [f"touch {r.parent / 'pwned'}"]}}))
        ck = json.loads((r / "state/checkpoint.json").read_text())
        cfg = yaml.safe_load((r / "config.yaml").read_text())
        for c in (ck["config"], cfg):
            node, *head = c, *key.split(".")[:-1]
            for part in head:
                node = node.setdefault(part, {})
            node[key.split(".")[-1]] = spelling(r)
        (r / "state/checkpoint.json").write_text(json.dumps(ck))
        (r / "config.yaml").write_text(yaml.safe_dump(cfg))
    return make


def _checkpoint_logger(r: Path) -> None:
    ck = json.loads((r / "state/checkpoint.json").read_text())
    ck["config"]["logger"] = {"_target_": "lightning.pytorch.loggers.CSVLogger", "save_dir": str(r.parent / "out")}
    (r / "state/checkpoint.json").write_text(json.dumps(ck))


def _link(name: str, dangling: bool = False) -> Callable[[Path], None]:
    def make(r: Path) -> None:
        outside = r.parent / f"outside-{name.replace('/', '-')}"
        if not dangling:
            outside.mkdir() if name == "verify" else outside.write_text("the outside file\n")
        (r / name).unlink(missing_ok=True)
        (r / name).symlink_to(outside, target_is_directory=name == "verify")
    return make


RUN_FOLDER_TRUST = [
    Variant("search-dispatch-absolute", "forge-search", ("resume={r}",), "the saved dispatch = ",
            _planted_group("dispatch", lambda r: str(r / "evil"))),
    Variant("search-trainer-proc-cwd", "forge-search", ("resume={r}",), "the saved evaluator.trainer = ",
            _planted_group("evaluator.trainer", lambda r: "/proc/self/cwd/../run copy/evil")),
    Variant("verify-dispatch-dotdot", "forge-verify", ("run={r}", "k=1"), "is a name, never a path",
            _planted_group("dispatch", lambda r: "../../../../../../../../../../.." + str(r / "evil"))),
    Variant("search-backend-path", "forge-search", ("resume={r}",), "the saved backend = ",
            _planted_group("backend", lambda r: str(r / "evil"))),
    Variant("search-checkpoint-logger", "forge-search", ("resume={r}",), "the saved logger.save_dir = ",
            _checkpoint_logger),
    Variant("search-archive-link", "forge-search", ("resume={r}",), "archive.jsonl: a link inside the run folder",
            _link("archive.jsonl")),
    Variant("search-loss-cache-link", "forge-search", ("resume={r}",), "loss_cache.jsonl: a link inside the run",
            _link("state/loss_cache.jsonl")),
    Variant("search-cli-log-dangling-link", "forge-search", ("resume={r}",), "cli.log: a link inside the run folder",
            _link("cli.log", dangling=True)),
    Variant("verify-output-link", "forge-verify", ("run={r}", "k=1"), "verify: a link inside the run folder",
            _link("verify")),
]


@pytest.mark.slow
@pytest.mark.parametrize("v", RUN_FOLDER_TRUST, ids=lambda v: v.id)
def test_a_run_folder_never_picks_a_file_a_logger_or_a_link(v, world, tmp_path, monkeypatch, capsys):
    refused(v, world, tmp_path, monkeypatch, capsys)
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "out").exists()
    assert not (tmp_path / "outside-cli.log").exists()  # a dangling link: Hydra's log never created its target
