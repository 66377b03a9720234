"""Plug-in hooks: a gene's meaning in the model and its count in the workload, registered together, in one order.

A plug-in module gives its gene a meaning with one call at the end of the module (after its helpers):

    hooks.hook("mlp", model=glu_block, workload=glu_ops)                            # tests/ext/genes.py
    hooks.hook("mlp", model=off_block, workload=off_ops, after=["tests.ext.genes"])  # tests/ext/off.py

`model(block, cfg, gene)` runs at the end of `forge.lm.model.Block.__init__` (it may add or replace modules of the
block); `workload(pop, terms)` runs at the end of `forge.lm.workload.layer_ops` and re-declares the operators it
changes (`terms`: `WORKLOAD_TERMS`). Two modules that hook one operator run in the order they declare (`after=`
names the modules whose hooks run first); when neither declares it the second is refused at registration, naming
both, since the model and the workload would compose them differently. Hooks of every operator run in one order,
the same in the model, the workload and the HF export.

A model hook ships in the HF export (`forge-export format=hf`), so it must be self-contained: it may use torch,
numpy, the standard library, forge.lm.model's own names and the functions, classes and constants defined in its
module (exported with it, `forge.lm.hook_export`); anything else is refused when the hook is registered, with why.

`hook()` is the one way in: `Block.hooks` and `OP_HOOKS` are `HookList`s that refuse a direct append (the way
before `hook()`, which bypassed the order), naming the call to make instead.

`check_agreement(genomes)` compares, for a sample of a run's genomes and only when a hook is registered, the
workload's parameter count with the model's (built on the meta device: no memory), then each layer's FLOPs, weight
elements and activation elements per operator (attention, mlp) with those of one forward pass of that model: a hook
with the right parameters but the wrong traffic is one line too.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from forge.lm.hook_export import HookError, check_exportable
from forge.lm.hook_lists import HookList

__all__ = ["HookError", "HookList", "hook", "ordered", "check_agreement", "WORKLOAD_TERMS", "OPERATORS"]
OPERATORS = ("attention", "mlp", "norm", "block")  # what a hook declares it changes
WORKLOAD_TERMS = ("gemm", "elementwise", "scale", "f", "rows", "act", "d", "dm", "ball", "sw")  # `terms`' keys
SAMPLE = 16  # genomes check_agreement builds per run
TRAFFIC = 4  # of them, those whose per-operator traffic it also counts (one meta-device forward pass each)
_AGREED: set = set()  # (genome id, the hooks registered) pairs found to agree in full


@dataclass(frozen=True)
class Hook:
    module: str
    operators: tuple[str, ...]
    model: Callable | None
    workload: Callable | None
    after: tuple[str, ...]


_HOOKS: list[Hook] = []  # in registration order; `ordered()` is the order they run in
_SEEN: set = set()  # every function ever registered here (a replaced one leaves the lists too)


def hook(operators: str | Sequence[str], model: Callable | None = None, workload: Callable | None = None,
         after: Sequence[str] = ()) -> Hook:
    """Register a plug-in module's model hook and workload hook on `operators`; see the module doc."""
    ops = (operators,) if isinstance(operators, str) else tuple(operators)
    bad = [o for o in ops if o not in OPERATORS]
    fns = [f for f in (model, workload) if f is not None]
    if bad or not ops or not fns:
        raise HookError(f"hook({operators!r}): allowed: operators in {', '.join(OPERATORS)} and a model or "
                        "workload function")
    module = fns[0].__module__
    new = Hook(module, ops, model, workload, tuple(after))
    if new in _HOOKS:
        return new
    _HOOKS[:] = [h for h in _HOOKS if _names(h) != _names(new)]  # the module imported again (a reload): replaced
    for old in _HOOKS:
        shared = sorted(set(old.operators) & set(ops))
        if old.module != module and shared and module not in old.after and old.module not in new.after:
            raise HookError(f"plug-in modules {old.module} and {module} both hook the {shared[0]} operator and "
                            f"neither declares which runs first; allowed: hook(..., after=[{old.module!r}]) in "
                            f"{module} (or after=[{module!r}] in {old.module}), or load only one of them")
    if model is not None:
        check_exportable(model, [h.model for h in _HOOKS if h.model is not None])
    _HOOKS.append(new)
    try:
        _apply(ordered())
    except HookError:
        _HOOKS.remove(new)
        raise
    return new


