"""report.html shows what to pick: the front table (knee, [lo, hi], an export command per member), the run's
settings and interactive Pareto projections with plotly embedded (no network); checked in a real browser."""
from __future__ import annotations

import json
import re

import pytest
import yaml

from search.report import make_report
from search.state import read_jsonl
from tests.search.cli.test_console import IntervalPredictor


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    from backends.interface import Workload
    from forge.spaces.space import load_space
    from search.evaluators import LossEvaluator
    from search.build import build_search
    from tests.search.conftest import tiny_cfg
    from tests.search.fakes import FakeBackend

    d = tmp_path_factory.mktemp("run")
    cfg = tiny_cfg()
    build_search(cfg, d, {"space": load_space("iha-tiny"), "evaluator": LossEvaluator(IntervalPredictor(), level=0.9),
                          "backend": FakeBackend(), "workload": Workload()}).run()
    (d / "config.yaml").write_text(yaml.safe_dump({**cfg, "evaluator": {"kind": "surrogate",
                                                                         "predictor": "forgeformer-iha-tiny"},
                                                   "backend": {"name": "fake", "hardware": "host-cpu"}}))
    out = make_report([d], d.parent / "rep")
    return d, out, (d.parent / "rep" / "report.html").read_text()


def test_front_table_marks_the_knee_and_gives_each_member_its_export_command(report):
    from search.console import _knee, front_rows

    d, _, page = report
    s = json.loads((d / "summary.json").read_text())
    rows = front_rows(d)
    knee = _knee(rows, s["objectives"])
    table = re.search(r'<table class="front" id="front-table-0"[^>]*>(.*?)</table>', page, re.S).group(1)
    assert table.count("<tr class=") == len(rows)
    assert re.search(rf'<tr class="knee" data-id="{knee}"', table) and table.count('class="knee"') == 1
    for h in ("p #1", "loss interval [lo, hi]", "ttft_ms", "tpot_ms", "energy_per_token_uj", "params", "export"):
        assert f">{h}</th>" in table
    first = rows[0]
    lo, hi = first["metrics"]["loss_lo"], first["metrics"]["loss_hi"]
    assert f"[{float(lo):.3f}, {float(hi):.3f}]" in table
    assert f"forge-export run={d} select=id:{first['id'][:12]}" in table


def test_groups_and_odds_are_named_and_the_runs_table_says_what_its_count_is(report):
    from search.odds import group_sizes, loss_groups, run_odds

    d, _, page = report
    s = json.loads((d / "summary.json").read_text())
    rows = [json.loads(x) for x in (d / "pareto.jsonl").read_text().splitlines()]
    sizes = group_sizes(loss_groups(rows, run_odds(s)))
    assert f"group sizes: {', '.join(map(str, sizes))}." in page and "cannot tell" not in page
    assert "trains better than this one" in page and "failure risk" in page
    if len(rows) > 1:
        assert f"forge-verify run={d} k=" in page and " tier=" not in page
    n = s["loss_pairwise"]["n_not_ruled_out"]
    assert ">not ruled out (best wins p &lt; 0.9)</th>" in page and f">{n} of {s['archive_size']} members</td>" in page


def test_the_exported_command_selects_that_member(report):
    from search.export import select

    d, _, _ = report
    rows = [json.loads(x) for x in (d / "pareto.jsonl").read_text().splitlines()]
    assert select(rows, f"id:{rows[-1]['id'][:12]}", ["val_loss"]) == [rows[-1]]
    from search.export import ExportError

    with pytest.raises(ExportError, match="0 Pareto genomes have this id prefix"):
        select(rows, "id:ffffffffffffffff0", ["val_loss"])


def test_settings_and_an_offline_interactive_plot(report):
    _, _, page = report
    settings = re.search(r'<table class="settings" id="settings-0">(.*?)</table>', page, re.S).group(1)
    for k, v in (("space", "iha-tiny"), ("backend", "fake"), ("machine (modelled)", "host-cpu"),
                 ("loss predictor", "forgeformer-iha-tiny"), ("seed", "0"), ("constraints", "val_loss &lt; 3.8")):
        assert f"<td>{k}</td><td>{v}</td>" in settings
    from search.report_page import plotly_js

    assert page.count(plotly_js()) == 1  # plotly.js itself is inline, once
    ours = page.replace(plotly_js(), "")
    assert "https://" not in ours and 'src="http' not in ours  # and nothing else is fetched
    assert page.count('<script type="application/json" id="fig-0">') == 1 and "Plotly.newPlot" in page
    fig = json.loads(re.search(r'id="fig-0">(.*?)</script>', page, re.S).group(1))
    front = [t for t in fig["data"] if t["name"].startswith("Pareto front")]
    assert front and all(c.startswith("forge-export run=") for c in front[0]["customdata"])
    assert any("loss μ" in h and " in [" in h and "layers (" in h for h in front[0]["hovertext"])


def test_forge_report_ends_with_a_short_summary_and_the_pages_path(report, tmp_path, capsys):
    from search.report import human

    d, out, _ = report
    lines = human(out)
    assert lines[0] == "report of 1 run(s), 1 recipe(s):" and lines[1].startswith("  nsga+iha-tiny@fake: hypervolume ")
    assert lines[2].startswith("page (") and lines[2].endswith("report.html") and "{" not in "".join(lines)
    make_report([d], tmp_path / "again", progress=True)  # not a terminal: a line per step on stderr
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "forge-report: reading and drawing: 0/6 to do" and err[-1].startswith(
        "forge-report: reading and drawing 6/6 (report.html): ")


def test_every_member_is_in_the_table_and_the_pages_exports_do_not_collide_with_the_consoles(report):
    """Issue 56 §4: the table holds every front member (the budget filter counts the whole front; none is
    reachable only by clicking, or nowhere); each page export writes to a folder of its own (`exported-<id>`),
    never the `exported/` of the console's `next:` export, so running both works."""
    from search.console import next_commands
    from search.report_page import front_table

    d, _, page = report
    rows = read_jsonl(d / "pareto.jsonl")
    table = front_table(d, rows, json.loads((d / "summary.json").read_text()), None)
    assert {r["id"] for r in table["rows"]} == {r["id"] for r in rows} and table["more"] == 0
    console_export = next(c for c in next_commands(d) if c.startswith("forge-export"))
    console_out = re.search(r"out=(\S+)", console_export)
    console_out = console_out.group(1) if console_out else "exported"
    outs = [re.search(r"out=(\S+)", r["export"]).group(1) for r in table["rows"]]
    assert console_out not in outs and len(set(outs)) == len(outs)
    assert all(o == f"exported-{r['id'][:8]}" for o, r in zip(outs, table["rows"]))


def test_each_run_row_links_to_its_section_and_back(report):
    """Issue 56 §8: a multirun report (21,537 px) had no links to its runs: each row of the Runs table links to
    that run's front section, and each section back to the table."""
    d, _, page = report
    assert '<h2 id="runs">' in page and f'<a href="#front-0">{d.name}</a>' in page
    assert 'id="front-0"' in page and '<a href="#runs"' in page
