"""Issue 25 §1: each attack on a shared run folder, replayed, does nothing.

- a run's checkpoint / config.yaml naming `subprocess.Popen` as its backend: `forge-search resume=` and
  `forge-verify run=` exit 2 with one line and the payload never runs (the real console scripts);
- `pareto.jsonl` ids `../../x` and `/abs/path`: `forge-export` writes nothing outside `out=`;
- a database URL with a password: it appears in no file written and nowhere on the console;
- a `summary.json` value `<script>alert(1)</script>`: escaped in `report.html`.
Plus the allowlist itself (`forge.plugins`) and a source check that nothing else imports code by name.
"""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from forge import plugins
from forge.disk.redact import mask

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
PASSWORD = "s3cr3t-Pa55word"
URL = f"postgresql+psycopg://forge:{PASSWORD}@127.0.0.1:1/labels"


def _cli(app: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The real console entry point in a fresh interpreter (as a user runs it)."""
    mod, fn = SCRIPTS[app].split(":")
    code = f"import sys; sys.argv[0] = {app!r}; from {mod} import {fn}; {fn}()"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FORGE_DEBUG": ""}
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def _tree(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.relative_to(folder).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A complete tiny search (fake predictor and backend, injected by the test's own live config)."""
    from search.cli import run

    d = tmp_path_factory.mktemp("run") / "run"
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search", overrides=["space=iha-tiny", "search.pop_size=6", "search.offspring=8",
                                                 "search.generations=2", "progress=false", f"out_dir={d}"])
    OmegaConf.set_struct(cfg, False)
    cfg.backend = {"_target_": "tests.search.fakes.FakeBackend"}
    cfg.evaluator.predictor = {"_target_": "tests.search.fakes.FakePredictor"}
    run(cfg)
    return d


def _hostile_copy(finished_run: Path, dest: Path, witness: Path) -> Path:
    """The run, shared by an attacker: its backend is `subprocess.Popen(['touch', witness])`; everything else
    is what a real run names (the shipped surrogate), so the backend is what a resume or verify meets."""
    import shutil

    shutil.copytree(finished_run, dest)
    payload = {"_target_": "subprocess.Popen", "args": ["touch", str(witness)]}
    ck = json.loads((dest / "state/checkpoint.json").read_text())
    ck["config"]["backend"], ck["config"]["evaluator"]["predictor"] = payload, "forgeformer-iha-tiny"
    (dest / "state/checkpoint.json").write_text(json.dumps(ck))
    c = yaml.safe_load((dest / "config.yaml").read_text())
    c["backend"], c["evaluator"]["predictor"] = payload, "forgeformer-iha-tiny"
    (dest / "config.yaml").write_text(yaml.safe_dump(c))
    return dest


# ---------------------------------------------------------------- 1. code execution from a run folder
@pytest.mark.slow  # two fresh interpreters (torch, Hydra): ~30 s each on a busy 2-core box
@pytest.mark.parametrize("app, arg", [("forge-search", "resume"), ("forge-verify", "run")])
def test_a_run_folder_naming_popen_runs_nothing(finished_run, tmp_path, app, arg):
    witness = tmp_path / "pwned"
    hostile = _hostile_copy(finished_run, tmp_path / "shared-run", witness)
    before = _tree(hostile)
    p = _cli(app, f"{arg}={hostile}", "measure=none" if app == "forge-verify" else "progress=false", cwd=tmp_path)
    assert p.returncode == 2, p.stderr[-2000:]
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "'subprocess.Popen' is not an allowed backend plug-in" in lines[0], p.stderr
    assert not witness.exists()
    assert _tree(hostile) == before  # a refused command changes nothing


def test_a_saved_config_naming_popen_is_refused_in_process(finished_run, tmp_path):
    """What resume and verify do with the hostile folder, in this process: the backend is refused, unimported."""
    from search.components import backend_of
    from search.errors import SearchConfigError
    from search.state import saved_config
    from search.verify import run as run_verify

    witness = tmp_path / "pwned"
    hostile = _hostile_copy(finished_run, tmp_path / "shared-run", witness)
    before = _tree(hostile)
    plugins.trust({"resume": str(hostile)})  # the live config of `forge-search resume=<dir>`
    with pytest.raises(SearchConfigError, match="'subprocess.Popen' is not an allowed backend plug-in"):
        backend_of(saved_config(hostile))
    with pytest.raises(SearchConfigError, match="'subprocess.Popen' is not an allowed backend plug-in"):
        run_verify({"run": str(hostile), "measure": "none"})
    assert not witness.exists() and _tree(hostile) == before


