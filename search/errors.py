"""The search package's user errors, in one place: each is a `forge.errors.ForgeError` (exit 2, one line naming
what is wrong and what is allowed). Import them from here: `SearchConfigError`, raised across the package, is
imported from nowhere else.
"""
from __future__ import annotations

from forge.errors import ForgeError, UserError


class SearchConfigError(ForgeError):
    """Bad search configuration; the message names the key and what is allowed."""


class ResumeError(ForgeError):
    """A resume that cannot continue (missing/corrupt state, or a different config)."""


class ExportError(ForgeError):
    """Bad selection, format or run folder; the message lists what is allowed."""


class HFExportError(ForgeError):
    """format=hf cannot be written (transformers missing, or a genome it cannot express)."""


class TokenizerError(UserError):
    """A named tokenizer that does not load or does not match the model's vocabulary."""


class ReportError(ForgeError):
    """No runs found, or a run folder without the files a report needs."""


class VerifyError(ForgeError):
    """A run directory or option forge-verify cannot use; the message lists what is allowed."""
