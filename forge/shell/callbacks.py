"""The Hydra callback every `forge-*.yaml` names (`hydra.callbacks.mask_secrets`): URL passwords masked in log records
and in Hydra's own files before the task runs, and the run folder noted for the command's guard before Hydra writes
into it. The shell's, not disk's: it knows about Hydra's run and the guard (forge.shell.run_guard); the masking it
calls is forge.disk.redact's.
"""
from __future__ import annotations

from typing import Any

from hydra.experimental.callback import Callback

from forge.disk.redact import hydra_files, mask_file, mask_log_records
from forge.shell.run_guard import note_run_dir


class MaskSecrets(Callback):
    """Hydra callback (`hydra.callbacks` of every forge-*.yaml): log records are masked from the start of a
    run or multirun, and once Hydra has saved a job's config and overrides, those files are rewritten with
    URL passwords masked, before the task runs."""

    def on_run_start(self, config: Any, **kwargs: Any) -> None:
        mask_log_records()
        note_run_dir(config)  # so a full disk inside Hydra's own config writing names the folder, and is undone

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        mask_log_records()

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        mask_log_records()
        for path in hydra_files(config):
            mask_file(path)
