"""The main job's last screen: loss intervals in the run files, the front table, and the JSON form."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from search.cli import json_argv
from search.console import front_rows, front_table, show_end
from search.export import select
from search.state import read_jsonl
from surrogate.pairwise import PairwiseOdds
from tests.search.fakes import FakePredictor

HALF = 0.03
ODDS = PairwiseOdds((0.0, 0.02, 0.06), (0.5, 0.7, 0.95))  # a steep curve: a tiny front splits into groups


class IntervalPredictor(FakePredictor):
    """The fake predictor with a fixed-width calibrated interval, as a conformal checkpoint has."""

    def interval(self, mu, sigma, level):
        return np.asarray(mu) - HALF, np.asarray(mu) + HALF

    def interval_info(self, has_sigma):
        return {"method": "conformal-residual", "source": {"n_rows": 10, "data": "fake", "split": "fake"}}

    pairwise = ODDS


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from backends.interface import Workload
    from forge.spaces.space import load_space
    from search.evaluators import LossEvaluator
    from search.build import build_search
    from tests.search.conftest import tiny_cfg
    from tests.search.fakes import FakeBackend

    d = tmp_path_factory.mktemp("run")
    ev = LossEvaluator(IntervalPredictor(), level=0.9)
    build_search(tiny_cfg(), d, {"space": load_space("iha-tiny"), "evaluator": ev, "backend": FakeBackend(),
                                 "workload": Workload()}).run()
    return d


def test_every_row_and_the_summary_carry_the_interval(run_dir):
    s = json.loads((run_dir / "summary.json").read_text())
    for name in ("archive.jsonl", "pareto.jsonl"):
        for r in read_jsonl(run_dir / name):
            m = r["metrics"]
            assert {"val_loss", "mu", "sigma", "loss_lo", "loss_hi"} <= set(m)
            assert m["loss_lo"] == pytest.approx(m["mu"] - HALF) and m["loss_hi"] == pytest.approx(m["mu"] + HALF)
    iv = s["loss_interval"]
    assert (iv["level"], iv["method"], iv["source"]["data"]) == (0.9, "conformal-residual", "fake")
    rows = read_jsonl(run_dir / "pareto.jsonl")
    best = min(r["metrics"]["mu"] for r in rows)
    pw = s["loss_pairwise"]  # the run names the odds it used, and how many members they cannot rule out
    assert PairwiseOdds.from_dict(pw).x == ODDS.x and pw["rule_out"] == 0.9
    assert pw["n_not_ruled_out"] == sum(ODDS.prob(r["metrics"]["mu"] - best) < 0.9 for r in rows) >= 1
    assert sum(pw["groups"]) == len(rows) and pw["groups"][0] == pw["n_not_ruled_out"]


def _text(table_or_fn) -> str:
    con = Console(record=True, width=140, force_terminal=False)
    con.print(table_or_fn)
    return con.export_text()


def test_front_table_columns_order_marks_and_caption(run_dir):
    s = json.loads((run_dir / "summary.json").read_text())
    rows = front_rows(run_dir)
    t = front_table(rows, s)
    heads = [c.header for c in t.columns]
    assert heads == ["#", "", "p #1", "id", "loss μ [90%]", "params (M)", "TTFT ms", "TPOT ms", "energy µJ/tok"]
    losses = [r["metrics"]["val_loss"] for r in rows]
    assert losses == sorted(losses)  # best first
    text = _text(t)
    knee = select(rows, "knee", s["objectives"])[0]["id"]
    knee_line = next(line for line in text.splitlines() if knee[:8] in line)
    assert "knee" in knee_line and sum("knee" in line for line in text.splitlines()) == 1
    m0 = rows[0]["metrics"]
    assert f"{m0['mu']:.3f} [{m0['loss_lo']:.3f}, {m0['loss_hi']:.3f}]" in text and " ± " not in text
    best = rows[0]["metrics"]["mu"]
    for r in rows:  # each member's p #1 is the odds curve read at its Δμ from the best-predicted member
        line = next(x for x in text.splitlines() if r["id"][:8] in x)
        p = "best" if r is rows[0] else f"{ODDS.prob(r['metrics']['mu'] - best):.2f}"
        assert re.search(rf"\s{p}\s+{r['id'][:8]}", line), (p, line)
    assert "cannot tell" not in text and "trains better than this one" in text and "failure risk" in text


def test_long_front_shows_the_best_rows_and_the_knee(run_dir):
    s = json.loads((run_dir / "summary.json").read_text())
    rows = front_rows(run_dir)
    knee = select(rows, "knee", s["objectives"])[0]["id"]
    t = front_table(rows, s, limit=1)
    assert t.row_count == (1 if rows[0]["id"] == knee else 2)
    assert f"{len(rows) - t.row_count} more in pareto.jsonl" in _text(t)


def test_last_screen_table_with_next_steps_or_json(run_dir, capsys):
    s = json.loads((run_dir / "summary.json").read_text())
    con = Console(record=True, width=140)
    show_end(s, {"status": s["status"], "loss_interval": s["loss_interval"]}, as_json=False, console=con)
    text = con.export_text()
    capsys.readouterr()
    assert f"run directory: {run_dir}" in text
    for cmd in ("forge-report runs=", "forge-export run="):
        assert cmd + str(run_dir) in text
    assert f"forge-verify run={run_dir}" in text or "forge-verify run=runs/tiny k=4 control=4" in text
    show_end(s, {"status": s["status"], "loss_interval": s["loss_interval"]}, as_json=True)
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "complete" and "n_indistinguishable" not in out["loss_interval"]


def test_json_flag_becomes_an_override():
    assert json_argv(["seed=1", "--json"]) == ["seed=1", "json=true"]
    assert json_argv(["seed=1"]) == ["seed=1"]


@pytest.mark.slow  # ~12 s: Hydra and the real tiny surrogate on the roofline
def test_forge_search_main_prints_json_with_quiet(tmp_path, capsys, monkeypatch):
    """The console entry end to end (Hydra, the tiny shipped surrogate, a 1-generation budget): --json
    gives the machine-readable form with the calibrated interval's summary."""
    import sys

    from search.cli import search_main

    monkeypatch.setattr(sys, "argv", ["forge-search", "space=iha-tiny", "evaluator.predictor=forgeformer-iha-tiny",
                                      "search.generations=1", "search.pop_size=6", "search.offspring=6",
                                      "progress=false", f"hydra.run.dir={tmp_path}", "--json"])
    search_main()
    out = json.loads(capsys.readouterr().out)
    assert out["loss_interval"]["method"] == "conformal-residual" and out["loss_interval"]["level"] == 0.9
    assert isinstance(out["loss_pairwise"]["n_not_ruled_out"], int)  # the shipped tiny checkpoint carries odds
    assert out["loss_pairwise"]["predictor"] == "forgeformer-iha-tiny"


