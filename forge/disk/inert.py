"""Text from a received file printed inert: a terminal control sequence in a genome name or a summary field
(ESC [2J clears the screen, ESC ]0; retitles the window, a bare CR overwrites the line) is shown escaped,
never sent to the terminal."""
from __future__ import annotations

import re
from typing import Any

# C0 controls but tab, DEL, C1 controls, and the Unicode line/paragraph separators and bidi overrides
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def inert(value: Any) -> str:
    """`str(value)` with every control character written as its escape (`\\x1b`, `\\n`, `\\u202e`)."""
    text = str(value)
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
