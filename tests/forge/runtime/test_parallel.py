import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from forge.runtime.parallel import map_spawned

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def _restore_threads():
    """The tests compare against one-thread runs here; later tests get the thread count back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def seeded_job(seed: int, scale: float) -> tuple[int, float]:
    """A job whose result depends only on its arguments; reports the torch threads it ran with."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 64, generator=g)
    return torch.get_num_threads(), float((x @ x).sum()) * scale


def failing_job(seed: int) -> int:
    if seed == 1:
        raise ValueError(f"bad job {seed}")
    return seed


def test_spawned_jobs_run_in_order_with_one_thread_and_match_this_process():
    jobs = [(s, 0.5) for s in range(5)]
    par = map_spawned(seeded_job, jobs, workers=2)
    torch.set_num_threads(1)
    assert par == [seeded_job(*j) for j in jobs]
    assert {threads for threads, _ in par} == {1}
    assert len({v for _, v in par}) == 5


def test_a_jobs_own_error_is_raised_and_workers_are_checked():
    with pytest.raises(ValueError, match="bad job 1"):
        map_spawned(failing_job, [(0,), (1,), (2,)], workers=2)
    with pytest.raises(ValueError, match="workers = 0; allowed: an integer >= 1"):
        map_spawned(seeded_job, [(0, 1.0)], workers=0)


def test_a_script_without_a_main_guard_falls_back_to_this_process(tmp_path):
    script = tmp_path / "noguard.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from forge.runtime.parallel import map_spawned
        from tests.forge.runtime.test_parallel import seeded_job
        print("RESULT", map_spawned(seeded_job, [(1, 1.0), (2, 1.0)], workers=2))
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    torch.set_num_threads(1)
    expected = [seeded_job(1, 1.0), seeded_job(2, 1.0)]
    assert [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT")] == [f"RESULT {expected}"]
    assert "worker processes failed" in out.stderr
