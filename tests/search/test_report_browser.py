"""report.html in a real headless Chromium (Debian's `chromium`, installed by .ci/chromium.sh): the page loads
with no console message, draws its plotly projections offline and holds the front table and the settings.
Without chromium the test is skipped, except under CI=true, where it fails loudly."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.search.test_report_page import report  # noqa: F401  (the module fixture: a run and its report)

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
                       capture_output=True, text=True, timeout=180)
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
