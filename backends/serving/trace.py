"""Request traces for the pool simulator: a seeded synthetic generator with the Azure trace's shape, and a CSV loader.

A trace is arrival times (s, sorted) with prompt and output token counts. The CSV loader takes either our
column names (arrival_s, prompt_tokens, output_tokens) or those of the Azure LLM inference trace 2023
(TIMESTAMP, ContextTokens, GeneratedTokens), which paper 003 draws its requests from.
"""
from __future__ import annotations

import csv
import errno
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from forge.errors import ForgeError
from forge.disk.files import require_file

COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
DISTS = ("lognormal", "fixed", "uniform")


class TraceError(ForgeError):
    """Bad trace input; the message names what is wrong and what is allowed."""


@dataclass(frozen=True)
class Trace:
    arrival_s: np.ndarray
    prompt: np.ndarray
    output: np.ndarray

    def __len__(self) -> int:
        return len(self.arrival_s)

    def summary(self) -> dict[str, Any]:
        return {"requests": len(self), "duration_s": float(self.arrival_s[-1] - self.arrival_s[0]) if len(self) else 0.0,
                "prompt_mean": float(self.prompt.mean()), "output_mean": float(self.output.mean()),
                "prompt_max": int(self.prompt.max()), "output_max": int(self.output.max())}


def _lengths(rng: np.random.Generator, n: int, d: dict[str, Any], what: str) -> np.ndarray:
    d = dict(d)
    kind = d.get("dist", "lognormal")
    if kind not in DISTS:
        raise TraceError(f"trace.{what}.dist = {kind!r} is unknown; allowed: {', '.join(DISTS)}")
    if kind == "lognormal":
        x = rng.lognormal(np.log(float(d["median"])), float(d.get("sigma", 1.0)), n)
    elif kind == "uniform":
        x = rng.uniform(float(d["min"]), float(d["max"]), n)
    else:
        x = np.full(n, float(d["median"]))
    return np.clip(np.rint(x), int(d.get("min", 1)), int(d.get("max", 1 << 20))).astype(np.int64)


def synthetic(cfg: Any, seed: int = 0) -> Trace:
    """Poisson arrivals at requests / duration_s, prompt and output lengths from their distributions."""
    d = dict(cfg)
    n, dur = int(d["requests"]), float(d["duration_s"])
    if n <= 0 or dur <= 0:
        raise TraceError(f"trace requests = {n}, duration_s = {dur} are invalid; allowed: positive numbers")
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(dur / n, n))
    arrivals -= arrivals[0]
    return Trace(arrivals, _lengths(rng, n, d["prompt"], "prompt"), _lengths(rng, n, d["output"], "output"))


def load_csv(path: str | Path) -> Trace:
    """A trace CSV (our columns or Azure's); arrivals are shifted to start at 0 and sorted."""
    path = Path(path)
    if path.exists():
        require_file(path, "trace file")  # a folder or a FIFO is named as such (a FIFO would block the read)
    else:
        raise FileNotFoundError(errno.ENOENT, "trace file does not exist; allowed: synthetic or a CSV path", str(path))
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        header = [h.strip() for h in (reader.fieldnames or [])]
        rows = [{k.strip(): v for k, v in r.items() if k} for r in reader]
    cols = COLUMNS if set(COLUMNS) <= set(header) else AZURE_COLUMNS if set(AZURE_COLUMNS) <= set(header) else None
    if cols is None:
        missing = sorted(set(COLUMNS) - set(header))
        raise TraceError(f"trace {path.name} lacks columns {', '.join(missing)}; allowed: {', '.join(COLUMNS)} "
                         f"or Azure's {', '.join(AZURE_COLUMNS)}")
    if not rows:
        raise TraceError(f"trace {path.name} has no requests; allowed: at least one row")
    t = [r[cols[0]] for r in rows]
    try:
        arr = np.array([float(x) for x in t]) if cols == COLUMNS else _azure_times(t)
        prompt = np.array([int(float(r[cols[1]])) for r in rows])
        out = np.array([int(float(r[cols[2]])) for r in rows])
    except ValueError as e:
        raise TraceError(f"trace {path.name} has a non-numeric value ({e}); allowed: numbers in {', '.join(cols)}") from None
    if np.any(prompt < 1) or np.any(out < 1):
        raise TraceError(f"trace {path.name} has token counts < 1; allowed: positive integers")
    order = np.argsort(arr, kind="stable")
    return Trace(arr[order] - arr[order][0], prompt[order], out[order])


def _azure_times(ts: list[str]) -> np.ndarray:
    """Azure's TIMESTAMP strings (ISO, sub-second) → seconds."""
    return np.array([np.datetime64(x.strip().replace(" ", "T")[:26]).astype("datetime64[us]").astype(np.int64) for x in ts]) / 1e6


def resolve_trace(spec: str, synthetic_cfg: Any, seed: int) -> Trace:
    """`synthetic` (the generator settings) or a CSV path."""
    return synthetic(synthetic_cfg, seed) if str(spec) == "synthetic" else load_csv(str(spec))
