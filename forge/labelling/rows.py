"""Label <-> store row conversion, shared by the store and its migration (kept apart so each stays short)."""
from __future__ import annotations

import json
import math
import os
import platform
import time
from typing import Any

from forge.genomes.genome import genome_from_dict
from forge.genomes.labels import Label
from forge.disk.io import loads

UNKNOWN = "unknown"  # fingerprint of a label whose provenance does not record its protocol config


def worker_name() -> str:
    return f"{platform.node()}:{os.getpid()}"


def row_of(lab: Label, protocol: str, created: float | None = None) -> dict[str, Any]:
    """The full row of a label under a protocol fingerprint (no claim: owner empty, no lease)."""
    now = time.time()
    return {"genome_id": lab.genome_id, "protocol": protocol, "genome": lab.genome.to_json(),
            "protocol_name": str(lab.provenance.get("protocol", "")), "status": lab.status,
            "label": lab.label if math.isfinite(lab.label) else None,
            "reason": lab.reason or ("" if math.isfinite(lab.label) else "non-finite label"),
            "attempts": int(lab.attempts), "provenance": json.dumps(lab.provenance, sort_keys=True, default=str),
            "worker": worker_name(), "owner": "", "lease_until": None,
            "created": now if created is None else created, "updated": now}


def label_of(r: Any) -> Label:
    """A stored row back as a Label (status, fingerprint and attempts included)."""
    m = r._mapping
    lab = float("inf") if m["label"] is None else float(m["label"])
    return Label(genome=genome_from_dict(loads(m["genome"])), label=lab, provenance=loads(m["provenance"]),
                 reason=m["reason"], status=m["status"] if m["status"] != "running" else "failed",
                 protocol_fp=m["protocol"], attempts=int(m["attempts"]))
