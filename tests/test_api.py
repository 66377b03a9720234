"""The Python API: the how-to page's code runs, a call writes what its command writes, and `import forge`
stays light."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "how-to" / "python-api.md"
FAKES = {"backend": {"_target_": "tests.search.fakes.FakeBackend"},
         "evaluator": {"predictor": {"_target_": "tests.search.fakes.FakePredictor"}}}
SMALL = {"search": {"pop_size": 6, "offspring": 8, "generations": 2}}


def test_a_call_writes_what_its_command_writes(tmp_path):
    """forge.search and search.cli.run on the same overrides give byte-identical logs (one code path)."""
    from omegaconf import OmegaConf

    import forge
    from search.api_compose import compose
    from search.cli import run

    res = forge.search(space="iha-tiny", objectives=["val_loss", "ttft_ms", "params"], out_dir=tmp_path / "api",
                       **FAKES, **SMALL)
    cfg = compose("forge-search", ["space=iha-tiny", "objectives=[val_loss,ttft_ms,params]", "progress=false",
                                   "search.pop_size=6", "search.offspring=8", "search.generations=2",
                                   f"out_dir={tmp_path / 'cli'}"])
    OmegaConf.set_struct(cfg, False)
    cfg.backend, cfg.evaluator.predictor = FAKES["backend"], FAKES["evaluator"]["predictor"]
    run(cfg)
    for name in ("pareto.jsonl", "archive.jsonl", "history.jsonl"):
        assert (tmp_path / "api" / name).read_text() == (tmp_path / "cli" / name).read_text()
    front = res.front
    assert {"id", "val_loss", "loss_lo", "loss_hi", "ttft_ms", "params", "genome"} <= set(front.columns)
    assert len(front) == len((tmp_path / "api" / "pareto.jsonl").read_text().splitlines())
    assert front["val_loss"].is_monotonic_increasing and len(res.archive) >= len(front)
    assert [g.id for g in res.genomes()] == list(front["id"])
    assert forge.load(tmp_path / "api").hypervolume == res.hypervolume > 0


def test_a_backend_object_is_taken_as_a_space_or_surrogate_object_is(tmp_path):
    """forge.search(backend=obj) and forge.cost(backend=obj) use that very object (its `calls` count), its class
    named in the run's config; the same run as the backend's config node gives the same front."""
    import json

    import forge
    from forge.errors import UserError
    from tests.search.fakes import FakeBackend

    chip = FakeBackend(max_params=5e7)  # gpt2 (124M) does not fit, the tiny genomes do
    res = forge.search(space="iha-tiny", objectives=["val_loss", "ttft_ms"], out_dir=tmp_path / "obj", backend=chip,
                       evaluator=FAKES["evaluator"], **SMALL)
    assert chip.calls >= 2 and "tests.search.fakes.FakeBackend" in (res.run_dir / "config.yaml").read_text()
    named = forge.search(space="iha-tiny", objectives=["val_loss", "ttft_ms"], out_dir=tmp_path / "cfg",
                         backend={"_target_": "tests.search.fakes.FakeBackend", "max_params": 5e7},
                         evaluator=FAKES["evaluator"], **SMALL)
    front = lambda r: [json.loads(x)["id"] for x in (r.run_dir / "pareto.jsonl").read_text().splitlines()]  # noqa: E731
    assert front(res) == front(named)
    before = chip.calls
    assert forge.cost(["gpt2"], backend=chip)["feasible"].tolist() == [False] and chip.calls == before + 1
    with pytest.raises(UserError, match=r"backend=3 is invalid; allowed: .*evaluate\(genomes, workload\)"):
        forge.cost(["gpt2"], backend=3)


def test_bad_input_and_missing_pandas_say_what_is_allowed(tmp_path, monkeypatch):
    import forge
    from forge.errors import UserError
    from search.errors import SearchConfigError

    with pytest.raises(SearchConfigError, match="allowed"):
        forge.search(space="iha-tiny", objectives=["val_loss", "kv_bites"], out_dir=tmp_path / "x", **FAKES, **SMALL)
    with pytest.raises(UserError, match="no summary.json"):
        forge.load(tmp_path / "nothing")
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(UserError, match=r"pip install -e '\.\[api\]' in the Forge clone"):
        forge.cost(["gpt2"])


def test_import_forge_stays_light():
    code = "import forge, sys; print(any(m in sys.modules for m in ('search', 'backends', 'surrogate', 'torch')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_the_python_api_page_runs(tmp_path, monkeypatch):
    """Every ```python block of docs/how-to/python-api.md, in order, in a scratch folder (~1 min: real
    Forge-Former predictions and the roofline / gemmini backends)."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) >= 5
    monkeypatch.chdir(tmp_path)
    ns: dict = {"__name__": "__main__"}  # as a script runs it: its functions and classes live in __main__
    try:
        for block in blocks:
            exec(compile(block, str(DOC), "exec"), ns)
    finally:
        from tests.ext import forget

        forget()  # the page registers the extension's gene: gone for the tests after this one
    assert "glu" in ns["ratio"].summary()["ranges"]
    res, kv = ns["res"], ns["kv"]
    assert ns["more"].summary["status"] == "complete"  # a run with __main__ objects, continued from Python
    assert res.summary["status"] == "complete" and (tmp_path / "runs" / "api-demo" / "pareto.jsonl").is_file()
    assert res.front["loss_lo"].notna().all() and (res.front["loss_lo"] <= res.front["loss_hi"]).all()
    assert (kv.front["peak_memory_bytes"] > kv.front["kv_bytes"]).all()
    assert Path(ns["exported"]["out"], ns["exported"]["exported"][0]["id"], "MODEL_CARD.md").is_file()
    assert Path(ns["report"]["report"]).is_file()
    assert list(ns["costs"]["name"]) == ["smollm2-135m", "gpt2"] and (ns["costs"]["ttft_ms"] > 0).all()
    loss, front = ns["loss"], res.front.head(3)
    assert list(loss["id"]) == list(front["id"])  # forge.predict gives what the search's evaluator gave
    assert loss["mu"].to_numpy() == pytest.approx(front["val_loss"].to_numpy())
    assert loss["loss_hi"].to_numpy() == pytest.approx(front["loss_hi"].to_numpy())


def test_the_plugin_block_of_the_python_api_page_runs_outside_the_clone(tmp_path):
    """Issue 56 §5: the block that loads a plug-in gene runs as pasted from any folder (it ran only from inside
    the clone), in a fresh interpreter with nothing of the clone on its path."""
    block = next(b for b in re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S) if "load_modules" in b)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, cwd=tmp_path, env=env,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "'glu': '[0, 1]'" in out.stdout
