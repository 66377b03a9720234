"""The shared label format: one JSON object per line (JSONL).

Each line is
    {"genome_id": "<16 hex>", "genome": {<Genome.to_dict()>}, "label": <float or "inf">,
     "reason": "" | "<why it is inf>",
     "provenance": {"protocol": "...", "tokens": <int>, "corpus": "...", "corpus_hash": "...",
                    "seed": <int>, "date": "YYYY-MM-DD", ...free keys such as tokens_per_s, wall_s}}

`label` is the final validation loss; diverged or failed runs carry `inf` with a reason, and every
consumer drops them (`finite_only`). The same format is written by the label store's export, read by
the surrogate's loader, and produced from the LLMForge CSV (`from_llmforge_csv`).
A corrupt line is an error naming its line number, never silently skipped.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from forge.genome import Genome, GenomeError, genome_from_dict
from forge.io import atomic_write_text


class LabelFileError(ValueError):
    """A label file line that cannot be parsed; names the file and line."""


@dataclass(frozen=True)
class Label:
    genome: Genome
    label: float
    provenance: dict[str, Any] = field(default_factory=dict)
    reason: str = ""

    @property
    def genome_id(self) -> str:
        return self.genome.id

    @property
    def finite(self) -> bool:
        return math.isfinite(self.label)

    def to_json(self) -> str:
        lab: Any = self.label if math.isfinite(self.label) else ("inf" if self.label > 0 or math.isnan(self.label) else "-inf")
        return json.dumps({"genome_id": self.genome_id, "genome": self.genome.to_dict(), "label": lab,
                           "reason": self.reason, "provenance": self.provenance}, sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> "Label":
        d = json.loads(line)
        g = genome_from_dict(d["genome"])
        lab = float(d["label"])
        if "genome_id" in d and d["genome_id"] != g.id:
            raise ValueError(f"genome_id {d['genome_id']} does not match its genome (id {g.id})")
        return cls(genome=g, label=lab, provenance=dict(d.get("provenance", {})), reason=str(d.get("reason", "")))


def read_labels(path: str | Path) -> Iterator[Label]:
    """Every label in a JSONL file, in order (inf ones included); corrupt lines raise with their number."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"label file not found: {path}")
    with path.open() as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                yield Label.from_json(line)
            except (json.JSONDecodeError, KeyError, TypeError, ValueError, GenomeError) as e:
                raise LabelFileError(f"{path}:{n}: corrupt label line: {e}") from None


def finite_only(labels: Iterable[Label]) -> tuple[list[Label], int]:
    """(finite labels, number dropped): consumers report the count."""
    keep, dropped = [], 0
    for lab in labels:
        if lab.finite:
            keep.append(lab)
        else:
            dropped += 1
    return keep, dropped


def write_labels(path: str | Path, labels: Iterable[Label]) -> int:
    """Write a whole JSONL file atomically; returns the number of lines."""
    lines = [lab.to_json() for lab in labels]
    atomic_write_text(path, "".join(line + "\n" for line in lines))
    return len(lines)


def from_llmforge_csv(path: str | Path) -> tuple[list[Label], int]:
    """LLMForge label CSV → (finite labels, number of non-finite rows dropped)."""
    from forge.importers import load_llmforge_csv

    rows, dropped = load_llmforge_csv(path)
    prov = {"protocol": "paper", "tokens": 655_000_000, "corpus": "minipile", "source": "llmforge_iha_200M.csv"}
    return [Label(r.genome, r.val_loss, {**prov, "row": r.idx}) for r in rows], dropped


def load_any(path: str | Path) -> tuple[list[Label], int]:
    """A `.csv` is read as the LLMForge release, anything else as our JSONL; non-finite rows dropped."""
    path = Path(path)
    if path.suffix == ".csv":
        return from_llmforge_csv(path)
    return finite_only(read_labels(path))
