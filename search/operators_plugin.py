"""The search's operators as plug-ins: sampling, crossover, mutation and repair, each chosen by `_target_` (issue 55).

`search.crossover`, `search.mutation`, `search.repair` (and `search.sampling` beside its `uniform` / genome forms)
each take a name from the config group conf/search/<kind>/ (`search.mutation=llmforge`), or a node
`{_target_: mypkg.ops.SwapMutation, ...options}`: a pymoo Crossover / Mutation / Repair / Sampling, built with its
options and `space=` the run's SearchSpace when its signature takes it. The forms runs saved before hold stay
theirs: a number for `search.crossover` is the paper's layer crossover at that probability, a mapping without
`_target_` for `search.mutation` the paper's four-operator mutation with those probabilities.

A run records each operator that is not Forge's own in its checkpoint, with a hash of its module's source
(`code_record`); a resume whose operator cannot be imported is refused where it is built (forge.plugins.check),
and one whose code differs from the recorded hash is refused before anything is restored (`check_code`).
"""
from __future__ import annotations

import copy
import hashlib
import inspect
import sys
from dataclasses import dataclass, field
from typing import Any, Mapping

from pymoo.core.crossover import Crossover
from pymoo.core.mutation import Mutation
from pymoo.core.repair import Repair
from pymoo.core.sampling import Sampling

from forge import plugins
from forge.runtime.config import group_names, group_yaml
from search.errors import ResumeError, SearchConfigError

KINDS: dict[str, type] = {"sampling": Sampling, "crossover": Crossover, "mutation": Mutation, "repair": Repair}
PLUGIN_KIND = "operator"  # forge.plugins kind: `plugins.operator=[mypkg.ops.SwapMutation]` allows one on resume
LEGACY = {"crossover": "layer", "mutation": "llmforge"}  # what a saved number / target-less mapping means
SAMPLING_FORMS = "uniform, a genome file or data/archs name, or {_target_: ...}"
OURS = ("search.", "forge.", "pymoo.")  # modules whose operators are Forge's or pymoo's own (never hashed)


@dataclass(frozen=True)
class OperatorSpec:
    """A settled operator node, typed: what `build_operator` builds and a checkpoint records."""

    target: str
    options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, node: Mapping[str, Any]) -> "OperatorSpec":
        return cls(str(node["_target_"]), {k: copy.deepcopy(v) for k, v in node.items() if k != "_target_"})


def shipped_node(kind: str, name: str) -> dict[str, Any] | None:
    """conf/search/<kind>/<name>.yaml (its `_target_` allowed as an operator plug-in), None when there is none."""
    node = group_yaml(f"search/{kind}", name)
    if isinstance(node, Mapping) and isinstance(node.get("_target_"), str):
        plugins.register(PLUGIN_KIND, node["_target_"])
        return dict(node)
    return None


def register_shipped() -> None:
    """Allow every shipped operator's `_target_` (a saved run names them: never code the run folder chose)."""
    for kind in KINDS:
        for name in group_names(f"search/{kind}"):
            shipped_node(kind, name)


def settle_operators(s: dict[str, Any], given: Mapping[str, Any], recipe: Mapping[str, Any]) -> None:
    """Each operator of the search section `s` settled in place as a full node, over the recipe's: a name read from
    conf/search/<kind>/, a node with the recipe's `_target_` merged over it (one level, as Hydra composes), a legacy
    form read as `LEGACY` says (`sampling`'s plain strings stay); its probabilities (`prob`, `rate`, `p_*`) checked
    in [0, 1] and `max_step` >= 1, named as the user wrote them."""
    for kind in KINDS:
        value, default = s.get(kind), recipe.get(kind)
        default = _named(kind, default) if isinstance(default, str) and kind != "sampling" else default
        value = default if value is None else value
        if kind == "sampling" and (isinstance(value, str) or value is None):
            continue
        if kind == "crossover" and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = {**_named(kind, LEGACY[kind]), "prob": value}
        elif isinstance(value, str):
            value = _named(kind, value)
        elif not isinstance(value, Mapping):
            raise SearchConfigError(f"search.{kind} = {value!r} is invalid; allowed: {_allowed(kind)}")
        elif "_target_" not in value:  # the pre-plug-in form, or a partial override of the default
            value = {**(_named(kind, LEGACY[kind]) if kind in LEGACY else dict(default or {})), **value}
        elif isinstance(default, Mapping) and default.get("_target_") == value["_target_"]:
            value = {**copy.deepcopy(dict(default)), **value}
        s[kind] = value = dict(value)
        number = not isinstance(given.get(kind), (Mapping, str, type(None)))  # search.crossover=0.7: its prob
        for k, v in value.items():
            key = f"search.{kind}" if number and k == "prob" else f"search.{kind}.{k}"
            if (k in ("prob", "rate") or k.startswith("p_")) and not (
                    isinstance(v, (int, float)) and not isinstance(v, bool) and 0.0 <= float(v) <= 1.0):
                raise SearchConfigError(f"{key}={v!r} is out of range; allowed: a probability in [0, 1]")
            if k == "max_step" and not (isinstance(v, int) and not isinstance(v, bool) and v >= 1):
                raise SearchConfigError(f"{key}={v!r} is out of range; allowed: an integer >= 1")


