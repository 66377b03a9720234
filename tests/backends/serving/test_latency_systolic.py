"""latency=systolic: pool device latency from the systolic mapper (backends/serving/latency.py). Bigger arrays
lower prefill latency; the global buffer and the vector width change latency (under the roofline they do not)."""
from __future__ import annotations

import numpy as np
import pytest
import yaml

from backends.serving.latency import fit_models, systolic_grid, systolic_models
from backends.serving.pool import design, device_perf
from backends.serving.system import ServingModel
from backends.serving.trace import synthetic
from forge.cli import resolve_arch
from forge.runtime.config import conf_dir


def load(group: str, name: str) -> dict:
    return yaml.safe_load((conf_dir() / "serve" / group / f"{name}.yaml").read_text())


@pytest.fixture(scope="module")
def setup():
    return resolve_arch("smollm2-135m"), load("cost", "n4-hbm3"), load("baseline", "h100-8gpu")["prefill"]


def grid(setup, **change):
    g, c, b = setup
    return systolic_grid(g, design({**b, **change}), c, 1)


def test_bigger_arrays_lower_prefill_latency(setup):
    t16, t32, t64 = (grid(setup, array_height=a)["prefill_s"] for a in (16, 32, 64))
    assert np.all(t32 <= t16 * (1 + 1e-9)) and np.all(t64 <= t32 * (1 + 1e-9))
    assert t32[-1] < 0.5 * t16[-1]  # the long compute-bound prefill (16 x 2048 tokens)


def test_global_buffer_and_vector_width_change_latency_roofline_does_not(setup):
    base = grid(setup)["prefill_s"]
    assert grid(setup, global_buffer_mb=20)["prefill_s"][-1] > base[-1]  # chunked: less weight reuse
    big = (resolve_arch("llama-2-7b"),) + setup[1:]  # a 2048-token sequence (34 MB) no longer fits 20 MB: via HBM
    assert grid(big, global_buffer_mb=20)["prefill_s"][-1] > 2 * grid(big)["prefill_s"][-1]
    assert np.all(grid(setup, vector_width=1)["prefill_s"] > base)                # norms/softmax/activation
    g, c, b = setup
    p = [device_perf(design({**b, **ch})[None], c) for ch in ({}, {"global_buffer_mb": 20, "vector_width": 1})]
    r = [fit_models(g, x["flops"], x["bw"])["prefill"] for x in p]
    np.testing.assert_allclose(r[0], r[1])


def test_serving_model_with_systolic_latency(setup):
    g, c, b = setup
    m = systolic_models(g, design(b), c, 1)
    assert m["prefill"].shape == (1, 3) and m["r2_prefill"][0] > 0.95 and m["r2_decode"][0] > 0.95
    tr = synthetic(load("trace", "small"), 0)
    r = {lat: ServingModel(g, tr, c, latency=lat).evaluate(design(b), design(b)) for lat in ("roofline", "systolic")}
    assert r["systolic"]["feasible"][0] and r["systolic"]["serving_time_s"][0] != r["roofline"]["serving_time_s"][0]
    with pytest.raises(ValueError, match="serve.pools.latency = 'gpu' is unknown; allowed: roofline, systolic"):
        ServingModel(g, tr, c, latency="gpu")
