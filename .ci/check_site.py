#!/usr/bin/env python3
"""Check a built docs site (`mkdocs build`) for what Markdown gets wrong silently: a list printed as literal " - "
lines inside a paragraph (a list needs a blank line before it), and a table outside a scroll wrapper (a wide
table loses columns). Usage: `.ci/check_site.py site/`; prints one line per problem, exit 1 if any."""
from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path

LIST_MARKER = re.compile(r"(?:^|\n)[ \t]*(?:[-*+]|\d+\.) \S")
WRAPPER = "forge-table-scroll"


class _Scan(HTMLParser):
    """Collect paragraph texts that hold a list marker at a line start, and tables not inside the wrapper."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, str]] = []  # (tag, class) of open non-void elements
        self.para: list[str] | None = None
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        cls = dict(attrs).get("class") or ""
        if tag == "p":
            self.para = []
        if tag == "table" and not any(WRAPPER in c.split() for _, c in self.stack):
            self.problems.append("a <table> outside a scroll wrapper")
        if tag not in {"br", "img", "hr", "input", "meta", "link", "source", "wbr"}:
            self.stack.append((tag, cls))

    def handle_endtag(self, tag: str) -> None:
        if tag == "p" and self.para is not None:
            text = "".join(self.para)
            if LIST_MARKER.search(text):
                self.problems.append(f"a list rendered as text in a paragraph: {text.strip()[:70]!r}")
            self.para = None
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break

    def handle_data(self, data: str) -> None:
        if self.para is not None:
            self.para.append(data)


REMOTE = re.compile(r"""(?:src|href)=["']?(?:https?:)?//(?:fonts\.googleapis|fonts\.gstatic|cdn\.)""")


def check_html(html: str) -> list[str]:
    """The problems of one page (a font or script fetched from the network: the site reads offline)."""
    scan = _Scan()
    scan.feed(html)
    return scan.problems + (["fetches from the network (fonts or a CDN)"] if REMOTE.search(html) else [])


def check_site(site: Path) -> list[str]:
    """Every problem of every page, as 'page: problem' lines; and the search index a page opened over file://
    reads (mkdocs-material's offline plugin writes it; without it every page logged a ReferenceError)."""
    missing = [] if (site / "search" / "search_index.js").is_file() else [
        "search/search_index.js: missing (the offline plugin writes it; pages opened from site/ need it)"]
    return missing + [f"{page.relative_to(site)}: {p}" for page in sorted(site.rglob("*.html"))
                      for p in check_html(page.read_text(encoding="utf-8"))]


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not (Path(argv[0]) / "index.html").is_file():
        print("check_site: expected one argument, a built site folder holding index.html (e.g. site/)")
        return 2
    problems = check_site(Path(argv[0]))
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
