"""The commands Forge suggests after a job (`next:` lines, verify's advice, export hints), each one that works as
printed: paths relative to the working folder, a fresh `out=` where the default is taken, the tutorial's sizes.

A suggestion is printed on its own line and never wrapped (`print_commands`), so pasting it runs all of it.
Kept apart from the console table so every CLI suggests through one place.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from search.carried import carry, customized, own_overrides, quote  # noqa: F401 (quote: spelled there)
from search.carried import searchpath as carried_searchpath

TINY_K = "k=4 control=4"  # the tutorial's verification: 4 picks + 4 controls (8 + 8 trainings by default)
TINY_OUT = "runs/tiny"


def rel(path: str | Path) -> str:
    """`path` relative to the working folder when it lies under it (shorter to paste), else as given."""
    p = Path(path)
    try:
        r = os.path.relpath(p.resolve(), Path.cwd().resolve()) if p.is_absolute() else str(p)
    except ValueError:  # another drive (Windows)
        return str(p)
    return str(p) if r.startswith("..") else r


def fresh_out(base: str = "exported") -> str:
    """`base` when no export is there yet, else the first `base-2`, `base-3`, ... that does not exist."""
    if not Path(base).exists():
        return base
    n = 2
    while Path(f"{base}-{n}").exists():
        n += 1
    return f"{base}-{n}"


def _name(node: Any) -> str:
    return node if isinstance(node, str) else str((node or {}).get("name", ""))


def tiny_space(space: str) -> str | None:
    """The CPU-trainable space nearest the run's: the run's own when it is a tiny one, else its tiny twin
    (iha-paper-swa -> iha-tiny-swa, gqa-paper -> gqa-tiny), else iha-tiny; None for a user's space (one that is
    not in conf/space): no shipped space stands for it."""
    from forge.runtime.config import group_yaml

    if group_yaml("space", space) is None:
        return None
    if "tiny" in space:
        return space
    twin = space.replace("paper", "tiny").removesuffix("-mx")
    return twin if group_yaml("space", twin) is not None else "iha-tiny"


def tiny_predictor(space: str) -> str:
    """The shipped cpu-proxy surrogate for `space` (gqa-tiny: iha-tiny's, blind to its 128-wide heads)."""
    from forge.runtime.config import data_dir

    own = f"forgeformer-{space}"
    return own if (data_dir() / "surrogate" / f"{own}.json").is_file() else "forgeformer-iha-tiny"


def allow_blind(space: str, predictor: str) -> list[str]:
    """`evaluator.allow_blind=[...]` a suggested search needs: the genes `space` varies outside what the shipped
    `predictor` covers (search.blind), so the command runs as printed and its loss says where it is blind."""
    from forge.spaces.space import load_space
    from search.blind import blind_genes, declared, varied

    return sorted(blind_genes(declared(predictor), varied(load_space(space))))


def tiny_recipe(run_cfg: Mapping[str, Any], run_dir: str | Path | None = None) -> list[str]:
    """A search whose verification trains on this CPU, in the run's own space family and backend. A run of a
    plug-in, a user's space or predictor (search.carried.customized) gets its own launch again, at CPU scale, with
    what it carries (never the shipped tiny predictor in place of theirs), when its space is a tiny one and its
    launch is recorded; else none (empty): only its own protocol verifies it."""
    if run_dir is not None and customized(run_dir, dict(run_cfg)):
        return own_recipe(run_dir, _name(run_cfg.get("space")))
    searchpath = carried_searchpath(run_dir) if run_dir is not None else []
    space = tiny_space(_name(run_cfg.get("space")) or "iha-tiny")
    if space is None:
        return []
    backend = _name(run_cfg.get("backend"))
    pred, blind = tiny_predictor(space), allow_blind(space, tiny_predictor(space))
    parts = ["forge-search", *([quote(f"hydra.searchpath=[{','.join(searchpath)}]")] if searchpath else []),
             f"space={space}", f"evaluator.predictor={pred}",
             *([f"evaluator.allow_blind=[{','.join(blind)}]"] if blind else []),
             *([f"backend={backend}"] if backend and backend != "roofline" else []),
             "protocol=cpu-proxy", "corpus=stdlib", "search.generations=5", f"hydra.run.dir={TINY_OUT}"]
    return [" ".join(parts), f"forge-verify run={TINY_OUT} {TINY_K}"]


def own_recipe(run_dir: str | Path, space: str) -> list[str]:
    """The run's own search again, trainable on this CPU (cpu-proxy protocol, stdlib corpus), and its verify."""
    own = own_overrides(run_dir)
    if own is None or "tiny" not in space:
        return []
    extra = carry(run_dir, code=True)
    return [" ".join(["forge-search", *own, *extra, "protocol=cpu-proxy", "corpus=stdlib", "search.generations=5",
                      f"hydra.run.dir={TINY_OUT}"]), " ".join(["forge-verify", f"run={TINY_OUT}", *extra, TINY_K])]


def is_tiny(run_cfg: Mapping[str, Any]) -> bool:
    """A CPU-scale run (a tiny space): verify it at the tutorial's size."""
    return "tiny" in _name(run_cfg.get("space"))


def verify_command(run_dir: str | Path, run_cfg: Mapping[str, Any]) -> str:
    """`forge-verify run=<rel dir>`, with the tutorial's `k=4 control=4` for a tiny run and the plug-in modules the
    run needs; a run made with Python objects no command rebuilds is verified from Python (a `# ...` line)."""
    from search.python_objects import needs_python

    k = f" {TINY_K}" if is_tiny(run_cfg) else ""
    if needs_python(run_cfg):
        return f"# verify from Python with the run's own objects: res.verify({k.strip().replace(' ', ', ')})"
    return " ".join([f"forge-verify run={quote(rel(run_dir))}", *carry(run_dir, code=True)]) + k


def export_command(run_dir: str | Path, *extra: str, select: str = "knee", base: str = "exported") -> str:
    """`forge-export run=<rel dir> select=... [extra] out=<a folder that holds no export yet>`, with the plug-in
    modules its genomes need."""
    args = [f"run={quote(rel(run_dir))}", f"select={quote(select)}", *extra, *carry(run_dir)]
    out = fresh_out(base)
    return " ".join(["forge-export", *args, *([f"out={quote(out)}"] if out != "exported" else [])])


def print_commands(console: Any, title: str, cmds: Sequence[str]) -> None:
    """`title:` then each command on its own unwrapped line (a `# ...` entry is a comment line of its own)."""
    console.print(title + ":", highlight=False)
    for c in cmds:
        console.print(f"  {c}", highlight=False, soft_wrap=True, markup=False)


def resume_command(run_dir: str | Path, run_cfg: Mapping[str, Any]) -> str:
    """How to continue a stopped run, as it works when pasted: `forge-search resume=<dir>` with the plug-in modules
    it needs, or, for a run made with Python objects no command rebuilds, the `forge.search(resume=...)` call."""
    from search.python_objects import needs_python, python_resume

    missing = needs_python(run_cfg)
    if missing:
        return f"{python_resume(rel(run_dir), missing)} (from Python: no command can rebuild {missing[0][1]})"
    return " ".join(["forge-search", f"resume={quote(rel(run_dir))}", *carry(run_dir, code=True)])
