"""PLENA (paper 004): a flattened systolic array for long-context agentic inference (`backend=plena`).

array (shape, Table III constraints, the 7 nm area model, tile cycle counts) · cost (one shape over a
population: prefill, exact decode sum, energy) · backend (`PlenaBackend`: batch=max, shape co-search).
Imports `backends.interface` and `forge` core only.
"""
from backends.plena.backend import PlenaBackend

__all__ = ["PlenaBackend"]
