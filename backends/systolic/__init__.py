"""Systolic accelerators: a Timeloop-like mapper over YAML templates
(`backend=gemmini|eyeriss|simba|flat|dxe|dxe-relaxed`, each following the LLMForge release's arch YAML).

template (the array, buffers and energies of one accelerator) · mapper (every legal tiling of one GEMM,
vectorized, best pick) · gemm (the cached per-shape entry points `map_gemm`, `gemm_costs`) · phase
(prefill and decode sums of a population) · conventions (`physical` or the release's `llmforge` counting)
· fusion (the release's inter-operator fusion savings, hw_exp.py) · backend (`SystolicBackend.evaluate`)
· reference (closed-form reading of the release's per-layer driver hw_exp.py, for checks).
Imports `backends.interface`, `backends.gpu.roofline` (operator bookkeeping) and `forge` core only.
"""
from backends.systolic.backend import SystolicBackend
from backends.systolic.gemm import clear_cache, map_gemm

__all__ = ["SystolicBackend", "clear_cache", "map_gemm"]