def test_interval_level_is_checked():
    from search.evaluators import LossEvaluator
    from search.errors import SearchConfigError

    with pytest.raises(SearchConfigError, match="evaluator.interval_level = 1.5; allowed: a number with 0 < level < 1"):
        LossEvaluator(IntervalPredictor(), level=1.5)
    ev = LossEvaluator(FakePredictor(), level=0.8)  # a predictor without `interval`: NaN, said so in the summary
    lo, hi = ev.interval(np.array([3.0]), np.zeros(1))
    assert np.isnan(lo).all() and np.isnan(hi).all() and ev.interval_info()["method"] == "none"


def test_summary_notes_a_pass_count_other_than_the_calibration_s():
    from search.evaluators import LossEvaluator
    from surrogate.loading import load_predictor

    p = load_predictor("forgeformer-iha-tiny")
    assert LossEvaluator(p, n_mc=4).interval_info()["method"] == "conformal-sigma"
    assert "n_mc=10" in LossEvaluator(p, n_mc=4).interval_info()["note"]
    assert "note" not in LossEvaluator(p, n_mc=10).interval_info()
    assert LossEvaluator(p).interval_info()["method"] == "conformal-residual"


@pytest.mark.parametrize("protocol, cuda, verify_here", [("paper", False, False), ("paper", True, True),
                                                         ("cpu-proxy", False, True)])
