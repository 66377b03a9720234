"""The docs site renders lists and wide tables: no paragraph of the built site holds a literal " - " list marker
(Markdown needs a blank line before a list; docs/hooks/site_fixes.py adds it, as GitHub renders it), and every
table sits in a scroll wrapper. `.ci/run` checks the site it builds with `.ci/check_site.py`; the slow test here
builds one itself."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str, path: Path):  # noqa: ANN202 (a module)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_site = _load("check_site", ROOT / ".ci" / "check_site.py")


def test_check_finds_a_list_inside_a_paragraph_and_a_bare_table() -> None:
    bad = "<p>Three kinds:\n- a;\n- b.</p><table><tr><td>1</td></tr></table>"
    problems = check_site.check_html(bad)
    assert len(problems) == 2 and "list" in problems[0] and "table" in problems[1]
    good = '<p>a - b, not a list</p><ul><li>a</li></ul><div class="forge-table-scroll"><table></table></div>'
    assert check_site.check_html(good) == []


def test_blank_line_goes_before_a_list_after_a_paragraph_only() -> None:
    pytest.importorskip("mkdocs")
    fixes = _load("site_fixes", ROOT / "docs" / "hooks" / "site_fixes.py")
    text = "Para:\n- a\n  more\n- b\n\n- c\n1. d\n\n```\nx:\n- not a list\n```\n| t |\n- after a table"
    out = fixes.blank_before_lists(text).split("\n")
    assert out[:2] == ["Para:", ""] and out.count("") == 3  # one inserted, two were there
    assert "x:" in out and out[out.index("x:") + 1] == "- not a list"  # code fences untouched
    inline = fixes.blank_before_lists("```` ```bash ```` is code, not a fence.\nPara:\n- a").split("\n")
    assert inline[1:] == ["Para:", "", "- a"]  # a line starting with an inline code span opens no fence
    assert fixes.wrap_tables("<table><tr></tr></table>").startswith('<div class="forge-table-scroll"><table>')


@pytest.mark.slow
def test_built_site_has_no_list_in_a_paragraph_and_every_table_scrolls(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert check_site.check_site(tmp_path / "site") == []


def test_check_finds_a_page_that_fetches_fonts_and_a_site_without_its_offline_search_index(tmp_path: Path) -> None:
    """Issue 56 §8: the site opened from site/ fetched Google Fonts and logged a ReferenceError on every page
    (search/search_index.js missing over file://): the check names both."""
    font = '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto">'
    assert check_site.check_html(font) == ["fetches from the network (fonts or a CDN)"]
    (tmp_path / "index.html").write_text("<p>ok</p>")
    assert [p.split(":")[0] for p in check_site.check_site(tmp_path)] == ["search/search_index.js"]
    (tmp_path / "search").mkdir()
    (tmp_path / "search" / "search_index.js").write_text("var __index = {};")
    assert check_site.check_site(tmp_path) == []
