"""The shared label format: one JSON object per line (JSONL).

Each line is
    {"genome_id": "<16 hex>", "genome": {<Genome.to_dict()>}, "label": <float or "inf">,
     "status": "done" | "diverged" | "failed", "reason": "" | "<why it is inf>", "attempts": <int>,
     "protocol_fp": "<16 hex: the protocol fingerprint, `fingerprint` below>",
     "provenance": {"protocol": "...", "tokens": <int>, "corpus": "...", "corpus_hash": "...",
                    "seed": <int>, "date": "YYYY-MM-DD", ...free keys such as tokens_per_s, wall_s}}

`label` is the final validation loss; diverged, failed or stopped runs carry `inf` with a reason, and every
consumer drops them (`finite_only`). **diverged** is a training outcome (NaN loss: the genome's label);
**failed** is not a result (timeout, crash, lost worker, config error) and the store retries it.
**stopped** is a partial label: a training the stopping rule ended at a rung (forge.fidelity.stopping);
its rung, loss, projected interval and reason are in `provenance["stopped"]`, its curve in
`provenance["curve"]`; the label stays `inf`, so no consumer ever reads it as a final loss.
Files written before `status`/`protocol_fp` existed are read by deriving them: an inf label is
diverged when its reason says "non-finite", else failed; the fingerprint comes from the provenance
(`protocol_config` + corpus hash), so shipped cpu-proxy labels read as that protocol's labels.
The same format is written by the label store's export, read by
the surrogate's loader, and produced from the LLMForge CSV (`from_llmforge_csv`).
A corrupt line is an error naming its line number, never silently skipped.
"""
from __future__ import annotations

import hashlib
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from forge.errors import ForgeError, UserError
from forge.disk.files import require_file
from forge.genomes.genome import Genome, GenomeError, genome_from_dict
from forge.disk.io import NONFINITE, atomic_write_text, json_num, read_text, loads

STATUSES = ("done", "diverged", "failed", "stopped")
# Protocol fields that only say where a curve is read (forge.labelling.curves), not what the final label is:
# a training with rungs ends with the same label as one without, so they stay out of the fingerprint.
CURVE_KEYS = ("name", "eta", "rungs")


class LabelFileError(ForgeError):
    """A label file line that cannot be parsed; names the file and line."""


@dataclass(frozen=True)
class Label:
    genome: Genome
    label: float
    provenance: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    status: str = ""        # done | diverged | failed; "" = derive from label and reason
    protocol_fp: str = ""   # protocol fingerprint; "" = derive from provenance
    attempts: int = 0       # labelling runs that tried this genome (store rows)

    def __post_init__(self) -> None:
        if not self.status:
            object.__setattr__(self, "status", derive_status(self.label, self.reason))
        elif self.status not in STATUSES:
            raise UserError(f"status = {self.status!r}; allowed: {', '.join(STATUSES)}")
        if not self.protocol_fp:
            object.__setattr__(self, "protocol_fp", fingerprint_from_provenance(self.provenance))

    @property
    def genome_id(self) -> str:
        return self.genome.id

    @property
    def finite(self) -> bool:
        return math.isfinite(self.label)

    def to_json(self) -> str:
        return json.dumps({"genome_id": self.genome_id, "genome": self.genome.to_dict(), "label": json_num(self.label),
                           "status": self.status, "reason": self.reason, "attempts": self.attempts,
                           "protocol_fp": self.protocol_fp, "provenance": self.provenance}, sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> "Label":
        d = loads(line)
        g = genome_from_dict(d["genome"])
        lab = _label_value(d["label"])
        if "genome_id" in d and d["genome_id"] != g.id:
            raise UserError(f"genome_id {d['genome_id']} does not match its genome (id {g.id})")
        return cls(genome=g, label=lab, provenance=dict(d.get("provenance", {})), reason=str(d.get("reason", "")),
                   status=str(d.get("status", "")), protocol_fp=str(d.get("protocol_fp", "")),
                   attempts=int(d.get("attempts", 0)))


def _label_value(v: Any) -> float:
    """A JSON number, or the strings "inf"/"-inf"/"nan" the writer uses for non-finite losses; a quoted
    number such as "3.1" is refused (it is a corrupted or hand-edited file, not a label)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, str) and v.strip().lower() in NONFINITE:
        return NONFINITE[v.strip().lower()]
    raise UserError(f"label {v!r} is not a number; allowed: a JSON number, or \"inf\" for a failed/diverged run")


def derive_status(label: float, reason: str) -> str:
    """Status of a label written without one: finite = done; inf with a "non-finite ..." reason = diverged
    (what `train_genome` writes); any other inf (timeout, error, worker lost) = failed."""
    if math.isfinite(label):
        return "done"
    return "diverged" if reason.startswith("non-finite") else "failed"


def fingerprint(protocol: dict[str, Any], corpus: dict[str, Any]) -> str:
    """16 hex of every field that changes a label: all protocol fields but its name, and the corpus
    identity (name, tokenizer, content hash, split sizes). Same fingerprint = labels that may be mixed."""
    keep = ("corpus", "tokenizer", "corpus_hash", "corpus_train_tokens", "corpus_val_tokens")
    body = {"protocol": {k: v for k, v in protocol.items() if k not in CURVE_KEYS and not str(k).startswith("_")},
            "corpus": {k: corpus.get(k) for k in keep}}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]


def fingerprint_from_provenance(prov: dict[str, Any]) -> str:
    """The fingerprint a real label's provenance implies ("" when it does not record its protocol config)."""
    if isinstance(prov.get("protocol_config"), dict) and prov.get("corpus_hash"):
        return fingerprint(prov["protocol_config"], prov)
    return ""


def read_labels(path: str | Path, protocol: str | None = None) -> Iterator[Label]:
    """Every label in a JSONL file, in order (inf ones included); corrupt lines raise with their number.
    `protocol` (a fingerprint) keeps only that protocol's labels."""
    path = require_file(path, "label file")
    with io.StringIO(read_text(path, "label file")) as f:  # binary / non-UTF-8: one error naming the file
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                lab = Label.from_json(line)
            except (json.JSONDecodeError, KeyError, TypeError, ValueError, GenomeError) as e:
                raise LabelFileError(f"{path}:{n}: corrupt label line: {e}") from None
            if protocol is None or lab.protocol_fp == protocol:
                yield lab


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
    from forge.genomes.importers import load_llmforge_csv

    rows, dropped = load_llmforge_csv(path)
    prov = {"protocol": "paper", "tokens": 655_000_000, "corpus": "minipile", "source": "llmforge_iha_200M.csv"}
    return [Label(r.genome, r.val_loss, {**prov, "row": r.idx}) for r in rows], dropped


def load_any(path: str | Path, protocol: str | None = None) -> tuple[list[Label], int]:
    """A `.csv` is read as the LLMForge release, anything else as our JSONL; non-finite rows dropped.
    A JSONL mixing protocols is refused unless `protocol` (a fingerprint) picks one: mixing them would
    train a surrogate on two objectives at once."""
    path = Path(path)
    if path.suffix == ".csv":
        return from_llmforge_csv(path)
    labels = list(read_labels(path, protocol))
    fps = sorted({lab.protocol_fp or "<none>" for lab in labels})
    if protocol is None and len(fps) > 1:
        raise LabelFileError(f"{path}: labels of {len(fps)} protocols ({', '.join(fps[:4])}); allowed: one "
                             "protocol per file (forge-label export=... protocol=... exports one)")
    return finite_only(labels)
