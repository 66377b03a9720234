"""hardware=host-cpu: calibrate (with a fake micro-benchmark) fits the roofline's overheads, writes a preset
that composes under Hydra and that load_hardware reads; forge-hw mode=calibrate end to end."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

import backends.host as host
import forge.runtime.config
from backends.cli import run
from backends.gpu.hardware import load_hardware
from backends.gpu.roofline import RooflineBackend
from backends.host import calibrate_host, host_hardware, write_preset
from backends.interface import BackendError, Workload
from backends.registry import build_backend
from forge.runtime.config import conf_dir, group_yaml
from forge.spaces.space import load_space

WL = Workload(prefill=32, decode=16, weight_bits=32, act_bits=32, kv_bits=32)
TRUTH = {"eta_compute": 0.4, "eta_memory": 0.7, "launch_us": 30.0, "layer_us": 50.0}


def fake_micro(threads, timer):
    return {"fp32_flops": 1e11, "gemv_bytes_s": 2e10}  # → peak_tflops_16 0.2, mem_bw_gbs 20


class RooflineHost:
    """A 'measured' backend whose timings are a roofline with known overheads: the fit must find them."""

    threads, timer, clock = 1, None, "thread"

    def __init__(self):
        hw = host_hardware(fake_micro(1, None), group_yaml("hardware", "host-cpu"))
        self.truth = RooflineBackend(hardware=hw, **TRUTH, precision={"weight_bits": 32})

    def evaluate(self, genomes, wl):
        return self.truth.evaluate(genomes, wl)


@pytest.fixture
def conf_copy(tmp_path, monkeypatch):
    """The shipped conf/ without any calibrated preset of this machine, as the install's conf dir."""
    d = tmp_path / "conf"
    shutil.copytree(conf_dir(), d, ignore=shutil.ignore_patterns("calibrated", "__pycache__"))
    monkeypatch.setattr(forge.runtime.config, "conf_dir", lambda: d)
    return d


def compose_hw(d, *overrides):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(d), version_base="1.3"):
        return compose(config_name="forge-hw", overrides=list(overrides))


def test_calibrate_recovers_the_overheads_of_a_known_host():
    genomes = load_space("iha-tiny").sample(16, np.random.default_rng(3))
    p = calibrate_host(RooflineHost(), genomes, WL, base=group_yaml("hardware", "host-cpu"), micro=fake_micro)
    assert p["peak_tflops_16"] == 0.2 and p["mem_bw_gbs"] == 20.0 and p["name"] == "host-cpu"
    assert p["roofline"]["launch_us"] == pytest.approx(30.0, rel=0.02)
    assert p["roofline"]["layer_us"] == pytest.approx(50.0, rel=0.05)
    assert p["calibration"]["rms_rel_error_after"] < 0.01 < p["calibration"]["rms_rel_error_before"]
    assert p["tdp_w"] == group_yaml("hardware", "host-cpu")["tdp_w"]  # energy assumptions kept from the shipped preset


def test_written_preset_composes_and_overrides_the_shipped_one(conf_copy):
    shipped = compose_hw(conf_copy, "hardware=host-cpu")  # nothing calibrated: the placeholder composes
    assert shipped.hardware.peak_tflops_16 == group_yaml("hardware", "host-cpu")["peak_tflops_16"]
    genomes = load_space("iha-tiny").sample(16, np.random.default_rng(3))
    p = calibrate_host(RooflineHost(), genomes, WL, base=group_yaml("hardware", "host-cpu"), micro=fake_micro)
    path = write_preset(p, conf_copy / "calibrated" / "hardware" / "host-cpu.yaml")
    assert path.read_text().startswith("# host-cpu preset MEASURED")
    cfg = compose_hw(conf_copy, "hardware=host-cpu")
    assert cfg.hardware.peak_tflops_16 == 0.2 and cfg.hardware.mem_bw_gbs == 20.0
    assert cfg.backend.launch_us == pytest.approx(p["roofline"]["launch_us"])  # roofline.yaml reads the preset
    assert compose_hw(conf_copy, "hardware=host-cpu", "backend.launch_us=3").backend.launch_us == 3  # CLI still wins
    assert cfg.backend.precision.weight_bits == 32  # costed in fp32, as calibrated
    gpu = compose_hw(conf_copy, "hardware=a100-40gb").backend  # GPU presets keep the defaults
    assert gpu.launch_us == 5.0 and gpu.precision.weight_bits == 16
    assert load_hardware("host-cpu").peak_tflops_16 == 0.2  # the same file outside Hydra
    r, truth = build_backend(cfg.backend).evaluate(genomes[:4], WL), RooflineHost().evaluate(genomes[:4], WL)
    assert np.allclose(r.tpot_ms, truth.tpot_ms, rtol=0.02)
    assert np.allclose(host.roofline_backend(p).evaluate(genomes[:4], WL).tpot_ms, r.tpot_ms)  # same as composed


