"""Hardware cost backends: `Backend.evaluate(genomes, workload) -> CostTable`, vectorized over a population.

interface (Backend, Workload, CostTable) · registry (build a backend from `conf/backend/<name>.yaml`) · gpu/
(analytical roofline, its hardware presets, its calibration, the measured GPU backend) · measure (the timing every
measured backend shares) · host (`cpu-measured` and the `host-cpu` roofline preset's calibration) · systolic/
(Timeloop-like mapper: gemmini, eyeriss, flat, dxe, ...) · rdxe/ (the multi-chip ring with chip co-search) ·
cli (`forge-hw`).
Imports the `forge` core only: never `surrogate` or `search`.
"""
