"""forge/'s packages in one tested order (issue 57): each may import the packages below it, never one above.

Each `forge/<pkg>/__init__.py` says in words what it "may import"; here that rule is a checked fact: every import
between forge's packages goes down the order or is one of the back arrows listed by name below, and every package a
package imports is one its docstring names. The root package `forge` is no layer: importing any `forge.x` runs it
(it installs the old-path finder, forge.moved, and the shadow check), so an edge to it is no arrow.
"""
from __future__ import annotations

import importlib
import re

import pytest

from tests.test_structure import ROOT, _graph

# bottom first; a package may import itself and those before it. labelling and cli are the top, side by side.
ORDER = (("errors", "numeric"), "moved", "disk", "genomes", "runtime", "plugins", "spaces", "lm", "fidelity", "shell",
         ("labelling", "cli"))
RANK = {p: i for i, ps in enumerate(ORDER) for p in (ps if isinstance(ps, tuple) else (ps,))}
# Back arrows (module, the package above it it imports), each a decision with its reason. Issue 57 moved the command
# shell out of forge/runtime/ into forge/shell/, above lm, and with it the last ones: none is left. (The core's one
# upward edge, forge/__init__'s lazy Python API, leaves forge's folders: tests/test_structure.py's API_IMPORT.)
BACK_ARROWS: dict[tuple[str, str], str] = {}
PACKAGES = sorted(p.name for p in (ROOT / "forge").iterdir() if (p / "__init__.py").exists())


def _package(module: str) -> str | None:
    """forge.<pkg>.x -> pkg; forge.<module> -> module; None for the root package and anything outside forge."""
    parts = module.split(".")
    return parts[1] if parts[0] == "forge" and len(parts) > 1 else None


def _arrows() -> dict[tuple[str, str], str]:
    """(module, package it imports) -> one example target, for every import from one forge package to another."""
    out: dict[tuple[str, str], str] = {}
    for m, targets in _graph().items():
        for t in sorted(targets):
            a, b = _package(m), _package(t)
            if a is not None and b is not None and a != b:
                out.setdefault((m, b), t)
    return out


def test_every_forge_package_has_a_place_in_the_order():
    assert {p for p in map(_package, _graph()) if p is not None} == set(RANK)


def test_imports_between_forge_packages_go_down_the_order_but_the_listed_back_arrows():
    back = {(m, b): t for (m, b), t in _arrows().items() if RANK[b] > RANK[_package(m)]}
    unlisted = sorted(f"{m} imports {t}" for (m, b), t in back.items() if (m, b) not in BACK_ARROWS)
    assert not unlisted, "imports up forge's order " + " → ".join(map(str, ORDER)) + ": " + "; ".join(unlisted)
    stale = sorted(f"{m} → {b}" for m, b in BACK_ARROWS if (m, b) not in back)
    assert not stale, f"listed back arrows that are gone (drop them from BACK_ARROWS): {stale}"
    assert len(BACK_ARROWS) == 0  # the count in view: a new back arrow is a decision, not a drift


@pytest.mark.parametrize("pkg", PACKAGES)
def test_each_package_docstring_names_what_it_imports(pkg):
    """Its "May import ..." paragraph names every forge package it imports (the root and itself aside)."""
    doc = importlib.import_module(f"forge.{pkg}").__doc__ or ""
    assert "May import" in doc, f"forge/{pkg}/__init__.py does not say what it may import"
    rule = doc[doc.index("May import"):]
    named = set(re.findall(r"forge\.(\w+)", rule))
    used = {b for (m, b) in _arrows() if _package(m) == pkg}
    assert used <= named, f"forge/{pkg}/__init__.py imports {sorted(used - named)} but its docstring does not say so"
    listed = {(_package(m), b) for m, b in BACK_ARROWS}
    above = sorted(b for b in named if RANK[b] > RANK[pkg] and (pkg, b) not in listed)
    assert not above, f"forge/{pkg}/__init__.py allows {above}, above it in the order"


def test_the_order_check_catches_a_back_arrow_and_a_stale_listing(monkeypatch):
    """Not vacuous: a planted import up the order is reported, and so is a listed back arrow that no longer exists."""
    import tests.test_layers as me

    real = _graph()
    planted = {**real, "forge.genomes.genome": real["forge.genomes.genome"] | {"forge.lm.model"}}
    monkeypatch.setattr(me, "_graph", lambda: planted)
    with pytest.raises(AssertionError, match="forge.genomes.genome imports forge.lm.model"):
        test_imports_between_forge_packages_go_down_the_order_but_the_listed_back_arrows()
    monkeypatch.setattr(me, "_graph", lambda: real)
    monkeypatch.setitem(BACK_ARROWS, ("forge.genomes.genome", "lm"), "planted")
    with pytest.raises(AssertionError, match="gone.*forge.genomes.genome → lm"):
        test_imports_between_forge_packages_go_down_the_order_but_the_listed_back_arrows()


def test_the_tests_mirror_the_packages():
    """tests/forge/<pkg>/ holds the tests of forge/<pkg>/; tests/forge/ itself only those of forge's top-level modules
    (a file named after a package's module belongs in its folder); tests/search/ holds its groups' folders only."""
    tests = ROOT / "tests"
    folders = {p.name for p in (tests / "forge").iterdir() if p.is_dir() and any(p.glob("test_*.py"))}
    assert folders <= set(PACKAGES), f"tests/forge/ folders mirroring no package: {sorted(folders - set(PACKAGES))}"
    top = {p.stem for p in (ROOT / "forge").glob("*.py")}
    inner = {p.stem: p.parent.name for pkg in PACKAGES for p in (ROOT / "forge" / pkg).glob("*.py")}
    astray = sorted(f"{p.name} (forge/{inner[p.stem[5:]]}/{p.stem[5:]}.py: tests/forge/{inner[p.stem[5:]]}/)"
                    for p in (tests / "forge").glob("test_*.py") if p.stem[5:] in inner and p.stem[5:] not in top)
    assert not astray, f"tests of a package's module at tests/forge/'s top: {astray}"
    loose = sorted(p.name for p in (tests / "search").glob("test_*.py"))
    assert not loose, f"tests at tests/search/'s top (put each in the folder of its group: problem, operators, run, " \
                      f"cli, report, export, verify, serving): {loose}"
