"""Block.hooks and OP_HOOKS: the lists forge.lm.hooks fills, in its one declared order, and nothing else.

Before `hooks.hook()` a plug-in appended its functions straight onto `forge.lm.model.Block.hooks` and
`forge.lm.workload.OP_HOOKS`, which bypassed the order two plug-ins on one operator must declare; a `HookList`
refuses any such change, naming the call to make instead. Apart from forge.lm.hooks so the workload (no torch)
and the model can hold one without importing the registry; HookError lives here for the same reason.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from forge.plugins import PluginError


class HookError(PluginError):
    """Plug-in hooks that cannot run together, cannot be exported, or disagree between model and workload."""


class HookList(list):
    """Block.hooks / OP_HOOKS: read like a list, filled only by `hook()` (in one declared order); any other change
    is refused naming the call to make instead."""

    def __init__(self, where: str, items: Sequence[Callable] = ()) -> None:
        super().__init__(items)
        self.where = where

    def _refuse(self, *_: Any, **__: Any) -> None:
        raise HookError(f"{self.where} is filled by forge.lm.hooks only, in one declared order (a function put there "
                        "directly bypasses it); allowed: forge.lm.hooks.hook('mlp', model=my_block, workload=my_ops, "
                        "after=[...]) at the end of your plug-in module")

    append = extend = insert = remove = pop = clear = sort = reverse = __setitem__ = __delitem__ = _refuse
    __iadd__ = __imul__ = _refuse  # type: ignore[assignment]

    def _set(self, items: Sequence[Callable]) -> None:
        list.__setitem__(self, slice(None), list(items))


def guard(cls: Any) -> None:
    """`cls.hooks` (forge.lm.model.Block's plain list, kept plain in its HF-exported copy) as a HookList."""
    if not isinstance(cls.hooks, HookList):
        cls.hooks = HookList(f"{cls.__module__}.{cls.__qualname__}.hooks", cls.hooks)
