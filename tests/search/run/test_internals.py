"""Search internals (issue 26 §3): building a search runs nothing, each part lives in its own module (old import
paths still work), and no module of the package reaches into another object's private fields."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np

from forge.errors import ForgeError
from tests.search.conftest import tiny_cfg
from tests.search.fakes import FakeBackend, FakePredictor

SEARCH = Path(__file__).resolve().parents[3] / "search"


class Counting:
    """Wraps a predictor or backend and counts its calls."""

    def __init__(self, inner, method: str):
        self.inner, self.method, self.calls = inner, method, 0

    def __getattr__(self, name):
        if name == self.method:
            def call(*a, **k):
                self.calls += 1
                return getattr(self.inner, name)(*a, **k)
            return call
        return getattr(self.inner, name)


def _same(a: dict, b: dict) -> bool:
    """Equal metric dicts, NaN (an uncalibrated interval) equal to NaN."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_building_a_search_runs_neither_the_surrogate_nor_the_backend(make_search, tmp_path):
    pred, back = Counting(FakePredictor(), "predict"), Counting(FakeBackend(), "evaluate")
    s = make_search(tmp_path / "run", tiny_cfg(search={"generations": 1}), backend=back, predictor=pred)
    assert (pred.calls, back.calls) == (0, 0) and not (tmp_path / "run").exists()
    summary = s.run()
    assert pred.calls > 0 and back.calls > 0
    # the anchor was scored once, by the same evaluator and backend as the search
    ref = make_search(tmp_path / "ref", tiny_cfg(search={"generations": 1}))
    assert _same(ref.anchor, s.anchor) and _same(summary["hv_anchor"]["values"], ref.anchor)
    assert summary["hypervolume"] == ref.run()["hypervolume"]


def test_a_resumed_search_scores_its_anchor_before_restoring(make_search, tmp_path):
    cfg = tiny_cfg(search={"generations": 3})
    s = make_search(tmp_path / "a", cfg)
    s.run(stop_after=1)
    r = make_search(tmp_path / "a", cfg)
    r.load()
    assert _same(r.anchor, s.anchor) and r.gen == 1
    assert r.run()["hypervolume"] == make_search(tmp_path / "b", cfg).run()["hypervolume"]


def test_each_part_lives_in_its_own_module_and_the_errors_in_one():
    import search.errors as errors
    import search.problem as problem
    from search import export, hf_export, hf_tokenizer, objectives, report, state, verify

    for name in ("IdDuplicateElimination", "LossEvaluator", "TrainEvaluator", "strip_precision", "__all__"):
        assert not hasattr(problem, name), name  # no compatibility re-exports: import from the owning module
    classes = [n.name for n in ast.parse((SEARCH / "problem.py").read_text()).body if isinstance(n, ast.ClassDef)]
    assert classes == ["ForgeProblem"]
    raised_by = {"SearchConfigError": objectives, "ResumeError": state, "ExportError": export, "HFExportError": hf_export,
                 "TokenizerError": hf_tokenizer, "ReportError": report, "VerifyError": verify}
    for name, module in raised_by.items():  # one home, and the old import paths still name the same class
        assert getattr(module, name) is getattr(errors, name), name
        assert issubclass(getattr(errors, name), ForgeError), name
    defined = {n.name for p in SEARCH.rglob("*.py") if p.name != "errors.py"
               for n in ast.parse(p.read_text()).body if isinstance(n, ast.ClassDef) and n.name.endswith("Error")}
    assert not defined  # every search error class lives in search/errors.py
    elsewhere = [f"{p}:{n.module}" for root in (SEARCH, Path(__file__).parents[2]) for p in root.rglob("*.py")
                 for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, ast.ImportFrom)
                 and n.module != "search.errors" and any(a.name == "SearchConfigError" for a in n.names)]
    assert not elsewhere  # one import path: search.errors


def test_the_duplicate_remover_groups_rows_by_key():
    from pymoo.core.population import Population

    from search.duplicates import IdDuplicateElimination

    X = np.array([[1, 2], [3, 4], [1, 2], [5, 6]])
    elim = IdDuplicateElimination(lambda X: [tuple(r) for r in np.asarray(X)])
    kept = elim.do(Population.new("X", X))
    assert kept.get("X").tolist() == [[1, 2], [3, 4], [5, 6]]
    kept = elim.do(Population.new("X", X), Population.new("X", X[:1]))
    assert kept.get("X").tolist() == [[3, 4], [5, 6]]


def _private_reaches(path: Path) -> list[str]:
    """`obj._name` where obj is not `self`/`cls` (a dunder is public protocol)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                out.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return out


def test_no_search_module_reaches_into_another_objects_private_fields():
    bad = [r for p in sorted(SEARCH.glob("*.py")) if not p.name.startswith("verify") for r in _private_reaches(p)]
    assert bad == []


def test_the_pymoo_problem_is_assembled_only_by_the_builder():
    """`forge-verify` scores its picks with the search's own problem (search.build.build_problem), not a copy."""
    calls = [f"{p.name}:{n.lineno}" for p in sorted(SEARCH.rglob("*.py")) for n in ast.walk(ast.parse(p.read_text()))
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "ForgeProblem"]
    assert [c.split(":")[0] for c in calls] == ["build.py"], calls
