"""Argument checks of the Python API (search.api): a call refuses what its command refuses, in the same words.

The CLI composes in Hydra's struct mode, so a misspelled key is refused; the API merges Python values into
the composed config, so without these checks `forge.search(seeds=3, search={"pop_sise": 4})` would run with
the defaults and save the typos. Here every value is checked against the composed config before it is merged:
an unknown key names the closest valid one, a value has its default's type and its key's range
(forge.runtime.limits), and one string stands for a one-item list where a list is expected. Every refusal is a
`forge.errors.ForgeError` (`UserError`, `RangeError`); `api_errors` turns Hydra's, OmegaConf's and file errors
raised inside a call into the one-line `UserError` the CLI prints.
"""
from __future__ import annotations

import difflib
import functools
import os
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

from forge.shell.app import describe_error
from forge.runtime.config import type_problem
from forge.errors import ForgeError, UserError
from forge.runtime.limits import check_range

F = TypeVar("F", bound=Callable[..., Any])
# keys the code reads that the shipped YAML leaves out (the CLI adds them with `+key=`): any value is theirs
OPTIONAL = {"plugins", "evaluator.trainer", "evaluator.quant_penalty"}


def api_errors(fn: F) -> F:
    """A Hydra/OmegaConf config error or an OS error naming a file, raised inside an API call, as the one-line
    UserError the CLI prints for it; the ForgeError family passes through; anything else is a bug, unchanged."""
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        check_arguments(fn, args, kwargs)
        try:
            return fn(*args, **kwargs)
        except ForgeError as e:
            said = _in_callers_words(str(e), fn.__name__)
            if said == str(e):
                raise
            raise UserError(said) from None
        except Exception as e:
            from hydra.errors import HydraException
            from omegaconf.errors import OmegaConfBaseException

            if isinstance(e, (HydraException, OmegaConfBaseException)) or (isinstance(e, OSError) and e.filename):
                raise UserError(_in_callers_words(describe_error(e) or type(e).__name__, fn.__name__)) from None
            raise
    return call  # type: ignore[return-value]


def _in_callers_words(msg: str, name: str) -> str:
    """A message composed for `forge-search`'s config (which forge.cost composes too) names the call made:
    `forge.cost: ...`, not `forge-search: ...`."""
    if name == "search":
        return msg
    for prefix in ("forge-search: ", "In 'forge-search': "):
        if msg.startswith(prefix):
            return f"forge.{name}: {msg[len(prefix):]}"
    return msg


def check_arguments(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """The call's arguments bind to `fn`'s signature, else one line naming the argument and the closest valid one
    (`forge.predict(nmc=2)`: "nmc ... did you mean n_mc"), not Python's TypeError."""
    import inspect

    sig = inspect.signature(fn)
    try:
        sig.bind(*args, **kwargs)
    except TypeError as e:
        names = [n for n, p in sig.parameters.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        unknown = [k for k in kwargs if k not in sig.parameters]
        close = difflib.get_close_matches(unknown[0], names, n=1) if unknown else []
        what = f"{unknown[0]}={kwargs[unknown[0]]!r} is not an argument" if unknown else str(e)
        raise UserError(f"forge.{fn.__name__}: {what}"
                        f"{f' (did you mean {close[0]}?)' if close else ''}; allowed: {', '.join(names)}") from None


def as_list(key: str, value: Any) -> list[Any] | None:
    """A list argument: None stays None, one string is a one-item list, other sequences become lists."""
    if value is None:
        return None
    if isinstance(value, (str, Mapping)):
        return [value]
    if isinstance(value, (list, tuple)):
        return list(value)
    raise UserError(f"{key}={value!r} is invalid; allowed: a list (or one string for a single item)")


def check_choice(key: str, value: Any, allowed: tuple[str, ...] | list[str]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise UserError(f"{key}={value!r} is invalid; allowed: {' | '.join(allowed)}")
    return value


def check_number(key: str, value: Any, low: float, high: float) -> float:
    """A real number in the open interval (low, high), else a UserError naming `key`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low < float(value) < high:
        raise UserError(f"{key}={value!r} is out of range; allowed: a number in ({low:g}, {high:g})")
    return float(value)


def check_path(key: str, value: Any) -> Path:
    if isinstance(value, bool) or not isinstance(value, (str, os.PathLike)) or not str(value):
        raise UserError(f"{key}={value!r} is invalid; allowed: a folder path (str or pathlib.Path)")
    return Path(value)


def check_group(key: str, value: Any, groups: tuple[str, ...]) -> None:
    """A config group takes a config name or a mapping (a `_target_` node, or options merged into the choice)."""
    if key in groups and value is not None and not isinstance(value, (str, Mapping)):
        raise UserError(f"{key}={value!r} is invalid; allowed: a config name in conf/{key}/ (a string) or a mapping")


def check_values(app: str, cfg: Mapping[str, Any], values: Mapping[str, Any]) -> None:
    """Every key of `values` exists in the composed config `cfg` (plain) and has its default's type and range."""
    for key, value in values.items():
        if value is not None:
            _check(app, cfg, key, value, key)


def _check(app: str, node: Mapping[str, Any], key: str, value: Any, path: str) -> None:
    if path in OPTIONAL:
        return
    if key not in node:
        if not node and path.count("."):  # an open mapping (hv.anchor_values, workload overrides): any key
            return
        close = difflib.get_close_matches(str(key), [str(k) for k in node], n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UserError(f"{app}: unknown option {path}={value!r}; {hint}allowed: "
                        f"{', '.join(sorted(str(k) for k in node))}")
    default = node[key]
    if isinstance(value, Mapping):
        if "_target_" in value or not isinstance(default, Mapping):
            return  # a plug-in node replaces the default; its options are its class's to check
        for k, v in value.items():
            _check(app, default, k, v, f"{path}.{k}")
        return
    problem = type_problem(default, value)
    if problem:
        raise UserError(f"{path}={value!r} is not {problem}; allowed: {problem} (default {default!r})")
    check_range(app, path, value)
