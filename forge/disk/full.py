"""A full disk is said of the place the user can free, in one line, exit 2; never reported as a result.

`full_disk_at(out)` names `out=` for a write that ran out of space without naming its file (and for the weights
libraries' own errors for os error 28); `refuse_full_disk(labels, where)` ends a command whose trainings failed
on a full disk (the labelling worker records the OSError's errno and path in the failed label) instead of
reporting their `inf` as a loss.
"""
from __future__ import annotations

import errno
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator


@contextmanager
def full_disk_at(out: Path) -> Iterator[None]:
    """A write that ran out of space is said of out= (where the user can free space), in one line: the OSError
    of a write that names no file, and the weights libraries' own errors for os error 28 (safetensors raises
    its SafetensorError, torch.save a RuntimeError)."""
    try:
        yield
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT) and e.filename is None:
            raise OSError(e.errno, e.strerror or "No space left on device", str(out)) from None
        raise
    except Exception as e:  # torch.save's RuntimeError, safetensors' SafetensorError (an Exception)
        if "No space left" in str(e) or "os error 28" in str(e):
            raise OSError(errno.ENOSPC, "No space left on device", str(out)) from None
        raise


def refuse_full_disk(labels: Iterable[Any], out: Path) -> None:
    """A label that failed on a full disk (its worker's OSError, ENOSPC or EDQUOT) ends the verification in
    one line, exit 2, before verify.json is written: reported as a loss, it would read "loss inf" and exit 0.
    The failed label stays stored as failed, so the next verify trains that genome again."""
    full = next((lab for lab in labels if lab.status == "failed" and
                 lab.provenance.get("errno") in (errno.ENOSPC, errno.EDQUOT)), None)
    if full is not None:
        raise OSError(errno.ENOSPC, "No space left on device", full.provenance.get("path") or str(out))
