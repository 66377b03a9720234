"""A run made with Python objects (issue 43 §2) resumes exactly, or refuses in one line: a surrogate object is
recorded by its class and constructor arguments and rebuilt from them by `forge-search resume=...` (the printed
line, pasted); one whose arguments cannot be read back, and a function defined in `__main__`, are said when the
search starts, refused by commands, and continued from Python with the same objects; a resume whose surrogate
predicts otherwise than the run did is refused."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from forge import plugins
from search.errors import ResumeError
from search.python_objects import constructor_args
from tests.ext import forget

ROOT = Path(__file__).resolve().parents[3]
LABELS = str(ROOT / "data" / "labels" / "iha-tiny-cpu-proxy.jsonl")
SMALL = {"space": "iha-tiny", "search": {"pop_size": 8, "offspring": 8, "generations": 3}, "seed": 2}


@pytest.fixture(autouse=True)
def clean():
    forget()
    yield
    forget()


def _search(out: Path, predictor, objectives=None, **values):
    import forge

    return forge.search(evaluator={"predictor": predictor, "labels": LABELS}, out_dir=out, objectives=objectives,
                        **SMALL, **values)


def _same_run(a: Path, b: Path) -> None:
    import json

    assert (a / "archive.jsonl").read_text() == (b / "archive.jsonl").read_text()
    assert json.loads((a / "summary.json").read_text())["hypervolume"] == \
        json.loads((b / "summary.json").read_text())["hypervolume"]


def test_a_surrogate_object_resumes_exactly_from_the_printed_command(tmp_path, capsys):
    import yaml

    from tests.ext.surrogates import SkForest
    from tests.test_extension import _cli

    _search(tmp_path / "full", SkForest(n_estimators=5, max_depth=1))
    _search(tmp_path / "part", SkForest(n_estimators=5, max_depth=1), stop_after=1)
    node = yaml.safe_load((tmp_path / "part" / "config.yaml").read_text())["evaluator"]["predictor"]
    assert node == {"_target_": "tests.ext.surrogates.SkForest", "n_estimators": 5, "max_depth": 1, "random_state": 0}
    line = re.search(r"continue with: (forge-search .*)$", capsys.readouterr().err, re.M).group(1)
    assert "plugins.modules=[tests.ext.surrogates]" in line  # the class's module, which a command must import
    out = _cli(tmp_path, *shlex.split(line))  # pasted: rebuilt with its arguments, not the defaults
    assert "forge-export" in out
    _same_run(tmp_path / "part", tmp_path / "full")


def test_an_object_no_command_rebuilds_is_said_refused_and_resumed_from_python(tmp_path, capsys):
    import forge
    from search.api_compose import compose
    from search.cli import run as search_run
    from tests.ext.surrogates import OpaqueForest

    _search(tmp_path / "full", OpaqueForest(n_estimators=5))
    _search(tmp_path / "part", OpaqueForest(n_estimators=5), stop_after=1)
    err = capsys.readouterr().err
    assert "no command can rebuild surrogate tests.ext.surrogates.OpaqueForest" in err  # said when it starts
    assert f"continue with: forge.search(resume={str(tmp_path / 'part')!r}, evaluator=" in err
    with pytest.raises(ResumeError, match=r"^resume=.* refused: .*OpaqueForest.*no command can rebuild.*"
                                          r"allowed: continue it from Python .*forge\.search\(resume="):
        search_run(compose("forge-search", resume=str(tmp_path / "part")), given=[])  # as `forge-search resume=`
    with pytest.raises(ResumeError, match=r"refused: its surrogate, built again, predicts"):  # another object
        forge.search(resume=str(tmp_path / "part"), evaluator={"predictor": OpaqueForest(n_estimators=3)})
    forge.search(resume=str(tmp_path / "part"), evaluator={"predictor": OpaqueForest(n_estimators=5)})
    _same_run(tmp_path / "part", tmp_path / "full")


def depth(genomes, weight=1.0):
    return [weight * g.n_active for g in genomes]


def test_a_function_from_main_is_said_at_start_and_a_command_refuses_it(tmp_path, capsys, monkeypatch):
    """The Python page's own example: an objective defined in the user's script (module `__main__`)."""
    import forge
    from search.api_compose import compose
    from search.cli import run as search_run

    monkeypatch.setattr(depth, "__module__", "__main__")
    objectives = ["val_loss", "params", {"name": "depth", "fn": depth, "params": {"weight": 2.0}}]
    forge.search(evaluator={"predictor": "forgeformer-iha-tiny"}, out_dir=tmp_path / "run", objectives=objectives,
                 stop_after=1, **SMALL)
    err = capsys.readouterr().err
    assert "no command can rebuild objective depth (__main__.depth is defined in your script)" in err
    assert "forge-search resume=" not in err and "continue with: forge.search(resume=" in err
    plugins._bound.pop("__main__.depth")  # a fresh process: the command never holds the script's function
    with pytest.raises(ResumeError, match=r"refused: the run was made from Python with objective depth.*"
                                          r"forge\.search\(resume=.*objectives=<the same objectives>"):
        search_run(compose("forge-search", resume=str(tmp_path / "run")), given=[])
    res = forge.search(resume=str(tmp_path / "run"), objectives=objectives)  # handed again: it continues
    assert res.summary["status"] == "complete" and "depth" in res.front


class Kept:
    def __init__(self, alpha: float = 1.0, layers: tuple = (1, 2)):
        self.alpha, self.layers = alpha, layers


class Doubled:
    def __init__(self, n: int = 1):
        self.n = 2 * n  # stored otherwise than given: building again from it is another object


def test_constructor_arguments_are_read_back_only_when_they_rebuild_the_object():
    from tests.ext.surrogates import OpaqueForest, SkForest

    assert constructor_args(SkForest(n_estimators=5, max_depth=1)) == (
        {"n_estimators": 5, "max_depth": 1, "random_state": 0}, "")
    assert constructor_args(Kept(0.5, (3,))) == ({"alpha": 0.5, "layers": [3]}, "")
    assert constructor_args(OpaqueForest(5))[0] is None and "n_estimators" in constructor_args(OpaqueForest(5))[1]
    assert constructor_args(Doubled(3))[0] is None
    assert constructor_args(Kept(alpha=object()))[0] is None  # not a plain value


def test_a_recorded_seed_is_the_objects_own_not_the_runs():
    from surrogate.generic import build_model

    plugins.register("surrogate", "tests.ext.surrogates.ForestSurrogate")
    model = build_model({"_target_": "tests.ext.surrogates.ForestSurrogate", "seed": 3}, seed=9)
    assert model.seed == 3


class Metric:
    def __call__(self, genomes):
        return [1.0 for _ in genomes]


def test_a_partial_is_its_function_with_params_and_a_callable_object_only_python_continues():
    import functools

    from search.python_objects import needs_python, objective_entry

    here = f"{__name__}.depth"
    assert objective_entry(functools.partial(depth, weight=2.0)) == {"name": "depth", "fn": here,
                                                                     "params": {"weight": 2.0}}
    entry = objective_entry({"name": "one", "fn": Metric()})
    assert entry["fn"].endswith("Metric<object>") and plugins.is_bound(entry["fn"])
    assert [w for _, w, _ in needs_python({"objectives": [entry, objective_entry(depth)]})] == ["objective one"]
