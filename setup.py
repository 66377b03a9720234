"""Package discovery (the rest of the metadata is in pyproject.toml).

setuptools' `packages.find` cannot rename a folder, and conf/ and data/ install as `forge_conf` and
`forge_data`; so the code packages are found here and those two are named explicitly.
"""
from pathlib import Path

from setuptools import find_packages, setup

CODE = ("forge", "surrogate", "backends", "search", "forge_hf")


def packages(where: str | Path = Path(__file__).resolve().parent) -> list[str]:
    """Every package under the code folders (a new subpackage is found by itself) + forge_conf, forge_data."""
    return find_packages(str(where), include=[p for c in CODE for p in (c, f"{c}.*")]) + ["forge_conf", "forge_data"]


if __name__ == "__main__":
    setup(packages=packages())
