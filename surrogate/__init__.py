"""Loss surrogates: the two interfaces every surrogate meets (`surrogate.interface`: the search side, predict with an
interval; the training side, fit / predict / save), the Forge-Former predictor (`surrogate.predictor`; reading one
back: `surrogate.loading.load_predictor`, with `register_format` for other checkpoint formats), any surrogate built
from its config node and refitted for co-evolution (`surrogate.generic`), replay fine-tuning
(`surrogate.fit.finetune`), baselines, metrics and the `forge-surrogate` CLI.
Heavy modules (torch, Lightning) load on first use, so `import surrogate` stays cheap.
Imports the `forge` core only: never `backends` or `search`."""
from __future__ import annotations

from typing import Any

_LAZY = {"load_predictor": "surrogate.loading", "ForgeFormerPredictor": "surrogate.predictor",
         "finetune": "surrogate.fit", "train_forgeformer": "surrogate.fit"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'surrogate' has no attribute {name!r}")
