"""Values from a run folder placed in a Markdown model card: text, never markup.

A metric, objective or backend name comes from the run's files (shared data): raw HTML in one (`<img onerror=...>`,
`<script>`) would render on a model hub, and a `|` or a backtick would break the card's tables and code spans.
"""
from __future__ import annotations

import html
from typing import Any


def md_text(value: Any) -> str:
    """A value as Markdown text: HTML escaped, table pipes escaped, on one line."""
    text = html.escape(str(value), quote=False).replace("|", "\\|")
    return " ".join(text.split("\n"))


def md_code(value: Any) -> str:
    """A value inside a `code span`: no backtick can close it early (HTML inside a code span is shown as is)."""
    return " ".join(str(value).replace("`", "'").split("\n"))
