"""The app wrapper every `forge-*` command runs in: `forge_main` (its Hydra main), `user_errors` (one error path:
a known error is one line and exit 2, a bug its traceback and exit 1, Ctrl-C exit 130) and the wording of
those one-line errors. The guard that takes back what Hydra wrote for a refused command is forge.shell.run_guard.

Where configs live and what they hold is forge.runtime.config; this module is what happens around a command's run.
"""
from __future__ import annotations

import errno
import functools
import logging
import os
import sys
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterator

from forge.runtime.config import CONFIG_PATH, as_choices, check_override_types, ray_cluster
from forge.runtime.signals import interrupt_was_sigterm
from forge.errors import REPORT_BUG, ForgeError
from forge.shell.run_guard import GUARD, RunDirGuard, hydra_output_dir
from forge.disk import run_folder

EXIT_BUG, EXIT_USAGE, EXIT_SIGINT, EXIT_SIGTERM = 1, 2, 130, 143  # shell conventions: 128 + signal number
TRAIN_MODULES = ("torch", "lightning", "pytorch_lightning", "torchmetrics")  # the `train` extra (issue 45)
TRAIN_EXTRA = "pip install 'forge-nas[train]'"
_ACTIVE: list[str] = []  # apps whose user_errors() is entered, outermost first


@contextmanager
def user_errors(app: str) -> Iterator[None]:
    """One error path for every forge-* command: a known error (the ForgeError family, an OS error naming a
    file, Hydra's and OmegaConf's config errors) prints one line `app: error: ...` and exits 2; Ctrl-C exits 130.
    Anything else is a bug: its traceback, one line saying how to report it, exit 1.

    Use it outside @hydra.main (catches Hydra's own errors, which HYDRA_FULL_ERROR makes Hydra re-raise) and,
    optionally, inside the task (it then also checks override types). FORGE_DEBUG=1 keeps the traceback.
    Files Hydra wrote for a refused command are taken back (`RunDirGuard`)."""
    outer = not _ACTIVE
    if outer:
        os.environ.setdefault("HYDRA_FULL_ERROR", "1")
        os.environ.setdefault("RAY_COLOR_PREFIX", "0")  # hydra/launcher=ray: jobs' next: lines come without ANSI codes
        GUARD[:] = [RunDirGuard.from_argv(sys.argv[1:])]
    elif GUARD:
        GUARD[0].hydra_dir = hydra_output_dir()
    _ACTIVE.append(app)
    locks = ExitStack()
    try:
        if outer and GUARD:
            GUARD[0].refuse_links()
            GUARD[0].lock(locks, GUARD[0].run_dir)  # one writer per run folder: before Hydra's first write there
        if not outer:
            if GUARD and GUARD[0].hydra_dir is not None and GUARD[0].hydra_dir.is_dir():
                GUARD[0].lock(locks, GUARD[0].hydra_dir)  # Hydra's stamp or sweep folder (re-entrant if named)
            check_override_types()
        yield
    except SystemExit as e:
        if outer and e.code == EXIT_USAGE and GUARD:
            GUARD[0].undo()
        raise
    except KeyboardInterrupt:
        if not outer:
            raise
        term = interrupt_was_sigterm()
        print(f"{app}: {'terminated (SIGTERM)' if term else 'interrupted'}", file=sys.stderr)
        raise SystemExit(EXIT_SIGTERM if term else EXIT_SIGINT) from None
    except BrokenPipeError:  # `forge-x --help | head`: the reader left; not a bug, nothing more to say
        if not outer:
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's own flush must not fail too
        raise SystemExit(0) from None
    except Exception as e:  # inside a job: exit here, so Hydra adds no "Error executing job" line
        msg = describe_error(e, app)
        if os.environ.get("FORGE_DEBUG") or (msg is None and not outer):
            raise
        if msg is None:
            _report_bug(app)
        if outer and GUARD:
            GUARD[0].undo()
        from forge.disk.inert import inert

        print(f"{app}: error: {inert(msg)}", file=sys.stderr)  # a received name in it is shown, never obeyed
        raise SystemExit(EXIT_USAGE) from None
    finally:
        locks.close()  # after undo(): no other writer can start before this command's files are taken back
        _ACTIVE.pop()


def _report_bug(app: str) -> None:
    """A bug: the traceback, then one line saying it is a bug and how to report it (a plug-in's: naming its module);
    exit 1 (not 2)."""
    import traceback

    from forge.shell.blame import plugin_error_line

    traceback.print_exc()
    try:  # raised inside a user's plug-in: name its module (never let that question hide the report)
        theirs = plugin_error_line(app, sys.exc_info()[1])
    except Exception:  # noqa: BLE001
        theirs = None
    print(theirs or f"{app}: internal error: {REPORT_BUG}", file=sys.stderr)
    if theirs and GUARD:  # the user's code failed: as for a refused command, a run it left with no work is taken back
        GUARD[0].undo()
    raise SystemExit(EXIT_BUG) from None


