"""Every `_target_` in conf/ names something importable, and every command the README and the
documentation site (docs/**/*.md) show composes with Hydra exactly as written (sweeps expanded), so
renaming a module or a config cannot silently break what a reader copies."""
from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.utils import get_object

from forge.runtime.config import conf_dir

ROOT = Path(__file__).resolve().parents[1]


def _targets(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "_target_" and isinstance(v, str):
                yield v
            else:
                yield from _targets(v)
    elif isinstance(node, list):
        for v in node:
            yield from _targets(v)


def _all_targets() -> list[tuple[str, str]]:
    out = []
    for p in sorted(conf_dir().rglob("*.yaml")):
        for t in _targets(yaml.safe_load(p.read_text())):
            out.append((str(p.relative_to(conf_dir())), t))
    return out


def test_conf_has_targets():
    assert len(_all_targets()) >= 20


@pytest.mark.parametrize("where,target", _all_targets())
def test_every_target_resolves(where, target):
    assert callable(get_object(target)), f"conf/{where}: _target_ {target} is not callable"


def readme_commands(text: str) -> list[list[str]]:
    """`forge-<app> ...` lines inside the README's bash blocks, as argv lists (comments dropped). A `<...>`
    placeholder (a run folder, a label file) becomes a plain word, as the reader would fill it in."""
    cmds = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():  # a trailing backslash continues the line
            line = re.sub(r"<[^<>]*>", "PLACEHOLDER", line)
            for part in re.split(r"&&", line):
                argv = shlex.split(part, comments=True)
                if argv and re.fullmatch(r"(\.venv/bin/)?forge-[a-z]+", argv[0]):
                    cmds.append([Path(argv[0]).name, *argv[1:]])
    return cmds


def _override_sets(args: list[str]) -> list[list[str]]:
    """Each sweep value once (others at their first value): what `-m` would launch, linearly."""
    parsed = OverridesParser.create().parse_overrides(args)
    first = [o.input_line if not o.is_sweep_override() else f"{o.get_key_element()}={next(iter(o.sweep_string_iterator()))}"
             for o in parsed]
    sets = [first]
    for i, o in enumerate(parsed):
        if o.is_sweep_override():
            for v in list(o.sweep_string_iterator())[1:]:
                sets.append(first[:i] + [f"{o.get_key_element()}={v}"] + first[i + 1:])
    return sets


DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SHOWN = [(str(p.relative_to(ROOT)), c) for p in DOC_FILES for c in readme_commands(p.read_text())]
UNIQUE: dict[tuple[str, ...], str] = {}  # a command shown in several places is composed once (named by the first)
for _where, _argv in SHOWN:
    UNIQUE.setdefault(tuple(_argv), _where)
COMMANDS = [list(c) for c in UNIQUE]


def test_readme_has_commands_for_every_cli():
    apps = {c[0] for c in COMMANDS}
    assert {"forge-search", "forge-hw", "forge-arch", "forge-surrogate", "forge-label"} <= apps


def test_docs_commands_are_harvested():
    """The site's pages are read too: a command that only the docs show is still composed."""
    pages = {where for where, _ in SHOWN if where.startswith("docs/")}
    assert {"docs/tutorial.md", "docs/how-to/accelerator.md", "docs/how-to/cluster.md"} <= pages


@pytest.mark.parametrize("argv", COMMANDS, ids=[f"{w}: " + " ".join(c)[:80] for c, w in UNIQUE.items()])
def test_readme_command_composes(argv, monkeypatch):
    monkeypatch.chdir(ROOT)  # hydra.searchpath=[file://docs/examples/conf] is relative to the repository root
    app, args = argv[0], [a for a in argv[1:] if a not in ("-m", "--multirun")]
    if "--help" in args:
        args = [a for a in args if a != "--help"]
    if not (conf_dir() / f"{app}.yaml").is_file():
        pytest.fail(f"README runs {app}, but conf/{app}.yaml does not exist")
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        for overrides in _override_sets(args):
            cfg = compose(config_name=app, overrides=overrides)
            assert cfg is not None


def test_a_broken_command_is_caught():
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        with pytest.raises(Exception, match="backend"):
            compose(config_name="forge-hw", overrides=["backend=no-such-backend"])


def test_every_code_package_has_a_reference_page():
    """The site's reference renders each package wheel-installed by setup.py (mkdocstrings, submodules
    included), so a new top-level package cannot be left out of the docs."""
    from importlib.util import module_from_spec, spec_from_file_location

    spec = spec_from_file_location("forge_setup", ROOT / "setup.py")
    setup = module_from_spec(spec)
    spec.loader.exec_module(setup)
    nav = (ROOT / "mkdocs.yml").read_text()
    for pkg in setup.CODE:
        page = ROOT / "docs" / "reference" / f"{pkg}.md"
        assert page.is_file() and f"::: {pkg}\n" in page.read_text(), f"docs/reference/{pkg}.md lacks '::: {pkg}'"
        assert f"reference/{pkg}.md" in nav, f"mkdocs.yml nav lacks reference/{pkg}.md"


def test_readme_is_a_landing_page_whose_links_resolve():
    """Issue 22: the README stays a landing page (< 12,000 characters); the rest lives in docs/, and every
    relative link or image in the README points at a file that exists."""
    text = (ROOT / "README.md").read_text()
    assert len(text) < 12_000, f"README.md has {len(text):,} characters; move detail into docs/"
    targets = [t for t in re.findall(r"\]\(([^)\s#]+)", text) if not re.match(r"[a-z]+://", t)]
    assert "docs/img/pareto.png" in targets and any(t.startswith("docs/") for t in targets)
    for t in targets:
        assert (ROOT / t).exists(), f"README links to {t}, which does not exist"
