"""Fidelity: the calibration points of issue 16 within 15% (bench/bench_fidelity.py's rows).

GPU: `roofline-eager` against the published eager-PyTorch measurements it was fitted to. rDXE: the
`backend.conventions=llmforge` mode against the release's three public outputs (chip count exactly).
These rDXE tests fail, naming the missing option or model file, until the rDXE conventions work lands.
Substrates (SmolLM2-135M, conventions=llmforge): against `backends.systolic.reference.release_reading`.
"""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_fidelity", ROOT / "bench" / "bench_fidelity.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


fid = _bench()


def _check(rows, tol=0.15):
    assert rows
    for r in rows:
        assert r["ours"] is not None, f"{r['model']} {r['backend']} {r['metric']}: n/a ({r['note']})"
        if r["metric"] == "n_chips":
            assert r["ours"] == r["theirs"], r
        else:
            assert abs(r["ratio"] - 1) <= tol, f"{r['model']} {r['backend']} {r['metric']}: ×{r['ratio']:.3f}"


def test_roofline_eager_reproduces_the_published_gpu_measurements():
    _check([r for r in fid.gpu_rows() if r["backend"].startswith("roofline-eager")])


def test_fused_roofline_is_far_from_eager_measurements():
    """The fused preset is not what eager PyTorch measures: TPOT ≥ 3× off (why roofline-eager exists)."""
    rows = [r for r in fid.gpu_rows() if r["backend"].startswith("roofline ") and r["metric"] == "tpot_ms"]
    assert rows and all(r["ratio"] < 1 / 3 for r in rows)


@pytest.mark.parametrize("arch", sorted(fid.RDXE_PUBLIC))
def test_rdxe_llmforge_conventions_reproduce_the_public_outputs(arch):
    rows = fid.rdxe_rows((arch,), default_too=False)
    _check(rows)


def test_substrates_match_the_release_reading():
    rows, notes = fid.substrate_rows()
    assert not notes
    _check(rows)
