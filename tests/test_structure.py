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
    """Every module's imports, bar the core's one documented upward import (API_IMPORT, checked on its own)."""
    mods = _modules()
    graph = {m: _imports(m, p, set(mods)) for m, p in mods.items()}
    graph.get(API_IMPORT[0], set()).discard(API_IMPORT[1])
    return graph


def _part(module: str) -> str:
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
    "search": {"core", "backends", "surrogate", "search"},  # search/api.py (the Python API) included
}
# The core's one upward import: forge/__init__'s `__getattr__` imports the Python API (`forge.search` & co.) on first
# use; lazy, so no circle at import time (docs/concepts/layout.md says why). test_the_api_is_the_one_upward_import.
API_IMPORT = ("forge", "search.api")
HIGHER = ("search", "surrogate", "backends")  # what the core (forge/, labelling included) never names as code
# calls that import the module a string names: the string is an import as much as an import statement is
IMPORTERS = {"import_module", "__import__", "find_spec", "get_class", "get_method", "get_object", "locate", "_locate"}


def test_the_walk_sees_the_packages_and_their_imports():
    g = _graph()
    assert {"forge.genomes.genome", "forge.labelling.train", "backends.rdxe.backend", "surrogate.predictor",
            "search.problem"} <= set(g)
    assert "forge.genomes.genome" in g["forge.genomes.importers"]  # a plain edge is found
    assert "surrogate.loading" in g["search.components"]  # a lazy (in-function) import is found


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


def _names_higher(s: object) -> bool:
    return isinstance(s, str) and s.replace(":", ".").split(".")[0] in HIGHER


def _string_imports(path: Path) -> list[str]:
    """Code above the core named by a string: an importer's literal argument (`import_module("search.api")`), an
    import path with an attribute (`"search.cli:main"`, an entry point's form) or a `_target_` in a dict literal."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and node.args:
            fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            arg = node.args[0]
            lit = arg.values[0] if isinstance(arg, ast.JoinedStr) and arg.values else arg
            if fn in IMPORTERS and isinstance(lit, ast.Constant) and _names_higher(lit.value):
                out.append(f"{fn}({lit.value!r})")
        elif isinstance(node, ast.Constant) and _names_higher(node.value) and ":" in node.value \
                and node.value.split(":")[0].replace(".", "").isidentifier():
            out.append(repr(node.value))
        elif isinstance(node, ast.Dict):
            out += [f"_target_: {v.value!r}" for k, v in zip(node.keys, node.values)
                    if isinstance(k, ast.Constant) and k.value == "_target_" and isinstance(v, ast.Constant)
                    and _names_higher(v.value)]
    return out


def test_the_core_names_no_higher_package_even_by_string():
    """The core imports nothing above it, lazily or by a string handed to importlib (issue 36 §4), bar the Python
    API's one lazy import in forge/__init__ (API_IMPORT, checked by test_the_api_is_the_one_upward_import)."""
    bad = sorted(f"{m}: {s}" for m, p in _modules().items() if _part(m) in ("core", "labelling")
                 for s in _string_imports(p))
    assert not bad, "the core names code above it: " + "; ".join(bad)


def test_the_api_is_the_one_upward_import():
    """forge/__init__ names search.api once, in `__getattr__` (not at import: `import forge` loads nothing above the
    core), and every other core module names nothing above it; forge.search & co. are search/api.py's own."""
    import forge
    import search.api

    tree = ast.parse((ROOT / "forge" / "__init__.py").read_text())
    upward = [(n.names[0].name, f.name) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
              for n in ast.walk(f) if isinstance(n, ast.Import) and _part(n.names[0].name) in HIGHER]
    assert upward == [("search.api", "__getattr__")]
    top = {t for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
           for t in ([a.name for a in n.names] if isinstance(n, ast.Import) else [n.module or ""])}
    assert not {t for t in top if _part(t) in HIGHER}
    for name in forge.API:
        assert forge.__getattr__(name) is getattr(search.api, name)
    assert forge.search is search.api.search and forge.SearchResult is search.api.SearchResult
    with pytest.raises(AttributeError, match="no attribute 'serach'"):
        forge.__getattr__("serach")


def test_the_checks_catch_a_violation(tmp_path, monkeypatch):
    """A planted circle and a backwards import are reported (the checks are not vacuous)."""
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "forge" / "a.py").write_text("from forge.b import x\n")
    (tmp_path / "forge" / "b.py").write_text("def f():\n    import forge.a\n    from surrogate import m\n")
    (tmp_path / "surrogate" / "m.py").write_text("")
    (tmp_path / "forge" / "c.py").write_text("import importlib\nENTRY = 'search.cli:main'\n"
                                             "def g():\n    return importlib.import_module(f'backends.{1}')\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    with pytest.raises(pytest.fail.Exception, match="import circle: forge.a → forge.b → forge.a"):
        test_no_import_circle_between_files()
    with pytest.raises(AssertionError, match="forge.b imports surrogate.m"):
        test_imports_go_one_way("core")
    with pytest.raises(AssertionError, match="forge.c: 'search.cli:main'; forge.c: import_module\\('backends.'\\)"):
        test_the_core_names_no_higher_package_even_by_string()


MAX_LINES = 350  # issue 36 §4: a module a newcomer reads in one sitting (the guide asks ~50–250)


def test_no_module_outside_bench_is_over_350_lines():
    files = [p for top in (*PACKAGES, "tests", "forge_hf") for p in (ROOT / top).rglob("*.py")]  # not .venv's 80,000
    assert len(files) > 100  # the walk sees the tree
    long = sorted(f"{p.relative_to(ROOT)} ({n})" for p in files if (n := len(p.read_text().splitlines())) > MAX_LINES)
    assert not long, f"modules over {MAX_LINES} lines: {long}"


TOP_LEVEL = {"__init__.py", "errors.py", "plugins.py", "cli.py", "genomes", "spaces", "lm", "runtime", "disk",
             "fidelity", "labelling", "moved.py", "shell", "numeric.py"}  # issue 46: forge/ reads as a table of contents, one entry per concept
# (issue 55: moved.py, the top level's own old paths, kept working for a deprecation period; issue 52: fidelity/;
# issue 57: shell/, the command shell apart from runtime's helpers, and numeric.py, numbers apart from plumbing)


def test_forge_top_level_is_a_table_of_contents():
    """A new core module goes into the package of its concept; each package's docstring says what it holds."""
    import importlib

    top = {p.name for p in (ROOT / "forge").iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    assert top == TOP_LEVEL
    for pkg in sorted(n for n in top if not n.endswith(".py")):
        doc = importlib.import_module(f"forge.{pkg}").__doc__ or ""
        assert len(doc.split()) > 20, f"forge/{pkg}/__init__.py says too little about what it holds"