def test_every_plugin_kind_a_run_config_names_is_refused(tmp_path):
    """The other names a run config holds, each refused the same way: a predictor node, a trainer node, a
    nested `_target_` inside a dispatch (which Hydra would instantiate recursively), a fine-tune function."""
    from search.components import build_coevolution, build_evaluator, build_trainer
    from search.errors import SearchConfigError
    from search.settings import settle_config

    witness = tmp_path / "pwned"
    popen = {"_target_": "subprocess.Popen", "args": ["touch", str(witness)]}
    plugins.trust({})  # nothing from a test's own config
    from forge.spaces.space import load_space

    space = load_space("iha-tiny")
    with pytest.raises(SearchConfigError, match="'subprocess.Popen' is not an allowed surrogate plug-in"):
        build_evaluator(settle_config({"evaluator": {"predictor": popen}}), space)
    with pytest.raises(SearchConfigError, match="'subprocess.Popen' is not an allowed dispatch plug-in"):
        build_evaluator(settle_config({"evaluator": {"kind": "train", "trainer": popen}}), space)
    nested = {"_target_": "forge.labelling.dispatch.LocalTrainer", "workers": popen}
    with pytest.raises(SearchConfigError, match="subprocess.Popen"):
        build_trainer({"dispatch": nested, "protocol": {"name": "x"}, "corpus": {"kind": "stdlib"}})
    co = {"every": 1, "trainer": {"_target_": "forge.labelling.dispatch.LocalTrainer"}, "finetune": "os.system"}
    with pytest.raises(SearchConfigError, match="'os.system' is not an allowed finetune plug-in"):
        build_coevolution(settle_config({"search": {"coevolve": co}, "evaluator": {}}), space, tmp_path)
    assert not witness.exists()


