"""The plug-in allowlist: which classes (or functions) a config may name by import path.

A run folder, a label store, a genome file or an export is *data*: researchers share them, so a `_target_`
read back from one must never pick the code Forge runs. What is trusted:

- Forge's own plug-ins: every `_target_` in the shipped config groups (`conf/<kind>/*.yaml`, one kind per
  group in `KINDS`), plus the few named in `BUILTIN`;
- what the user names in the config of the command they launched: `trust(cfg)`, called by each command's
  `run(cfg)` on its live Hydra config before it reads anything from disk, allows every `_target_` written in
  it and every path listed under `plugins: {<kind>: [module.Class, ...]}` (for example
  `forge-search resume=DIR '+plugins.backend=[mypkg.MyBackend]'` to continue a run made with your own backend);
- `register(kind, path)` from Python (a notebook, a plug-in package).

A plug-in *module* (your genes, spaces, surrogates, objectives) is imported before a command does anything
else: `trust(cfg)` imports every module listed under `plugins.modules` of the live config and every module an
installed package declares in the entry-point group `forge.plugins`. A search records the ones it uses in its
folder (`plugins.json`, forge.shell.plugin_use: an installed package it does not use binds it to nothing); `resume`,
`forge-verify`, `forge-export` and `forge-report` of that run import nothing from that record: they refuse in one
line (`plugin_use.require(run_dir)`) unless the live config, an installed entry point or this Python process has
imported each of them. A class or function defined in a plug-in module (`mypkg.genes.MySurrogate`) is allowed as
any kind: the module is code you chose to run.

Everything else is refused with one line naming the path and what is allowed, *before* its module is imported.

    cls = resolve("backend", node["_target_"])               # the class, or PluginError
    trainer = instantiate("dispatch", node, _partial_=True)  # hydra.utils.instantiate, every nested _target_ checked
"""
from __future__ import annotations

import functools
import importlib
from collections import defaultdict
from typing import Any, Iterator, Mapping

from forge.runtime.config import conf_dir, to_container
from forge.errors import UserError
from forge.moved import MOVED, new_path, new_target  # noqa: F401 (MOVED, new_path: read here by older callers)
from forge.disk import run_folder

KINDS = ("backend", "space", "surrogate", "dispatch", "corpus", "protocol")  # one shipped config group each
# plug-ins named by a plain string key (search.coevolve.finetune) or by a default (label training's logger)
BUILTIN = {"finetune": ("surrogate.fit.finetune", "surrogate.generic.refit"),
           "logger": tuple(f"lightning.pytorch.loggers.{c}" for c in
                           ("CSVLogger", "TensorBoardLogger", "MLFlowLogger", "WandbLogger"))}
ANY = "*"  # a path the user wrote in their own config: theirs to run as any kind
MODULES = "modules"  # `plugins.modules=[mypkg.genes]`: modules imported before anything else
ENTRY_GROUP = "forge.plugins"  # [project.entry-points."forge.plugins"] name = "mypkg.genes"
RECORD = run_folder.PLUGINS  # in a run folder: the plug-in modules the run imported (data: never imported from)

_registered: dict[str, set[str]] = defaultdict(set)
_live: dict[str, set[str]] = {}
_modules: list[str] = []  # plug-in modules imported by this process, in import order
_broken: dict[str, str] = {}  # installed entry-point module -> why it failed to import (load_installed)
_bound: dict[str, Any] = {}  # path -> a Python object handed to the API (a function objective), no import needed


class PluginError(UserError):
    """A config names a class or function that is not an allowed plug-in."""


# Issues 46 and 57 moved the core's modules (forge.moved keeps the old import paths working for a while); a run saved
# before names a class at its old path (its space as forge's `space.SearchSpace`): read as the new path, so it resumes.


def _norm(path: str) -> str:
    return new_target(str(path).replace(":", ".").strip())


