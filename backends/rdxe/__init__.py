"""rDXE: a ring of DXE chips holding the weights stationary, with per-genome chip co-search (LLMForge §3.3.2).

profile (per-layer weights, KV and MACs from `forge.lm.workload`) · pack (Algorithms 1–2: balanced contiguous
stages) · ring (the ring's TTFT, TPOT, energy and area) · pareto (envelope and top-K picks) · backend
(`RDXEBackend.evaluate`). Imports `backends.interface` and `forge` core only.
"""
from backends.rdxe.backend import RDXEBackend

__all__ = ["RDXEBackend"]
