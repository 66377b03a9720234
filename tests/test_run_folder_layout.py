"""Issue 57: the run folder has one owner, forge/disk/run_folder.py. No other module of the product spells one of its
file names (a string literal equal to a name, or to the last part of one such as `state/checkpoint.json`'s), nor
joins one of its folders by name (`run_dir / "state"`): renaming a file is one line there. Tests and docs may."""
from __future__ import annotations

import ast
from pathlib import Path

from forge.disk import run_folder

ROOT = Path(__file__).resolve().parents[1]
OWNER = ROOT / "forge" / "disk" / "run_folder.py"
PRODUCT = ("forge", "search", "surrogate", "backends", "forge_hf")
# the same spelling with another meaning, each named: (file, literal) -> why it is no run-folder name
ELSEWHERE = {("search/report_html.py", "report.html"): "the Jinja template's name (search/templates/report.html)"}


def _spelled() -> tuple[set[str], set[str]]:
    """(file names, as literals a module might write; folder names, as the right side of a `/` join)."""
    values = set(run_folder.names().values())
    files = {v for v in values if "." in v.rpartition("/")[2] and "{" not in v}
    files |= {v.rpartition("/")[2] for v in files}
    folders = values - files - {v for v in values if "{" in v}
    folders |= {v.rpartition("/")[2] for v in folders}
    return files, folders


def _hits(path: Path, files: set[str], folders: set[str], root: Path = ROOT) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and node.value in files:
            out.append(f"{path.relative_to(root)}:{node.lineno}: {node.value!r}")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant) \
                and node.right.value in folders:
            out.append(f"{path.relative_to(root)}:{node.lineno}: / {node.right.value!r}")
    return out


def test_the_layout_names_the_main_job_files():
    """The files the default `forge-search` writes (listed from its folder) are all named by the owner."""
    main_job = {"front.csv", "history.csv", "summary.json", "history.jsonl", ".hydra/overrides.yaml",
                ".hydra/hydra.yaml", ".hydra/config.yaml", "cli.log", "archive.jsonl", "state/checkpoint.json",
                "state/loss_cache.jsonl", "state/checkpoint.durable.json", "archive.csv", "pareto.jsonl", "config.yaml"}
    assert main_job <= set(run_folder.names().values())
    assert set(run_folder.SEARCH_FILES) <= set(run_folder.names().values())


def test_no_module_but_the_owner_spells_a_run_folder_name():
    files, folders = _spelled()
    found = [h for pkg in PRODUCT for p in sorted((ROOT / pkg).rglob("*.py")) if p != OWNER
             for h in _hits(p, files, folders)
             if (h.split(":")[0], h.rpartition(": ")[2].strip("'/ ")) not in ELSEWHERE]
    assert not found, "run-folder names spelled outside forge/disk/run_folder.py: " + "; ".join(found)


def test_the_check_is_not_vacuous(tmp_path):
    planted = tmp_path / "m.py"
    planted.write_text('from pathlib import Path\nP = Path("x") / "state" / "checkpoint.json"\nQ = "pareto.jsonl"\n')
    hits = [h.split(": ", 1)[1] for h in _hits(planted, *_spelled(), root=tmp_path)]
    assert sorted(hits) == ["'checkpoint.json'", "'pareto.jsonl'", "/ 'state'"]
