"""Forge's one family of errors: what a user can fix, as opposed to a bug.

Every package's error class derives from `ForgeError`; the CLIs turn a ForgeError (and Hydra/OmegaConf config
errors, and OS errors that name a file) into one line and exit 2. Any other exception is a bug: it keeps its
traceback and exits 1. `ForgeError` stays a `ValueError` so code that caught bad values before still does.
"""
from __future__ import annotations

from typing import Any

REPORT_BUG = ("this is a bug in Forge, not bad input: please report it (an issue on the Forge project) with the "
              "traceback above, the command line and `pip show forge` output")


class ForgeError(ValueError):
    """Bad input the user can fix; the message says what is wrong and what is allowed."""


class UserError(ForgeError):
    """A bad option value or file (the generic member of the family)."""


class RangeError(UserError):
    """A numeric option outside what is allowed (or outside what fits in memory)."""


def check_int(key: str, value: Any, low: int, high: int | None = None, why: str = "") -> int:
    """`value` as an int in [low, high], else a RangeError naming `key` and the allowed range."""
    ok = isinstance(value, int) and not isinstance(value, bool) or (isinstance(value, float) and value.is_integer())
    if ok and low <= int(value) and (high is None or int(value) <= high):
        return int(value)
    allowed = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high:,}]"
    raise RangeError(f"{key}={value!r} is out of range; allowed: {allowed}{f' ({why})' if why else ''}")
