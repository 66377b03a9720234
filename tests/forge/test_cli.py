"""forge-arch and forge-space: run(cfg) directly, plus the console scripts end to end."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_module

from forge.cli import run_arch, run_space
from forge.genomes.genome import GenomeError


def _cfg(app: str, overrides: list[str]):
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        return compose(config_name=app, overrides=overrides)


def test_forge_arch_summary(tmp_path):
    cfg = _cfg("forge-arch", ["arch=qwen2.5-0.5b", f"+out_dir={tmp_path}", "quiet=true"])
    s = run_arch(cfg)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["params"] == s["params"] == 494_032_768
    for k in ("name", "params", "non_embedding_params", "n_active_layers", "kv_bytes_per_token", "flops_per_token"):
        assert k in on_disk


def test_forge_arch_unknown_lists_baselines(tmp_path):
    cfg = _cfg("forge-arch", ["arch=nonexistent", f"+out_dir={tmp_path}"])
    with pytest.raises(GenomeError, match="smollm2-135m"):
        run_arch(cfg)


@pytest.mark.parametrize("space,expected", [("iha-paper", {"gqa": 27, "iha": 11250}), ("iha-tiny", None)])
def test_forge_space_summary(tmp_path, space, expected):
    s = run_space(_cfg("forge-space", [f"space={space}", f"+out_dir={tmp_path}", "quiet=true"]))
    assert json.loads((tmp_path / "summary.json").read_text())["configs_per_layer"] == s["configs_per_layer"]
    if expected:
        assert s["configs_per_layer"] == expected


def test_console_script_writes_run_dir(tmp_path):
    exe = [sys.executable, "-c", "from forge.cli import arch_main; arch_main()"]
    r = subprocess.run(exe + ["arch=gpt2", f"hydra.run.dir={tmp_path}"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "summary.json").read_text())["params"] == 124_439_808


def test_bad_input_is_one_line_not_a_traceback(tmp_path):
    exe = [sys.executable, "-c", "from forge.cli import arch_main; arch_main()"]
    r = subprocess.run(exe + ["arch=nonexistent", f"hydra.run.dir={tmp_path}"], capture_output=True, text=True, timeout=600)
    assert r.returncode != 0
    assert "forge-arch: error: arch = 'nonexistent'" in r.stderr and "Traceback" not in r.stderr


def _arch_file(tmp_path, **gene):
    layer = {"n_h": 2, "n_kv": 1, "d_qk": 16, "d_v": 16, "d_mlp": 64}
    path = tmp_path / "g.yaml"
    path.write_text(json.dumps({"d_model": 128, "block_size": 64, "vocab_size": 256,
                                "layers": [{**layer, **gene}, layer]}))
    return path


def test_forge_arch_on_an_unregistered_gene_says_how_to_import_its_module(tmp_path):
    cfg = _cfg("forge-arch", [f"arch={_arch_file(tmp_path, glu=1)}", f"+out_dir={tmp_path}", "quiet=true"])
    with pytest.raises(GenomeError, match=r"layers\[0\]\.glu = 1 is invalid; .*plugins.modules=\[mypkg.genes\]"):
        run_arch(cfg)


def test_a_bool_gene_prints_as_true_or_false_in_every_row(tmp_path, capsys):
    """A layer at the default holds False, one set holds 1 in its canonical form: the table spells both alike."""
    from forge.genomes.genes import Gene, registered

    with registered(Gene("toy_off", kind="bool", lo=0, default=False)):
        cfg = _cfg("forge-arch", [f"arch={_arch_file(tmp_path, toy_off=True)}", f"+out_dir={tmp_path}"])
        run_arch(cfg)
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.strip().startswith(("│ 0", "│ 1"))]
    assert "true" in rows[0] and "false" in rows[1] and not any(w in out for w in ("False", "True", "│ 1       │"))
