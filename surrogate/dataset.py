"""Label sets and architecture-level splits, deterministic by seed.

Every split is grouped by canonical architecture (`genome.id`, a hash of the network the genome builds):
the label set holds some architectures more than once (relabelled runs, or genomes differing only in
pruned slots), and rows of one architecture on both sides of a split inflate ranking metrics. So the
train/test split and the validation and calibration carves (`split_ids`, a group shuffle split over
unique ids) and the CV folds (`group_folds`, sklearn's GroupKFold) never put one architecture on two sides.
`split_ids` predates `group_folds` and is kept as is: the shipped checkpoints' test splits are re-made by it.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from forge.errors import ForgeError
from forge.genomes.genome import Genome
from forge.genomes.labels import Label, load_any


class LabelSetError(ForgeError):
    """A label set is unusable (empty, NaN label); names what is wrong."""


@dataclass
class LabelSet:
    genomes: list[Genome]
    y: np.ndarray  # (n,) float64 validation losses
    ids: list[str]
    dropped: int = 0
    source: str = ""

    def __len__(self) -> int:
        return len(self.genomes)

    def take(self, idx: Sequence[int] | np.ndarray) -> "LabelSet":
        idx = np.asarray(idx, dtype=np.int64)
        return LabelSet([self.genomes[i] for i in idx], self.y[idx], [self.ids[i] for i in idx], 0, self.source)

    def join(self, other: "LabelSet") -> "LabelSet":
        return LabelSet(self.genomes + other.genomes, np.concatenate([self.y, other.y]), self.ids + other.ids,
                        0, self.source)

    def data_hash(self) -> str:
        """Order-independent hash of (id, label) pairs: identifies the training data in a checkpoint."""
        pairs = sorted(f"{i}:{v:.6f}" for i, v in zip(self.ids, self.y))
        return hashlib.sha256("\n".join(pairs).encode()).hexdigest()[:16]


def from_labels(labels: Sequence[Label], dropped: int = 0, source: str = "") -> LabelSet:
    y = np.array([lab.label for lab in labels], dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(y))
    if bad.size:
        raise LabelSetError(f"label #{int(bad[0])} of {source or 'the label set'} is {y[bad[0]]}; allowed: finite losses")
    genomes = [lab.genome for lab in labels]
    return LabelSet(genomes, y, [g.id for g in genomes], dropped, source)


def load_labelset(path: str | Path | Sequence[str | Path], protocol: str | None = None) -> LabelSet:
    """LLMForge CSV or our JSONL, or several such files joined (e.g. a space's labels plus those of its
    extension); non-finite rows are dropped and counted in `.dropped`. Labels mixing protocols (within a
    file or across files) are refused unless `protocol` (a fingerprint, `protocol_fp`) picks one."""
    paths = [path] if isinstance(path, (str, Path)) else list(path)
    labels: list[Label] = []
    dropped = 0
    for p in paths:
        labs, d = load_any(p, protocol)
        labels, dropped = labels + labs, dropped + d
    source = " + ".join(str(p) for p in paths)
    fps = sorted({lab.protocol_fp or "<none>" for lab in labels})
    if protocol is None and len(fps) > 1:
        raise LabelSetError(f"{source}: labels of {len(fps)} protocols ({', '.join(fps[:4])}); allowed: files "
                            "of one protocol (a surrogate fits one objective)")
    if not labels:
        raise LabelSetError(f"{source}: no finite labels (dropped {dropped})")
    return from_labels(labels, dropped, source)


def split_ids(ids: Sequence[str], frac: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(rest, held) row indices; `frac` of the unique ids (at least one) go to `held`."""
    uniq = np.array(sorted(set(ids)))
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(uniq))
    n_held = max(1, int(math.floor(frac * len(uniq) + 0.5)))
    if n_held >= len(uniq):
        raise LabelSetError(f"cannot hold out {frac:.0%} of {len(uniq)} architectures; need at least 2")
    held_ids = set(uniq[perm[:n_held]].tolist())
    held = np.array([i for i, x in enumerate(ids) if x in held_ids], dtype=np.int64)
    rest = np.array([i for i, x in enumerate(ids) if x not in held_ids], dtype=np.int64)
    return rest, held


def train_val_test(data: LabelSet, seed: int, test_frac: float = 0.2,
                   val_frac: float = 0.1) -> tuple[LabelSet, LabelSet, LabelSet]:
    """80/20 architecture-level train/test split, then a validation carve of the train part.
    `test_frac = 0` trains on everything but the carve (the test set is then empty)."""
    if test_frac > 0:
        rest, test = split_ids(data.ids, test_frac, seed)
    else:
        rest, test = np.arange(len(data)), np.zeros(0, dtype=np.int64)
    train_all = data.take(rest)
    tr, va = split_ids(train_all.ids, val_frac, seed + 7919)
    return train_all.take(tr), train_all.take(va), data.take(test)


def duplicate_groups(ids: Sequence[str]) -> dict[str, int]:
    """How often the label set repeats an architecture: rows, unique architectures (canonical genome ids),
    groups holding more than one row, and the rows in those groups (relabelled runs of one network)."""
    _, counts = np.unique(np.asarray(list(ids)), return_counts=True)
    return {"rows": int(counts.sum()), "architectures": int(len(counts)),
            "duplicate_groups": int((counts > 1).sum()), "rows_in_duplicate_groups": int(counts[counts > 1].sum())}


def group_folds(ids: Sequence[str], k: int, seed: int) -> np.ndarray:
    """(n,) fold index 0..k-1 per row from sklearn's GroupKFold over canonical genome ids, the groups shuffled
    by `seed` first: every row of one architecture sits in one fold, so a CV test fold holds only
    architectures its model never trained on."""
    from sklearn.model_selection import GroupKFold

    uniq, groups = np.unique(np.asarray(list(ids)), return_inverse=True)
    if not 2 <= k <= len(uniq):
        raise LabelSetError(f"cannot cut {len(uniq)} architectures into {k} folds; allowed: 2 <= folds <= architectures")
    shuffled = np.random.default_rng(seed).permutation(len(uniq))[groups]  # GroupKFold itself is deterministic
    fold = np.empty(len(groups), dtype=np.int64)
    for f, (_, te) in enumerate(GroupKFold(n_splits=k).split(np.zeros(len(groups)), groups=shuffled)):
        fold[te] = f
    return fold
