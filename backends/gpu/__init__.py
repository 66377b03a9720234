"""GPU cost models: the analytical roofline (`backend=roofline`), its least-squares calibration to
measurements, the published eager-PyTorch points that `backend=roofline-eager` is fitted to (published.py),
and the measured backend that times the real IHA model (`backend=gpu-measured`); hardware.py: the presets.
Imports `backends.interface` and `forge` core only.
"""
from backends.gpu.roofline import RooflineBackend

__all__ = ["RooflineBackend"]
