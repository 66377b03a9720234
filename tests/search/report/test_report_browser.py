"""report.html in a real headless Chromium (Debian's `chromium`, installed by .ci/chromium.sh): the page loads
with no console message, draws its plotly projections offline and holds the front table and the settings.
Without chromium the test is skipped, except under CI=true, where it fails loudly."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.search.report.test_report_page import report  # noqa: F401  (the module fixture: a run and its report)

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=10000", "--dump-dom")


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed; CI must install it (source .ci/chromium.sh)")
        pytest.skip("chromium is not installed (apt-get install chromium, or source .ci/chromium.sh)")
    return exe


def load(page: Path, profile: Path) -> tuple[str, list[str]]:
    """(the DOM after the scripts ran, the console messages) of `page` in a fresh profile."""
    p = subprocess.run([_chromium(), *FLAGS, f"--user-data-dir={profile}", page.resolve().as_uri()],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout, [ln for ln in p.stderr.splitlines() if ":CONSOLE" in ln]


def test_the_console_capture_sees_errors(tmp_path):
    """The check below can fail: a page with an error is caught by the same capture."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>missingFunction();</script></body></html>")
    _, console = load(bad, tmp_path / "profile")
    assert any("Uncaught ReferenceError: missingFunction" in ln for ln in console)


def test_report_loads_without_console_errors_and_draws_table_and_plots(report, tmp_path):  # noqa: F811
    d, _, _ = report
    dom, console = load(d.parent / "rep" / "report.html", tmp_path / "profile")
    assert console == []
    assert 'id="front-table-0"' in dom and 'class="knee"' in dom and 'id="settings-0"' in dom
    plot = dom[dom.index('id="plot-0"'):]
    assert "js-plotly-plot" in dom[dom.rindex("<div", 0, dom.index('id="plot-0"')):dom.index('id="plot-0"') + 200]
    assert plot.count('class="main-svg"') >= 2 and "scatterlayer" in plot  # plotly drew the points


MARKERS = """(function () {  // every front marker's viewport pixel and its export command, the plot scrolled into view
  var div = document.getElementById("plot-0"); div.scrollIntoView({block: "center"});
  var L = div._fullLayout, box = div.getBoundingClientRect(), out = [];
  div._fullData.forEach(function (t, c) {
    if (!t.customdata) return;
    var xa = L["xaxis" + t.xaxis.slice(1)], ya = L["yaxis" + t.yaxis.slice(1)];
    for (var i = 0; i < t.x.length; i++)
      out.push([box.left + xa._offset + xa.l2p(t.x[i]), box.top + ya._offset + ya.l2p(t.y[i]), t.customdata[i], c]);
  });
  return out; })()"""


def _center(b, selector: str) -> tuple[float, float]:
    r = b.js(f"(function () {{ var e = document.querySelector({selector!r}); e.scrollIntoView({{block: 'center'}}); "
             "var r = e.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()")
    return r[0], r[1]


