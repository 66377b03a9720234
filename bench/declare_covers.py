"""Declare what each shipped checkpoint covers (issue 43 §5): `covers` in its sidecar, {gene: [lo, hi]} over the
genomes of the split it was trained on (`surrogate.checkpoints.data_covers`), re-made from its recorded test seed
and fraction and checked against its recorded training-data hash. search.blind refuses, or marks blind, any
value outside these ranges.

    .venv/bin/python bench/declare_covers.py            # print what each sidecar declares and what its data holds
    .venv/bin/python bench/declare_covers.py --write    # write `covers` into the sidecars that declare none
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LABELS = ROOT / "data" / "labels"

# the label files each shipped checkpoint was trained on (docs/concepts/forge-former.md gives the commands)
TRAINED_ON = {
    "forgeformer-iha-paper": ("shared", "llmforge_iha_200M.csv"),
    "forgeformer-iha-paper-all": ("shared", "llmforge_iha_200M.csv"),
    "forgeformer-iha-tiny": ("labels", "iha-tiny-cpu-proxy.jsonl"),
    "forgeformer-iha-tiny-swa": ("labels", "iha-tiny-cpu-proxy.jsonl", "iha-tiny-swa-cpu-proxy.jsonl"),
}


def training_split(name: str, meta: dict):
    """The label set the checkpoint trained on: every row (`trained_on`), else the train part of its split."""
    from forge.disk.io import shared_data_dir
    from surrogate.dataset import load_labelset, train_val_test

    where, *files = TRAINED_ON[name]
    base = shared_data_dir() if where == "shared" else LABELS
    data = load_labelset([base / f for f in files] if len(files) > 1 else base / files[0])
    if "trained_on" in meta:
        return data, meta["trained_on"]["data_hash"]
    test = meta.get("test") or {}
    return train_val_test(data, int(test.get("seed", 0)), float(test.get("test_frac", 0.2)))[0], meta["data_hash"]


def derived(name: str, meta: dict) -> dict:
    from surrogate.checkpoints import data_covers

    data, want = training_split(name, meta)
    if data.data_hash() != want:
        sys.exit(f"{name}: the re-made training split has hash {data.data_hash()}, its sidecar records {want}")
    return data_covers(data)


def main() -> None:
    from forge.disk.io import atomic_write_json
    from surrogate.checkpoints import shipped_sidecars

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    for name, meta in shipped_sidecars().items():
        got = derived(name, meta)
        print(json.dumps({"checkpoint": name, "declared": meta.get("covers"), "data": got}))
        if a.write and "covers" not in meta:
            atomic_write_json(ROOT / "data" / "surrogate" / f"{name}.json", {**meta, "covers": got})


if __name__ == "__main__":
    main()
