"""The console script of `forge-hw`: `--help`/`--version` answer from the config before the
command's own imports (forge.shell.entry); pyproject.toml's [project.scripts] point here."""
from __future__ import annotations

from forge.shell.entry import entry

forge_hw = entry("forge-hw", "backends.cli:main", inference=True)
