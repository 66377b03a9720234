"""What a model hook needs in the HF export: its source and that of every helper it uses, or why it cannot ship.

The exported `modeling_forge.py` imports only torch and transformers (it loads where forge is not installed), and
holds forge/lm/model.py's definitions. A model hook (forge.lm.hooks) is written there verbatim with what it names from
its module: functions and classes defined there (their own needs too), plain constants, and imports of torch,
numpy or the standard library. A name that is none of these (a class from another package of the user's, a
forge module other than forge.lm.model) cannot be exported: `check_exportable` refuses the hook when it is
registered, naming the name and why, so `forge-export format=hf` never fails half-way.
"""
from __future__ import annotations

import ast
import inspect
import sys
import textwrap
import types
from typing import Any, Callable, Iterable

from forge.lm.hook_lists import HookError
from forge.plugins import PluginError

SHIPPED = ("torch", "numpy")  # packages an exported model may import besides the standard library
CONSTANTS = (int, float, str, bool, bytes, type(None))


def _names(obj: Any) -> list[str]:
    """Names `obj`'s source reads (functions, classes: bodies, bases and decorators), in order of appearance."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(obj)))
    seen: dict[str, None] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            seen.setdefault(node.id, None)
    return list(seen)


def _model_names() -> dict[str, Any]:
    """What the exported file defines before the hooks: forge.lm.model's top-level names (torch, nn, F, math...)."""
    import forge.lm.model

    return vars(forge.lm.model)


def _constant(v: Any) -> bool:
    return isinstance(v, CONSTANTS) or (isinstance(v, tuple) and all(_constant(x) for x in v))


def _shippable_module(m: types.ModuleType) -> bool:
    top = m.__name__.split(".")[0]
    return top in SHIPPED or top in sys.stdlib_module_names


def needs(fn: Callable) -> dict[str, str]:
    """name -> the source line(s) that define it in the export, for `fn` and everything it uses from its module,
    dependencies first (`fn` itself last). Raises HookError naming a name that cannot ship."""
    out: dict[str, str] = {}
    model = _model_names()

    def visit(obj: Any, name: str, where: str) -> None:
        if name in out:
            return
        out[name] = ""  # placed: a recursive helper ends here
        env = vars(sys.modules[obj.__module__])
        for n in _names(obj):
            if n in out or n == name or n not in env:
                continue  # placed already, or a builtin or local name (arguments, assignments)
            add(env[n], n, f"{where} uses {n}")
        out.pop(name)
        out[name] = textwrap.dedent(inspect.getsource(obj))

    def add(v: Any, n: str, why: str) -> None:
        if model.get(n, object()) is v:
            return  # forge.lm.model's own name: already in the export
        if isinstance(v, types.ModuleType) and _shippable_module(v):
            out[n] = f"import {v.__name__}" + ("" if n == v.__name__ else f" as {n}")
        elif _constant(v):
            out[n] = f"{n} = {v!r}"
        elif isinstance(v, (type, types.FunctionType)) and v.__module__ == fn.__module__:
            visit(v, n, why)
        elif any(v is x for x in model.values()):
            out[n] = f"{n} = {next(k for k, x in model.items() if x is v)}"
        else:
            what = v.__name__ if isinstance(v, types.ModuleType) else f"{type(v).__name__} from " \
                   f"{getattr(v, '__module__', None) or 'elsewhere'}"
            raise HookError(f"model hook {fn.__module__}.{fn.__qualname__} cannot be exported: {why} ({what}), "
                            f"which a process without {fn.__module__} cannot import; allowed in a model hook: torch, "
                            f"numpy, the standard library, forge.lm.model's names, and functions, classes and constants "
                            f"defined in {fn.__module__} before the hook is registered")

    try:
        visit(fn, fn.__name__, f"{fn.__name__}")
    except (OSError, TypeError) as e:  # no source: typed in a console, or a builtin/compiled callable
        raise HookError(f"model hook {fn.__module__}.{fn.__qualname__} cannot be exported: its source is not "
                        f"available ({e}); allowed: a hook defined in a module file") from None
    return out


def check_exportable(fn: Callable, others: Iterable[Callable]) -> None:
    """Refuse a model hook whose export would fail or clash: a name it cannot ship, or a helper of the same name
    as another hook's (or forge.lm.model's) that is a different definition."""
    mine = needs(fn)
    model = _model_names()
    taken = {n: (src, h) for h in others for n, src in needs(h).items()}
    for n, src in mine.items():
        if n in taken and taken[n][0] != src:
            raise HookError(f"model hook {fn.__module__}.{fn.__qualname__} cannot be exported beside "
                            f"{taken[n][1].__module__}: both define {n!r} differently; allowed: distinct names")
        if n in model and not src.startswith(("import ", f"{n} = ")):
            raise HookError(f"model hook {fn.__module__}.{fn.__qualname__} defines {n!r}, a name forge.lm.model uses; "
                            "allowed: another name (the export holds both in one file)")


def export_source(hooks: Iterable[Callable]) -> str:
    """The exported file's hook section: every helper once, then each hook appended to Block.hooks in run order."""
    parts: dict[str, str] = {}
    hooks = list(hooks)
    for h in hooks:
        for n, src in needs(h).items():
            parts.setdefault(n, src)
    body = "\n\n".join(parts.values())
    return body + "\n\n" + "".join(f"Block.hooks.append({h.__name__})\n" for h in hooks)
