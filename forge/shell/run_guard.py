"""The guard around a command's run folder: what Hydra writes before the task runs (`.hydra/*.yaml`, the job
log), taken back for a refused command. Its own module because it is file bookkeeping (snapshot, restore, remove),
a concern apart from forge.shell.app's error path, which only decides when to call `undo()`.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any
from forge.disk import run_folder

GUARD: list["RunDirGuard"] = []  # the outermost command's guard (set by forge.shell.app.user_errors)


class RunDirGuard:
    """What Hydra writes before the task runs (`.hydra/*.yaml`, the job log), undone for a refused command:
    restored byte for byte (and mtime) in a run directory named by `hydra.run.dir=`, removed from a fresh one."""

    HYDRA_FILES = run_folder.HYDRA_FILES

    def __init__(self, run_dir: Path | None):
        self.run_dir, self.saved, self.hydra_dir = run_dir, {}, None
        if run_dir is not None and run_dir.is_dir():
            names = [*self.HYDRA_FILES, *(p.name for p in run_dir.glob("*.log")), run_folder.HYDRA_DIR]
            self.saved = {n: _snapshot(run_dir / n) for n in names}

    def refuse_links(self) -> None:
        """Before Hydra opens the job log in a named run folder (`resume=`): a log or `.hydra` there that is a link
        is refused in one line (it would send the log outside the run), and nothing is undone through it."""
        d = self.run_dir
        names = [*d.glob("*.log"), d / run_folder.HYDRA_DIR, *d.glob(".hydra/*")] if d is not None and d.is_dir() else []
        link = next((p for p in names if p.is_symlink()), None)
        odd = next((p for p in names if p.exists() and not (p.is_file() or p.is_dir())), None)
        if link is not None or odd is not None:
            from forge.disk.confined import not_regular, refused

            self.run_dir, self.saved = None, {}  # undo() then touches nothing
            raise refused(link, d) if link is not None else not_regular(odd)

    def lock(self, stack: Any, folder: Path | None) -> None:
        """Lock `folder` (forge.disk.lock) into `stack` (an ExitStack): the run folder named by `hydra.run.dir=`
        before Hydra writes its `.hydra/` or job log there, Hydra's own run folder once the job starts. Another
        command holding it is refused in one line, and nothing of the holder's is then undone by this one."""
        from forge.disk.lock import RunFolderBusy, run_lock

        if folder is None:
            return
        try:
            stack.enter_context(run_lock(folder))
        except RunFolderBusy:
            self.run_dir, self.saved, self.hydra_dir = None, {}, None  # the holder's files: undo() touches nothing
            raise

    @classmethod
    def from_argv(cls, argv: list[str]) -> "RunDirGuard":
        given = [a.split("=", 1)[1].strip("'\"") for a in argv if a.startswith("hydra.run.dir=")]
        return cls(Path(given[-1]) if given else None)

    def undo(self) -> None:
        d = self.run_dir or self.hydra_dir
        if d is None or not d.is_dir():
            return
        if self.saved:
            for name, snap in self.saved.items():
                _restore(d / name, snap)
            for log in d.glob("*.log"):  # a job log Hydra opened for this command
                if log.name not in self.saved and not log.is_symlink() and log.stat().st_size == 0:
                    log.unlink()
            return
        if self.run_dir is not None and _only_setup_files(d):  # named, absent before, and no work written yet
            shutil.rmtree(d, ignore_errors=True)
            return
        for name in self.HYDRA_FILES:  # a fresh stamp folder: drop Hydra's files, then the folder if nothing else is in it
            (d / name).unlink(missing_ok=True)
        for log in d.glob("*.log"):
            if not log.is_symlink() and log.stat().st_size == 0:
                log.unlink()
        if (d / run_folder.HYDRA_DIR).is_dir() and not any((d / run_folder.HYDRA_DIR).iterdir()):
            (d / run_folder.HYDRA_DIR).rmdir()
        cwd = Path.cwd().resolve()
        for folder in (d.resolve(), *d.resolve().parents):  # and outputs/<app>/ if now empty
            if folder == cwd or not folder.is_dir() or any(folder.iterdir()):
                break
            folder.rmdir()


def _only_setup_files(d: Path) -> bool:
    """Whether a folder holds only what a command writes before its work starts (Hydra's files, logs, the
    run's config.yaml): an error raised after that (a checkpoint, labels written) must not delete the run."""
    setup = {*RunDirGuard.HYDRA_FILES, run_folder.HYDRA_DIR, run_folder.CONFIG, run_folder.LOCK}
    return all(p.relative_to(d).as_posix() in setup or p.suffix == ".log" for p in d.rglob("*"))


_LINK = (None, -1)  # a link in the run folder: never written through, removed or followed by the guard


def _snapshot(path: Path) -> tuple[bytes | None, int] | None:
    if path.is_symlink():
        return _LINK
    if path.is_dir():
        return (None, path.stat().st_mtime_ns)
    return (path.read_bytes(), path.stat().st_mtime_ns) if path.is_file() else None


def _restore(path: Path, snap: tuple[bytes | None, int] | None) -> None:
    if snap == _LINK or path.is_symlink():
        return
    if snap is None:  # Hydra made it
        if path.is_dir():
            if not any(path.iterdir()):
                path.rmdir()
        else:
            path.unlink(missing_ok=True)
        return
    data, mtime = snap
    if data is not None and (not path.is_file() or path.read_bytes() != data):
        path.write_bytes(data)
    if path.exists():
        os.utime(path, ns=(mtime, mtime))


def note_run_dir(config: Any) -> None:
    """The run folder Hydra is about to create (its `hydra.run.dir`), known to the command's guard before Hydra
    writes into it: a failure there (a full disk) is then named and undone like any refused command's files."""
    try:
        if GUARD and GUARD[0].hydra_dir is None:
            GUARD[0].hydra_dir = Path(str(config.hydra.run.dir))
    except Exception:  # noqa: BLE001 - a run.dir that cannot resolve: nothing to note
        pass


def hydra_output_dir() -> Path | None:
    try:
        from hydra.core.hydra_config import HydraConfig

        from omegaconf import OmegaConf

        hc = HydraConfig.get()  # before the job starts, only its configured run.dir is known
        return Path(OmegaConf.select(hc, "runtime.output_dir", default=None, throw_on_missing=False) or hc.run.dir)
    except Exception:  # noqa: BLE001 - no Hydra job (ValueError), or a run.dir that cannot resolve yet
        return None
