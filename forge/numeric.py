"""Machine-independent numbers: one seed gives the same decisions and the same run files on any CPU (issue 33).

Floats computed by torch kernels, BLAS and numpy's SIMD loops differ between instruction sets in their last
bits. A search compares such floats (survival ranking, crowding, constraints, the archive's dominance, the
knee), so a last-bit difference can fork its trajectory. Every float a surrogate or a backend returns therefore
passes through `settle` once, where the search assembles its metrics: it is rounded to `DIGITS` significant
digits before anything compares it, and the same rounded value is what the run files hold. Ties left by
rounding are broken by genome id (`argmin_by_id`), never by position or last bits.

Rounding alone cannot make every value safe: a value within the machine difference of a rounding boundary
still rounds two ways. The surrogate's encoder therefore runs in float64 (differences between instruction
sets ~1e-16 relative instead of ~1e-8 for float32), so a boundary is crossed with probability ~1e-10 per
value, about 1e-6 for a whole default run (bench/RESULTS.md, issue 33, states the measured rates).

`FORGE_PERTURB=r` (a test hook, read here only) multiplies every settled float by (1 + U(−r, r)) before
rounding, from its own generator seeded by `FORGE_PERTURB_SEED` (default 0): what a different machine does,
without one.
"""
from __future__ import annotations

import math
import os
from decimal import ROUND_FLOOR, Decimal
from typing import Any, Sequence

import numpy as np

DIGITS = 6  # significant digits of every surrogate and backend float (label noise is ~1e-2 nats: 1e-5 loses nothing)
BOUNDARY = Decimal("0.4618034")  # 1/2 - (3 - sqrt 5)/20: no short decimal lies within 0.0018 of a digit of it
_UP = 1 - BOUNDARY
PERTURB_ENV, PERTURB_SEED_ENV = "FORGE_PERTURB", "FORGE_PERTURB_SEED"
_rng: dict[str, np.random.Generator] = {}


def round_float(x: float, digits: int = DIGITS) -> float:
    """x rounded to `digits` significant digits: the nearest float to a short decimal, which prints as that
    decimal on every machine; 0, inf and nan pass unchanged.

    The step up happens at `BOUNDARY` of the last digit, not at one half: an analytic cost model often computes
    a short decimal such as 0.7728975, which sits exactly on the halfway point and would round either way
    under the smallest difference. Exact decimal arithmetic (no float division) decides the digit."""
    x = float(x)
    if x == 0.0 or not math.isfinite(x):
        return x
    d = Decimal(abs(x))
    shift = d.adjusted() - digits + 1  # the exponent of the last kept digit
    q = int((d.scaleb(-shift) + _UP).to_integral_value(rounding=ROUND_FLOOR))
    return math.copysign(float(Decimal(q).scaleb(shift)), x)


def round_sig(x: Any, digits: int = DIGITS) -> np.ndarray:
    """`round_float` of every element (float64 array of x's shape)."""
    a = np.asarray(x, dtype=float)
    return np.array([round_float(v, digits) for v in a.ravel().tolist()], dtype=float).reshape(a.shape)


def perturbation() -> float:
    """The relative perturbation the test hook asks for (0.0 when `FORGE_PERTURB` is unset)."""
    return float(os.environ.get(PERTURB_ENV) or 0.0)


def perturb(x: Any) -> np.ndarray:
    """x × (1 + U(−r, r)) with r = `FORGE_PERTURB` (x unchanged, as float64, when unset)."""
    a = np.asarray(x, dtype=float)
    r = perturbation()
    if not r or a.size == 0:
        return a
    seed = int(os.environ.get(PERTURB_SEED_ENV) or 0)
    rng = _rng.setdefault(f"{seed}:{r}", np.random.default_rng(seed))
    return a * (1.0 + rng.uniform(-r, r, size=a.shape))


def settle(x: Any, digits: int = DIGITS) -> np.ndarray:
    """A computed float (array) as the search compares and stores it: perturbed by the test hook, then rounded."""
    return round_sig(perturb(x), digits)


def round_floats(obj: Any, digits: int = DIGITS) -> Any:
    """A JSON-able structure with every non-integral float rounded (what a report file holds: the same text on
    every machine). Integral floats (parameter counts, byte totals) are exact everywhere and stay whole."""
    if isinstance(obj, dict):
        return {k: round_floats(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [round_floats(v, digits) for v in obj]
    if isinstance(obj, (float, np.floating)) and not float(obj).is_integer():
        return round_float(float(obj), digits)
    return obj


def order_by_id(values: Any, ids: Sequence[str], digits: int = DIGITS) -> np.ndarray:
    """Indices that sort `values` ascending after rounding; equal values in id order (not row order or last bits)."""
    v = round_sig(values, digits).tolist()
    return np.array(sorted(range(len(ids)), key=lambda j: (v[j], ids[j])), dtype=int)


def argmin_by_id(values: Any, ids: Sequence[str], digits: int = DIGITS) -> int:
    """Index of the smallest value after rounding; equal values go to the smallest id (not the first row)."""
    return int(order_by_id(values, ids, digits)[0])
