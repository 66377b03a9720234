"""Systolic accelerators: a Timeloop-like mapper over YAML templates (`backend=gemmini|eyeriss|flat|dxe`).

template (the array, buffers and energies of one accelerator) · mapper (every legal tiling of one GEMM,
vectorized, best pick) · gemm (the cached per-shape entry points `map_gemm`, `gemm_costs`) · phase
(prefill and exact decode sums of a population) · backend (`SystolicBackend.evaluate`).
Imports `backends.interface`, `backends.gpu.roofline` (operator bookkeeping) and `forge` core only.
"""
from backends.systolic.backend import SystolicBackend
from backends.systolic.gemm import clear_cache, map_gemm

__all__ = ["SystolicBackend", "clear_cache", "map_gemm"]
