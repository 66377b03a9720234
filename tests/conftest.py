"""Shared fixtures. Tests that need ../shared/data find it through `shared_data` (FORGE_SHARED_DATA),
which skips locally when it is absent but fails loudly when CI=true."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from forge.io import shared_data_dir


@pytest.fixture(scope="session")
def shared_data() -> Path:
    d = shared_data_dir()
    if not (d / "llmforge_iha_200M.csv").is_file():
        msg = f"shared data not found at {d} (set FORGE_SHARED_DATA to the folder holding llmforge_iha_200M.csv)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return d


@pytest.fixture(scope="session")
def shared_csv(shared_data: Path) -> Path:
    return shared_data / "llmforge_iha_200M.csv"