def test_next_commands_suggest_only_what_trains_here(tmp_path, monkeypatch, protocol, cuda, verify_here):
    """forge-verify trains under the run's protocol: without a GPU the paper protocol cannot, so the next line is
    the tiny recipe whose verification trains on this CPU."""
    import yaml

    import forge.runtime.needs as needs
    from forge.runtime.config import group_yaml
    from search.console import next_commands

    monkeypatch.setattr(needs, "_cuda", lambda: cuda)
    cfg = {"protocol": group_yaml("protocol", protocol), "corpus": group_yaml("corpus", "stdlib")}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    cmds = next_commands(tmp_path)
    assert cmds[:2] == [f"forge-report runs={tmp_path}", f"forge-export run={tmp_path} select=knee"]
    assert (cmds[2:] == [f"forge-verify run={tmp_path}"]) is verify_here
    if not verify_here:
        assert cmds[2].startswith("# ") and cmds[3].startswith("forge-search space=iha-tiny")
        assert "protocol=cpu-proxy corpus=stdlib" in cmds[3]
        assert cmds[4] == "forge-verify run=runs/tiny k=4 control=4"


def test_an_interrupted_search_ends_without_the_front_or_next_lines(run_dir, capsys):
    from search.cli import end_screen

    s = json.loads((run_dir / "summary.json").read_text())
    end_screen({**s, "status": "interrupted"}, as_json=False)
    assert capsys.readouterr().out == ""
    end_screen(s, as_json=False)
    assert "next:" in capsys.readouterr().out


@pytest.fixture(scope="module")
def main_job_dir(tmp_path_factory):
    """The default main job's run folder (`forge-search`, no arguments), made once."""
    from hydra import compose, initialize_config_module

    from search.cli import run

    out = tmp_path_factory.mktemp("main-job")
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        run(compose("forge-search", overrides=["progress=false", f"out_dir={out}"]))
    return out


def test_main_job_table_at_80_columns_cuts_nothing_and_every_row_has_a_handle(main_job_dir, monkeypatch):
    """Issue 44 §4: at 80 columns the id, the interval's bounds, TTFT and the knee mark show whole, and the id
    on every row is a handle `forge-export select=id:<handle>` resolves to that very member."""
    from search.console import _fmt

    monkeypatch.setenv("COLUMNS", "80")
    s = json.loads((main_job_dir / "summary.json").read_text())
    con = Console(record=True, width=80, force_terminal=True)
    show_end(s, console=con)
    text = con.export_text()
    table = text[:text.index("hypervolume")]
    assert "…" not in table and max(len(line.rstrip()) for line in table.splitlines()) <= 80
    assert "p #1" in table and "cannot tell" not in text  # issue 51: only what the run's odds support
    pareto, lines = front_rows(main_job_dir), [ln for ln in table.splitlines() if re.match(r"\s+\d+\s", ln)]
    assert len(lines) >= min(len(pareto), 30)
    knee = select(pareto, "knee", s["objectives"])[0]["id"]
    for line in lines:
        handle = re.search(r"\b[0-9a-f]{8,16}\b", line).group(0)
        (row,) = select(pareto, f"id:{handle}", s["objectives"])  # accepted, and names one member
        m = row["metrics"]
        assert f"{m['mu']:.3f} [{m['loss_lo']:.3f}, {m['loss_hi']:.3f}]" in line
        assert f" {_fmt(m['ttft_ms'], 'sig')} " in line + " "
        assert ("knee" in line) == (row["id"] == knee)
    assert any(knee[:8] in line for line in lines)
    assert "forge-verify run=" in text and " control=0" in text and " tier=" not in text  # the decide line


def test_progress_keeps_gen_n_of_n_at_80_columns():
    from types import SimpleNamespace

    from search.progress import SearchProgress

    con = Console(record=True, width=80, force_terminal=True)
    with SearchProgress(40, console=con) as p:
        p.update(SimpleNamespace(history=[{"generation": 12, "archive_size": 64, "hv": 7.0123, "best": {
            "val_loss": 2.5661, "ttft_ms": 0.2081, "tpot_ms": 0.176, "energy_per_token_uj": 6614.0}}]))
    assert "gen 13/41" in con.export_text()


def test_the_docs_main_job_output_is_what_the_main_job_prints(main_job_dir):
    """Issue 51 §2: getting-started's "What the main job prints" block, line by line, is a real run's output
    (abridged rows skipped, the run folder as <stamp>, the machine's own seconds not compared)."""
    from pathlib import Path

    from search.suggest import rel

    doc = (Path(__file__).resolve().parents[3] / "docs" / "getting-started.md").read_text()
    block = re.search(r"```text\n(Pareto front: .*?)```", doc, re.S).group(1).splitlines()
    s = json.loads((main_job_dir / "summary.json").read_text())
    con = Console(record=True, width=110, force_terminal=False)
    show_end(s, console=con)
    got = [ln.rstrip() for ln in con.export_text().replace(str(rel(main_job_dir)), "outputs/search/<stamp>")
           .splitlines()]
    for line in block:
        if line.strip() == "…":
            continue
        if line.startswith("hypervolume"):  # the search's own seconds are that machine's
            head = line.rsplit(",", 1)[0]
            assert any(g.startswith(head) for g in got), line
            continue
        assert line.rstrip() in got, line