def test_real_clicks_on_front_markers_show_their_export_command_and_the_page_fits_1280px(report, tmp_path):  # noqa: F811
    """Issues 44 §3 and 56 §4: real mouse events (DevTools Input.dispatchMouseEvent) at each red marker's pixel,
    and at archive markers', show the export command of the very genome the tooltip names there (it could name an
    archive genome while the click gave a neighbouring front member's command); the page needs no sideways scroll
    in a 1,280-px window."""
    import math
    import re

    from tests.search.cdp import Browser

    d, _, _ = report
    with Browser(_chromium(), tmp_path / "profile", 1280, 900) as b:
        b.open((d.parent / "rep" / "report.html").resolve().as_uri(),
               "document.querySelector('#plot-0 .scatterlayer') !== null")
        assert b.js("document.documentElement.scrollWidth") <= b.js("window.innerWidth") == 1280
        markers = b.js(MARKERS)
        front = b.js("document.getElementById('plot-0')._fullData.map(function (t) { return t.legendgroup; })")
        on_front = [m for m in markers if front[m[3]] == "front"]
        archive = [m for m in markers if front[m[3]] != "front"]
        archive = archive[::max(1, len(archive) // 12)]  # a dozen archive genomes: each click costs ~0.4 s
        assert len(on_front) >= 3 and archive and all(m[2].startswith(f"forge-export run={d} select=id:")
                                                      for m in markers)
        exact = 0
        for x, y, cmd, trace in on_front + archive:
            b.js("document.getElementById('pick-0').textContent = '-'")
            b.click(x, y)
            got = b.js("document.getElementById('pick-0').textContent")
            label = b.js("(document.querySelector('#plot-0 .hoverlayer .hovertext') || {}).textContent || ''")
            near = [m[2] for m in markers if math.hypot(m[0] - x, m[1] - y) <= 8.0]
            assert got in near, (x, y, got)  # a genome drawn at that pixel
            assert re.search(r"select=id:(\w{12})", got).group(1) in label, (got, label)  # the one the tooltip names
            exact += got == cmd
        assert exact >= len(on_front) // 2


def test_the_front_table_sorts_filters_by_budget_and_a_row_click_shows_its_command(report, tmp_path):  # noqa: F811
    from tests.search.cdp import Browser

    d, _, _ = report
    with Browser(_chromium(), tmp_path / "profile", 1280, 900) as b:
        b.open((d.parent / "rep" / "report.html").resolve().as_uri())
        col = b.js("Array.prototype.map.call(document.querySelectorAll('#front-table-0 th'), "
                   "function (h) { return h.textContent; }).indexOf('ttft_ms')")
        b.click(*_center(b, f"#front-table-0 th:nth-child({col + 1})"))
        vals = b.js(f"Array.prototype.map.call(document.querySelectorAll('#front-table-0 tbody tr'), "
                    f"function (r) {{ return +r.cells[{col}].getAttribute('data-v'); }})")
        assert vals == sorted(vals) and len(vals) >= 3
        assert len(vals) == len((d / "pareto.jsonl").read_text().splitlines())  # the whole front: the filter counts it
        budget = sorted(vals)[len(vals) // 2]
        b.click(*_center(b, "#budget-0 input[data-col='0']"))  # the first cost column: ttft_ms
        assert b.js("document.querySelector('#budget-0 input[data-col=\"0\"]').parentNode.textContent").startswith(
            "ttft_ms")
        b.call("Input.insertText", text=repr(budget))
        shown = b.js(f"Array.prototype.filter.call(document.querySelectorAll('#front-table-0 tbody tr'), "
                     f"function (r) {{ return r.style.display !== 'none'; }}).map(function (r) {{ "
                     f"return +r.cells[{col}].getAttribute('data-v'); }})")
        assert shown and max(shown) <= budget and len(shown) == sum(v <= budget for v in vals) < len(vals)
        assert b.js("document.getElementById('shown-0').textContent").startswith(f"{len(shown)} of {len(vals)} shown")
        _p1_is_against_the_best_shown_member(b, d)
        b.click(*_center(b, "#front-table-0 tbody tr:first-child td:nth-child(4)"))
        first = b.js("document.querySelector('#front-table-0 tbody tr').getAttribute('data-export')")
        assert b.js("document.getElementById('pick-0').textContent") == first and first.startswith("forge-export run=")


def _p1_is_against_the_best_shown_member(b, d: Path) -> None:
    """Under a budget, each shown row's p #1 is search.odds.p_best over the shown rows only (the page's JavaScript
    against numpy's interp and rounding), and the best shown member reads "best"."""
    import json

    from search.console import front_rows
    from search.odds import p_best, run_odds

    got = b.js("Array.prototype.filter.call(document.querySelectorAll('#front-table-0 tbody tr'), "
               "function (r) { return r.style.display !== 'none'; }).map(function (r) { "
               "return [r.getAttribute('data-id'), r.cells[1].textContent]; })")
    by_id = {r["id"]: r for r in front_rows(d)}
    rows = [by_id[i] for i, _ in got]
    odds = run_odds(json.loads((d / "summary.json").read_text()))
    assert odds is not None and len(rows) >= 2
    want = ["best" if v != v else f"{v:.2f}" for v in p_best(rows, odds)]
    assert [t for _, t in got] == want
    assert want.count("best") == 1 and b.js("document.getElementById('shown-0').textContent").endswith(
        rows[want.index("best")]["id"][:8])