def forge_main(app: str, config_name: str | None = None) -> Callable[[Callable[[Any], Any]], Callable[[], None]]:
    """`@forge_main("forge-x")` on `task(cfg)`: the console-script entry, a Hydra main on conf/<config_name>.yaml
    with `user_errors(app)` around Hydra (its own errors) and inside the task (ours, plus override types)."""
    def decorate(task: Callable[[Any], Any]) -> Callable[[], None]:
        import hydra

        @functools.wraps(task)
        def job(cfg: Any) -> Any:
            quiet_log_errors(app)  # Hydra has just attached the run's log handlers
            with user_errors(app):
                return task(cfg)

        entry = hydra.main(config_path=CONFIG_PATH, config_name=config_name or app, version_base="1.3")(job)

        @functools.wraps(task)
        def main() -> None:
            if "--version" in sys.argv[1:]:  # Forge's version, not Hydra's (Hydra's own flag prints "Hydra 1.3.x")
                from forge import __version__

                print(f"{app} (forge-nas) {__version__}")
                return
            sys.argv[1:] = ray_cluster(as_choices(config_name or app, sys.argv[1:]))  # +hardware=x means hardware=x
            with user_errors(app):
                entry()
            quiet_teardown()
        return main
    return decorate


_TEARDOWN: list[bool] = []


def quiet_teardown() -> None:
    """Once a command's work is done and said, Ctrl-C during the interpreter's teardown (torch's and the
    libraries' atexit functions, a second or so after an export) has nothing left to stop: it is ignored from
    then on, instead of "Exception ignored in atexit callback" and a traceback under a finished command.
    Registered last, so it runs first among the atexit functions."""
    if not _TEARDOWN:
        import atexit
        import signal

        _TEARDOWN.append(True)
        atexit.register(signal.signal, signal.SIGINT, signal.SIG_IGN)


def quiet_log_errors(app: str) -> None:
    """A log handler that cannot write (a full disk under cli.log) says so in one line and is dropped, instead of
    logging's `--- Logging error ---` traceback on every record; the command's own writes still refuse in one line
    when they fail. Any other exception in a handler is a bug and keeps logging's report."""
    for handler in logging.getLogger().handlers:
        handler.handleError = functools.partial(_log_write_failed, app, handler)  # type: ignore[method-assign]


def _log_write_failed(app: str, handler: logging.Handler, record: logging.LogRecord) -> None:
    e = sys.exc_info()[1]
    if not isinstance(e, OSError):
        return logging.Handler.handleError(handler, record)
    logging.getLogger().removeHandler(handler)
    where = getattr(handler, "baseFilename", None) or type(handler).__name__
    try:  # stderr itself may be the stream that failed (a closed pipe): then there is no one to tell
        print(f"{app}: cannot write {where}: {e.strerror or e}; the command goes on without that log (free some "
              "disk space)", file=sys.stderr)
    except OSError:
        pass


