"""mkdocs hook: serve bench/results/*.png at results/<name>.png, so bench/RESULTS.md's figure links (relative to
bench/) resolve on docs/measurement-log.md, which includes that file instead of copying it, and on
docs/results.md. Figures are read in place."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]


def on_files(files: Files, config: Any) -> Files:
    """Add every figure of bench/results as a site file (not copied into docs/)."""
    for png in sorted((ROOT / "bench" / "results").glob("*.png")):
        files.append(File.generated(config, f"results/{png.name}", abs_src_path=str(png)))
    return files
