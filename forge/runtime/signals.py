"""SIGTERM stops a long command like Ctrl-C: a scheduler's preemption or `kill` keeps what is done.

forge-search, forge-label and forge-export run their work inside `term_as_interrupt()`; SIGTERM then raises
KeyboardInterrupt where the loop is, so the same cleanup runs (claims released, summary written, a staged
output removed) and the command exits 143 instead of 130 (forge_main asks `interrupt_was_sigterm`).
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator


_TERM = {"signal": ""}  # the signal the newest `term_as_interrupt` turned into a KeyboardInterrupt, if any


def interrupt_was_sigterm() -> bool:
    """Whether the KeyboardInterrupt now unwinding came from SIGTERM (so the command exits 143, not 130)."""
    return _TERM["signal"] == "SIGTERM"


@contextmanager
def term_as_interrupt(caught: dict[str, str] | None = None) -> Iterator[dict[str, str]]:
    """Yields a dict whose "signal" names the signal that stopped the loop (SIGTERM; absent for Ctrl-C). A loop
    may also check it: a KeyboardInterrupt raised inside a finalizer or a logging lock is ignored by Python."""
    caught = {} if caught is None else caught

    def raise_interrupt(signum, frame):
        caught["signal"] = _TERM["signal"] = "SIGTERM"
        raise KeyboardInterrupt

    main = threading.current_thread() is threading.main_thread()
    _TERM["signal"] = ""
    old = signal.signal(signal.SIGTERM, raise_interrupt) if main else None
    try:
        yield caught
    finally:
        if main:
            signal.signal(signal.SIGTERM, old)
