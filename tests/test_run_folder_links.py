"""Issue 42 §3: nothing is written through a link planted in a run folder (forge.disk.confined).

Attacks replayed on a shared copy of a finished run: `archive.jsonl`, `history.jsonl`, `history.csv`,
`state/loss_cache.jsonl`, `cli.log` or `labels.db` replaced by a link to a file outside the run, `state` or
`logs` by a link to a folder outside it, and a `verify` link for forge-verify's output. The command refuses in one
line naming the link; the outside file is byte for byte what it was and the run folder is unchanged.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from forge import plugins
from forge.disk.confined import LinkError
from forge.errors import ForgeError
from tests.test_launch_only import FAKES
from tests.test_security import _cli, _tree, finished_run  # noqa: F401  (the module-scoped fixture)

FILES = ("archive.jsonl", "history.jsonl", "history.csv", "state/loss_cache.jsonl", "cli.log", "labels.db")


def _linked(finished_run: Path, tmp_path: Path, name: str, folder: bool = False) -> tuple[Path, Path]:
    """(the shared run with `name` a link, what it links to outside the run, holding the attacker's bytes)."""
    run = tmp_path / "shared-run"
    shutil.copytree(finished_run, run)
    outside = tmp_path / "outside"
    if folder:
        shutil.copytree(run / name, outside) if (run / name).is_dir() else outside.mkdir()
        shutil.rmtree(run / name, ignore_errors=True)
    else:
        outside.write_text("the outside file\n")
        (run / name).unlink(missing_ok=True)
    (run / name).parent.mkdir(parents=True, exist_ok=True)
    (run / name).symlink_to(outside, target_is_directory=folder)
    return run, outside


def _live(command: str, run: Path) -> dict:
    live = ({"resume": str(run), "progress": False} if command == "resume"
            else {"run": str(run), "measure": "none", "k": 1, "control": 0})
    plugins.trust({**live, "plugins": FAKES})
    return {**live, "plugins": FAKES}


@pytest.mark.parametrize("name, folder", [*((n, False) for n in FILES), ("state", True), ("logs", True)])
@pytest.mark.parametrize("command", ["resume", "verify"])
def test_a_link_in_the_run_folder_is_refused_and_nothing_is_written_through_it(finished_run, tmp_path, name,
                                                                               folder, command):
    from search.cli import run as run_search
    from search.verify import run as run_verify

    run, outside = _linked(finished_run, tmp_path, name, folder)
    before, there = _tree(run), _tree(tmp_path)
    with pytest.raises(LinkError, match=rf"{name}: a link inside the run folder .* is refused") as e:
        (run_search if command == "resume" else run_verify)(_live(command, run))
    assert "\n" not in str(e.value) and isinstance(e.value, ForgeError)
    assert _tree(tmp_path) == there and _tree(run) == before


def test_a_verify_link_never_receives_forge_verifys_output(finished_run, tmp_path):
    from search.verify import run as run_verify

    run, outside = _linked(finished_run, tmp_path, "verify", folder=True)
    with pytest.raises(LinkError, match=r"verify: a link inside the run folder"):
        run_verify(_live("verify", run))
    assert not any(outside.iterdir())


def test_an_append_never_follows_a_link_even_past_the_first_check(tmp_path):
    """O_NOFOLLOW: a link planted after the command began (or a writer with no walk before it) is refused too."""
    from search.state import append_jsonl

    outside = tmp_path / "outside.jsonl"
    outside.write_text("theirs\n")
    (tmp_path / "archive.jsonl").symlink_to(outside)
    with pytest.raises(LinkError, match="archive.jsonl: a link"):
        append_jsonl(tmp_path / "archive.jsonl", [{"id": "x"}])
    assert outside.read_text() == "theirs\n"


@pytest.mark.slow  # a fresh interpreter (torch, Hydra)
@pytest.mark.parametrize("name, dangling", [("cli.log", True), ("cli.log", False), ("archive.jsonl", False)])
def test_the_cli_refuses_a_linked_log_before_hydra_opens_it(finished_run, tmp_path, name, dangling):
    """Hydra opens the job log (cli.log) before the command runs: a dangling link would create the outside file."""
    run, outside = _linked(finished_run, tmp_path, name)
    if dangling:
        outside.unlink()
    before, there = _tree(run), _tree(tmp_path)
    p = _cli("forge-search", f"resume={run}", "progress=false",
             *(f"+plugins.{k}=[{v[0]}]" for k, v in FAKES.items()), cwd=tmp_path)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr[-2000:]
    assert f"{name}: a link inside the run folder" in lines[0]
    assert outside.exists() != dangling and _tree(tmp_path) == there and _tree(run) == before
