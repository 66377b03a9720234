"""roofline-eager: the shipped YAML is the least-squares fit to the published points, and depth costs latency."""
import numpy as np
import pytest
import yaml

from backends.gpu.calibrate import calibrate
from backends.gpu.published import EAGER_POINTS, arch_genome, fit_eager, yaml_text
from backends.gpu.roofline import RooflineBackend
from backends.interface import BackendError, Workload
from backends.registry import build_backend
from forge.runtime.config import conf_dir, data_dir
from forge.genomes.genome import Genome
from forge.genomes.importers import load_genome


def test_shipped_yaml_is_the_fit_to_the_published_points():
    cfg = fit_eager()
    shipped = yaml.safe_load((conf_dir() / "backend" / "roofline-eager.yaml").read_text())
    assert shipped["layer_us"] == pytest.approx(cfg["layer_us"], abs=0.1)
    for k in ("eta_compute", "eta_memory", "launch_us"):  # not fitted: the fused roofline's values
        assert shipped[k] == build_backend("roofline").config()[k]
    text = yaml_text(cfg, ("layer_us",))
    assert all(p.source in text for p in EAGER_POINTS) and "residual" in text


def _truncated(g: Genome, n: int) -> Genome:
    return Genome(**{**g.__dict__, "layers": g.layers[:n]})


def test_depth_costs_latency_in_eager_mode_but_little_when_fused():
    g = load_genome(data_dir() / "archs" / "smollm2-360m.yaml")
    half = _truncated(g, len(g.layers) // 2)
    wl = Workload()
    eager, fused = build_backend("roofline-eager"), build_backend("roofline", launch_us=0.0)
    de = eager.evaluate([g], wl).tpot_ms[0] - eager.evaluate([half], wl).tpot_ms[0]
    df = fused.evaluate([g], wl).tpot_ms[0] - fused.evaluate([half], wl).tpot_ms[0]
    assert de == pytest.approx(16 * eager.layer_us * 1e-3 + df + 16 * 13 * eager.launch_us * 1e-3, rel=0.05)
    assert de > 20 * df  # 16 layers: ~12 ms eager against ~0.3 ms of weight traffic


def test_calibrate_mixes_hardware_workloads_and_tpot_only_samples():
    g, big = arch_genome("smollm2-135m"), arch_genome("llama-3.2-1b")
    truth = RooflineBackend(layer_us=400.0)
    s1 = truth.evaluate([g], Workload()).row(0)
    wl2 = Workload(prefill=8, decode=100)
    s2 = RooflineBackend(hardware="a100-80gb", layer_us=400.0).evaluate([big], wl2).row(0)
    samples = [(g, s1["ttft_ms"], s1["tpot_ms"]),
               {"genome": big, "ttft_ms": None, "tpot_ms": s2["tpot_ms"], "hardware": "a100-80gb", "workload": wl2}]
    cfg = calibrate(samples, fit=("layer_us",))
    assert cfg["layer_us"] == pytest.approx(400.0, rel=1e-3)
    assert len(cfg["calibration"]["rel_residuals"]) == 3 and max(map(abs, cfg["calibration"]["rel_residuals"])) < 1e-3
    with pytest.raises(BackendError, match="tpot_ms=None"):
        calibrate([{"genome": g, "ttft_ms": 1.0, "tpot_ms": None}])
    assert np.isfinite(cfg["calibration"]["rms_rel_error_before"])
