"""Every shell block of the README and the docs site runs as written, after the README's install (this venv's
`bin/` first on PATH), in a fresh folder per block. A `bash` block's lines are commands (a trailing backslash
continues one); a `console` block's `$ ` lines are commands and the lines under each are the output it must print.

What a block needs beyond that is declared beside it, in an HTML comment right above the fence (invisible on
GitHub and on the site), holding YAML after `test:`; a number key means the block's n-th command (from 1):

    <!-- test:
    slow: a search of 40 generations          # the block runs only under -m slow
    long: why                                 # a slow block over ~10 s: it runs under -m long, not in the
                                              #   README's test command (its 12-minute budget)
    set: {"<labels>": "labels.jsonl"}         # a placeholder's value (<stamp> is always a small finished search)
    args: {2: "search.generations=2"}         # words appended to command 2 ("all": to every command)
    before: "forge-label ... export=labels.jsonl"  # a command run first, to make what the block reads
    fails: {3: "needs the transformers extra"}     # command 3 must exit 2 with this in its one-line message
    not-run: {1: "needs a Slurm cluster"}     # not run, with the reason (a whole block: a string)
    rc: {1: 130}                              # an exit status other than 0 (console blocks: Ctrl-C)
    interrupt: {1: 7}                         # SIGINT command 1 once its run has checkpointed generation 7
    ray-cluster: why                          # the block runs against a Ray head node the test starts and
                                              #   stops (RAY_ADDRESS names it: `address=auto` joins it)
    -->

Output is compared line by line, blanks collapsed, with the command's own folder left out of the paths it
prints. A placeholder `<...>` left without a value fails the test, so a new block cannot be skipped by accident.
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(bash|console)\s*$")
DIRECTIVE = re.compile(r"<!--\s*test:(.*?)-->\s*$", re.S)
PLACEHOLDER = re.compile(r"<[A-Za-z][^<>\"'=]*>")
TINY_SEARCH = "search.pop_size=4 search.offspring=4 search.generations=2 progress=false"
TIMEOUT_S = 900
pytestmark = pytest.mark.docs  # CI runs every block, slow ones too, but the long: ones (`-m "(not slow or docs) and not long"`)


@dataclass
class Command:
    text: str
    expected: list[str] = field(default_factory=list)  # console blocks: the output shown under the command


@dataclass
class Block:
    where: str  # file:line of the fence
    lang: str
    commands: list[Command]
    directive: dict


def _directive(lines: list[str], fence: int) -> dict:
    """The `<!-- test: ... -->` comment ending right above line `fence` (blank lines allowed between)."""
    i = fence - 1
    while i >= 0 and not lines[i].strip():
        i -= 1
    if i < 0 or not lines[i].rstrip().endswith("-->"):
        return {}
    j = i
    while j > 0 and "<!--" not in lines[j]:
        j -= 1
    m = DIRECTIVE.search("\n".join(lines[j:i + 1]))
    return (yaml.safe_load(m.group(1)) or {}) if m else {}


def _commands(lang: str, body: list[str]) -> list[Command]:
    if lang == "console":
        cmds: list[Command] = []
        for line in body:
            if line.startswith("$ "):
                cmds.append(Command(line[2:]))
            elif cmds and line.strip():
                cmds[-1].expected.append(line.strip())
        return cmds
    joined = "\n".join(body).replace("\\\n", " ")
    return [Command(line) for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def doc_blocks(path: Path) -> list[Block]:
    """The bash/console blocks of one Markdown file, with their directives."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i].strip())
        if m:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("```"))
            body = [ln[len(lines[i]) - len(lines[i].lstrip()):] for ln in lines[i + 1:end]]
            where = f"{path.relative_to(ROOT)}:{i + 1}"
            blocks.append(Block(where, m.group(1), _commands(m.group(1), body), _directive(lines, i)))
            i = end
        i += 1
    return blocks


BLOCKS = [b for p in DOC_FILES for b in doc_blocks(p)]


def _by_index(value: object, n: int) -> object:
    """A directive's value for command n: {n: v} or {"all": v}."""
    if isinstance(value, dict):
        return value.get(n, value.get("all"))
    return None


