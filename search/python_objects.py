"""Python objects handed to `forge.search` (a space, a function objective, a surrogate object) and how a run made
with them is continued exactly, or refused.

The run's config names each object by what rebuilds it: a space by its fields, a function by its import path, a
surrogate by its class and constructor arguments (scikit-learn's `get_params()`, else the attributes its
`__init__` arguments are stored under, checked by building it again), so `forge-search resume=<run>` rebuilds the
same surrogate and fits it on the same labels. What no command can rebuild is said when the search starts and
refused in one line by a command: a function or class defined in `__main__` (the user's script or notebook) or
inside a function, a surrogate whose arguments cannot be read back (`_object_: <why>` in its config node), or one
that arrived fitted (its fitted state is not saved, never pickled). Such a run continues from Python, handed the
same objects again: `forge.search(resume=<run>, evaluator={"predictor": <the same object>})`.
"""
from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from forge.shell.plugin_use import python_only

OBJECT = "_object_"  # in a surrogate's config node: why no command can rebuild it (refused, never built)
PART = {"space": "space", "evaluator": "predictor", "backend": "backend"}  # a config key -> the part an object fills


def _plain(v: Any) -> bool:
    if v is None or type(v) in (bool, int, float, str):
        return True
    if isinstance(v, (list, tuple)):
        return all(_plain(x) for x in v)
    return isinstance(v, dict) and all(isinstance(k, str) and _plain(x) for k, x in v.items())


def _read(obj: Any) -> tuple[dict[str, Any] | None, str]:
    """The constructor arguments `obj` keeps (get_params(deep=False), else an attribute per `__init__` argument)."""
    cls = type(obj)
    if callable(getattr(obj, "get_params", None)):
        try:
            args = dict(obj.get_params(deep=False))
        except TypeError:
            args = dict(obj.get_params())
    else:
        params = [p for p in inspect.signature(cls).parameters.values()]
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
            return None, f"{cls.__name__}.__init__ takes *args/**kwargs and it has no get_params()"
        missing = [p.name for p in params if not hasattr(obj, p.name)]
        if missing:
            return None, f"it keeps no attribute {missing[0]!r} for its __init__ argument and has no get_params()"
        args = {p.name: getattr(obj, p.name) for p in params}
    bad = [k for k, v in args.items() if not _plain(v)]
    if bad:
        return None, f"its argument {bad[0]!r} is a {type(args[bad[0]]).__name__}, not a plain value"
    return json.loads(json.dumps(args)), ""  # as YAML holds them: tuples as lists


def constructor_args(obj: Any) -> tuple[dict[str, Any] | None, str]:
    """(the arguments that build `obj` again, "") or (None, why not): read, then checked by building the class
    again from them and reading the same arguments back."""
    args, why = _read(obj)
    if args is None:
        return None, why
    try:
        again, _ = _read(type(obj)(**args))
    except Exception as e:  # noqa: BLE001  (the user's class; any failure means: cannot be rebuilt)
        return None, f"{type(obj).__name__}(**arguments) fails ({type(e).__name__})"
    if again != args:
        return None, f"{type(obj).__name__} built again from its arguments reads back other ones"
    return args, ""


def surrogate_node(obj: Any, path: str, labels: Any) -> dict[str, Any]:
    """The config node that rebuilds a surrogate object: its class and arguments, or `_object_` saying why none
    can (it arrived fitted: without evaluator.labels the search does not fit it, so a rebuild would differ)."""
    if not labels:
        return {"_target_": path, OBJECT: "it arrived fitted (no evaluator.labels), and its fitted state is not saved"}
    args, why = constructor_args(obj)
    return {"_target_": path, **args} if args is not None else {"_target_": path, OBJECT: why}


