"""The console scripts of `forge-search`, `forge-report`, `forge-export`, `forge-verify`, `forge-serve`:
`--help`/`--version` answer from the config before the command's own imports (forge.shell.entry); pyproject.toml's
[project.scripts] point here."""
from __future__ import annotations

from forge.shell.entry import entry

forge_search = entry("forge-search", "search.cli:search_main", inference=True)
forge_report = entry("forge-report", "search.cli:report_main", inference=True)
forge_export = entry("forge-export", "search.cli:export_main", inference=True)
forge_verify = entry("forge-verify", "search.verify_cli:main")
forge_serve = entry("forge-serve", "search.serving.cli:main", inference=True)