def test_constraints_print_with_the_front_and_one_that_never_bound_says_so(tmp_path):
    """Issue 56 §3: the last screen lists the run's constraints; one no evaluated genome came near says so, with
    the closest value; one that excluded genomes says how many (counted over archive.jsonl's genomes)."""
    from backends.interface import Workload
    from forge.spaces.space import load_space
    from search.build import build_search
    from search.constraints import constraint_use, parse_constraint
    from search.evaluators import LossEvaluator
    from search.state import read_jsonl
    from tests.search.conftest import tiny_cfg
    from tests.search.fakes import FakeBackend

    recs = [{"metrics": {"tpot_ms": v}} for v in (0.2, 0.5, 0.9)]
    use = constraint_use([parse_constraint("tpot_ms <= 0.5"), parse_constraint("tpot_ms < 0.5"),
                          parse_constraint("tpot_ms > 0.1")], recs)
    assert [(u["failed"], u["closest"]) for u in use] == [(1, 0.9), (2, 0.9), (0, 0.2)]
    cfg = tiny_cfg()
    cfg["constraints"] = ["tpot_ms <= 1e6"]
    build_search(cfg, tmp_path, {"space": load_space("iha-tiny"), "evaluator": LossEvaluator(IntervalPredictor(), level=0.9),
                                 "backend": FakeBackend(), "workload": Workload()}).run()
    s = json.loads((tmp_path / "summary.json").read_text())
    largest = max({r["id"]: r["metrics"]["tpot_ms"] for r in read_jsonl(tmp_path / "archive.jsonl")}.values())
    con = Console(record=True, width=200)
    show_end(s, {}, console=con)
    text = con.export_text()
    assert (f"constraints: tpot_ms <= 1e+06 (never bound: no evaluated genome came near it, the largest tpot_ms "
            f"was {largest:.4g})") in text


def test_the_tiny_recipe_after_a_search_on_the_users_accelerator_carries_its_searchpath(tmp_path):
    """Issue 56 §5: a run launched with `hydra.searchpath=[...]` (the user's backend yaml) gets a tiny `next:`
    search with that searchpath, and the line runs as printed (it failed: "Could not find 'backend/my-npu'")."""
    import shlex
    import subprocess
    import sys

    import yaml

    from search.suggest import tiny_recipe

    conf = Path(__file__).resolve().parents[3] / "docs" / "examples" / "conf"
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"searchpath": [f"file://{conf}"]}}))
    cmd = tiny_recipe({"space": {"name": "iha-paper"}, "backend": {"name": "my-npu"}}, run)[0]
    assert f"hydra.searchpath=[file://{conf}]" in cmd and "backend=my-npu" in cmd
    argv = shlex.split(cmd)
    argv[0] = str(Path(sys.executable).with_name("forge-search"))
    p = subprocess.run([*argv, "search.pop_size=4", "search.offspring=4", "search.generations=1", "progress=false",
                        f"hydra.run.dir={tmp_path / 'tiny'}"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]


def test_a_sweep_ends_with_its_jobs_and_the_report_over_them(tmp_path, capsys):
    """Issue 56 §8: `forge-search -m hydra/launcher=submitit_local ...` printed no front and no next: (each job's
    screen went to submitit's logs): the driver ends every sweep with a table of its jobs and the report line."""
    import yaml
    from omegaconf import OmegaConf

    from search.sweep_end import SweepEnd

    for i in (0, 1):
        (tmp_path / str(i) / ".hydra").mkdir(parents=True)
        (tmp_path / str(i) / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"seed={i}", "progress=false"]))
        (tmp_path / str(i) / "summary.json").write_text(json.dumps({"status": "complete", "archive_size": 3 + i,
                                                                     "hypervolume": 1.5, "run_dir": str(tmp_path / str(i))}))
    SweepEnd().on_multirun_end(OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}}}))
    out = capsys.readouterr().out
    assert "sweep: 2 jobs" in out and "seed" in out and "progress" not in out and "1.5000" in out
    assert f"forge-report runs={tmp_path}" in out
