"""One composition per command run: Hydra's main composes a command's config twice, this makes it once.

`hydra.main` first composes the whole config (in multirun mode) only to read `hydra.mode`, throws it away, then
composes it again to run. For forge-search's default job that first composition is 0.08 s CPU of about 2 s
(issue 45). Inside `compose_once`, the first composition is the run's own (run mode, the same overrides, logging
configured as the run's composition does); it is kept and handed to the run, so the config is composed once.

Everything else stays Hydra's: `-m`/`--multirun` on the command line, a config that sets `hydra.mode`, a sweep
override without `-m` or any composition error take Hydra's own path unchanged (its own second composition
reports the error). The only trace of the shortcut is that `.hydra/hydra.yaml` does not list the
`hydra.mode=RUN` override Hydra adds for itself when no config sets the mode (its `hydra.mode` is RUN either
way). Where Hydra's internals are not as expected (another version) nothing is changed.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Sequence

MULTIRUN_FLAGS = ("-m", "--multirun")


@contextmanager
def compose_once(args: Sequence[str]) -> Iterator[None]:
    """While inside, a plain (not multirun) Hydra run composes its config once."""
    try:
        from hydra._internal.hydra import Hydra
        from hydra.types import RunMode
    except ImportError:  # pragma: no cover - another Hydra layout: its own two compositions
        Hydra = None
    if Hydra is None or any(a in MULTIRUN_FLAGS for a in args) or not all(
            callable(getattr(Hydra, n, None)) for n in ("get_mode", "compose_config", "run")):
        yield
        return
    get_mode, compose = Hydra.get_mode, Hydra.compose_config
    kept: dict[tuple[Any, tuple[str, ...]], Any] = {}

    def get_mode_once(self: Any, config_name: Any, overrides: list[str]) -> Any:
        try:
            cfg = compose(self, config_name=config_name, overrides=list(overrides), run_mode=RunMode.RUN,
                          with_log_configuration=True)
        except Exception:  # noqa: BLE001 - Hydra's own path, whose run composition reports the error
            return get_mode(self, config_name=config_name, overrides=overrides)
        if cfg.hydra.mode not in (None, RunMode.RUN):  # a config asks for a multirun: Hydra's path
            return cfg.hydra.mode
        kept[(config_name, tuple(overrides))] = cfg
        return RunMode.RUN

    def compose_kept(self: Any, config_name: Any, overrides: list[str], run_mode: Any,
                     with_log_configuration: bool = False, **kw: Any) -> Any:
        cfg = kept.pop((config_name, tuple(overrides)), None) if run_mode == RunMode.RUN and not kw else None
        if cfg is not None and with_log_configuration:  # the run's composition, made (with its logging) above
            return cfg
        return compose(self, config_name=config_name, overrides=overrides, run_mode=run_mode,
                       with_log_configuration=with_log_configuration, **kw)

    Hydra.get_mode, Hydra.compose_config = get_mode_once, compose_kept
    try:
        yield
    finally:
        Hydra.get_mode, Hydra.compose_config = get_mode, compose