def describe_error(e: BaseException, app: str | None = None) -> str | None:
    """One line for a known, user-fixable error; None for a bug (which keeps its traceback)."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    e = _log_setup_cause(e)
    if isinstance(e, OSError) and e.filename is None and e.errno in (errno.ENOSPC, errno.EDQUOT):
        job = hydra_output_dir()  # inside the job: a write in its run folder; before it: Hydra's own .hydra/
        before = (GUARD[0].run_dir or GUARD[0].hydra_dir) if GUARD else None
        where = job or (before / run_folder.HYDRA_DIR if before else None)
        e = OSError(e.errno, e.strerror or str(e), str(where) if where else "the output folder")
    if isinstance(e, OSError) and e.filename is not None:
        text = f"{e.filename}: {e.strerror or e}"
        if e.errno in (errno.ENOSPC, errno.EDQUOT):  # nothing is lost: atomic writes keep the old files
            text = f"no space left on {text}; allowed: free some disk space, then run the command again" + (
                " (the search continues from its last checkpoint with resume=<run dir>)" if app == "forge-search"
                else "")
    elif isinstance(e, (ForgeError, HydraException, OmegaConfBaseException)):
        text = str(e).split("\nConfig search path", 1)[0]
    elif missing_train_extra(e):
        text = missing_train_extra(e)
    else:
        return None
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return _hint("; ".join(lines), app) or type(e).__name__


def _log_setup_cause(e: BaseException) -> BaseException:
    """Hydra's log set-up that could not open the run's log (`cli.log` a link pointing nowhere, a folder): the
    OSError naming the file, said of a link as such; any other error as it is."""
    cause = e.__cause__
    if not (isinstance(e, ValueError) and str(e).startswith("Unable to configure handler") and
            isinstance(cause, OSError) and cause.filename):
        return e
    if os.path.islink(cause.filename):
        return ForgeError(f"{cause.filename}: a link to {os.readlink(cause.filename)} that cannot be opened "
                          f"({cause.strerror}); allowed: a regular file (remove the link)")
    return cause


def missing_train_extra(e: BaseException) -> str | None:
    """The one line for torch or Lightning missing from a search-only install (issue 45); None otherwise."""
    root = (getattr(e, "name", None) or "").split(".")[0] if isinstance(e, ModuleNotFoundError) else ""
    if root not in TRAIN_MODULES:
        return None
    return (f"this command needs {root}, which this install left out (the search and inference run without it); "
            f"allowed: {TRAIN_EXTRA} (training, labelling, fine-tuning, export, measured backends)")


def _hint(text: str, app: str | None = None) -> str:
    """Hydra's own messages made to say what is allowed: a group's choices as one list, how to quote a value
    its override lexer cannot read (a non-ASCII or spaced path), and for a misspelled key the closest valid key
    (Hydra's advice, `+key=value`, would add a key nothing reads)."""
    import re

    m = re.fullmatch(r"Could not override '([^']+)'\.; To append to your config use \+(\S+)", text)
    if m and app:
        return unknown_key(m.group(1), m.group(2).split("=", 1)[1] if "=" in m.group(2) else "", app)

    m = re.search(r"; Available options in '([^']+)':((?:; [^;]+)+)$", text)
    if m:
        text = f"{text[:m.start()]}; allowed: {m.group(1)}=" + " | ".join(x.strip() for x in m.group(2).split(";")[1:])
    if "LexerNoViableAltException" in text:
        text += ("; allowed: quote a value holding spaces or non-ASCII characters for Hydra, inside shell quotes: "
                 "\"key='my folder/é'\"")
    return text


def other_options(key: str) -> list[str]:
    """The options of `key`'s config group whose config has the key (`dispatch.address`: dispatch=ray's): Hydra
    refuses it beside another option, and `+key=` would add it to that one instead."""
    from forge.runtime.config import group_yaml, known_names

    group, _, rest = key.partition(".")
    if not rest:
        return []

    def has(node: Any, parts: list[str]) -> bool:
        return isinstance(node, dict) and parts[0] in node and (len(parts) == 1 or has(node[parts[0]], parts[1:]))

    return [n for n in known_names(group) if has(group_yaml(group, n), rest.split("."))]


def unknown_key(key: str, value: str, app: str) -> str:
    """`key` is in no config of `app`: name the closest valid dotted key (difflib), or say how to list them."""
    import difflib

    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import DictConfig, OmegaConf

    def keys(node: Any, prefix: str = "") -> list[str]:
        out = []
        for k in node:
            sub = node._get_node(k)
            name = f"{prefix}{k}"
            deeper = isinstance(sub, DictConfig) and not (sub._is_missing() or sub._is_none())
            out += [name] + (keys(sub, name + ".") if deeper else [])
        return out

    try:
        if GlobalHydra.instance().is_initialized():
            GlobalHydra.instance().clear()
        with initialize_config_module(config_module=CONFIG_PATH.split("://")[1], version_base="1.3"):
            cfg = compose(config_name=app)
        OmegaConf.set_readonly(cfg, True)
        close = difflib.get_close_matches(key, [k for k in keys(cfg) if k != "hydra"], n=1, cutoff=0.6)
    except Exception:  # the hint is a courtesy: a config that does not compose here keeps Hydra's own words
        close = []
    if close == [key]:  # a key it has, holding an open mapping: Hydra sets its entries one at a time, with +
        pairs = [p.split(":", 1) for p in value.strip().strip("{}").split(",") if ":" in p]
        each = " ".join(f"+{key}.{k.strip()}={v.strip()}" for k, v in pairs) or f"+{key}.<name>=<value>"
        return (f"{key}={value}: an open mapping is not set whole from the command line; allowed: its entries one "
                f"at a time: {each}")
    elsewhere = other_options(key)
    if elsewhere:
        group, pick = key.split(".", 1)[0], elsewhere[0]
        return (f"{key} is a setting of {group}={' | '.join(elsewhere)}, not of the {group} this command composes "
                f"(the default unless named); allowed: name it too: {group}={pick} {key}={value}")
    fix = f"did you mean {close[0]}={value}?" if close else f"the keys are listed by `{app} --cfg job`"
    return (f"{key} is not a setting of {app} (adding it with + would change nothing); allowed: a key of its config: "
            + fix)
