"""`forge-hw`: cost one architecture on one backend; prints totals and the slowest operators, writes summary.json.

A thin @hydra.main around `run(cfg) -> dict`; with `-m` Hydra sweeps backends, hardware presets and
workloads. The backend is built generically from its `_target_`, so any conf/backend/*.yaml works.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig
from rich.console import Console
from rich.table import Table

from backends.interface import BackendError
from backends.registry import build_backend, resolve_workload
from forge.cli import output_dir, resolve_arch
from forge.lm.hooks import check_agreement
from forge import plugins
from forge.shell.app import forge_main
from forge.disk.io import atomic_write_json
from forge.disk import run_folder


def run(cfg: Any) -> dict[str, Any]:
    plugins.trust(cfg)  # the user's own config: a backend class named in it is theirs to run
    mode = str(cfg.get("mode", "cost"))
    if mode not in ("cost", "calibrate"):
        raise BackendError(f"mode={mode} is unknown; allowed: cost | calibrate")
    if mode == "calibrate":  # measure this machine: backends/host.py
        return calibrate_main(cfg)
    genome = resolve_arch(str(cfg["arch"]))
    check_agreement([genome])  # plug-in hooks: the workload prices what the model holds, else one line
    backend = build_backend(cfg["backend"])
    wl = resolve_workload(cfg["workload"], backend)
    row = _evaluate(backend, genome, wl, not cfg.get("quiet", False))
    summary = {"arch": genome.name, "genome_id": genome.id, "backend": backend.name,
               "workload": {k: getattr(wl, k) for k in ("prefill", "decode", "batch", "weight_bits", "act_bits", "kv_bits")},
               **row}
    out = output_dir(cfg)
    atomic_write_json(out / run_folder.SUMMARY, summary)
    if not cfg.get("quiet", False):
        print_summary(summary, int(cfg.get("top_ops", 8)))
        Console().print(f"summary: {_rel(out / run_folder.SUMMARY)}", highlight=False, soft_wrap=True)
    return summary


def _rel(path: Path) -> str:
    """A path under the working folder as typed from there (outputs/hw/<stamp>/summary.json), else as it is."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _evaluate(backend: Any, genome: Any, wl: Any, progress: bool) -> dict[str, Any]:
    """The genome's row; a measured backend (it runs the model: minutes for a 135M model on a busy CPU) shows
    a progress step per round of runs."""
    from backends.measure import MeasuredBackend

    if not (progress and isinstance(backend, MeasuredBackend)):
        return backend.evaluate([genome], wl).row(0)
    from forge.runtime.steps import Steps

    backend._setup(wl)  # a backend that cannot run here (no GPU, mixed bits) refuses in one line, before the progress
    with Steps("forge-hw", f"timing {genome.name} on {backend.device}", backend.warmup + backend.repeats,
               unit="run") as st:
        backend.on_round = st.step
        try:
            return backend.evaluate([genome], wl).row(0)
        finally:
            backend.on_round = None


def calibrate_main(cfg: Any) -> dict[str, Any]:
    """Write this machine's host-cpu roofline preset; print what was measured and fitted."""
    from backends.host import run_calibrate

    s = run_calibrate(cfg)
    atomic_write_json(output_dir(cfg) / run_folder.SUMMARY, s)
    if not cfg.get("quiet", False):
        cal, con = s["calibration"], Console()
        con.print(f"host-cpu on {cal['cpu']} ({cal['threads']} thread(s)): fp32 matmul {cal['fp32_gflops']:.1f} "
                  f"GFLOP/s, GEMV {cal['gemv_gbs']:.1f} GB/s; roofline fitted on {cal['n_genomes']} genomes: {s['roofline']}, "
                  f"RMS relative error {cal['rms_rel_error_before']:.1%} -> {cal['rms_rel_error_after']:.1%}")
        con.print(f"wrote {s['path']} (hardware=host-cpu now uses it on this machine)")
    return s


def print_summary(s: dict[str, Any], top: int = 8) -> None:
    con = Console()
    t = Table(title=f"{s['arch']} on {s['backend']}  (prefill {s['workload']['prefill']}, decode {s['workload']['decode']}, "
                    f"batch {s['workload']['batch']}, w/a/kv bits {s['workload']['weight_bits']}/"
                    f"{s['workload']['act_bits']}/{s['workload']['kv_bits']})")
    t.add_column("metric"), t.add_column("value", justify="right")
    for k, v in s.items():
        if k in ("workload", "genome_id") or isinstance(v, (dict, list)):
            continue
        t.add_row(k, f"{v:.4g}" if isinstance(v, float) else str(v))
    con.print(t)
    for phase in ("ttft_ops_ms", "tpot_ops_ms"):
        ops = s.get(phase) or {}
        if not ops:
            continue
        total = sum(ops.values())
        ot = Table(title=f"slowest operators, {phase[:4].upper()} (summed over layers)")
        ot.add_column("operator"), ot.add_column("ms", justify="right"), ot.add_column("share", justify="right")
        for name, ms in sorted(ops.items(), key=lambda kv: -kv[1])[:top]:
            ot.add_row(name, f"{ms:.4g}", f"{ms / total:.1%}")
        con.print(ot)


@forge_main("forge-hw")
def main(cfg: DictConfig) -> None:
    run(cfg)


if __name__ == "__main__":
    main()
