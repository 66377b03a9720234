"""Issue 56: a run written as an Optuna study (`optuna_study=true` -> <run>/study.db), opened by the real
optuna-dashboard on 127.0.0.1 in a headless Chromium: the Pareto front it draws holds exactly the run's front.
Both packages are the optional extra `optuna` (in `[test]`); without them or chromium the test is skipped, except
under CI=true, where it fails loudly."""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module

from search.cli import run
from search.state import read_jsonl
from tests.search.report.test_report_browser import _chromium


def _need(module: str) -> None:
    try:
        __import__(module)
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{module} is not installed; CI installs the [test] extra, which holds it")
        pytest.skip(f"{module} is the optional extra `optuna` (pip install -e '.[optuna]')")


@pytest.fixture(scope="module")
def study_run(tmp_path_factory):
    """A default search (the main job's config) on a small budget, written as a study as it goes."""
    _need("optuna")
    d = tmp_path_factory.mktemp("optuna") / "run"
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search", overrides=["optuna_study=true", "progress=false", "search.pop_size=8",
                                                 "search.offspring=8", "search.generations=4", f"out_dir={d}"])
    assert run(cfg)["status"] == "complete"
    return d


def _study(d: Path):
    import optuna

    return optuna.load_study(study_name=d.name, storage=f"sqlite:///{d / 'study.db'}")


def test_the_study_holds_one_trial_per_evaluated_genome_and_the_runs_front(study_run):
    st = _study(study_run)
    last = {r["id"]: r for r in read_jsonl(study_run / "archive.jsonl")}
    assert [t.user_attrs["genome_id"] for t in st.trials] == list(last)  # in evaluation order
    failed = {t.user_attrs["genome_id"] for t in st.trials if t.state.name == "FAIL"}
    assert failed == {i for i, r in last.items() if not r.get("feasible", True)}
    assert {t.user_attrs["genome_id"] for t in st.best_trials} == {r["id"] for r in read_jsonl(study_run / "pareto.jsonl")}
    t0 = next(t for t in st.trials if t.state.name == "COMPLETE")
    assert st.metric_names == json.loads((study_run / "summary.json").read_text())["objectives"]
    assert t0.user_attrs["label"] == "predicted" and len(t0.user_attrs["loss_interval"]) == 2


def test_a_real_label_marks_its_trial(study_run, tmp_path):
    import shutil

    from search.optuna_study import for_run

    d = tmp_path / study_run.name
    shutil.copytree(study_run, d)
    gid = _study(d).trials[0].user_attrs["genome_id"]
    (d / "labels.jsonl").write_text(json.dumps({"genome_id": gid, "label": 3.25}) + "\n")
    w = for_run(d)
    assert w.sync() == len(_study(d).trials)
    t = next(t for t in _study(d).trials if t.user_attrs["genome_id"] == gid)
    assert t.user_attrs["label"] == "real" and t.user_attrs["real_loss"] == 3.25


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_optuna_dashboard_draws_exactly_the_runs_front(study_run, tmp_path):
    """The dashboard's own Pareto-front plot, read from the page (its "Best Trial" trace, each point's trial number,
    mapped to the genome id the trial carries), is pareto.jsonl."""
    _need("optuna_dashboard")
    exe = _chromium()
    from tests.search.cdp import Browser

    port = _free_port()
    dash = subprocess.Popen([str(Path(sys.executable).with_name("optuna-dashboard")), f"sqlite:///{study_run / 'study.db'}",
                             "--host", "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600  # a bound on a broken start only: it waits for the answer
        while True:
            try:
                studies = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=30).read())
                break
            except OSError:
                assert dash.poll() is None and time.monotonic() < deadline, dash.stderr.read() if dash.poll() else ""
                time.sleep(0.2)
        sid = studies["study_summaries"][0]["study_id"]
        with Browser(exe, tmp_path / "profile", 1280, 900) as b:
            b.open(f"http://127.0.0.1:{port}/dashboard/studies/{sid}",
                   "document.querySelector('#graph-pareto-front .scatterlayer') !== null", timeout=600)
            texts = b.js("[].concat.apply([], document.getElementById('graph-pareto-front').data.filter(function (t) {"
                         " return /Best Trial/.test(t.hovertemplate || ''); }).map(function (t) { return t.text; }))")
            drawn = b.js("document.querySelectorAll('#graph-pareto-front .scatterlayer .point').length")
    finally:
        dash.terminate()
        dash.wait(30)
    numbers = [int(re.search(r'"number": (\d+)', t).group(1)) for t in texts]
    by_number = {t.number: t.user_attrs["genome_id"] for t in _study(study_run).trials}
    front = {r["id"] for r in read_jsonl(study_run / "pareto.jsonl")}
    assert sorted(by_number[n] for n in numbers) == sorted(front) and drawn >= len(front)


def test_without_optuna_the_option_is_refused_in_one_line(monkeypatch, tmp_path):
    """`optuna_study=true` without the extra: one line naming it, before any search work."""
    from search.errors import SearchConfigError
    from search.optuna_study import StudyWriter

    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna -> ImportError
    with pytest.raises(SearchConfigError, match=r"optuna_study=true needs the optional packages optuna and "
                                                r"optuna-dashboard: pip install -e '\.\[optuna\]'"):
        StudyWriter(tmp_path, ["val_loss"])
