"""The console script of `forge-surrogate`: `--help`/`--version` answer from the config before the
command's own imports (forge.shell.entry); pyproject.toml's [project.scripts] point here."""
from __future__ import annotations

from forge.shell.entry import entry

forge_surrogate = entry("forge-surrogate", "surrogate.cli:main")
