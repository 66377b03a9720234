"""What real training needs beyond the core install, checked before any work is done.

`protocol=paper` trains on a CUDA GPU in bf16; `corpus=hf` reads a Hugging Face dataset (the `datasets` package)
and tokenizes with GPT-2's BPE (`tiktoken`). A command that would train under them on a machine without them
says so in one line at its start, naming the extra and the CPU recipe, instead of failing minutes later.
"""
from __future__ import annotations

import importlib.util
from typing import Any, Mapping

from forge.errors import UserError

CPU_RECIPE = "protocol=cpu-proxy corpus=stdlib (trains on this CPU in seconds per genome)"
DATA_EXTRA = "(pip install -e '.[data]' in the Forge clone)"


class NeedsError(UserError):
    """Training was asked for under a protocol or corpus this machine cannot run."""


def _cuda() -> bool:
    """Whether torch sees a CUDA GPU. The driver is asked first (milliseconds): a machine without one answers
    without importing torch (~1.5 s, the end of every `forge-search` asks) or without torch installed."""
    if not _driver_sees_gpu():
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _driver_sees_gpu() -> bool:
    """The CUDA driver API's device count > 0 (honours CUDA_VISIBLE_DEVICES); False where no driver loads."""
    import ctypes

    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        count = ctypes.c_int(0)
        return lib.cuInit(0) == 0 and lib.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0
    return False


def training_needs(protocol: Mapping[str, Any], corpus: Mapping[str, Any]) -> list[str]:
    """What is missing here to train under `protocol` on `corpus` (empty: nothing)."""
    missing = []
    if str(protocol.get("accelerator", "cpu")) == "gpu" and not _cuda():
        missing.append("a CUDA GPU (none is visible)")
    if str(corpus.get("_target_", "")).endswith("hf_corpus") and importlib.util.find_spec("datasets") is None:
        missing.append(f"datasets {DATA_EXTRA}")
    if corpus.get("tokenizer") == "gpt2" and importlib.util.find_spec("tiktoken") is None:
        missing.append(f"tiktoken {DATA_EXTRA}")
    return missing


def _joined(missing: list[str]) -> str:
    """`a CUDA GPU (none is visible) and datasets, tiktoken (pip install -e '.[data]')`: one extra named once."""
    pkgs = [m.removesuffix(f" {DATA_EXTRA}") for m in missing if m.endswith(DATA_EXTRA)]
    rest = [m for m in missing if not m.endswith(DATA_EXTRA)]
    return " and ".join([*rest, *([f"{', '.join(pkgs)} {DATA_EXTRA}"] if pkgs else [])])


def check_training(protocol: Mapping[str, Any], corpus: Mapping[str, Any], what: str,
                   allowed: str = CPU_RECIPE) -> None:
    """Raise one line naming what is missing and `allowed`: what works without it (default: the CPU recipe)."""
    missing = training_needs(protocol, corpus)
    if missing:
        name = corpus.get("name") or str(corpus.get("_target_", "?")).rsplit(".", 1)[-1]
        raise NeedsError(f"{what} trains under protocol={protocol.get('name', '?')} on corpus {name}, which needs "
                         f"{_joined(missing)}; allowed: {allowed}")
