"""A script run from a folder that holds its own `search/` package is refused in one line naming the folder."""
from __future__ import annotations

import subprocess
import sys


def test_forge_search_from_a_folder_with_its_own_search_package_is_refused(tmp_path):
    (tmp_path / "search").mkdir()
    (tmp_path / "search" / "__init__.py").write_text("# the user's own NAS code\n")
    script = tmp_path / "go.py"
    script.write_text("import forge\nforge.search(space='iha-tiny', out_dir='r', search={'generations': 1})\n")
    p = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode != 0 and "No module named" not in p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert f"the folder {(tmp_path / 'search').resolve()} hides Forge's `search` package" in last
    assert "allowed: run from another folder, or rename your `search` package" in last


def test_no_refusal_where_nothing_shadows():
    from forge.runtime.shadow import check

    check()  # this checkout: every package is Forge's own, found beside `forge`
