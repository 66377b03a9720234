import json

import pytest
from hydra import compose, initialize_config_module

from surrogate.cli import run


def _cfg(*overrides):
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        return compose(config_name="forge-surrogate", overrides=["threads=1", *overrides])


def test_train_eval_finetune_roundtrip(tiny_jsonl, tmp_path):
    stem = tmp_path / "ff-tiny"
    res = run(_cfg(f"data={tiny_jsonl}", "space=iha-tiny", "surrogate.epochs=2", f"out={stem}",
                   f"out_dir={tmp_path / 'train'}"))
    assert set(res["metrics"]) == {"mae", "mae_at_5", "spearman", "kendall", "k_at_1", "k_at_5"}
    assert json.loads((tmp_path / "train" / "summary.json").read_text())["n_test"] == res["n_test"] > 0
    side = json.loads(stem.with_suffix(".json").read_text())
    assert side["space"]["name"] == "iha-tiny" and side["metrics"] == res["metrics"] and side["data_hash"]
    ev = run(_cfg("mode=eval", f"ckpt={stem}.json", f"data={tiny_jsonl}", f"out_dir={tmp_path / 'eval'}"))
    assert ev["n_rows"] == 160 and -1 <= ev["metrics"]["spearman"] <= 1
    ft = run(_cfg("mode=finetune", f"ckpt={stem}", f"new={tiny_jsonl}", f"data={tiny_jsonl}", "ft_epochs=1",
                  f"out={tmp_path / 'ft'}", f"out_dir={tmp_path / 'fto'}"))
    assert (tmp_path / "ft.safetensors").is_file() and ft["n_new"] == 160


def test_compare_writes_summary_and_table(tiny_jsonl, tmp_path):
    res = run(_cfg("mode=compare", f"data={tiny_jsonl}", "seeds=2", "models=[rf,rf_rank,scaling_law]",
                   f"out_dir={tmp_path}"))
    summ = json.loads((tmp_path / "summary.json").read_text())
    assert set(summ["models"]) == {"rf", "rf_rank", "scaling_law"}
    assert len(summ["models"]["rf"]["runs"]) == 2
    assert summ["models"]["rf"]["summary"]["spearman"]["std"] >= 0
    table = (tmp_path / "table.md").read_text()
    assert "| spearman |" in table and "rf" in table
    assert res["models"]["rf"]["summary"]["spearman"]["mean"] > 0.3  # the synthetic target is learnable


def test_bad_options_are_named(tiny_jsonl, tmp_path):
    with pytest.raises(ValueError, match="mode='fit' is unknown; allowed: train"):
        run(_cfg("mode=fit", f"out_dir={tmp_path}"))
    with pytest.raises(ValueError, match="model='xgb' is unknown"):
        run(_cfg("model=xgb", f"data={tiny_jsonl}", "space=iha-tiny", f"out_dir={tmp_path}"))
