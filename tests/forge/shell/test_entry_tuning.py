"""The inference commands' start (forge.shell.entry): BLAS pools start at one thread unless the user sized them,
the config's thread count still holds, and glibc's malloc keeps freed memory (issue 45)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from forge.shell.entry import BLAS_ENV, keep_freed_memory

PROBE = """
import json, os, sys
from forge.shell.entry import blas_one_thread, blas_threads_default
with blas_one_thread(%r):
    import numpy, scipy.special  # numpy's and scipy's OpenBLAS load in here
inside_env = os.environ.get("OPENBLAS_NUM_THREADS")
from threadpoolctl import threadpool_info
start = sorted({d["num_threads"] for d in threadpool_info() if d["internal_api"] == "openblas"})
from search.cli import _set_threads
_set_threads(None)  # threads: null in a config: the library's default count
after_null = sorted({d["num_threads"] for d in threadpool_info() if d["internal_api"] == "openblas"})
print(json.dumps({"start": start, "after_null": after_null, "env_after": inside_env, "default": blas_threads_default()}))
"""


def _probe(on: bool, env: dict[str, str]) -> dict:
    base = {k: v for k, v in os.environ.items() if k not in BLAS_ENV}
    out = subprocess.run([sys.executable, "-c", PROBE % on], env={**base, **env}, capture_output=True, text=True,
                         timeout=600, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def test_blas_starts_at_one_thread_and_null_restores_the_default():
    got = _probe(True, {})
    cores = len(os.sched_getaffinity(0))
    assert got["start"] == [1] and got["env_after"] is None  # the variable is gone again: children see the user's
    assert got["default"] == cores and len(got["after_null"]) == 1
    assert got["after_null"][0] == cores or got["after_null"][0] >= 64  # OpenBLAS caps its pool at its build's max


def test_a_users_setting_wins_and_an_untuned_command_is_unchanged():
    assert _probe(True, {"OPENBLAS_NUM_THREADS": "2"})["start"] == [2]
    untuned = _probe(False, {})
    assert untuned["default"] is None and (untuned["start"] != [1] or len(os.sched_getaffinity(0)) == 1)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_malloc_settings_are_taken_on_glibc():
    import platform

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("not glibc")
    assert keep_freed_memory() is True
