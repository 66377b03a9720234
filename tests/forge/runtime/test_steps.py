"""Long commands show progress: one line per step when not a terminal, a rich bar on one; forge-label's steps."""
from __future__ import annotations

import io

import pytest

from forge.runtime.steps import Steps, clock


def test_a_line_per_step_with_n_of_m_elapsed_and_remaining_when_not_a_terminal():
    buf = io.StringIO()
    with Steps("forge-x", "training", 3, stream=buf) as st:  # a StringIO is not a terminal
        st.step("a")
        st.step("b")
        st.step()
    lines = buf.getvalue().splitlines()
    assert lines[0] == "forge-x: training: 0/3 to do"
    assert lines[1].startswith("forge-x: training 1/3 (a): ") and "elapsed, ~" in lines[1] and "left" in lines[1]
    assert lines[3].startswith("forge-x: training 3/3: ") and "left" not in lines[3]


def test_a_bar_on_a_terminal_and_nothing_when_disabled():
    buf = io.StringIO()
    with Steps("forge-x", "training", 2, stream=buf, tty=True) as st:
        st.step("first genome")
        st.step("second genome")
    out = buf.getvalue()
    assert "training" in out and "2/2" in out and "forge-x:" not in out  # the bar, not the log lines
    quiet = io.StringIO()
    with Steps("forge-x", "training", 2, enabled=False, stream=quiet) as st:
        st.step("x")
    assert quiet.getvalue() == "" and st.done == 1


def test_clock_reads_at_a_glance():
    assert [clock(s) for s in (3.2, 125, 3720)] == ["3 s", "2 min 05 s", "1 h 02 min"]


def test_forge_label_steps_and_its_human_summary(tiny_label):
    from forge.labelling.cli import _progress, human

    buf, new = io.StringIO(), []
    with Steps("forge-label", "labelling under cpu-proxy", 2, stream=buf) as st:
        on_label = _progress(new, {}, st)
        on_label(tiny_label)
    assert new == [tiny_label]
    assert buf.getvalue().splitlines()[1].startswith(f"forge-label: labelling under cpu-proxy 1/2 "
                                                     f"({tiny_label.genome_id} label=")
    text = human({"requested": 2, "trained": 1, "skipped_done": 1, "finite": 1, "diverged": 0, "failed": 0,
                  "wall_s": 61.0, "median_label_wall_s": 60.5, "protocol": "cpu-proxy", "store": "l.db",
                  "store_size": 9, "status": "complete"})
    assert text.splitlines() == ["labelled 1 of 2 genomes under cpu-proxy in 1 min 01 s (1 already in the store): "
                                 "1 finite, 0 diverged, 0 failed; median 60.5 s per label", "store: l.db (9 labels)"]


@pytest.fixture
def tiny_label():
    import numpy as np

    from forge.genomes.labels import Label
    from forge.spaces.space import load_space

    g = load_space("iha-tiny").sample(1, np.random.default_rng(0))[0]
    return Label(g, 3.25, {"protocol": "cpu-proxy", "wall_s": 60.5, "tokens_per_s": 500}, "")


def test_a_lazy_opening_waits_for_the_first_step():
    """A job refused on bad input before its first step prints nothing but its error."""
    buf = io.StringIO()
    with Steps("forge-x", "fitting", 2, stream=buf, lazy=True):
        pass
    assert buf.getvalue() == ""
    with Steps("forge-x", "fitting", 2, stream=buf, lazy=True) as st:
        st.step()
    assert buf.getvalue().splitlines()[0] == "forge-x: fitting: 0/2 to do"