def _names(h: Hook) -> tuple[str, ...]:
    return (h.module, *(getattr(f, "__qualname__", "") for f in (h.model, h.workload)))


def ordered() -> list[Hook]:
    """The registered hooks in run order: each after the modules it names, else in registration order."""
    left, out = list(_HOOKS), []
    while left:
        ready = next((h for h in left if not any(x.module in h.after for x in left if x is not h)), None)
        if ready is None:
            raise HookError(f"plug-in modules {', '.join(sorted({h.module for h in left}))} declare a cycle in "
                            "their after= order; allowed: an order without cycles")
        left.remove(ready)
        out.append(ready)
    return out


def _apply(hooks: list[Hook]) -> None:
    """forge.lm.model.Block.hooks and forge.lm.workload.OP_HOOKS in run order (a function put there directly stays first)."""
    from forge.lm import workload

    _SEEN.update(f for h in _HOOKS for f in (h.model, h.workload) if f is not None)
    ops = [f for f in workload.OP_HOOKS if f not in _SEEN] + [h.workload for h in hooks if h.workload]
    _fill(workload.OP_HOOKS, ops)
    if any(h.model for h in _HOOKS):
        from forge.lm.model import Block

        _fill(Block.hooks, [f for f in Block.hooks if f not in _SEEN] + [h.model for h in hooks if h.model])


def _fill(fns: list, items: list) -> None:
    """A hook list's new content (a plain list a test patched in is set the plain way)."""
    if isinstance(fns, HookList):
        fns._set(items)
    else:
        fns[:] = items


def forget(prefix: str) -> None:
    """Drop the hooks of modules under `prefix` (a test's teardown)."""
    gone = [h for h in _HOOKS if h.module == prefix or h.module.startswith(f"{prefix}.")]
    _HOOKS[:] = [h for h in _HOOKS if h not in gone]
    from forge.lm import workload

    drop = {f for h in gone for f in (h.model, h.workload) if f is not None}
    _fill(workload.OP_HOOKS, [f for f in workload.OP_HOOKS if f not in drop])
    if "forge.lm.model" in sys.modules:
        block = sys.modules["forge.lm.model"].Block
        _fill(block.hooks, [f for f in block.hooks if f not in drop])


def active() -> bool:
    """Whether any plug-in hook changes the model or the workload in this process."""
    from forge.lm import workload

    model = sys.modules.get("forge.lm.model")
    return bool(_HOOKS or workload.OP_HOOKS or (model is not None and model.Block.hooks))


def check_agreement(genomes: Sequence[Any]) -> None:
    """Refuse in one line when the workload and the model disagree for one of `genomes` (at most SAMPLE of them,
    built on the meta device): on the parameter count, and for the first TRAFFIC of them on any layer's FLOPs,
    weight or activation elements per operator (forge.lm.hook_check: a meta-device forward pass, ~0.25 s for a
    40-layer genome, bench/bench_hook_check.py). A genome that agreed under the same hooks is not checked again
    (forge.cost in a loop); free when no plug-in hooks anything."""
    if not active():
        return
    from forge.lm.hook_check import first_difference
    from forge.lm.model import build_model
    from forge.lm.workload import analyze

    key = tuple((h.module, id(h.model), id(h.workload)) for h in ordered())  # a module imported again: new functions
    todo = [g for g in list(genomes)[:SAMPLE] if (g.id, key) not in _AGREED]
    for i, g in enumerate(todo):
        model = build_model(g, device="meta")
        counted, built = analyze(g)["params"], model.num_params()
        why = (f"{counted:,} parameters in the workload but {built:,} in the model" if counted != built
               else first_difference(g, model) if i < TRAFFIC else None)
        if why:
            names = ", ".join(h.module for h in ordered())
            raise HookError(f"plug-in hooks disagree: genome {g.id} has {why} (hooks, in run order: {names}); allowed: "
                            "workload hooks that count what the model hooks build and run, composed in the order "
                            "they declare (after=)")
        if i < TRAFFIC:
            _AGREED.add((g.id, key))
