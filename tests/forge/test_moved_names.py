"""Issue 46: forge/'s modules moved into packages; a run saved before names classes at their old paths."""
from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from forge import plugins
from forge.genomes.genome import GenomeError
from forge.spaces.space import SearchSpace, space_class

ROOT = Path(__file__).resolve().parents[2]
OLD = "forge." + "space.SearchSpace"  # written apart: the path a run saved before the move holds


def test_a_saved_run_naming_the_old_space_path_still_builds_its_space():
    assert plugins.check("space", OLD) == "forge.spaces.space.SearchSpace"
    assert space_class(OLD) is SearchSpace


@pytest.mark.parametrize("module", sorted(plugins.MOVED))
def test_every_moved_module_lives_where_the_map_says_and_nowhere_else(module):
    importlib.import_module(f"forge.{plugins.MOVED[module]}.{module}")
    assert not (ROOT / "forge" / f"{module}.py").exists()


def test_an_old_path_is_still_only_what_the_allowlist_holds():
    with pytest.raises(GenomeError, match="not an allowed space plug-in"):
        space_class("forge." + "io.atomic_write_text")  # moved, but never a space
