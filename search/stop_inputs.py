"""What the stopping rule needs from above the labeller (issue 52): each genome's exact costs on the hardware
targets (the backends) and its surrogate prior, and the front to beat. The labeller imports neither backends
nor surrogates, so the search (co-evolution, verify's race) builds these here and hands them over as plain
numbers; `write_inputs` writes the same as a file for `forge-label stop.inputs=FILE`.

    python -m search.stop_inputs --genomes batch.jsonl --front labelled.jsonl --out stop_inputs.json \
        --target roofline:orin-nano:tpot_ms --target eyeriss::tpot_ms --surrogate forgeformer-iha-tiny
"""
from __future__ import annotations

import argparse
from typing import Any, Sequence

import numpy as np

from forge.disk.io import atomic_write_json
from forge.genomes.genome import Genome
from forge.genomes.labels import Label


def parse_target(text: str) -> tuple[str, dict[str, Any], str]:
    """`backend:hardware:objective` (hardware may be empty) -> (backend name, overrides, objective)."""
    parts = text.split(":")
    if len(parts) != 3 or not parts[0] or not parts[2]:
        raise SystemExit(f"--target {text!r}; allowed: BACKEND:HARDWARE:OBJECTIVE, e.g. roofline:orin-nano:tpot_ms")
    return parts[0], ({"hardware": parts[1]} if parts[1] else {}), parts[2]


def exact_costs(genomes: Sequence[Genome], targets: Sequence[tuple[str, dict[str, Any], str]]) -> np.ndarray:
    """[genome, target] costs from the backends (the same numbers a search's objectives hold)."""
    from backends.interface import Workload
    from backends.registry import build_backend

    if not genomes:
        return np.zeros((0, len(targets)))
    return np.stack([build_backend(b, **kw).evaluate(list(genomes), Workload()).objective(obj)
                     for b, kw, obj in targets], axis=1)


def inputs(genomes: Sequence[Genome], costs: np.ndarray, priors: Sequence[float] | None,
           front: Sequence[Label] = (), front_costs: np.ndarray | None = None) -> dict[str, Any]:
    """The stop inputs: {genomes: {id: {costs, prior}}, front: [{id, costs, loss}]} (finite front labels only)."""
    g = {x.id: {"costs": [round(float(c), 9) for c in costs[i]],
                "prior": None if priors is None else round(float(priors[i]), 6)} for i, x in enumerate(genomes)}
    fr = [{"id": lab.genome_id, "costs": [round(float(c), 9) for c in front_costs[i]], "loss": float(lab.label)}
          for i, lab in enumerate(front) if lab.finite and front_costs is not None and np.all(np.isfinite(front_costs[i]))]
    return {"genomes": g, "front": fr}


def write_inputs(path: str, genomes: Sequence[Genome], targets: Sequence[tuple[str, dict[str, Any], str]],
                 front: Sequence[Label] = (), surrogate: str | None = None) -> dict[str, Any]:
    priors = None
    if surrogate:
        from surrogate.loading import load_predictor

        priors = load_predictor(surrogate).predict(list(genomes), n_mc=0)[0]
    d = inputs(genomes, exact_costs(genomes, targets), priors, front,
               exact_costs([lab.genome for lab in front], targets))
    atomic_write_json(path, d)
    return d


def read_genomes(path: str) -> list[Genome]:
    """Genomes from a JSONL of label lines or bare genome dicts (what forge-label reads and exports)."""
    import json

    from forge.disk.io import read_text
    from forge.genomes.genome import genome_from_dict

    return [genome_from_dict(d.get("genome", d)) for d in
            (json.loads(x) for x in read_text(path, "genomes file").splitlines() if x.strip())]


def main() -> None:
    from forge.genomes.labels import read_labels

    ap = argparse.ArgumentParser(prog="python -m search.stop_inputs", description=__doc__.split("\n\n")[0])
    ap.add_argument("--genomes", required=True)
    ap.add_argument("--front", default=None, help="labels (JSONL) whose non-dominated finals form the front to beat")
    ap.add_argument("--target", action="append", required=True)
    ap.add_argument("--surrogate", default=None)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    front = [lab for lab in read_labels(a.front) if lab.finite] if a.front else []
    d = write_inputs(a.out, read_genomes(a.genomes), [parse_target(t) for t in a.target], front, a.surrogate)
    print(f"wrote {a.out}: {len(d['genomes'])} genomes, front of {len(d['front'])} labels")


if __name__ == "__main__":
    main()