def test_forge_hw_mode_calibrate_end_to_end(conf_copy, tmp_path, monkeypatch):
    monkeypatch.setattr(host, "microbenchmark", fake_micro)
    cfg = compose_hw(conf_copy, "mode=calibrate", "hardware=host-cpu", "calibrate.n=8", "quiet=true",
                     "calibrate.workload.prefill=8", "calibrate.workload.decode=4", f"out_dir={tmp_path}",
                     "backend=cpu-measured", "backend.warmup=0", "backend.repeats=1")
    s = run(cfg)
    written = yaml.safe_load((conf_copy / "calibrated" / "hardware" / "host-cpu.yaml").read_text())
    assert s["path"].endswith("calibrated/hardware/host-cpu.yaml") and (tmp_path / "summary.json").is_file()
    assert written["peak_tflops_16"] == 0.2
    assert set(written["roofline"]) == {*TRUTH, "weight_bits", "act_bits", "kv_bits"}
    assert s["calibration"]["n_genomes"] == 8 and s["calibration"]["clock"] == "thread"


def test_a_preset_written_outside_the_install_composes_through_the_searchpath(conf_copy, tmp_path):
    genomes = load_space("iha-tiny").sample(16, np.random.default_rng(3))
    p = calibrate_host(RooflineHost(), genomes, WL, base=group_yaml("hardware", "host-cpu"), micro=fake_micro)
    write_preset(p, tmp_path / "mine" / "calibrated" / "hardware" / "host-cpu.yaml")
    cfg = compose_hw(conf_copy, "hardware=host-cpu", f"hydra.searchpath=[file://{tmp_path / 'mine'}]")
    assert cfg.hardware.mem_bw_gbs == 20.0 and cfg.backend.launch_us == pytest.approx(p["roofline"]["launch_us"])


def test_unwritable_output_is_one_clear_error(conf_copy, tmp_path, monkeypatch):
    monkeypatch.setattr(host, "microbenchmark", fake_micro)
    monkeypatch.setattr(host, "calibrate_host", lambda *a, **k: {"name": "host-cpu"})
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cfg = compose_hw(conf_copy, "mode=calibrate", "hardware=host-cpu", "calibrate.n=1", f"calibrate.out={blocker}/x.yaml",
                     "calibrate.workload.prefill=2", "calibrate.workload.decode=1")
    with pytest.raises(BackendError, match="cannot write the host-cpu preset.*hydra.searchpath"):
        run(cfg)


def test_calibrate_needs_the_host_preset_and_a_known_mode(conf_copy):
    with pytest.raises(BackendError, match="allowed: hardware=host-cpu"):
        run(compose_hw(conf_copy, "mode=calibrate", "hardware=a100-40gb"))
    with pytest.raises(BackendError, match="allowed: cost \\| calibrate"):
        run(compose_hw(conf_copy, "mode=measure"))


@pytest.mark.slow
def test_real_microbenchmark_gives_positive_rates():
    from backends.measure import thread_timer

    m = host.microbenchmark(1, thread_timer, n=256, gemv_mb=16, repeats=2)
    assert 1e8 < m["fp32_flops"] < 1e14 and 1e8 < m["gemv_bytes_s"] < 1e13
