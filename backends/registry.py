"""Build any backend from its config (`conf/backend/<name>.yaml`, chosen by `_target_`) and resolve the workload.

Nothing here knows the individual backends: a new `conf/backend/*.yaml` (rdxe, a user's accelerator)
plugs in without code changes. `_target_` resolves through `forge.plugins`: a saved run's config can name
only a registered backend class, never arbitrary code.
"""
from __future__ import annotations

import inspect
from typing import Any

from backends.interface import FORMAT_KEYS, Backend, BackendError, Workload
from forge.runtime.config import conf_dir, group_names, is_name, to_container
from forge.plugins import PluginError, resolve

BITS = ("weight_bits", "act_bits", "kv_bits")


def list_backends() -> list[str]:
    return group_names("backend")


def backend_config(name: str) -> dict[str, Any]:
    """The resolved config of a shipped backend, standalone (no top-level hardware group)."""
    from omegaconf import OmegaConf

    path = conf_dir() / "backend" / f"{name}.yaml"
    if not is_name(name) or not path.is_file():  # a name, never a path (`backend: /abs/evil` in a saved run)
        raise BackendError(f"backend {name!r} is unknown; allowed: {', '.join(list_backends())}")
    root = OmegaConf.create({"backend": OmegaConf.load(path)})
    return to_container(root)["backend"]


def build_backend(spec: Any, **overrides: Any) -> Backend:
    """A backend from a name in conf/backend, or a config mapping with `_target_` (plus overrides)."""
    cfg = backend_config(spec) if isinstance(spec, str) else dict(to_container(spec))
    cfg.update(overrides)
    target = cfg.get("_target_")
    if not target:
        raise BackendError(f"backend config has no _target_; allowed backends: {', '.join(list_backends())}")
    try:  # only Forge's own backends or a class the user named in the config they launched (forge.plugins)
        cls = resolve("backend", target)
    except PluginError as e:
        raise BackendError(str(e)) from None
    _check_kwargs(cls, cfg)
    kwargs = {k: v for k, v in cfg.items() if k != "_target_"}
    return cls(**kwargs)


def _check_kwargs(cls: type, cfg: dict[str, Any]) -> None:
    params = inspect.signature(cls).parameters
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return
    bad = sorted(set(cfg) - set(params) - {"_target_"})
    if bad:
        raise BackendError(f"backend.{bad[0]} is not an option of {cls.__name__}; allowed: {', '.join(params)}")
    missing = [n for n, p in params.items() if p.default is p.empty and n not in cfg  # a constructor's TypeError
               and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if missing:
        raise BackendError(f"backend {cls.__name__} needs option {missing[0]!r}, which its config lacks; allowed: "
                           f"set backend.{missing[0]} (see conf/backend/), or a shipped backend: "
                           f"{', '.join(list_backends())}")


def resolve_workload(cfg: Any, backend: Any = None) -> Workload:
    """Workload from config; precision bits left null follow the backend's `default_bits`."""
    d = dict(to_container(cfg) or {})
    cfg_bits = {k for k in BITS if d.get(k) is None}  # bits the user left to the backend
    defaults = getattr(backend, "default_bits", (16, 16, 16))
    for k, v in zip(BITS, defaults):
        if d.get(k) is None:
            d[k] = int(v)
    for k, b in zip(FORMAT_KEYS, BITS):  # a format left null follows the backend's default_formats where
        if d.get(k) is None and b in cfg_bits:  # the user set no bits for that tensor either
            d[k] = getattr(backend, "default_formats", {}).get(k)
        if d.get(k) is None:
            d.pop(k, None)
    wl = Workload.from_config(d)
    if wl.batch_max and backend is not None and not getattr(backend, "supports_batch_max", False):
        raise BackendError(f"workload.batch = max is not supported by backend {getattr(backend, 'name', '?')!r}; "
                           "allowed: a positive integer (batch: max works with backend=plena, roofline and roofline-eager)")
    return wl
