"""Give every shipped checkpoint its pairwise odds (issue 51 §1): `pairwise` in its sidecar, nothing else changed.

- forgeformer-iha-paper-all (trained on every label): the out-of-fold pairs of grouped 5-fold CV
  (bench/results/grouped_cv_oof.npz, the rows its conformal interval came from), through its own low-end stretch,
  pairs within one fold (one model predicted both members, as one model predicts a whole front).
- The others: their held-out test split, re-made from the sidecar's test seed and fraction and checked against
  its training-data hash (as `forge-surrogate mode=calibrate` does), predicted by the checkpoint itself.

    .venv/bin/python bench/attach_pairwise.py            # print each checkpoint's check (max error per Δμ bin)
    .venv/bin/python bench/attach_pairwise.py --write    # write `pairwise` into the sidecars
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from declare_covers import LABELS, TRAINED_ON  # noqa: E402  (the label files each checkpoint was trained on)

OOF = ROOT / "bench" / "results" / "grouped_cv_oof.npz"


def odds_for(name: str):
    from forge.disk.io import shared_data_dir
    from surrogate.crossconf import oof_rows
    from surrogate.dataset import load_labelset, train_val_test
    from surrogate.fit import pairwise_fit
    from surrogate.loading import load_predictor
    from surrogate.pairwise import PairwiseOdds

    p = load_predictor(ROOT / "data" / "surrogate" / name)
    if "trained_on" in p.meta:  # every label trained it: cross-fitted out-of-fold rows
        y, pred, fold, ids = oof_rows(OOF)
        mu = p.calib.apply(pred, np.zeros(len(pred)))[0] if p.calib is not None else pred
        return PairwiseOdds.fit(mu, y, ids, fold, fold, source=f"{OOF.name}: out-of-fold pairs of grouped 5-fold "
                                "CV, within each fold")
    where, *files = TRAINED_ON[name]
    base = shared_data_dir() if where == "shared" else LABELS
    data = load_labelset([base / f for f in files] if len(files) > 1 else base / files[0])
    t = p.meta["test"]
    train, _, held = train_val_test(data, int(t["seed"]), float(t["test_frac"]))
    if train.data_hash() != p.meta.get("data_hash"):
        raise SystemExit(f"{name}: the label files do not re-make its training split")
    split = {"data": " + ".join(files), "split": f"train_val_test(seed={t['seed']}, test_frac={t['test_frac']})"}
    return pairwise_fit(p, held, split, int(t["seed"]))


def main() -> None:
    from forge.disk.io import atomic_write_json

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    for name in TRAINED_ON:
        odds = odds_for(name)
        prov = odds.provenance
        print(f"{name}: {prov['n_rows']} rows, {prov['n_pairs']} pairs, {len(odds.x)} knots, grouped check "
              f"max |predicted - observed| {prov['check']['max_error']} (bins of >= 100 pairs)")
        if a.write:
            path = ROOT / "data" / "surrogate" / f"{name}.json"
            meta = json.loads(path.read_text())
            meta["pairwise"] = odds.to_dict()
            atomic_write_json(path, meta)


if __name__ == "__main__":
    main()
