"""search/cli.py reads as it runs: no local there is named after the package `search` (issue 57).

`search = build_search(...)` made `search.run(...)` resolve, for grep and for tools, to the package's modules.
"""
from __future__ import annotations

import ast
from pathlib import Path

import search.cli


def test_no_name_in_the_cli_shadows_the_search_package():
    tree = ast.parse(Path(search.cli.__file__).read_text(encoding="utf-8"))
    bound = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "search"
             and isinstance(n.ctx, ast.Store)]
    bound += [n.lineno for n in ast.walk(tree) if isinstance(n, ast.arg) and n.arg == "search"]
    assert bound == [], f"search/cli.py binds `search` at lines {bound}: it shadows the package"
