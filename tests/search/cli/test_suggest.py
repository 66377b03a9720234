"""Every suggested command works as printed: unwrapped, relative, sized as the docs say, a fresh `out=`."""
from __future__ import annotations

import io

import pytest
import yaml
from rich.console import Console

import forge.runtime.needs as needs
from forge.runtime.config import group_yaml
from search import suggest
from search.console import next_commands


def _run(folder, space="iha-tiny", protocol="cpu-proxy", backend="roofline"):
    folder.mkdir(parents=True, exist_ok=True)
    cfg = {"space": group_yaml("space", space), "backend": {"name": backend},
           "protocol": group_yaml("protocol", protocol), "corpus": group_yaml("corpus", "stdlib")}
    (folder / "config.yaml").write_text(yaml.safe_dump(cfg))
    return folder


def test_next_lines_are_relative_and_never_wrapped_at_80_columns(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(needs, "_cuda", lambda: False)
    run = _run(tmp_path / "outputs" / "search" / "2026-11-27_03-11-01", space="iha-paper-swa", protocol="paper",
               backend="gemmini")
    cmds = next_commands(run)
    buf = io.StringIO()
    suggest.print_commands(Console(file=buf, width=80, force_terminal=False), "next", cmds)
    lines = buf.getvalue().splitlines()
    assert lines[0] == "next:" and [ln.strip() for ln in lines[1:]] == cmds  # one command, one line
    assert any(len(ln) > 80 for ln in lines)  # the long recipe really is longer than the console
    assert cmds[0] == "forge-report runs=outputs/search/2026-11-27_03-11-01"
    assert str(tmp_path) not in "".join(cmds)
    # the recipe follows the run's space family and backend, in a space this CPU trains
    assert cmds[3].startswith("forge-search space=iha-tiny-swa evaluator.predictor=forgeformer-iha-tiny-swa "
                              "backend=gemmini protocol=cpu-proxy corpus=stdlib")


def test_a_tiny_run_is_verified_at_the_tutorials_size(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert next_commands(_run(tmp_path / "runs" / "tiny"))[-1] == "forge-verify run=runs/tiny k=4 control=4"
    assert next_commands(_run(tmp_path / "big", space="iha-paper"))[-1] == "forge-verify run=big"  # paper runs: 8+8


def test_a_run_of_a_users_space_is_never_sent_to_a_shipped_space(tmp_path, monkeypatch):
    """A space of the user's own (not in conf/space) has no CPU-scale twin: without a GPU the advice is its own
    verify where its protocol trains, never an iha-tiny search (issue 36 §3), and verify's refusal says the same."""
    from search.verify import cpu_verify

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(needs, "_cuda", lambda: False)
    run = _run(tmp_path / "mine", space="iha-paper", protocol="paper")
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    cfg["space"]["name"] = "gpt2-bench"  # the user's space, declared in their own yaml
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    cmds = next_commands(run)
    assert not any("iha-tiny" in c for c in cmds)
    assert cmds[-2].startswith("# real training of front picks needs a CUDA GPU") and cmds[-1] == "forge-verify run=mine"
    assert suggest.tiny_recipe(cfg) == [] and "iha-tiny" not in cpu_verify(suggest.tiny_recipe(cfg))
    assert "iha-tiny" in cpu_verify(suggest.tiny_recipe({"space": "iha-paper"}))  # a shipped space keeps its twin


def test_export_suggests_a_fresh_out_when_an_export_is_there(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert suggest.export_command("r") == "forge-export run=r select=knee"
    (tmp_path / "exported").mkdir()
    assert suggest.export_command("r") == "forge-export run=r select=knee out=exported-2"
    (tmp_path / "exported-2").mkdir()
    assert suggest.export_command("r", "format=hf").endswith("format=hf out=exported-3")
    assert suggest.quote("my runs/a") == "'my runs/a'"


@pytest.mark.parametrize("space, twin", [("iha-paper", "iha-tiny"), ("gqa-paper", "gqa-tiny"),
                                         ("iha-paper-mx", "iha-tiny"), ("iha-tiny-swa", "iha-tiny-swa")])
def test_tiny_twin_of_each_space(space, twin):
    assert suggest.tiny_space(space) == twin
    assert suggest.tiny_predictor(twin) in ("forgeformer-iha-tiny", "forgeformer-iha-tiny-swa")


def test_verify_on_a_paper_run_without_a_gpu_advises_a_cpu_search_not_a_protocol_swap(monkeypatch):
    from search.verify import CPU_VERIFY

    monkeypatch.setattr(needs, "_cuda", lambda: False)
    with pytest.raises(needs.NeedsError) as e:
        needs.check_training(group_yaml("protocol", "paper"), group_yaml("corpus", "stdlib"), "forge-verify run=r",
                             allowed=CPU_VERIFY.format(*suggest.tiny_recipe({"space": "iha-paper"})))
    msg = str(e.value)
    assert "forge-search space=iha-tiny" in msg and "forge-verify run=runs/tiny k=4 control=4" in msg
    assert "\n" not in msg


def test_verify_takes_protocol_corpus_and_dispatch_as_typed():
    """`forge-verify protocol=cpu-proxy` and the API's `res.verify(protocol=...)` compose (they are groups)."""
    from search.api_compose import compose

    cfg = compose("forge-verify", run="r", protocol="cpu-proxy", corpus="stdlib", dispatch="local")
    assert cfg.protocol.name == "cpu-proxy" and cfg.corpus.tokenizer == "byte" and "_target_" in cfg.dispatch
    cfg = compose("forge-verify", run="r")
    assert cfg.protocol is None and cfg.corpus is None and cfg.dispatch is None
