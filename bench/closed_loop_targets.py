"""The K = 4 hardware targets of the multi-target closed loop (bench_closed_loop_priors.py), and their scoring.

host-cpu-measured: the searches steer on the host-cpu roofline (cheap) and are scored on TPOT measured on this
CPU (as bench_closed_loop.py); the other three are analytic and score on what they steer on. Every target's HV
divides each objective by the GPT-2-style anchor genome's value (its real loss and its cost on that target),
reference point 2.0, as the searches' own HV. A measured TPOT is only compared within one session: the same 20
prior genomes timed 5x slower here than in closed_loop.json's session, by a ratio that varies 0.13-0.31 per genome. The roofline host-cpu target is not a fourth target of its own:
it steers exactly as host-cpu-measured does, so an edge GPU (orin-nano) stands in for it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

FP32 = {"prefill": 64, "decode": 32, "weight_bits": 32, "act_bits": 32, "kv_bits": 32}
INT8 = {"prefill": 64, "decode": 32}  # the accelerators' own precision defaults (int8)
ROOF_HOST = {"_target_": "backends.gpu.roofline.RooflineBackend", "name": "roofline", "hardware": "host-cpu"}
TARGETS: dict[str, dict[str, Any]] = {
    "host-cpu-measured": {"backend": ROOF_HOST, "workload": FP32, "score": "measured"},
    "orin-nano-roofline": {"backend": {**ROOF_HOST, "hardware": "orin-nano"}, "workload": {"prefill": 64, "decode": 32},
                           "score": "steer"},
    "gemmini": {"backend": "gemmini", "workload": INT8, "score": "steer"},
    "rdxe": {"backend": "rdxe", "workload": INT8, "score": "steer"},
}
OLD = Path(__file__).resolve().parent / "results" / "closed_loop.json"


class Target:
    """One target: its steering backend and workload, a cost cache by genome id, and its real-front score."""

    def __init__(self, name: str, spec: dict[str, Any], loop: Any):
        from forge.runtime.config import group_yaml
        from forge.spaces.space import load_space
        from search.archive import Hypervolume, default_anchor
        from search.components import backend_of, build_workload

        node = group_yaml("backend", spec["backend"]) if isinstance(spec["backend"], str) else dict(spec["backend"])
        self.name, self.node, self.wl, self.loop = name, node, dict(spec["workload"]), loop
        self.measured = spec["score"] == "measured"
        self.space = load_space("iha-tiny")
        self.backend = backend_of({"backend": node})
        self.workload = build_workload({"workload": self.wl}, self.backend)
        self.cache: dict[str, float] = {}
        loss = json.loads(OLD.read_text())["anchor"][0]  # the anchor genome's real loss (the old runs' store)
        a = default_anchor(self.space)
        self.anchor_cost = float(self.cost([a])[0])  # measured in this session: timings do not carry across
        self.hv = Hypervolume([loss, self.anchor_cost], 2.0)

    def search_cfg(self) -> dict[str, Any]:
        return {"backend": self.node, "workload": self.wl}

    def steer(self, genomes: list) -> np.ndarray:
        """The steering cost (TPOT, ms) of each genome on this target's backend, cached by id."""
        todo = [g for g in {g.id: g for g in genomes}.values() if g.id not in self.cache]
        if todo:
            t = self.backend.evaluate(todo, self.workload)
            self.cache.update({g.id: float(v) if ok else np.inf for g, v, ok in zip(todo, t.tpot_ms, t.feasible)})
        return np.array([self.cache[g.id] for g in genomes])

    def cost(self, genomes: list) -> np.ndarray:
        return self.loop.measured(genomes) if self.measured else self.steer(genomes)

    def score(self, labels: list) -> dict[str, Any]:
        """HV and best real loss of the real front of `labels` in (real loss, this target's cost)."""
        from search.archive import non_dominated

        labs = list({lab.genome_id: lab for lab in labels if lab.finite}.values())
        if not labs:
            return {"n": 0, "hv": 0.0, "best_loss": None, "front": []}
        F = np.column_stack([[lab.label for lab in labs], self.cost([lab.genome for lab in labs])])
        front = non_dominated(F)
        return {"n": len(labs), "hv": float(self.hv(F)), "best_loss": float(F[:, 0].min()),
                "front": [[labs[i].genome_id, *map(float, F[i])] for i in front]}
