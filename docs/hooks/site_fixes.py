"""mkdocs hook: render the Markdown the way GitHub does, so a page reads the same on both.

GitHub lets a list start right after a paragraph line; Python-Markdown needs a blank line first and otherwise prints
the items as literal " - " inside the paragraph. Wide tables (the fidelity table has 9 columns) get a static scroll
wrapper, so no column is cut off even where the theme's JavaScript does not run. `.ci/check_site.py` checks both on
the built site.
"""
from __future__ import annotations

import re
from typing import Any

from markdown import Extension, Markdown
from markdown.preprocessors import Preprocessor
from mkdocs.plugins import event_priority

LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\S")
FENCE = re.compile(r"^\s*(`{3,}[^`]*|~{3,}.*)$")  # a backtick fence's info string holds no backtick (CommonMark)
TABLE = re.compile(r"<table>(.*?)</table>", re.S)
SCROLL_CLASS = "forge-table-scroll"


def blank_before_lists(markdown: str) -> str:
    """Insert a blank line where a list follows a paragraph line directly (outside code fences)."""
    out: list[str] = []
    fenced, block_start = False, None  # block_start: first line of the current paragraph-or-list block
    for line in markdown.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            if not line.strip():
                block_start = None
            elif block_start is None:
                block_start = line
            elif LIST_ITEM.match(line) and not LIST_ITEM.match(block_start) and not _is_special(block_start):
                out.append("")
                block_start = line
        out.append(line)
    return "\n".join(out)


def _is_special(line: str) -> bool:
    """Blocks whose lines are not paragraph text: tables, HTML, headings, admonitions, quotes, snippets."""
    return line.lstrip().startswith(("|", "<", "#", "!!!", "???", ">", "--8<--"))


def wrap_tables(html: str) -> str:
    """Put every table in a horizontally scrolling block."""
    return TABLE.sub(lambda m: f'<div class="{SCROLL_CLASS}"><table>{m.group(1)}</table></div>', html)


class _BlankBeforeLists(Preprocessor):
    def run(self, lines: list[str]) -> list[str]:
        return blank_before_lists("\n".join(lines)).split("\n")


class BlankBeforeListsExtension(Extension):
    """As a Markdown extension, so that it also reaches docstrings, which mkdocstrings renders on its own."""

    def extendMarkdown(self, md: Markdown) -> None:  # noqa: N802 (Python-Markdown's name)
        # 31: after pymdownx.snippets (32) has included files, before fences and HTML blocks
        md.preprocessors.register(_BlankBeforeLists(md), "forge_blank_before_lists", 31)


@event_priority(100)  # before mkdocstrings reads the extension list
def on_config(config: Any) -> Any:
    config.markdown_extensions.append(BlankBeforeListsExtension())
    return config


def on_page_content(html: str, **_: Any) -> str:
    return wrap_tables(html)
