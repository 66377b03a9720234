"""The host CPU as hardware: `backend=cpu-measured` times the IHA model here; `hardware=host-cpu` is its roofline.

`CpuMeasuredBackend` runs `backends.measure` on the CPU with a fixed torch thread count and the timing
thread's CPU time (or the wall clock) as its timer; energy is NaN, or with `power_w` an estimate (power ×
time, `TimeEnergy`), since no meter is read. `calibrate_host` makes the roofline preset of this machine:
peak FLOP/s and bandwidth from a micro-benchmark (`microbenchmark`: a large fp32 matmul, a large GEMV),
then the roofline's efficiencies and overheads fitted by `backends.gpu.calibrate` to cpu-measured samples
of calibration genomes. `forge-hw mode=calibrate hardware=host-cpu` runs it and writes the preset to
conf/calibrated/hardware/host-cpu.yaml of the install (untracked; see conf/hardware/host-cpu.yaml): the
numbers belong to the machine, not to the repository.
"""
from __future__ import annotations

import os
import platform
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from backends.gpu.calibrate import FITTABLE, calibrate
from backends.interface import BackendError, Workload
from backends.measure import DTYPES, MeasuredBackend, Timer, thread_timer, torch_threads, wall_timer
from forge.genomes.genome import Genome

CLOCKS: dict[str, Timer] = {"thread": thread_timer, "wall": wall_timer}
OVERHEAD_KEYS = tuple(FITTABLE)  # eta_compute, eta_memory, launch_us, layer_us: with the bits, a preset's `roofline:`


class CpuMeasuredBackend(MeasuredBackend):
    """Times real KV-cached generation of each genome on this machine's CPU with `threads` torch threads.

    clock=thread (the default, threads=1) counts the timing thread's CPU time, so other processes on a
    shared machine do not inflate the latency; clock=wall is the plain wall clock (any thread count).
    """

    def __init__(self, threads: int = 1, clock: str = "thread", warmup: int = 1, repeats: int = 5, interleave: int = 32,
                 interleave_gb: float = 2.0, power_w: float | None = None, seed: int = 0,
                 precision: dict | None = None, timer: Timer | None = None, name: str = "cpu-measured") -> None:
        super().__init__(warmup, repeats, seed, precision or {"weight_bits": 32, "act_bits": 32, "kv_bits": 32})
        for k, v in (("threads", threads), ("interleave", interleave), ("repeats", repeats)):
            if int(v) < 1:
                raise BackendError(f"backend.{k} = {v!r} is invalid; allowed: an integer >= 1")
        if clock not in CLOCKS or (clock == "thread" and int(threads) != 1):
            raise BackendError(f"backend.clock = {clock!r} with threads={threads} is invalid; allowed: thread (with "
                               "threads=1: one thread's CPU time) or wall (any thread count)")
        self.name, self.device, self.clock, self.timer = name, "cpu", clock, timer or CLOCKS[clock]
        self.threads, self.interleave, self.interleave_gb = int(threads), int(interleave), float(interleave_gb)
        if power_w is not None and not float(power_w) > 0:
            raise BackendError(f"backend.power_w = {power_w!r} is invalid; allowed: watts > 0, or null (energy NaN)")
        self.power_w = None if power_w is None else float(power_w)

    def _setup(self, wl: Workload) -> tuple[Any, Timer, Any]:
        import torch

        bits = {wl.weight_bits, wl.act_bits, wl.kv_bits}
        if len(bits) != 1 or wl.weight_bits not in DTYPES:
            raise BackendError(f"cpu-measured runs one dtype for weights, activations and KV; got bits {sorted(bits)}; "
                               "allowed: all 32 (fp32) or all 16 (bf16)")
        energy = None if self.power_w is None else TimeEnergy(self.power_w, self.clock)
        return getattr(torch, DTYPES[wl.weight_bits]), self.timer, energy

    def _energy_source(self, row: dict[str, Any]) -> str:
        return f"estimate: {self.power_w:g} W x {self.clock} time" if self.power_w else "unavailable"


class TimeEnergy:
    """An energy ESTIMATE, not a meter: `power_w` × the time between start() and stop() on `clock`.

    No power counter is read on a CPU; this only lets energy-aware objectives run on cpu-measured, and it
    ranks exactly as latency does.
    """

    def __init__(self, power_w: float, clock: str = "thread") -> None:
        self.power_w, self.now = power_w, time.thread_time if clock == "thread" else time.perf_counter
        self.t0 = 0.0

    def start(self) -> None:
        self.t0 = self.now()

    def stop(self) -> float:
        return self.power_w * (self.now() - self.t0)