def _named(kind: str, name: str) -> dict[str, Any]:
    node = shipped_node(kind, name)
    if node is None:
        raise SearchConfigError(f"search.{kind} = {name!r} is unknown; allowed: {_allowed(kind)}")
    return copy.deepcopy(node)


def _allowed(kind: str) -> str:
    names = " | ".join(group_names(f"search/{kind}"))
    return (SAMPLING_FORMS if kind == "sampling" else names) + " (conf/search/" + kind + "/), or {_target_: ...}"


def build_operator(kind: str, spec: OperatorSpec, space: Any) -> Any:
    """The operator `spec` names, checked: an allowed plug-in, options its signature takes, the right pymoo base
    class. `space` is passed when its signature takes it."""
    register_shipped()
    try:
        factory = plugins.resolve(PLUGIN_KIND, spec.target)
    except plugins.PluginError as e:
        raise SearchConfigError(f"search.{kind}: {e}") from None
    params, open_kw = _signature(factory)
    bad = [k for k in spec.options if k == "space" or (k not in params and not open_kw)]
    if bad:
        raise SearchConfigError(f"search.{kind}: {', '.join(bad)} is not an option of {spec.target}; allowed: "
                                f"{', '.join(p for p in params if p != 'space') or 'no options'}")
    op = factory(**({"space": space} if "space" in params or open_kw else {}), **spec.options)
    if not isinstance(op, KINDS[kind]):
        raise SearchConfigError(f"search.{kind}: {spec.target} made a {type(op).__name__}, not a pymoo "
                                f"{KINDS[kind].__name__}; allowed: a class or function returning one")
    return op


def _signature(factory: Any) -> tuple[list[str], bool]:
    try:
        ps = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return [], True
    named = [n for n, p in ps.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return named, any(p.kind is p.VAR_KEYWORD for p in ps.values())


def code_record(specs: Mapping[str, OperatorSpec]) -> dict[str, dict[str, str]]:
    """{kind: {"_target_", "sha256" of its module's source}} for each operator that is not Forge's or pymoo's own."""
    return {kind: {"_target_": sp.target, "sha256": _source_hash(sp.target)} for kind, sp in specs.items()
            if not sp.target.startswith(OURS)}


def _source_hash(target: str) -> str:
    from forge.shell.plugin_use import module_of

    module = sys.modules.get(module_of(target) or "")
    try:
        source = inspect.getsource(module) if module is not None else ""
    except (OSError, TypeError):  # no source file (a notebook's cell): the target alone is compared
        source = ""
    return hashlib.sha256(source.encode()).hexdigest() if source else "unknown"


def check_code(recorded: Mapping[str, Any] | None, live: Mapping[str, Any], where: str) -> None:
    """Refuse a resume whose operators differ from those its checkpoint recorded (another target, or the same
    target whose module's source changed): the rest of the run would be searched by other code, unsaid. A
    checkpoint from before operators were recorded (`recorded` None) ran Forge's own."""
    if recorded is None:
        recorded = {}
    for kind in sorted({*(recorded or {}), *live}):
        was, now = (recorded or {}).get(kind), live.get(kind)
        if was == now:
            continue
        before, after = ((x or {}).get("_target_", "Forge's own") for x in (was, now))
        what = (f"{before}'s source changed since the run was made" if before == after
                else f"the run used {before}, this resume {after}")
        raise ResumeError(f"{where}: refused: its search.{kind} operator differs ({what}); allowed: resume with the "
                          "operator code the run was made with, or start a new run")


register_shipped()  # a saved run's config names them: `forge-verify run=` checks it (plugins.check_all) before building