def needs_python(cfg: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(config key, what, why) for each part of a run's config that no command can rebuild."""
    out = []
    for o in cfg.get("objectives") or []:
        if isinstance(o, Mapping) and isinstance(o.get("fn"), str) and python_only(o["fn"]):
            why = "is a callable object, not a function" if "<object>" in o["fn"] else "is defined in your script"
            out.append(("objectives", f"objective {o.get('name')}", f"{o['fn']} {why}"))
    for key in PART:
        node = cfg.get(key)
        node = node.get("predictor") if key == "evaluator" and isinstance(node, Mapping) else node
        if isinstance(node, Mapping) and isinstance(node.get("_target_"), str):
            what = f"{'surrogate' if key == 'evaluator' else key} {node['_target_']}"
            if python_only(node["_target_"]):
                out.append((key, what, "it is defined in your script"))
            elif node.get(OBJECT):
                out.append((key, what, str(node[OBJECT])))
    return out


def python_resume(run_dir: Any, missing: Sequence[tuple[str, str, str]]) -> str:
    """How to continue from Python: the same objects handed again for each key that needs one."""
    args = ", ".join(dict.fromkeys("evaluator={'predictor': <the same object>}" if k == "evaluator" else
                                   f"{k}=<the same {k}>" for k, _, _ in missing))
    return f"forge.search(resume={str(run_dir)!r}, {args})"


def check_resumable_here(saved: Mapping[str, Any], parts: Mapping[str, Any], run_dir: Any) -> None:
    """Refuse, in one line, a resume that would rebuild a Python object it cannot: unless this call hands the
    same objects again (a function bound in this process counts as handed)."""
    from forge import plugins
    from search.state import ResumeError

    missing = [m for m in needs_python(saved) if not _handed(m[0], saved, parts, plugins)]
    if missing:
        _, what, why = missing[0]
        raise ResumeError(f"resume={run_dir} refused: the run was made from Python with {what}, which no command can "
                          f"rebuild ({why}); allowed: continue it from Python with the same objects: "
                          f"{python_resume(run_dir, missing)}")


def _handed(key: str, saved: Mapping[str, Any], parts: Mapping[str, Any], plugins: Any) -> bool:
    if key == "objectives":
        fns = [o["fn"] for o in saved.get("objectives") or [] if isinstance(o, Mapping) and isinstance(o.get("fn"), str)]
        return all(plugins.is_bound(f) for f in fns if python_only(f))
    return PART[key] in parts


def start_note(cfg: Mapping[str, Any], run_dir: Any) -> str | None:
    """The line `forge.search` prints when it starts a run that only Python can continue."""
    missing = needs_python(cfg)
    if not missing:
        return None
    what = "; ".join(f"{w} ({why})" for _, w, why in missing)
    return (f"forge.search: no command can rebuild {what}: continue or verify this run from Python, handing the "
            f"same objects again: {python_resume(run_dir, missing)}")


def objective_entry(o: Any) -> Any:
    """An objectives entry with its function bound (plugins.bind) and named by its import path; a
    `functools.partial` of a function with keyword arguments is that function with `params`."""
    import functools

    from forge import plugins

    if isinstance(o, Mapping) and callable(o.get("fn")):
        fn, params = o["fn"], dict(o.get("params") or {})
        if isinstance(fn, functools.partial) and not fn.args:
            fn, params = fn.func, {**fn.keywords, **params}
        return {**o, "fn": plugins.bind("objective", fn), **({"params": params} if params else {})}
    if callable(o):
        name = getattr(o, "__name__", None) or getattr(getattr(o, "func", None), "__name__", type(o).__name__)
        return objective_entry({"name": name, "fn": o})
    return o


def split_objects(space: Any, objectives: Sequence[Any] | None,
                  values: dict[str, Any]) -> tuple[Any, list[Any] | None, dict[str, Any], dict[str, Any]]:
    """Python objects out of `forge.search`'s arguments, into the search's parts; the config keeps what rebuilds
    them (the space's own config node, the function's import path, the surrogate's class and arguments)."""
    from forge import plugins
    from forge.spaces.space import SearchSpace, space_config

    parts: dict[str, Any] = {}
    if isinstance(space, SearchSpace):
        parts["space"], space = space, space_config(space)
    objs = None if objectives is None else [objective_entry(o) for o in objectives]
    ev = values.get("evaluator")
    pred = ev.get("predictor") if isinstance(ev, Mapping) else None
    if pred is not None and not isinstance(pred, (str, Path, Mapping)):  # a surrogate object
        parts["predictor"], cls = pred, type(pred)
        path = f"{cls.__module__}.{cls.__qualname__}"
        plugins.register("surrogate", path)  # the caller's class: verify or resume in this process may rebuild it
        labels = ev.get("labels") if "labels" in ev or not values.get("resume") else _saved_labels(values["resume"])
        values = {**values, "evaluator": {**ev, "predictor": surrogate_node(pred, path, labels)}}
    return space, objs, values, parts


def given_keys(values: Mapping[str, Any], overrides: Sequence[str] = ()) -> list[str]:
    """The dotted keys a `forge.search` call sets (a mapping without `_target_` spread into its keys): what its
    resume compares with the run's own config, as the command line compares only the keys given again."""
    out: list[str] = []
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, Mapping) and "_target_" not in value and value:
            out += [f"{key}.{k}" for k in given_keys(value)]
        else:
            out.append(str(key))
    return out + [str(o).split("=", 1)[0] for o in ([overrides] if isinstance(overrides, str) else overrides or ())]


def _saved_labels(run_dir: Any) -> Any:
    """The labels the resumed run fits its surrogate on (its own config's); None where it has none to read (the
    resume itself then says what is wrong with the folder)."""
    from search.state import ResumeError, saved_config

    try:
        return (saved_config(Path(str(run_dir))).get("evaluator") or {}).get("labels")
    except (ResumeError, OSError, AttributeError):
        return None
