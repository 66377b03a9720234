"""The package boundaries of the design card, checked on the source: no import circles between files, and
imports only in the allowed direction (search → surrogate, backends → forge core; labelling → core)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("forge", "backends", "surrogate", "search")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every project module this file imports, at top level or inside a function (lazy imports count)."""
    out: set[str] = set()
    is_pkg = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = name.split(".") if is_pkg else name.split(".")[:-1]
                base = ".".join(pkg[: len(pkg) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: _imports(m, p, set(mods)) for m, p in mods.items()}


def _part(module: str) -> str:
    if module == "forge.api":  # the Python API: the one façade above every package (see ALLOWED["api"])
        return "api"
    if module.startswith("forge.labelling"):
        return "labelling"
    return "core" if module.split(".")[0] == "forge" else module.split(".")[0]


# What each part may import (besides itself). Package __init__ re-exports are edges too.
ALLOWED = {
    "core": {"core"},
    "labelling": {"core", "labelling"},
    "backends": {"core", "backends"},
    # the supernet loss source (surrogate/supernet*.py, issue 38) trains and scores through the label protocol
    "surrogate": {"core", "labelling", "surrogate"},
    "search": {"core", "backends", "surrogate", "search"},
    # forge/api.py composes the CLIs' configs and calls their run(cfg): it may import every part, and no part
    # imports it (forge/__init__ loads it lazily by name), so the core stays free of search/backends/surrogate.
    "api": {"core", "backends", "surrogate", "search"},
}


def test_the_walk_sees_the_packages_and_their_imports():
    g = _graph()
    assert {"forge.genome", "forge.labelling.train", "backends.rdxe.backend", "surrogate.predictor",
            "search.problem"} <= set(g)
    assert "forge.genome" in g["forge.importers"]  # a plain edge is found
    assert "surrogate.predictor" in g["search.components"]  # a lazy (in-function) import is found


def test_no_import_circle_between_files():
    g = _graph()
    # Package __init__ re-exports are edges too, so a submodule importing its own package back
    # (`from pkg import sibling` while pkg/__init__ imports that submodule) is reported as a circle.
    edges = g
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(edges[m]):
            if state.get(t) == 1:
                cycle = stack[stack.index(t):] + [t]
                pytest.fail("import circle: " + " → ".join(cycle))
            if t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)


@pytest.mark.parametrize("part", sorted(ALLOWED))
def test_imports_go_one_way(part):
    bad = sorted(f"{m} imports {t}" for m, ts in _graph().items() if _part(m) == part
                 for t in ts if _part(t) not in ALLOWED[part])
    assert not bad, f"{part} may import only {sorted(ALLOWED[part])}: " + "; ".join(bad)


def test_nothing_imports_the_api_facade():
    users = sorted(m for m, ts in _graph().items() if "forge.api" in ts)
    assert not users, f"forge.api is the top of the graph; imported by {users}"


def test_the_checks_catch_a_violation(tmp_path, monkeypatch):
    """A planted circle and a backwards import are reported (the checks are not vacuous)."""
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "forge" / "a.py").write_text("from forge.b import x\n")
    (tmp_path / "forge" / "b.py").write_text("def f():\n    import forge.a\n    from surrogate import m\n")
    (tmp_path / "surrogate" / "m.py").write_text("")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    with pytest.raises(pytest.fail.Exception, match="import circle: forge.a → forge.b → forge.a"):
        test_no_import_circle_between_files()
    with pytest.raises(AssertionError, match="forge.b imports surrogate.m"):
        test_imports_go_one_way("core")
