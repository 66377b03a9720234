import io

import pytest

from forge.runtime.steps import Steps

from surrogate.compare import compare
from surrogate.dataset import load_labelset


def test_compare_in_worker_processes_equals_one_process(tiny_jsonl):
    """Splits run in spawned processes (one torch thread each) give the same table as one process."""
    data = load_labelset(tiny_jsonl)
    models = ["rf", "forgeformer"]
    ov = {"forgeformer": {"epochs": 1, "space": "iha-tiny", "L_max": 12}}
    lines: list[str] = []
    counted = {}
    for workers in (1, 2):  # fits are counted as they end; a forgeformer fit's Lightning epochs are not fits
        buf = io.StringIO()
        with Steps("forge-surrogate", "fits", 4, stream=buf, tty=False, unit="fit") as st:
            res = compare(data, models, seeds=2, overrides=ov, log=lines.append if workers == 2 else lambda m: None,
                          workers=workers, step=st.step)
        counted[workers] = [ln.split("fits ")[1].split(" ")[0] for ln in buf.getvalue().splitlines()[1:]]
        seq, par = (res, None) if workers == 1 else (seq, res)
    assert counted == {1: ["1/4", "2/4", "3/4", "4/4"], 2: ["2/4", "4/4"]}
    for m in models:
        assert seq[m]["runs"] == par[m]["runs"] and seq[m]["summary"] == par[m]["summary"]
    assert [ln.split(":")[0] for ln in lines] == ["seed 0 rf", "seed 0 forgeformer", "seed 1 rf", "seed 1 forgeformer"]
    with pytest.raises(ValueError, match="workers = 0; allowed"):
        compare(data, models, seeds=1, workers=0)


def test_compare_reports_decision_metrics_and_interval_tails_for_every_model(tiny_jsonl):
    """Issue 35 §3: regret/overlap/optimism with bootstrap CIs and the interval's tails and best-10 % figures."""
    from surrogate.compare import markdown

    data = load_labelset(tiny_jsonl)
    res = compare(data, ["rf"], seeds=1, log=lambda m: None)
    run, summ = res["rf"]["runs"][0], res["rf"]["summary"]
    lo, hi = run["regret_at_10_ci95"]
    assert 0.0 <= lo <= hi and 0.0 <= run["regret_at_10"] and 0.0 <= run["overlap_at_10"] <= 1.0
    assert 0.0 <= run["iv90_below"] <= 0.2 and 0.0 <= run["iv90_above"] <= 0.2 and run["iv90_width"] > 0
    table = markdown(res, run["n_test"], 1)
    for k in ("regret_at_10", "overlap_at_10", "optimism_best10", "iv90_below", "iv90_above", "iv90_coverage_best10",
              "iv90_width_best10"):
        assert f"| {k} | {summ[k]['mean']:.3f}" in table
