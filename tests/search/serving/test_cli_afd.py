"""forge-serve command=afd: run() through Hydra compose writes summary.json and afd.png; bad input is one line."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_module
from omegaconf import open_dict

from backends.serving.afd import AfdError
from search.serving.cli import run


def cfg(*overrides: str, out=None):
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        c = compose(config_name="forge-serve", overrides=list(overrides))
    with open_dict(c):
        c.out_dir = str(out)
        c.quiet = True
    return c


def test_table2_preset_reproduces_r_star_and_the_simulator_agrees(tmp_path):
    s = run(cfg("command=afd", "serve/afd=table2", "serve.afd.N=400", "serve.afd.ratios=[2,8,16]", out=tmp_path))
    disk = json.loads((tmp_path / "summary.json").read_text())
    assert disk["r_star"] == pytest.approx(s["r_star"]) and disk["source"] == "config"
    assert (tmp_path / "afd.png").stat().st_size > 10_000
    assert s["sim_max_rel_gap"] < 0.10 and len(s["sweep"]) == 3


def test_fit_on_roofline_from_a_genome(tmp_path):
    s = run(cfg("command=afd", "arch=smollm2-135m", "backend=roofline", "serve.afd.N=100", "serve.afd.ratios=[1,4]",
                "serve.afd.grid.batch_scale=[1,2]", "serve.afd.grid.load_scale=[0.5,1]", "serve.afd.grid.ffn_scale=[1,8]",
                out=tmp_path))
    assert s["source"] == "fit on roofline" and s["unit"] == "ms" and s["r2_attention"] > 0.99
    assert s["r_star"] > 0 and s["throughput_star_per_s"] == pytest.approx(s["throughput_star"] * 1e3)


def test_nonpositive_ratio_is_an_error(tmp_path):
    with pytest.raises(AfdError, match="allowed: numbers > 0"):
        run(cfg("command=afd", "serve/afd=table2", "serve.afd.ratios=[0,2]", out=tmp_path))


def test_cli_reports_bad_input_in_one_line(tmp_path):
    p = subprocess.run([sys.executable, "-m", "search.serving.cli", "afd", "serve/afd=table2", "serve.afd.ratios=[-1]",
                        f"hydra.run.dir={tmp_path}"], capture_output=True, text=True)
    assert p.returncode != 0
    lines = [x for x in p.stderr.strip().splitlines() if x]
    assert len(lines) == 1 and lines[0].startswith("forge-serve: error:") and "r = [-1.0]" in lines[0]
