"""Figures: RESULTS.md "Issue 50" (how fast the bounded readers refuse, and what the lock and the bounds cost).

    nice -n 10 .venv/bin/python bench/bench_trust_iv.py

- the alias bomb of tests/test_trust_iv.py (10 lines, 9^10 nodes expanded): refused by `load_yaml`; the
  libyaml loader as it was (construct, then one walk over the data, as every later check does) on the same
  bomb cut to 5..7 levels, whose time grows ~9x per level;
- a 100,000-deep JSON row: `loads` refuses it; an archive row of a 40-layer genome (under 64 brackets, and one
  with a precision per layer, over 64: the depth scan runs): `loads` vs `json.loads`, microseconds a row;
- the run-folder lock: taking and releasing it (with its holder note) against one `atomic_write_text`.
Writes bench/results/trust_iv.json.
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def best(fn: Callable[[], Any], n: int = 5) -> float:
    """The fastest of `n` calls, in seconds (an exception counts: a refusal is what is timed)."""
    out = []
    for _ in range(n):
        t = time.perf_counter()
        try:
            fn()
        except Exception:  # noqa: BLE001 - the refusal
            pass
        out.append(time.perf_counter() - t)
    return min(out)


def bomb(levels: int) -> str:
    return "a0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, levels))


def old_load_and_walk(text: str) -> int:
    import yaml

    data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506
    n, stack = 0, [data]
    while stack:
        x = stack.pop()
        n += 1
        stack.extend(x.values() if isinstance(x, dict) else x if isinstance(x, list) else ())
    return n


def main() -> None:
    from forge.disk.io import atomic_write_text, load_yaml, loads
    from forge.disk.lock import run_lock
    from tests.test_trust_iv import BOMB

    res: dict[str, Any] = {"bomb_bytes": len(BOMB), "refuse_bomb_s": best(lambda: load_yaml(BOMB, "b.yaml"))}
    res["old_loader_s"] = {lv: best(lambda lv=lv: old_load_and_walk(bomb(lv)), 1) for lv in (5, 6, 7)}
    res["new_loader_s"] = {lv: best(lambda lv=lv: load_yaml(bomb(lv), "b.yaml")) for lv in (5, 6, 7)}
    deep = "[" * 100_000 + "]" * 100_000
    res["refuse_deep_json_s"] = best(lambda: loads(deep))
    row = json.dumps({"id": "x" * 16, "genome": {"layers": [{"n_h": 4, "n_kv": 2, "d_qk": 64, "d_v": 64,
                                                            "d_mlp": 1024, "attn": True, "active": True}] * 40},
                      "metrics": {"val_loss": 3.1, "tpot_ms": 1.2}})
    wide = row.replace('"active": true}', '"active": true, "precision": {"w": [8, 4], "a": [8, 4]}}')
    for name, text in (("row", row), ("row_over_64_brackets", wide)):  # the second takes the depth scan
        res[f"{name}_bytes"], res[f"{name}_brackets"] = len(text), text.count("[") + text.count("{")
        res[f"{name}_loads_us"] = best(lambda t=text: [loads(t) for _ in range(1000)]) * 1e3
        res[f"{name}_json_loads_us"] = best(lambda t=text: [json.loads(t) for _ in range(1000)]) * 1e3
    with tempfile.TemporaryDirectory() as d:
        def lock() -> None:
            with run_lock(Path(d) / "run"):
                (Path(d) / "run" / "x").touch()
        res["lock_us"] = best(lambda: [lock() for _ in range(200)]) / 200 * 1e6
        res["atomic_write_us"] = best(lambda: [atomic_write_text(Path(d) / "a.txt", "x") for _ in range(200)]) / 200 * 1e6
    out = ROOT / "bench/results/trust_iv.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
