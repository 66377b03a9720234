"""Which plug-ins a run uses, recorded in its folder (`plugins.json`), so a plug-in binds only the runs that use it.

Every command imports the modules of `plugins.modules` and of the `forge.plugins` entry points (forge.plugins);
importing one may register genes (forge.genomes.genes keeps which module declared each) and model/workload hooks. A search
records:

- `modules`: the modules that give its genomes their meaning: those that declared the genes its space names, and
  those that add hooks without a gene (they change every model), whether a plug-in list or the user's script
  imported them. Reading the run (export, report, verify, resume) needs
  each of them imported (`require`): a genome with an unknown gene cannot be read.
- `code`: the modules of the run's own classes and functions (its space, backend, surrogate or objective named by
  import path outside Forge): what rebuilding its parts (resume, verify) needs (`require(..., code=True)`).

An installed package whose genes and classes a run does not use is recorded by none, so uninstalling it leaves
that run readable. The record is data: it names modules, it never imports them.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterable

from forge import plugins
from forge.disk.io import loads

FORGE = ("forge", "search", "surrogate", "backends", "forge_hf")  # Forge's own packages: never a plug-in's code


def python_only(path: str) -> bool:
    """No command can import `path` (module.qualname): it lives in `__main__` (a script, a notebook) or in code
    run by exec (`builtins`, plugins.bind's `python`), inside a function (`<locals>`, `<lambda>`), or names a
    callable object (plugins.bind's `<object>`)."""
    return str(path).split(".")[0] in ("__main__", "builtins", "python") or "<" in str(path)


def _hook_modules() -> list[str]:
    """The modules of the hooks registered so far: through forge.lm.hooks (a model hook too, in a search that never
    imports forge.lm.model), and any function put straight on Block.hooks / OP_HOOKS."""
    from forge.lm import hooks as registry

    model, workload = sys.modules.get("forge.lm.model"), sys.modules.get("forge.lm.workload")
    direct = [*getattr(getattr(model, "Block", None), "hooks", []), *getattr(workload, "OP_HOOKS", [])]
    return [h.module for h in registry.ordered()] + [str(getattr(h, "__module__", "")) for h in direct]


def _ours(module: str) -> bool:
    return not module or module.split(".")[0] in FORGE or python_only(f"{module}.x")


def _named(module: str) -> str:
    """The plug-in module the user named that holds `module` (mypkg for mypkg.genes), else `module` itself."""
    return next((p for p in plugins.used() if module == p or module.startswith(f"{p}.")), module)


def module_of(path: str) -> str | None:
    """The imported module that holds `path` (its longest dotted prefix in sys.modules)."""
    parts = str(path).split(".")
    return next((m for m in (".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)) if m in sys.modules), None)


def used(genes: Iterable[str], paths: Iterable[str]) -> dict[str, list[str]]:
    """{"modules": the modules that registered the genes the run names, and those whose hooks come with no gene
    (they change every model), in import order, "code": the modules of its own classes and functions beyond those,
    sorted}."""
    from forge.genomes.genes import ORIGIN

    with_genes = set(ORIGIN.values())
    found = [ORIGIN.get(g, "") for g in genes] + [m for m in _hook_modules() if m not in with_genes]
    order = {m: i for i, m in enumerate(sys.modules)}  # sys.modules keeps import order
    modules = sorted({_named(m) for m in found if not _ours(m)}, key=lambda m: order.get(m, len(order)))
    shipped = {p for paths_ in plugins.shipped().values() for p in paths_}
    code: list[str] = []
    for path in paths:
        m = None if python_only(path) or path in shipped else module_of(path)
        if m and not _ours(m) and _named(m) not in modules and _named(m) not in code:
            code.append(_named(m))
    return {"modules": modules, "code": sorted(code)}


def record(run_dir: Any, genes: Iterable[str]) -> None:
    """Write `plugins.json` for a run whose space names `genes`, made from the live config (plugins.trust), only
    when it uses a plug-in: a run of Forge's own parts writes none, whatever is installed."""
    from forge.disk.io import atomic_write_json

    use = used(genes, plugins.live_paths())
    if use["modules"] or use["code"]:
        atomic_write_json(Path(run_dir) / plugins.RECORD, {k: v for k, v in use.items() if v})


def recorded(run_dir: Any) -> dict[str, list[str]]:
    """The run's record ({} when it used no plug-in); a file that is not one is refused, naming it."""
    path = Path(run_dir) / plugins.RECORD
    try:
        rec = loads(path.read_text()) if path.is_file() else {}
    except (ValueError, OSError):
        rec = None
    if not isinstance(rec, dict) or not all(isinstance(rec.get(k, []), list) for k in ("modules", "code")):
        raise plugins.PluginError(f"{path}: not a plug-in record; allowed: {{\"modules\": [module, ...], "
                                  "\"code\": [module, ...]}")
    return {k: [str(n) for n in rec.get(k) or []] for k in ("modules", "code") if rec.get(k)}


def needed(run_dir: Any, code: bool = False) -> list[str]:
    """The modules a command on the run must import: its genes' (and, to rebuild its parts, its code's)."""
    rec = recorded(run_dir)
    return [*rec.get("modules", []), *(rec.get("code", []) if code else [])]


def require(run_dir: Any, code: bool = False) -> None:
    """A run made with plug-in modules is read back only once each is imported by the live config, an entry
    point or this process: the folder names them, it never imports them (it is data). Its `code` modules are
    named in the line (`code`: a command that rebuilds its parts), not required: each class is checked where it is
    built (plugins.check), and may be allowed by `plugins.<kind>=[module.Class]` instead."""
    names = needed(run_dir, code)
    missing = [n for n in needed(run_dir) if n not in plugins.used() and n not in sys.modules]
    failed = [plugins.broken()[n] for n in missing if n in plugins.broken()]
    if failed:
        raise plugins.PluginError(f"{run_dir} was made with plug-in modules {', '.join(missing)}, and the "
                                  f"{failed[0]}; allowed: fix or reinstall that package")
    if missing:
        raise plugins.PluginError(
            f"{run_dir} was made with plug-in modules {', '.join(missing)}, which this command has not imported (a "
            f"run folder never names code to run); allowed: name them in the command (plugins.modules=[{','.join(names)}]) "
            f"or install them under the {plugins.ENTRY_GROUP!r} entry-point group")


def args(run_dir: Any, code: bool = False) -> list[str]:
    """`plugins.modules=[...]` for a command on the run (none when it used no plug-in or the record is not ours)."""
    try:
        names = needed(run_dir, code)
    except plugins.PluginError:
        return []
    return [f"plugins.modules=[{','.join(names)}]"] if names else []
