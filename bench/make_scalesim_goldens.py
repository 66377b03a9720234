"""Produces: tests/backends/systolic/data/scalesim_goldens.json (the SCALE-Sim-exact mode's goldens).

Generate the SCALE-Sim golden cycle counts in tests/backends/systolic/data/scalesim_goldens.json (run once).

How they were made: SCALE-Sim v3 (`pip install scalesim "numpy<2.3"` in its own venv, since scalesim
needs numpy < 2.3), GEMM input mode, weight-stationary dataflow, InterfaceBandwidth = CALC (no
memory stalls, so the reported total cycles are the compute cycles), large SRAMs. For each array shape
and GEMM (M×K)·(K×N) it runs the simulator and records COMPUTE_REPORT's total cycles, next to the
analytical count folds × (2R + C + M − 2), folds = ceil(K/R)·ceil(N/C), computed independently here.
Only the numbers are committed; the test compares them with backends.systolic.map_gemm(mode="scalesim").

    python3 -m venv /tmp/scalesim-venv && /tmp/scalesim-venv/bin/pip install scalesim "numpy<2.3"
    /tmp/scalesim-venv/bin/python bench/make_scalesim_goldens.py            # SCALE-Sim goldens
    python bench/make_scalesim_goldens.py --formula-only                      # formula goldens, no scalesim
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import tempfile
from pathlib import Path

ARRAYS = [(16, 16), (32, 32), (14, 12)]
SHAPES = {  # name: (M, K, N)
    "gemv_768x2304": (1, 768, 2304), "gemv_768x3072": (1, 768, 3072), "gemv_3072x768": (1, 3072, 768),
    **{f"decode_score_c{c}": (1, 64, c) for c in (128, 256, 512, 1024, 2048)},
    **{f"decode_value_c{c}": (1, c, 64) for c in (128, 256, 512, 1024, 2048)},
    "prefill_m16_768x768": (16, 768, 768), "prefill_m64_768x3072": (64, 768, 3072),
    "prefill_m256_768x2304": (256, 768, 2304), "prefill_m256_3072x768": (256, 3072, 768),
    "odd_1x1x1": (1, 1, 1), "odd_7x33x65": (7, 33, 65), "odd_13x100x17": (13, 100, 17),
    "odd_255x17x31": (255, 17, 31), "odd_3x1000x5": (3, 1000, 5),
}
CONFIG = """[general]
run_name = golden
[architecture_presets]
ArrayHeight : {R}
ArrayWidth : {C}
IfmapSramSzkB : 65536
FilterSramSzkB : 65536
OfmapSramSzkB : 65536
IfmapOffset : 0
FilterOffset : 100000000
OfmapOffset : 200000000
Bandwidth : 10
Dataflow : ws
ReadRequestBuffer : 32
WriteRequestBuffer : 32
[layout]
IfmapCustomLayout : False
IfmapSRAMBankBandwidth : 10
IfmapSRAMBankNum : 10
IfmapSRAMBankPort : 2
FilterCustomLayout : False
FilterSRAMBankBandwidth : 10
FilterSRAMBankNum : 10
FilterSRAMBankPort : 2
[sparsity]
SparsitySupport : false
SparseRep : ellpack_block
OptimizedMapping : false
BlockSize : 8
RandomNumberGeneratorSeed : 40
[run_presets]
InterfaceBandwidth : CALC
UseRamulatorTrace : False
"""


def formula(R: int, C: int, M: int, K: int, N: int) -> int:
    return math.ceil(K / R) * math.ceil(N / C) * (2 * R + C + M - 2)


def run_scalesim(R: int, C: int, M: int, K: int, N: int) -> int:
    from scalesim.scale_sim import scalesim

    with tempfile.TemporaryDirectory() as d:
        cfg, topo = Path(d) / "cfg.cfg", Path(d) / "topo.csv"
        cfg.write_text(CONFIG.format(R=R, C=C))
        topo.write_text(f"Layer, M, N, K,\nL0, {M}, {N}, {K},\n")
        layout = Path(d) / "layout.csv"  # required by the loader; unused without custom layouts
        layout.write_text("Layer,\n")
        sim = scalesim(save_disk_space=True, verbose=False, config=str(cfg), topology=str(topo),
                       layout=str(layout), input_type_gemm=True)
        sim.run_scale(top_path=d)
        report = next(Path(d).rglob("COMPUTE_REPORT.csv"))
        row = next(csv.DictReader(report.open(), skipinitialspace=True))
        return int(float(row["Total Cycles"]))


class _Timeout(Exception):
    pass


def run_with_timeout(seconds: int, *args: int) -> int | None:
    """SCALE-Sim takes minutes per large GEMM: give up on a shape after `seconds` (recorded as null)."""
    import signal

    def _raise(*_):
        raise _Timeout()

    signal.signal(signal.SIGALRM, _raise)
    signal.alarm(seconds)
    try:
        return run_scalesim(*args)
    except _Timeout:
        return None
    finally:
        signal.alarm(0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "tests/backends/systolic/data/scalesim_goldens.json"))
    ap.add_argument("--formula-only", action="store_true")
    ap.add_argument("--timeout", type=int, default=240, help="seconds per shape before giving up")
    a = ap.parse_args()
    todo = [(R, C, name, *shape) for R, C in ARRAYS for name, shape in SHAPES.items()]
    todo.sort(key=lambda x: formula(x[0], x[1], *x[3:]) * x[0])  # cheapest simulations first
    rows = [{"rows": R, "cols": C, "name": name, "M": M, "K": K, "N": N, "formula_cycles": formula(R, C, M, K, N),
             "scalesim_cycles": None} for R, C, name, M, K, N in todo]
    source = "formula only" if a.formula_only else ("scalesim 3.0.0 (ws, CALC bandwidth); its COMPUTE_REPORT "
                                                    "'Total Cycles' is the 0-based index of the last cycle, i.e. "
                                                    "the analytical count minus one; null = not simulated (gave up "
                                                    "after --timeout s, or the run was stopped first)")
    for row in rows:
        if not a.formula_only:
            row["scalesim_cycles"] = run_with_timeout(a.timeout, row["rows"], row["cols"], row["M"], row["K"], row["N"])
            print(row, flush=True)
        # written after every shape, so a stopped run keeps what it simulated
        Path(a.out).write_text(json.dumps({"source": source, "dataflow": "ws", "goldens": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
