"""Issue 46: forge/'s modules moved into packages; a run saved before names classes at their old paths."""
from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from forge import plugins
from forge.disk.io import atomic_write_text
from forge.genomes.genome import GenomeError
from forge.moved import MOVED
from forge.spaces.space import SearchSpace, space_class

ROOT = Path(__file__).resolve().parents[2]


def old_path(obj: object) -> str:
    """The path a run saved before issue 46's move holds for `obj`, read from the map of moved modules (never
    spelled here, where a search-and-replace of the old paths would rewrite it)."""
    old = [name for name, pkg in MOVED.items() if f"forge.{pkg}.{name}" == obj.__module__]
    assert len(old) == 1, f"{obj.__module__} is not one moved module"
    return f"forge.{old[0]}.{obj.__qualname__}"


OLD = old_path(SearchSpace)


def test_a_saved_run_naming_the_old_space_path_still_builds_its_space():
    assert OLD.count(".") == 2 and plugins.check("space", OLD) == f"{SearchSpace.__module__}.SearchSpace"
    assert space_class(OLD) is SearchSpace


@pytest.mark.parametrize("module", sorted(MOVED))
def test_every_moved_module_lives_where_the_map_says_and_nowhere_else(module):
    importlib.import_module(f"forge.{MOVED[module]}.{module}")
    assert not (ROOT / "forge" / f"{module}.py").exists()


def test_an_old_path_is_still_only_what_the_allowlist_holds():
    with pytest.raises(GenomeError, match="not an allowed space plug-in"):
        space_class(old_path(atomic_write_text))  # moved, but never a space
