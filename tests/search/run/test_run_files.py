"""Issue 42 §5: a damaged run folder is bad input in one line (exit 2, nothing changed), never "a bug in Forge".

Each variant damages a copy of a finished run (tests.bad_input_kit) the way a failed disk or a hand edit would;
the command refuses it before any work starts: resume reads config.yaml first (it once read it only for the end
screen, after every generation ran), a saved dispatch's options are checked against its class, summary.json
against its schema, and a cli.log link Hydra cannot open is named as a link.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

import pytest

from search.errors import SearchConfigError
from tests.bad_input_kit import Variant, refused, world  # noqa: F401  (world: a fixture)


def _append(rel: str, text: str) -> Callable[[Path], None]:
    def damage(r: Path) -> None:
        with (r / rel).open("a") as f:
            f.write(text)
    return damage


def _replace(rel: str, make: Callable[[Path], None]) -> Callable[[Path], None]:
    def damage(r: Path) -> None:
        (r / rel).unlink()
        make(r / rel)
    return damage


def _summary(**fields) -> Callable[[Path], None]:
    def damage(r: Path) -> None:
        s = json.loads((r / "summary.json").read_text())
        (r / "summary.json").write_text(json.dumps({**s, **fields}))
    return damage


TARGET = {"_target_": "os.system", "command": "echo planted"}
DAMAGED = [
    Variant("resume-config-python-tag", "forge-search", ("resume={r}",), "corrupt run config",
            _append("config.yaml", 'evil: !!python/object/apply:os.system ["echo planted"]\n')),
    Variant("resume-config-fifo", "forge-search", ("resume={r}",), "a FIFO, not a file",
            _replace("config.yaml", os.mkfifo)),
    Variant("verify-config-fifo", "forge-verify", ("run={r}", "k=1"), "config.yaml is a FIFO, not a file",
            _replace("config.yaml", os.mkfifo)),
    Variant("export-config-fifo", "forge-export", ("run={r}", "out={c}/exp"), "config.yaml is a FIFO, not a file",
            _replace("config.yaml", os.mkfifo)),
    Variant("resume-cli-log-dangling", "forge-search", ("resume={r}",), "a link inside the run folder",
            _replace("cli.log", lambda p: p.symlink_to("/nonexistent/forge/cli.log"))),
    Variant("resume-archive-folder", "forge-search", ("resume={r}",), "archive.jsonl is a folder, not a file",
            _replace("archive.jsonl", Path.mkdir)),
    Variant("report-summary-target", "forge-report", ("runs=[{r}]", "out={c}/rep"), "mistyped backend",
            _summary(backend=TARGET)),
    Variant("report-summary-nested-target", "forge-report", ("runs=[{r}]", "out={c}/rep"), "a _target_ key",
            _summary(loss_interval={"method": TARGET})),
]


@pytest.mark.slow
@pytest.mark.parametrize("v", DAMAGED, ids=lambda v: v.id)
def test_a_damaged_run_folder_is_refused_in_one_line_before_any_work(v, world, tmp_path, monkeypatch, capsys):
    refused(v, world, tmp_path, monkeypatch, capsys)


PROTOCOL_CORPUS = {"protocol": {"name": "cpu-proxy"}, "corpus": {"name": "stdlib"}}
LOCAL = {"_target_": "forge.labelling.dispatch.LocalTrainer", "workers": 1}


@pytest.mark.parametrize("extra, says", [({"bogus": 1}, "bogus is not an option of LocalTrainer"),
                                         ({"_args_": [1]}, "_args_ is not an option"),
                                         ({"protocol": {}}, "protocol is not an option")])
def test_a_saved_dispatch_with_an_unknown_key_or_args_is_refused_naming_it(extra, says):
    from search.components import build_trainer

    with pytest.raises(SearchConfigError, match=says) as e:
        build_trainer({"dispatch": {**LOCAL, **extra}, **PROTOCOL_CORPUS})
    assert "\n" not in str(e.value) and "allowed: " in str(e.value)
    if "protocol" not in extra:  # an explicit trainer node names its own protocol and corpus
        with pytest.raises(SearchConfigError, match=says):
            build_trainer({}, {**LOCAL, **extra, **PROTOCOL_CORPUS})
    with pytest.raises(SearchConfigError, match="LocalTrainer needs corpus"):
        build_trainer({}, {**LOCAL, "protocol": {}})


def test_a_saved_dispatch_with_known_options_still_builds():
    from search.components import build_trainer

    trainer = build_trainer({"dispatch": LOCAL, **PROTOCOL_CORPUS})
    assert type(trainer).__name__ == "LocalTrainer" and trainer.workers == 1