# ---------------------------------------------------------------- 2. path traversal in forge-export
@pytest.mark.parametrize("bad_id", ["../../x", "/abs/path"])
def test_export_names_folders_from_the_genome_and_refuses_a_forged_id(finished_run, tmp_path, bad_id):
    import shutil

    from search.export import ExportError
    from search.export import run as run_export

    d = tmp_path / "shared-run"
    shutil.copytree(finished_run, d)
    bad_id = str(tmp_path / "abs" / "path") if bad_id.startswith("/") else bad_id
    rows = [json.loads(line) for line in (d / "pareto.jsonl").read_text().splitlines()]
    rows[0]["id"] = bad_id
    (d / "pareto.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "deep" / "er" / "exported"
    outside = sorted(p for p in tmp_path.rglob("*"))
    with pytest.raises(ExportError, match=re.escape(f"row id {bad_id!r} does not match its genome")) as e:
        run_export({"run": str(d), "select": "pareto", "format": "safetensors", "out": str(out)})
    assert "\n" not in str(e.value)
    assert sorted(p for p in tmp_path.rglob("*")) == outside  # nothing written anywhere, out= included
    # the run as forge-search wrote it exports into folders named by the recomputed ids
    shutil.copy(finished_run / "pareto.jsonl", d / "pareto.jsonl")
    s = run_export({"run": str(d), "select": "pareto", "format": "yaml", "out": str(out)})
    assert {p.name for p in out.iterdir() if p.is_dir()} == {x["id"] for x in s["exported"]}
    assert all(re.fullmatch(r"[0-9a-f]+", x["id"]) for x in s["exported"])


def test_export_into_an_export_is_refused_unless_overwrite(finished_run, tmp_path):
    from search.export import ExportError, load_exported
    from search.export import run as run_export

    out = tmp_path / "exported"
    cfg = {"run": str(finished_run), "select": "knee", "out": str(out)}
    first = run_export({**cfg, "format": "json"})
    before = _tree(out)
    with pytest.raises(ExportError, match="already holds an export; allowed: .*overwrite=true"):
        run_export({**cfg, "format": "pt"})
    assert _tree(out) == before
    run_export({**cfg, "format": "pt", "overwrite": True})
    folder = out / first["exported"][0]["id"]
    assert sorted(p.name for p in folder.iterdir()) == ["MODEL_CARD.md", "export.json", "genome.yaml", "model.pt"]
    genome, _ = load_exported(folder)  # one export, not a mix of two
    assert genome.id == folder.name


# ---------------------------------------------------------------- 3. secrets in output
def test_a_store_password_is_in_no_file_and_not_on_the_console(finished_run, tmp_path, capsys):
    """forge-verify with a password in its store URL (the trainer is a fake, so nothing connects)."""
    import shutil

    from search.verify import brief
    from search.verify import run as run_verify
    from tests.search.fakes import FakeBackend, FakePredictor
    from search.evaluators import LossEvaluator

    d = tmp_path / "run"
    shutil.copytree(finished_run, d)
    before = set(_tree(d))
    out = run_verify({"run": str(d), "store": URL, "measure": "none", "k": 2, "control": 1,
                      "trainer": {"_target_": "tests.search.fakes.FakeTrainer"}},
                     {"evaluator": LossEvaluator(FakePredictor()), "backend": FakeBackend()})
    print(json.dumps(brief(out)))
    written = [p for p in d.rglob("*") if p.is_file() and p.relative_to(d).as_posix() not in before]
    assert any(p.name == "verify.json" for p in written)
    console = capsys.readouterr()
    for text in [*(p.read_bytes().decode("latin-1") for p in written), console.out, console.err]:
        assert PASSWORD not in text
    assert "forge:***@127.0.0.1" in (d / "verify" / "verify.json").read_text()


def test_the_hydra_callback_masks_what_hydra_saved(tmp_path):
    from forge.shell.callbacks import MaskSecrets

    run, sweep = tmp_path / "many" / "0", tmp_path / "many"
    (run / ".hydra").mkdir(parents=True)
    escaped = URL.replace(":", "\\:")  # how a multirun writes each override
    (run / ".hydra" / "overrides.yaml").write_text(f"- +store={escaped}\n")
    (run / ".hydra" / "config.yaml").write_text(f"store: {URL}\n")
    (sweep / "multirun.yaml").write_text(f"hydra:\n  overrides:\n    task:\n    - store={URL}\n")
    cfg = OmegaConf.create({"hydra": {"output_subdir": ".hydra", "runtime": {"output_dir": str(run)},
                                      "sweep": {"dir": str(sweep)}, "mode": "RunMode.MULTIRUN"}})
    MaskSecrets().on_job_start(cfg)
    texts = [p.read_text() for p in tmp_path.rglob("*.yaml")]
    assert len(texts) == 3 and not any(PASSWORD in t for t in texts)
    assert yaml.safe_load((run / ".hydra" / "config.yaml").read_text())["store"].startswith("postgresql+psycopg://forge:***@")


@pytest.mark.slow  # three fresh interpreters
def test_hydra_files_of_a_run_and_a_multirun_never_keep_a_password(tmp_path):
    """Any command started with such a URL (here forge-arch, the quickest): .hydra/*.yaml, multirun.yaml."""
    p = _cli("forge-arch", "arch=smollm2-135m", f"+store={URL}", "hydra.run.dir=one", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    q = _cli("forge-arch", "-m", "arch=smollm2-135m,gpt2", f"+store={URL}", "hydra.sweep.dir=many", cwd=tmp_path)
    assert q.returncode == 0, q.stderr[-2000:]
    files = [f for f in tmp_path.rglob("*") if f.is_file()]
    assert {"one/.hydra/overrides.yaml", "many/multirun.yaml", "many/1/.hydra/hydra.yaml"} <= {
        f.relative_to(tmp_path).as_posix() for f in files}
    for text in [*(f.read_bytes().decode("latin-1") for f in files), p.stdout, p.stderr, q.stdout, q.stderr]:
        assert PASSWORD not in text
    assert "forge:***@127.0.0.1" in (tmp_path / "one/.hydra/overrides.yaml").read_text()


def test_mask_keeps_everything_but_the_password():
    assert mask(URL) == "postgresql+psycopg://forge:***@127.0.0.1:1/labels"
    assert mask("postgresql://u:p@ss:w@rd@h/db x sqlite:///a.db") == "postgresql://u:***@h/db x sqlite:///a.db"
    assert mask({"store": [URL], "n": 3}) == {"store": ["postgresql+psycopg://forge:***@127.0.0.1:1/labels"], "n": 3}
    assert mask("postgresql://u@h/db and http://host:80/x") == "postgresql://u@h/db and http://host:80/x"


# ---------------------------------------------------------------- 4. HTML injection in report.html
def test_report_escapes_values_from_summary_json(finished_run, tmp_path):
    import shutil

    from search.report import make_report

    d = tmp_path / "run"
    shutil.copytree(finished_run, d)
    s = json.loads((d / "summary.json").read_text())
    payload = "<script>alert(1)</script>"
    s["hv_anchor"] = {**(s.get("hv_anchor") or {}), "ref": payload}
    s["algorithm"], s["space"] = payload, payload  # a number field holding text is refused (search.run_files)
    (d / "summary.json").write_text(json.dumps(s))
    page = (Path(make_report([d], tmp_path / "report")["report"])).read_text()
    ours = re.sub(r"<script( type=\"application/json\" id=\"fig-\d+\")?>.*?</script>", "", page, flags=re.S)
    assert page.count("<script") - ours.count("<script") == 3  # plotly.js, one figure's JSON, the page's own
    assert "<script" not in ours and page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 3
    assert "<title>Forge</title>" in page and "<table>" in page and "data:image/png;base64," in page
    assert "{" not in re.sub(r"<style>.*?</style>", "", ours, flags=re.S)  # no raw JSON dump


# ---------------------------------------------------------------- the allowlist itself
def test_plugins_resolve_shipped_refuse_others_before_importing_them():
    plugins.trust({})
    from backends.gpu.roofline import RooflineBackend

    assert plugins.resolve("backend", "backends.gpu.roofline.RooflineBackend") is RooflineBackend
    assert "forge.labelling.dispatch.LocalTrainer" in plugins.allowed("dispatch")
    sys.modules.pop("this", None)
    with pytest.raises(plugins.PluginError) as e:
        plugins.resolve("backend", "this.s")  # importing `this` prints the Zen: it must never be imported
    assert "this" not in sys.modules
    msg = str(e.value)
    assert "\n" not in msg and "'this.s' is not an allowed backend plug-in" in msg and "RooflineBackend" in msg
    with pytest.raises(plugins.PluginError, match="None is not an allowed backend plug-in"):
        plugins.resolve("backend", None)


def test_the_live_config_registers_its_own_classes_until_the_next_command(monkeypatch):
    from collections import defaultdict

    monkeypatch.setattr(plugins, "_registered", defaultdict(set))  # the API's objects from earlier tests: not the live config's
    plugins.trust({"backend": {"_target_": "tests.search.fakes.FakeBackend"},
                   "plugins": {"finetune": ["tests.search.fakes:fake_finetune"]}})
    from tests.search.fakes import FakeBackend, fake_finetune

    assert plugins.resolve("backend", "tests.search.fakes.FakeBackend") is FakeBackend
    assert plugins.resolve("finetune", "tests.search.fakes.fake_finetune") is fake_finetune
    plugins.trust({})  # the next command's config names neither
    with pytest.raises(plugins.PluginError):
        plugins.resolve("backend", "tests.search.fakes.FakeBackend")
    with pytest.raises(plugins.PluginError, match="plugins.backend = 3 is invalid"):
        plugins.trust({"plugins": {"backend": 3}})
    plugins.trust({"plugins": {"backend": ["no.such.Backend"]}})
    with pytest.raises(plugins.PluginError, match="cannot be imported"):
        plugins.resolve("backend", "no.such.Backend")
    plugins.trust({})


def test_only_forge_plugins_imports_code_by_name():
    """No other module resolves a name to code (hydra's instantiate/get_class/get_method/call, importlib,
    pydoc.locate): every such path goes through the allowlist."""
    banned = {"instantiate", "get_class", "get_method", "call", "_locate", "locate", "import_module"}
    allowed = {"forge/plugins.py", "surrogate/__init__.py",  # surrogate/__init__: lazy re-exports of fixed names
               "forge/shell/entry.py",  # entry.py: a console script's fixed target (pyproject.toml's [project.scripts])
               "forge/moved.py"}  # moved.py: an old import path's new module, from its fixed MOVED table only
    found = []
    for pkg in ("forge", "backends", "surrogate", "search"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module in ("hydra.utils", "importlib", "pydoc"):
                    found += [f"{rel}: from {node.module} import {a.name}" for a in node.names if a.name in banned]
                elif isinstance(node, ast.Attribute) and node.attr in banned and rel not in allowed and \
                        isinstance(node.value, ast.Name) and node.value.id in ("importlib", "utils", "pydoc"):
                    found.append(f"{rel}: {node.value.id}.{node.attr}")
                elif isinstance(node, ast.Attribute) and node.attr in banned and rel not in allowed and \
                        isinstance(node.value, ast.Attribute) and node.value.attr == "utils":
                    found.append(f"{rel}: hydra.utils.{node.attr}")
    assert [f for f in found if f.split(":")[0] not in allowed] == []
