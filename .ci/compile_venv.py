#!/usr/bin/env python3
"""Byte-compile this interpreter's site-packages on every core (run with the venv's python, after
`pip install --no-compile`).

pip byte-compiles what it installs on one core: about half of the test install's 180 CPU-seconds (81,000 files;
bench/RESULTS.md, issue 56: CI budget). The files are compiled all the same, here on every core, because this
environment sets PYTHONDONTWRITEBYTECODE=1: nothing would be cached later, and every process the suite starts would
compile what it imports, every time. A file that does not compile under this Python (torch ships one written for
3.12) is skipped, as pip skips it."""
from __future__ import annotations

import compileall
import sysconfig


def main() -> None:
    for folder in sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}):
        compileall.compile_dir(folder, quiet=2, workers=0)  # workers=0: one process per core


if __name__ == "__main__":
    main()
