"""Issue 57 moved the command shell out of forge/runtime/ (and numeric.py up to forge/): the old paths keep working,
one warning each, so a plug-in, a saved `.hydra/hydra.yaml` or an old console script still runs."""
from __future__ import annotations

import importlib
import sys
import warnings
from pathlib import Path

import pytest
from hydra.utils import instantiate

from forge import moved, plugins

ROOT = Path(__file__).resolve().parents[2]


def _fresh(monkeypatch, old: str) -> None:
    """As in a new process: the old path not yet imported nor warned about."""
    monkeypatch.delitem(sys.modules, old, raising=False)
    parent, _, name = old.rpartition(".")
    monkeypatch.delattr(sys.modules[parent], name, raising=False)  # `from parent import name` asks the finder again
    monkeypatch.setattr(moved, "_warned", set())


@pytest.mark.parametrize("old", sorted(moved.NESTED))
def test_an_old_runtime_path_is_the_new_module_with_one_warning(monkeypatch, old):
    _fresh(monkeypatch, f"forge.{old}")
    new = f"forge.{moved.NESTED[old]}"
    with pytest.warns(moved.ForgeDeprecationWarning, match=rf"forge\.{old} moved to {new}: import {new}"):
        module = importlib.import_module(f"forge.{old}")
    assert module is importlib.import_module(new) and module.__spec__.name == new
    assert not (ROOT / "forge" / f"{old.replace('.', '/')}.py").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        importlib.import_module(f"forge.{old}")  # once per process


def test_from_runtime_import_a_moved_module(monkeypatch):
    _fresh(monkeypatch, "forge.runtime.plugin_use")
    with pytest.warns(moved.ForgeDeprecationWarning, match="forge.runtime.plugin_use moved to forge.shell.plugin_use"):
        from forge.runtime import plugin_use
    from forge.shell import plugin_use as new

    assert plugin_use is new


def test_the_old_callback_path_of_a_saved_hydra_yaml_still_builds_the_callback(monkeypatch):
    from forge.shell.callbacks import MaskSecrets

    monkeypatch.setattr(moved, "_warned", set())
    with pytest.warns(moved.ForgeDeprecationWarning, match="forge.disk.redact.MaskSecrets moved to "
                                                           "forge.shell.callbacks.MaskSecrets"):
        built = instantiate({"_target_": "forge.disk.redact.MaskSecrets"})
    assert type(built) is MaskSecrets
    import forge.disk.redact as redact

    with pytest.raises(AttributeError, match="has no attribute 'Nothing'"):
        redact.Nothing  # noqa: B018 - a name that never lived there is still an AttributeError


def test_old_targets_read_as_their_new_paths():
    assert moved.new_target("forge.runtime.app.forge_main") == "forge.shell.app.forge_main"
    assert moved.new_target("forge.app.forge_main") == "forge.shell.app.forge_main"  # the path before issue 46
    assert moved.new_target("forge.runtime.config.conf_dir") == "forge.runtime.config.conf_dir"  # did not move
    assert moved.new_target("forge.disk.redact.MaskSecrets") == "forge.shell.callbacks.MaskSecrets"
    assert plugins._norm("forge.runtime.tracking:build") == "forge.shell.tracking.build"
    assert moved.new_path("forge.numeric") is None  # numeric.py is at its old place again: nothing to alias