@functools.cache
def _ray_tmpdir() -> str:
    """Ray's default temporary folder (/tmp/ray) is shared by every Ray instance on the machine, and local
    instances started there at once (another suite, another user) race on its `session_latest` link ("Head node
    temp_dir not found"): the blocks' commands get a folder of this process's own (short: Ray's socket paths must
    fit 107 bytes), removed at exit."""
    path = tempfile.mkdtemp(prefix="rdoc-", dir="/tmp")
    atexit.register(shutil.rmtree, path, True)
    return path


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, "RAY_TMPDIR": _ray_tmpdir(), **(extra or {})}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if env.get("PYTHONPATH"):  # the commands run in other folders: a relative entry must keep meaning the same
        env["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in env["PYTHONPATH"].split(os.pathsep))
    env.pop("FORGE_TEST_PG_URL", None)
    return env


@pytest.fixture(scope="session")
def finished_search(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small finished search: what `<stamp>` stands for (the docs' `outputs/search/<stamp>`)."""
    run = tmp_path_factory.mktemp("docs-search") / "run"
    proc = subprocess.run(f"forge-search {TINY_SEARCH} hydra.run.dir={run}", shell=True, env=_env(),
                          cwd=run.parent, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return run


def _workdir(tmp: Path, run: Path | None) -> Path:
    """A fresh folder that sees the repository's docs/ and data/ and the finished search where docs put runs."""
    tmp.mkdir()
    for name in ("docs", "data", "bench", "tests"):  # tests/ext: the docs' worked plug-in package
        (tmp / name).symlink_to(ROOT / name)
    for parent in ("outputs/search", "multirun/search"):
        (tmp / parent).mkdir(parents=True)
        if run is not None:
            (tmp / parent / "stamp").symlink_to(run)
    return tmp


def _strip_comment(text: str) -> str:
    """The command without its trailing `# comment` (a `#` outside quotes after a blank)."""
    quote = None
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and i and text[i - 1].isspace() and text[i - 2:i] != "$?":
            return text[:i].rstrip()
    return text.rstrip()


def _fill(text: str, values: dict) -> str:
    for key, value in values.items():
        text = text.replace(key, str(value))
    left = PLACEHOLDER.findall(text)
    assert not left, f"placeholder {left[0]} has no value: declare it in the block's `<!-- test: set: ... -->`"
    return text


def _ctrl_c_default() -> None:
    """In the child: Ctrl-C (SIGINT) back to its default. A suite started in the background (`cmd &` without job
    control, nohup, some CI runners) inherits SIGINT as ignored, and the commands would then run through it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _run(script: str, cwd: Path, interrupt_at: int | None, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run one command line in bash; with interrupt_at, SIGINT it once its run folder holds that many generations."""
    for _ in range(5):  # a busy machine can let the run pass the generation before it is stopped: run it again
        proc = subprocess.Popen(["bash", "-c", script], cwd=cwd, env=_env(env), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                preexec_fn=_ctrl_c_default)
        run = cwd / re.search(r"hydra\.run\.dir=(\S+)", script).group(1) if interrupt_at is not None else None
        if run is None or _interrupted_at(proc, run, interrupt_at) != "past":
            break
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        shutil.rmtree(run, ignore_errors=True)
    try:
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return -9, out
    return proc.returncode, out


def _interrupted_at(proc: subprocess.Popen, run: Path, gen: int) -> str:
    """SIGINT the run once generation `gen` is checkpointed, while generation gen+1 is still running: the group is
    stopped (SIGSTOP) where the poll sees it, read again, and interrupted only if it holds exactly that many
    generations (then resumed, so the pending SIGINT lands at once): "exact"; "past": it ran past that generation
    (stopped and resumed as it was); "ended": it ended (or the deadline passed) before reaching it."""
    history = run / "history.jsonl"  # one line per generation, from generation 0 (the initial population)
    deadline = time.monotonic() + TIMEOUT_S
    while proc.poll() is None and time.monotonic() < deadline:
        if history.is_file() and len(history.read_text().splitlines()) > gen:
            os.killpg(proc.pid, signal.SIGSTOP)
            exact = len(history.read_text().splitlines()) == gen + 1
            if exact:
                os.killpg(proc.pid, signal.SIGINT)
            os.killpg(proc.pid, signal.SIGCONT)
            return "exact" if exact else "past"
        time.sleep(0.005)  # a default generation takes ~30 ms on an idle core
    return "ended"


def _check(block: Block, n: int, cmd: Command, cwd: Path, prev_rc: int, values: dict,
           env: dict[str, str] | None = None) -> int:
    d = block.directive
    text = _fill(cmd.text, values)
    text = _strip_comment(text)
    if extra := _by_index(d.get("args"), n):
        text = f"{text} {extra}"
    script = f"(exit {prev_rc}); {text}" if "$?" in text else text
    rc, out = _run(script, cwd, _by_index(d.get("interrupt"), n), env)
    where = f"{block.where} command {n}: {text}\n--- output (tail) ---\n{out[-3000:]}"
    if (message := _by_index(d.get("fails"), n)) is not None:
        assert rc == 2, f"expected exit 2 (documented failure), got {rc}: {where}"
        assert message in out and "Traceback" not in out, f"expected the one line {message!r}: {where}"
        return rc
    want = _by_index(d.get("rc"), n) or 0
    assert rc == want, f"exit {rc}, expected {want}: {where}"
    for folder in {str(cwd.resolve()), str(cwd)}:  # a path the command prints in full reads as the docs show it
        out = out.replace(folder + os.sep, "")
    norm = " ".join(out.split())
    for line in cmd.expected:
        assert " ".join(_fill(line, values).split()) in norm, f"output lacks {line!r}: {where}"
    return rc


def _param(block: Block):  # noqa: ANN202 (pytest.param)
    marks = [pytest.mark.slow] if block.directive.get("slow") else []
    if block.directive.get("long"):
        assert marks, f"{block.where}: a long block is a slow one too"
        marks.append(pytest.mark.long)
    if any(re.search(r"launcher=ray|dispatch=ray", c.text) for c in block.commands):
        marks.append(pytest.mark.xdist_group("ray"))  # one local Ray cluster at a time under pytest-xdist
    return pytest.param(block, id=block.where, marks=marks)


@pytest.mark.parametrize("block", [_param(b) for b in BLOCKS])
def test_doc_block_runs(block: Block, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    d = block.directive
    if isinstance(d.get("not-run"), str):
        assert len(d["not-run"]) > 10, f"{block.where}: a not-run block needs its reason"
        pytest.skip(f"not run, as declared beside the block: {d['not-run']}")
    needs_run = any("<stamp" in _strip_comment(c.text) for c in block.commands)
    cwd = _workdir(tmp_path / "work", request.getfixturevalue("finished_search") if needs_run else None)
    values = {"<stamp>": "stamp", **(d.get("set") or {})}
    if before := d.get("before"):
        rc, out = _run(_fill(before, values), cwd, None)
        assert rc == 0, f"{block.where}: the declared `before` command failed:\n{out[-3000:]}"
    with _cluster(d, tmp_path, cwd) as env:
        rc = 0
        for n, cmd in enumerate(block.commands, 1):
            reason = _by_index(d.get("not-run"), n)
            if reason:
                continue
            rc = _check(block, n, cmd, cwd, rc, values, env)


@contextlib.contextmanager
def _cluster(d: dict, tmp_path: Path, cwd: Path):  # noqa: ANN202
    """`ray-cluster:`: a Ray head node of the block's own for its commands (tests.ray_head); else nothing."""
    if not d.get("ray-cluster"):
        yield None
        return
    from tests.ray_head import ray_head

    pytest.importorskip("ray", reason="ray is an optional extra (pip install -e '.[ray]' in the Forge clone)")
    with ray_head(tmp_path, cwd=cwd) as (_, env):  # the jobs' relative multirun/ folder lands in the block's folder
        yield env


def test_every_block_is_found() -> None:
    """The extractor sees the blocks the docs show (a fence typo would hide a block from the test above)."""
    fences = sum(len(re.findall(r"^\s*```(?:bash|console)\s*$", p.read_text(), flags=re.M)) for p in DOC_FILES)
    assert len(BLOCKS) == fences and len(BLOCKS) >= 30
    assert sum(len(b.commands) for b in BLOCKS) >= 60


def test_directive_parsing() -> None:
    """A directive above a fence reaches its block; the console form splits commands from their output."""
    lines = ["text", "<!-- test:", "args: {1: 'x=1'}", "-->", "", "```console", "$ echo hi", "hi", "```"]
    assert _directive(lines, 5) == {"args": {1: "x=1"}}
    cmds = _commands("console", ["$ echo hi", "hi", "$ true"])
    assert [(c.text, c.expected) for c in cmds] == [("echo hi", ["hi"]), ("true", [])]
    assert _strip_comment("forge-a x='a # b'   # note") == "forge-a x='a # b'"
    assert _by_index({"all": "a"}, 3) == "a" and _by_index({2: "b"}, 2) == "b" and _by_index({2: "b"}, 1) is None