def targets(node: Any) -> Iterator[str]:
    """Every `_target_` in a (nested) config, in document order."""
    if isinstance(node, Mapping):
        if isinstance(node.get("_target_"), str):
            yield node["_target_"]
        for v in node.values():
            yield from targets(v)
    elif isinstance(node, (list, tuple)):
        for v in node:
            yield from targets(v)


@functools.lru_cache(maxsize=1)
def shipped() -> dict[str, frozenset[str]]:
    """kind → the `_target_`s of Forge's own config group `conf/<kind>/` (and `BUILTIN`)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's safe loader where built: same data, ~10x faster
    out: dict[str, set[str]] = defaultdict(set)
    for kind in KINDS:
        for path in sorted((conf_dir() / kind).rglob("*.yaml")):
            out[kind].update(_norm(t) for t in targets(yaml.load(path.read_text(), Loader=loader) or {}))
    for path in sorted((conf_dir() / "search").rglob("*.yaml")):  # the search's operators (issue 53's groups)
        out["operator"].update(_norm(t) for t in targets(yaml.load(path.read_text(), Loader=loader) or {}))
    for kind, paths in BUILTIN.items():
        out[kind].update(paths)
    return {k: frozenset(v) for k, v in out.items()}


def register(kind: str, path: str) -> None:
    """Allow `path` (module.Class or module.function) as a `kind` plug-in for the rest of this process."""
    _registered[kind].add(_norm(path))


def bind(kind: str, obj: Any) -> str:
    """A Python object the caller handed over (forge.search(objectives=[my_fn])) as a `kind` plug-in named by its
    import path (module.qualname), which a config can hold; `resolve` returns the object itself in this process."""
    import inspect

    own = inspect.isroutine(obj) or inspect.isclass(obj)  # else a callable object: no import path rebuilds it
    name = getattr(obj, "__qualname__", None) if own else f"{type(obj).__qualname__}<object>"
    path = _norm(f"{getattr(obj, '__module__', None) or 'python'}.{name or type(obj).__name__}")
    register(kind, path)
    _bound[path] = obj
    return path


def is_bound(path: str) -> bool:
    """Whether this process holds the object a path names (handed to the API): no import rebuilds it."""
    return _norm(path) in _bound


def trust(cfg: Any) -> None:
    """Declare `cfg` the live config of the command being run (the user's own): its `_target_`s and its
    `plugins:` lists are allowed until the next `trust`. Never call it on a config read from disk."""
    _live.clear()  # a refused config leaves nothing of the previous command's allowed
    c = _plain(cfg) or {}
    live: dict[str, set[str]] = defaultdict(set)
    live[ANY].update(_norm(t) for t in targets({k: v for k, v in dict(c).items() if k != "plugins"}))
    for entry in c.get("objectives") or []:  # a user metric function: `objectives=[{name, fn: pkg.mod.f}]`
        if isinstance(entry, Mapping) and isinstance(entry.get("fn"), str):
            live["objective"].add(_norm(entry["fn"]))
    plugins = c.get("plugins") or {}
    if not isinstance(plugins, Mapping):
        raise PluginError(f"plugins = {plugins!r} is invalid; allowed: a mapping kind -> [module.Class, ...] "
                          f"with kind in {', '.join(kinds())}")
    for kind, paths in plugins.items():
        paths = [paths] if isinstance(paths, str) else paths
        if not isinstance(paths, (list, tuple)) or not all(isinstance(p, str) for p in paths):
            raise PluginError(f"plugins.{kind} = {paths!r} is invalid; allowed: a list of import paths")
        if kind != MODULES:
            live[str(kind)].update(_norm(p) for p in paths)
    _live.update(live)
    load_installed()
    mods = plugins.get(MODULES)  # a string or a list: the paths were checked above
    load_modules([_norm(p) for p in ([mods] if isinstance(mods, str) else list(mods or []))], where="plugins.modules")


def _entry_points() -> list[Any]:
    from importlib.metadata import entry_points

    return sorted(entry_points(group=ENTRY_GROUP), key=lambda ep: ep.name)


def entry_point_modules() -> list[str]:
    """The modules installed packages declare in the `forge.plugins` entry-point group, sorted by name."""
    return [ep.module for ep in _entry_points()]


class InstalledPluginWarning(UserWarning):
    """An installed plug-in package failed to import: skipped, so a command that does not use it still runs."""


def load_installed() -> list[str]:
    """Import every installed `forge.plugins` entry point once. One that fails to import (a package written
    against an older Forge) is skipped with one warning naming the entry point and its distribution: it stops no
    command that does not use it, and one that does (a run recording it) is refused naming why (`broken`)."""
    import warnings

    for ep in _entry_points():
        if ep.module in _modules or ep.module in _broken:
            continue
        try:
            importlib.import_module(ep.module)
        except Exception as e:  # noqa: BLE001 (someone else's package, any error: it must not stop this command)
            dist = f"{ep.dist.name} {ep.dist.version}" if getattr(ep, "dist", None) else "an unknown distribution"
            why = (str(e).strip().splitlines() or [""])[0][:200]
            _broken[ep.module] = (f"installed plug-in {ep.module!r} (entry point {ep.name!r} of {ENTRY_GROUP!r}, from "
                                  f"{dist}) cannot be imported ({type(e).__name__}: {why})")
            fix = f"pip uninstall {ep.dist.name}" if getattr(ep, "dist", None) else "uninstall it"
            warnings.warn(f"{_broken[ep.module]}: skipped; fix it or `{fix}` (a command that needs it says so)",
                          InstalledPluginWarning, stacklevel=2)
            continue
        _modules.append(ep.module)
    return list(_modules)


def broken() -> dict[str, str]:
    """module -> why: the installed plug-ins that failed to import in this process (load_installed)."""
    return dict(_broken)


def load_modules(names: list[str], where: str = "forge.plugins.load_modules") -> list[str]:
    """Import each plug-in module once (a gene registers itself on import); a missing one is one line naming
    `where` it was asked for (the command's `plugins.modules`, or the Python call)."""
    for name in names:
        if name in _modules:
            continue
        try:
            importlib.import_module(name)
        except ImportError as e:
            raise PluginError(f"{where}: {name!r} cannot be imported ({type(e).__name__}: {e}); allowed: "
                              "an importable module (on PYTHONPATH or installed)") from None
        _modules.append(name)
    return list(_modules)


def live_paths() -> list[str]:
    """The import paths the live config names (its `_target_`s and objective functions), sorted: what a run made
    from it uses (forge.shell.plugin_use), the `plugins.<kind>` lists (what it merely allows) left out."""
    return sorted({*_live.get(ANY, ()), *_live.get("objective", ())})


def used() -> list[str]:
    """The plug-in modules this process imported (what a run records in its folder)."""
    return list(_modules)


def trust_file(node: Any) -> None:
    """A config file the user named in the command they launched (`models=[mine.yaml]`, a space YAML): its
    `_target_`s are theirs to run, as if written in the live config. Never for a file found inside a run folder."""
    _live.setdefault(ANY, set()).update(_norm(t) for t in targets(_plain(node) or {}))


def kinds() -> list[str]:
    return sorted({*shipped(), *_registered, *_live} - {ANY, MODULES})


def _plain(cfg: Any) -> Any:
    """A config as plain containers, interpolations left as written (a live config may name Hydra's runtime)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    return OmegaConf.to_container(cfg, resolve=False) if isinstance(cfg, (DictConfig, ListConfig)) else cfg


def allowed(kind: str) -> list[str]:
    """Every path a `kind` plug-in may name now, sorted."""
    return sorted({*shipped().get(kind, ()), *_registered.get(kind, ()), *_live.get(kind, ()), *_live.get(ANY, ())})


def _in_plugin_module(name: str) -> bool:
    """A class or function defined in a plug-in module this process imported (plugins.modules or an entry point):
    a module the user named to run is theirs, everything in it included."""
    return any(name.rpartition(".")[0] == m or name.startswith(f"{m}.") for m in _modules)


def check(kind: str, path: Any) -> str:
    """`path` normalized if it is an allowed `kind` plug-in; else PluginError naming it and what is allowed."""
    name = _norm(path) if isinstance(path, str) else None
    if name is None or (name not in allowed(kind) and not _in_plugin_module(name)):
        ours = ", ".join(sorted({*shipped().get(kind, ()), *_registered.get(kind, ())})) or "none"
        raise PluginError(f"{path!r} is not an allowed {kind} plug-in (a saved run, store, genome file or export "
                          f"never names code to run); allowed: {ours}, or your own class named in the config you "
                          f"launch (plugins.{kind}=[module.Class])")
    return name


KEY_KIND = {"backend": "backend", "space": "space", "evaluator": "surrogate", "surrogate": "surrogate",
            "dispatch": "dispatch", "corpus": "corpus", "protocol": "protocol"}  # a config key -> its plug-in kind


def check_all(node: Mapping[str, Any]) -> None:
    """Every `_target_` in a config read from disk (a run's saved config) is an allowed plug-in of some kind:
    refused in one line, naming the kind its key holds, before any part of it is built."""
    for key, value in dict(to_container(node)).items():
        for t in targets(value):
            if not _in_plugin_module(_norm(t)) and not any(_norm(t) in allowed(k) for k in kinds()):
                check(KEY_KIND.get(str(key), str(key)), t)  # raises, naming the path


def resolve(kind: str, path: Any) -> Any:
    """The class (or function) at `path`, imported only once `check` allows it."""
    name = check(kind, path)
    if name in _bound:
        return _bound[name]
    module, _, attr = name.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as e:
        raise PluginError(f"{kind} {name!r} cannot be imported ({type(e).__name__}: {e}); "
                          f"allowed: {', '.join(allowed(kind))}") from None


def instantiate(kind: str, node: Mapping[str, Any], **kwargs: Any) -> Any:
    """`hydra.utils.instantiate(node, **kwargs)` once its `_target_` is an allowed `kind` and every nested
    `_target_` (which Hydra would instantiate recursively) is allowed as some kind."""
    from hydra.utils import instantiate as hydra_instantiate

    node = dict(to_container(node))
    check(kind, node.get("_target_"))
    for t in list(targets({k: v for k, v in node.items() if k != "_target_"})):
        if not _in_plugin_module(_norm(t)) and not any(_norm(t) in allowed(k) for k in {*kinds(), kind}):
            check(kind, t)  # raises, naming the nested path
    return hydra_instantiate(node, **kwargs)


def checked_factory(factory: Any, where: str, supplied: tuple[str, ...] = ("protocol", "corpus", "store")) -> Any:
    """A dispatch node instantiated as a partial (`_partial_=True`), its options checked against the class's
    signature before it is called: an unknown key, `_args_` or an option the caller supplies itself (`protocol`,
    ...) in a config, a saved one included, is bad input named in one line, not a TypeError from its __init__."""
    import inspect

    func, given = getattr(factory, "func", None), dict(getattr(factory, "keywords", None) or {})
    if func is None:
        return factory
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):  # a builtin without a signature: nothing to check against
        return factory
    open_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    named = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n not in supplied]
    bad = [k for k in given if k in supplied or (k not in params and not open_kw)]
    if getattr(factory, "args", ()):
        bad.insert(0, "_args_")
    if bad:
        raise PluginError(f"{where}: {', '.join(bad)} is not an option of {func.__name__}; allowed: "
                          f"{', '.join(named) or 'no options'} (named, no _args_)")
    missing = [n for n in named if params[n].default is params[n].empty and n not in given]
    if missing:
        raise PluginError(f"{where}: {func.__name__} needs {', '.join(missing)}; allowed: {', '.join(named)}")
    return factory
