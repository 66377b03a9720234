"""The search wired to the real plug-ins: every shipped backend, and a real Forge-Former refit (slow)."""
from __future__ import annotations

import numpy as np
import pytest

from backends.registry import list_backends
from forge.genomes.labels import Label
from forge.spaces.space import load_space
from search.coevolution import CoEvolution
from search.components import backend_of, build_workload
from search.evaluators import LossEvaluator
from search.build import build_search
from search.state import read_jsonl
from tests.search.conftest import tiny_cfg
from tests.search.fakes import FakePredictor, FakeTrainer, fake_loss


@pytest.mark.parametrize("backend", [b for b in list_backends() if b != "gpu-measured"])  # that one needs CUDA
def test_search_runs_on_every_shipped_backend(backend, tmp_path):
    cfg = tiny_cfg(backend=backend, search={"pop_size": 4, "offspring": 4, "generations": 1})
    if backend == "cpu-measured":  # really times every genome on this CPU: a short workload keeps it fast
        cfg["workload"] = {"prefill": 16, "decode": 8}
    b = backend_of(cfg)
    s = build_search(cfg, tmp_path, {"space": load_space("iha-tiny"), "evaluator": LossEvaluator(FakePredictor()),
                                     "backend": b, "workload": build_workload(cfg, b)})
    out = s.run()
    assert out["backend"] == b.name and out["evaluations"] == 8
    rows = read_jsonl(tmp_path / "archive.jsonl")
    assert all(r["metrics"]["ttft_ms"] != "inf" for r in rows if r["feasible"])


@pytest.mark.slow
def test_coevolution_with_a_real_forgeformer_refit(tmp_path):
    from surrogate.dataset import from_labels
    from surrogate.fit import finetune, train_forgeformer
    from surrogate.loading import load_predictor
    from surrogate.training import Recipe

    space = load_space("iha-tiny")
    g = space.sample(40, np.random.default_rng(0))
    labs = [Label(x, float(y)) for x, y in zip(g, fake_loss(g))]
    base = tmp_path / "ff"
    train_forgeformer(from_labels(labs), None, Recipe(epochs=2, val_frac=0.0, standardize=True),
                      space_name="iha-tiny", L_max=12).save(base)
    cfg = tiny_cfg(search={"pop_size": 6, "offspring": 6, "generations": 2})

    def make(d):
        co = CoEvolution(1, FakeTrainer(), finetune, str(base), labs, batch=2, n_mc=3, epochs=1, load=load_predictor)
        return build_search(cfg, d, {"space": space, "evaluator": LossEvaluator(load_predictor(base)),
                                     "backend": backend_of({"backend": "roofline"}),
                                     "workload": build_workload({}, None), "coevolution": co})

    make(tmp_path / "full").run()
    make(tmp_path / "part").run(stop_after=1)
    s = make(tmp_path / "part")
    s.load()
    assert s.problem.evaluator.version >= 1
    s.run()
    ev = read_jsonl(tmp_path / "full" / "coevolution.jsonl")
    assert [e["generation"] for e in ev] == [1, 2] and (tmp_path / "full" / "state" / "surrogate-v1.json").is_file()
    for f in ("pareto.jsonl", "archive.jsonl", "coevolution.jsonl"):
        assert (tmp_path / "full" / f).read_text() == (tmp_path / "part" / f).read_text(), f


def _shipped() -> bool:
    from forge.runtime.config import data_dir

    return (data_dir() / "surrogate" / "forgeformer-iha-paper.json").is_file()


@pytest.mark.skipif(not _shipped(), reason="shipped surrogate data/surrogate/forgeformer-iha-paper.* not built yet")
def test_default_search_with_the_shipped_surrogate_and_roofline(tmp_path):
    from hydra import compose, initialize_config_module

    from search.cli import run
    from search.components import load_surrogate
    from search.errors import SearchConfigError

    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search", overrides=["search.generations=2", "progress=false", f"out_dir={tmp_path}"])
    s = run(cfg)
    assert s["evaluations"] == 24 + 2 * 48 and s["backend"] == "roofline" and s["archive_size"] > 0
    pareto = read_jsonl(tmp_path / "pareto.jsonl")
    assert all(1.0 < r["metrics"]["val_loss"] < 3.8 for r in pareto)  # the constraint holds on the archive
    with pytest.raises(SearchConfigError, match="does not match space 'iha-tiny'"):
        load_surrogate("forgeformer-iha-paper", load_space("iha-tiny"))
