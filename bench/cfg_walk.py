"""The walk of `cfg` from `forge-search` (issue 36 §4): which project functions the config reaches, in order.

A *stop* is a function of Forge's packages (forge, search, surrogate, backends) called with the config, or any
node of it, as an argument. What a stop derives from the config (the plain-dict copy, a section with its defaults
filled in) is the config too: a container returned by a stop is followed from there on. The walk is measured on a
real `forge-search` job, in-process, with a profiler hook; it reports

- stops: distinct functions reached, and the files they sit in;
- returns per file: how often the walk comes back to a file after leaving it (consecutive stops in one file
  are one visit);
- returns per package: the same for the four packages.

    python bench/cfg_walk.py                       # the default job, 1 generation
    python bench/cfg_walk.py --json                # the numbers tests/search/run/test_build.py asserts
"""
from __future__ import annotations

import functools
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("forge", "search", "surrogate", "backends")


@functools.lru_cache(maxsize=None)  # the hook sees every call: resolve each file once
def _project_file(filename: str) -> str | None:
    try:
        rel = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    return rel.as_posix() if rel.parts and rel.parts[0] in PACKAGES else None


class Walk:
    """A profiler hook that records each project call whose arguments hold a config node."""

    def __init__(self) -> None:
        self.ids: set[int] = set()
        self.keep: list[Any] = []  # held so no id is reused by a new object
        self.stops: list[tuple[str, str]] = []
        self.open: dict[int, bool] = {}  # frame id -> whether it was a stop (its return value is followed)

    def add(self, node: Any) -> None:
        from omegaconf import DictConfig, ListConfig

        if id(node) in self.ids:
            return
        if isinstance(node, (dict, DictConfig)):
            children = list(node.values()) if isinstance(node, dict) else [node._get_node(k) for k in node]
        elif isinstance(node, (list, tuple, ListConfig)):
            children = list(node) if not isinstance(node, ListConfig) else [node._get_node(i) for i in range(len(node))]
        else:
            return
        self.ids.add(id(node))
        self.keep.append(node)
        for child in children:
            self.add(child)

    def _start(self, frame: Any) -> None:
        from omegaconf import DictConfig

        for v in frame.f_locals.values():
            if isinstance(v, DictConfig) and "search" in v and id(v) not in self.ids:
                self.add(v)

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":  # c_call and the like never carry a config node to a project function
            where = _project_file(frame.f_code.co_filename)
            if where is None:
                return
            code = frame.f_code
            self._start(frame)  # Hydra hands its callbacks and the task function their own copies
            names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
            hit = any(id(frame.f_locals.get(n)) in self.ids for n in names if n in frame.f_locals)
            if hit:
                self.stops.append((where, code.co_qualname))
                self.open[id(frame)] = True
        elif event == "return" and self.open.pop(id(frame), False):
            self.add(arg)


def measure(overrides: list[str]) -> dict[str, Any]:
    """Run `forge-search <overrides>` in-process under the hook and summarize the walk."""
    import search.cli as cli

    walk, argv = Walk(), sys.argv
    try:
        with tempfile.TemporaryDirectory() as tmp:
            sys.argv = ["forge-search", *overrides, f"hydra.run.dir={tmp}/run", "quiet=true", "progress=false"]
            sys.setprofile(walk)
            try:
                cli._search_job()
            finally:
                sys.setprofile(None)
    finally:
        sys.argv = argv
    return summarize(walk.stops)


def _returns(seq: list[str]) -> dict[str, int]:
    """Per name: visits after the first, where a visit is a run of consecutive equal names."""
    visits = Counter(x for i, x in enumerate(seq) if i == 0 or seq[i - 1] != x)
    return {k: v - 1 for k, v in sorted(visits.items(), key=lambda kv: -kv[1]) if v > 1}


def summarize(stops: list[tuple[str, str]]) -> dict[str, Any]:
    distinct = list(dict.fromkeys(stops))
    files = [f for f, _ in stops]
    return {"stops": len(distinct), "files": len(set(files)),
            "returns_per_file": _returns(files),
            "returns_per_package": _returns([f.split("/")[0] for f in files]),
            "walk": [f"{f}:{q}" for f, q in distinct]}


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--json"]
    out = measure(args or ["search.generations=1"])
    if "--json" in sys.argv:
        print(json.dumps(out, indent=2))
        return
    print(f"stops {out['stops']} in {out['files']} files")
    print("returns per package:", out["returns_per_package"] or "none")
    print("returns per file:", out["returns_per_file"] or "none")
    for s in out["walk"]:
        print("  ", s)


if __name__ == "__main__":
    main()
