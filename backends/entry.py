"""The console script of `forge-hw`: `--help`/`--version` answer from the config before the
command's own imports (forge.runtime.entry); pyproject.toml's [project.scripts] point here."""
from __future__ import annotations

from forge.runtime.entry import entry

forge_hw = entry("forge-hw", "backends.cli:main", inference=True)