def microbenchmark(threads: int = 1, timer: Timer = wall_timer, n: int = 1024, gemv_mb: int = 256,
                   repeats: int = 5) -> dict[str, float]:
    """Best-of-`repeats` fp32 matmul FLOP/s (n×n·n×n) and memory bandwidth on `threads`, timed with the
    measuring backend's own clock. Bandwidth = bytes of a matrix-vector product over a `gemv_mb` matrix,
    far larger than any cache: decode streams its weights exactly so (a plain copy reads ~1.5x faster)."""
    import torch

    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=gen), torch.randn(n, n, generator=gen)
    rows = gemv_mb * 2**20 // (4 * 4096)
    w, x = torch.randn(rows, 4096, generator=gen), torch.randn(4096, generator=gen)
    with torch_threads(threads):
        a @ b, w @ x  # warm-up: page faults and thread pool start
        mm = min(timer(lambda: a @ b)[1] for _ in range(repeats))
        mv = min(timer(lambda: w @ x)[1] for _ in range(repeats))
    return {"fp32_flops": 2.0 * n ** 3 / (mm * 1e-3), "gemv_bytes_s": w.numel() * 4 / (mv * 1e-3)}


def host_memory_gb() -> float:
    """Physical memory of this machine (what the roofline's capacity check uses)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    except (ValueError, OSError, AttributeError):  # not POSIX: a safe small figure
        return 8.0


def host_hardware(micro: dict[str, float], base: dict[str, Any]) -> dict[str, Any]:
    """Hardware fields from the micro-benchmark over `base` (the shipped preset's energy assumptions).

    The roofline runs fp32 at half its 16-bit peak (`Hardware.peak_flops`), so the measured fp32 rate is
    stated as twice that; the 8-bit peak is not measured and set equal (int8 is not used on the host).
    """
    hw = {k: v for k, v in base.items() if k not in ("defaults", "roofline")}
    peak16 = round(2.0 * micro["fp32_flops"] / 1e12, 5)
    hw.update(name="host-cpu", peak_tflops_16=peak16, peak_tops_8=peak16,
              mem_bw_gbs=round(micro["gemv_bytes_s"] / 1e9, 3), mem_gb=round(host_memory_gb(), 1))
    return hw


def calibrate_host(backend: MeasuredBackend, genomes: Sequence[Genome], wl: Workload, base: dict[str, Any],
                   micro: Callable[[int, Timer], dict[str, float]] | None = None,
                   fit: Sequence[str] = OVERHEAD_KEYS) -> dict[str, Any]:
    """The host-cpu preset: hardware fields from `micro`, `roofline` overheads fitted to `backend`'s timings.

    Returns the preset with a `calibration` block (micro-benchmark, fit errors, host, threads, workload).
    """
    threads = int(getattr(backend, "threads", None) or 1)
    m = (micro or microbenchmark)(threads, getattr(backend, "timer", None) or wall_timer)
    hw = host_hardware(m, base)
    meas = backend.evaluate(list(genomes), wl)
    ok = np.flatnonzero(meas.feasible)
    if len(ok) < 2 * len(fit):
        raise BackendError(f"calibrate: {len(ok)} genomes measured; allowed: at least {2 * len(fit)} (calibrate.n)")
    samples = [(genomes[i], meas.ttft_ms[i], meas.tpot_ms[i]) for i in ok]
    start = {"eta_compute": 0.5, "eta_memory": 0.5, "launch_us": 10.0, "layer_us": 10.0}
    cfg = calibrate(samples, base={"hardware": hw, **start, "precision": _bits(wl)}, workload=wl, fit=fit)
    cal = cfg["calibration"]
    preset = {**hw, "roofline": {**{k: round(float(cfg[k]), 6) for k in OVERHEAD_KEYS}, **_bits(wl)}}
    preset["calibration"] = {
        "host": platform.node(), "cpu": platform.processor() or platform.machine(), "threads": threads,
        "clock": getattr(backend, "clock", "wall"),
        "fp32_gflops": round(m["fp32_flops"] / 1e9, 2), "gemv_gbs": round(m["gemv_bytes_s"] / 1e9, 2),
        "n_genomes": len(ok), "rms_rel_error_before": round(cal["rms_rel_error_before"], 4),
        "rms_rel_error_after": round(cal["rms_rel_error_after"], 4), "workload": cal["workload"]}
    return preset


def roofline_backend(preset: dict[str, Any]) -> Any:
    """The RooflineBackend a preset describes (what backend=roofline hardware=<preset> composes to)."""
    from backends.gpu.roofline import RooflineBackend

    r = dict(preset.get("roofline") or {})
    bits = {k: r.pop(k) for k in ("weight_bits", "act_bits", "kv_bits") if k in r}
    hw = {k: v for k, v in preset.items() if k not in ("roofline", "calibration", "defaults")}
    return RooflineBackend(hardware=hw, **r, precision=bits or None)


def _bits(wl: Workload) -> dict[str, int]:
    return {"weight_bits": wl.weight_bits, "act_bits": wl.act_bits, "kv_bits": wl.kv_bits}


def write_preset(preset: dict[str, Any], path: str | Path) -> Path:
    """Write the preset YAML atomically (the calibration block as a comment header); returns the path."""
    import yaml

    from forge.disk.io import atomic_write_text

    cal = preset.get("calibration", {})
    head = ["# host-cpu preset MEASURED on this machine by `forge-hw mode=calibrate hardware=host-cpu`",
            "# (backends/host.py); it overrides conf/hardware/host-cpu.yaml. Delete it to go back to the shipped one.",
            "# calibration: " + yaml.safe_dump(cal, default_flow_style=True, width=10**6).strip()]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {k: v for k, v in preset.items() if k != "calibration"}
    atomic_write_text(path, "\n".join(head) + "\n" + yaml.safe_dump(body, sort_keys=False))
    return path


def calibrated_path(name: str = "host-cpu") -> Path:
    """Where `forge-hw mode=calibrate` writes this machine's preset: the install's conf/calibrated/hardware/.

    conf/hardware/<name>.yaml merges it through its Hydra defaults list and `load_hardware` reads it too,
    so `hardware=host-cpu` composes everywhere, with the shipped placeholder where nothing was calibrated.
    """
    from forge.runtime.config import conf_dir

    return conf_dir() / "calibrated" / "hardware" / f"{name}.yaml"


def run_calibrate(cfg: Any) -> dict[str, Any]:
    """`forge-hw mode=calibrate hardware=host-cpu`: micro-benchmark, time `calibrate.n` genomes, fit, write.

    Timed by the composed backend when it is cpu-measured (so `backend=cpu-measured backend.threads=2` sets
    how), else by the shipped cpu-measured config.
    """
    from backends.registry import build_backend
    from forge.runtime.config import group_yaml, to_container
    from forge.spaces.space import load_space

    hw_name = str((to_container(cfg.get("hardware")) or {}).get("name", ""))
    if hw_name != "host-cpu":
        raise BackendError(f"mode=calibrate measures this machine's CPU; got hardware={hw_name or 'none'}; "
                           "allowed: hardware=host-cpu")
    c = dict(to_container(cfg["calibrate"]))
    own = str((to_container(cfg.get("backend")) or {}).get("_target_", "")).endswith(".CpuMeasuredBackend")
    backend = build_backend(cfg["backend"] if own else "cpu-measured")  # backend=cpu-measured backend.threads=2 ...
    wl = Workload(**{**dict(zip(("weight_bits", "act_bits", "kv_bits"), backend.default_bits)), **c["workload"]})
    rng = np.random.default_rng(int(c.get("seed", 0)))
    genomes = load_space(str(c.get("space", "iha-tiny"))).sample(int(c.get("n", 24)), rng)
    preset = calibrate_host(backend, genomes, wl, base=group_yaml("hardware", "host-cpu") or {})
    out = Path(c.get("out") or calibrated_path())
    try:
        path = write_preset(preset, out)
    except OSError as e:
        raise BackendError(f"cannot write the host-cpu preset to {out} ({e.strerror or e}); allowed: a writable "
                           "install, or calibrate.out=<dir>/calibrated/hardware/host-cpu.yaml used with "
                           "hydra.searchpath=[file://<dir>]") from None
    return {"mode": "calibrate", "path": str(path), **preset}
