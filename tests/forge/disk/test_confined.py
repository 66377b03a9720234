"""forge.disk.confined: a write inside a run folder never goes through a link planted there (issue 42 §3)."""
from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from forge.disk.confined import LinkError, inside, open_append, refuse_links
from forge.errors import UserError


def test_open_append_writes_a_plain_file_and_refuses_a_link_at_its_name(tmp_path):
    with open_append(tmp_path / "a" / "log.jsonl") as f:
        f.write("one\n")
    with open_append(tmp_path / "a" / "log.jsonl") as f:
        f.write("two\n")
    assert (tmp_path / "a/log.jsonl").read_text() == "one\ntwo\n"
    outside = tmp_path / "outside.txt"
    outside.write_text("theirs\n")
    (tmp_path / "a/linked.jsonl").symlink_to(outside)
    with pytest.raises(LinkError, match=r"linked.jsonl: a link inside the run folder .* is refused") as e:
        open_append(tmp_path / "a/linked.jsonl")
    assert "\n" not in str(e.value) and outside.read_text() == "theirs\n"
    (tmp_path / "a/dangling.jsonl").symlink_to(tmp_path / "nowhere")
    with pytest.raises(LinkError):
        open_append(tmp_path / "a/dangling.jsonl")
    assert not (tmp_path / "nowhere").exists()


def test_open_append_refuses_a_fifo_instead_of_blocking(tmp_path):
    os.mkfifo(tmp_path / "log.jsonl")
    done: list[BaseException] = []
    t = threading.Thread(target=lambda: done.append(pytest.raises(UserError, open_append, tmp_path / "log.jsonl")))
    t.start()
    t.join(10)
    assert not t.is_alive() and done and "not a regular file" in str(done[0].value)


def test_refuse_links_names_the_first_link_anywhere_inside(tmp_path):
    run = tmp_path / "run"
    (run / "state").mkdir(parents=True)
    (run / "state/checkpoint.json").write_text("{}")
    refuse_links(run)  # no link: nothing to say
    (run / "state/loss_cache.jsonl").symlink_to(tmp_path / "outside")
    with pytest.raises(LinkError, match=r"state/loss_cache.jsonl: a link inside the run folder"):
        refuse_links(run)
    (run / "state/loss_cache.jsonl").unlink()
    (run / "verify").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(LinkError, match=r"run/verify: a link"):
        refuse_links(run)


def test_inside_follows_links_to_where_a_path_really_leads(tmp_path):
    run = tmp_path / "run"
    (run / "verify").mkdir(parents=True)
    assert inside(run, run / "verify") == run / "verify"
    assert inside(run, run / "new" / "x.json") == run / "new" / "x.json"  # not there yet: fine
    (run / "out").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(LinkError, match=r"out/verify.json resolves to .*, outside the run folder"):
        inside(run, run / "out" / "verify.json")
    with pytest.raises(LinkError):
        inside(run, Path(run, "..", "elsewhere"))
