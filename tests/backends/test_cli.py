"""forge-hw: run() through Hydra compose, summary.json, bad input messages, and a -m sweep (slow)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_module

from backends.cli import run
from backends.interface import BackendError
from forge.genomes.genome import GenomeError


def cfg(*overrides: str, out=None):
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        c = compose(config_name="forge-hw", overrides=list(overrides))
    if out is not None:
        from omegaconf import open_dict

        with open_dict(c):
            c.out_dir = str(out)
    return c


@pytest.mark.parametrize("backend", ["roofline", "gemmini", "eyeriss", "flat", "dxe"])
def test_run_writes_summary_and_prints_tables(backend, tmp_path, capsys):
    s = run(cfg(f"backend={backend}", "workload.prefill=32", "workload.decode=8", out=tmp_path))
    disk = json.loads((tmp_path / "summary.json").read_text())
    for k in ("ttft_ms", "tpot_ms", "energy_per_token_uj", "feasible"):
        assert disk[k] == s[k]
    assert disk["backend"] == backend and disk["arch"] == "smollm2-135m" and disk["feasible"]
    assert disk["workload"]["prefill"] == 32 and disk["workload"]["weight_bits"] == (16 if backend == "roofline" else 8)
    assert "slowest operators" in capsys.readouterr().out


def test_hardware_group_reaches_the_roofline(tmp_path):
    a = run(cfg("hardware=a100-40gb", "quiet=true", out=tmp_path))
    h = run(cfg("hardware=h100-sxm", "quiet=true", out=tmp_path))
    assert h["hardware"] == "h100-sxm" and h["tpot_ms"] < a["tpot_ms"]


def test_bad_input_messages(tmp_path):
    with pytest.raises(BackendError, match="workload.prefill = 0 is invalid"):
        run(cfg("workload.prefill=0", "quiet=true", out=tmp_path))
    with pytest.raises(BackendError, match="workload.decode = -5 is invalid"):
        run(cfg("workload.decode=-5", "quiet=true", out=tmp_path))
    with pytest.raises(GenomeError, match="smollm2-135m"):
        run(cfg("arch=not-a-model", "quiet=true", out=tmp_path))
    bad = tmp_path / "bad.yaml"
    bad.write_text("d_model: wide\nblock_size: 64\nlayers: [{n_h: 2, n_kv: 1, d_qk: 8, d_v: 8, d_mlp: 16}]\n")
    with pytest.raises(GenomeError, match="d_model"):
        run(cfg(f"arch={bad}", "quiet=true", out=tmp_path))
    with pytest.raises(BackendError, match="a100-40gb"):
        run(cfg("backend.hardware=rtx9090", "quiet=true", out=tmp_path))
    with pytest.raises(Exception, match="gemmini"):  # Hydra lists the available backend options
        cfg("backend=tpu")


@pytest.mark.slow
def test_multirun_sweeps_all_five_backends(tmp_path):
    cmd = [sys.executable, "-m", "backends.cli", "-m", "arch=smollm2-135m", "backend=roofline,gemmini,eyeriss,flat,dxe",
           "workload.decode=16", "quiet=true", f"hydra.sweep.dir={tmp_path}"]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)
    got = {json.loads(p.read_text())["backend"] for p in tmp_path.glob("*/summary.json")}
    assert got == {"roofline", "gemmini", "eyeriss", "flat", "dxe"}


def test_a_measured_backend_shows_a_step_per_round_of_runs(tmp_path, capsys):
    """Issue 56 §7: `forge-hw backend=cpu-measured` times the model for real (245 s for smollm2-135m on a busy
    2-core box, silently): a line per round of runs on stderr (not a terminal here), n of m."""
    from tests.forge.labelling._train_helpers import tiny_genomes

    arch = tmp_path / "tiny.yaml"
    arch.write_text(tiny_genomes(1)[0].to_yaml())
    run(cfg(f"arch={arch}", "backend=cpu-measured", "workload.prefill=8", "workload.decode=2", out=tmp_path))
    from backends.registry import build_backend

    b = build_backend(cfg("backend=cpu-measured")["backend"])
    n, w = b.warmup + b.repeats, b.warmup
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"forge-hw: timing tiny on cpu: 0/{n} to do"
    assert [ln.split("(")[1].split(")")[0] for ln in err[1:]] == [
        f"{'warm-up' if r < w else 'timed'} run {r + 1} of {n}" for r in range(n)]


def test_the_summary_path_is_printed_as_typed_from_the_working_folder(tmp_path, monkeypatch, capsys):
    """Issue 56 §8: forge-hw printed the summary's absolute path; under the working folder it is relative."""
    monkeypatch.chdir(tmp_path)
    run(cfg("workload.prefill=32", "workload.decode=8", out=tmp_path / "o"))
    assert "summary: o/summary.json" in capsys.readouterr().out


def test_a_sweep_ends_with_its_jobs_side_by_side(tmp_path, capsys):
    """Issue 56 §8: `forge-hw -m ... backend=a,b,...` ends with one table of every job (what varies and its
    costs) and side_by_side.csv; it printed a table per job and no comparison."""
    from omegaconf import OmegaConf

    from backends.side_by_side import SideBySide

    for i, (b, t) in enumerate([("roofline", 2.5), ("gemmini", 40.0)]):
        (tmp_path / str(i) / ".hydra").mkdir(parents=True)
        (tmp_path / str(i) / ".hydra" / "overrides.yaml").write_text(f"- backend={b}\n- quiet=true\n")
        (tmp_path / str(i) / "summary.json").write_text(json.dumps({"ttft_ms": t, "tpot_ms": t / 2,
                                                                     "energy_per_token_uj": 9.0, "feasible": True}))
    SideBySide().on_multirun_end(OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}}}))
    out = capsys.readouterr().out
    assert "side by side: 2 jobs" in out and "roofline" in out and "gemmini" in out and "quiet" not in out
    rows = (tmp_path / "side_by_side.csv").read_text().splitlines()
    assert rows[0] == "backend,ttft_ms,tpot_ms,energy_per_token_uj,feasible" and rows[2].startswith("gemmini,40.0,")
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        c = compose(config_name="forge-hw", return_hydra_config=True)
    assert c.hydra.callbacks.side_by_side._target_ == "backends.side_by_side.SideBySide"


def test_a_measured_backend_that_cannot_run_here_refuses_before_its_progress(tmp_path, capsys):
    """A refusal stays one line: `backend=gpu-measured` on a machine without a GPU says so before any step."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: gpu-measured runs here")
    with pytest.raises(BackendError, match="needs a CUDA GPU"):
        run(cfg("backend=gpu-measured", out=tmp_path))
    assert capsys.readouterr().err == ""
