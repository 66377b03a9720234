import pytest

from surrogate.compare import compare
from surrogate.dataset import load_labelset


def test_compare_in_worker_processes_equals_one_process(tiny_jsonl):
    """Splits run in spawned processes (one torch thread each) give the same table as one process."""
    data = load_labelset(tiny_jsonl)
    models = ["rf", "forgeformer"]
    ov = {"forgeformer": {"epochs": 1, "space": "iha-tiny", "L_max": 12}}
    lines: list[str] = []
    seq = compare(data, models, seeds=2, overrides=ov, log=lambda m: None, workers=1)
    par = compare(data, models, seeds=2, overrides=ov, log=lines.append, workers=2)
    for m in models:
        assert seq[m]["runs"] == par[m]["runs"] and seq[m]["summary"] == par[m]["summary"]
    assert [ln.split(":")[0] for ln in lines] == ["seed 0 rf", "seed 0 forgeformer", "seed 1 rf", "seed 1 forgeformer"]
    with pytest.raises(ValueError, match="workers = 0; allowed"):
        compare(data, models, seeds=1, workers=0)
