import json

import pytest
from hydra import compose, initialize_config_module

from surrogate.cli import run


def _cfg(*overrides):
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        return compose(config_name="forge-surrogate", overrides=["threads=1", *overrides])


def test_train_eval_finetune_roundtrip(tiny_jsonl, tmp_path, capsys):
    from surrogate.cli import human

    stem = tmp_path / "ff-tiny"
    res = run(_cfg(f"data={tiny_jsonl}", "space=iha-tiny", "surrogate.epochs=2", f"out={stem}",
                   f"out_dir={tmp_path / 'train'}"))
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("forge-surrogate: ")]
    assert err[0] == "forge-surrogate: mode=train: epochs: 0/2 to do"  # not a terminal: a line per epoch
    assert [ln.split(" (")[0] for ln in err[1:]] == ["forge-surrogate: mode=train: epochs 1/2",
                                                     "forge-surrogate: mode=train: epochs 2/2"]
    text = human(res)
    assert text.startswith("forge-surrogate mode=train done in ") and "spearman" in text and str(stem) in text
    assert set(res["metrics"]) == {"mae", "mae_at_5", "spearman", "kendall", "k_at_1", "k_at_5"}
    assert json.loads((tmp_path / "train" / "summary.json").read_text())["n_test"] == res["n_test"] > 0
    side = json.loads(stem.with_suffix(".json").read_text())
    assert side["space"]["name"] == "iha-tiny" and side["metrics"] == res["metrics"] and side["data_hash"]
    assert side["covers"]["d_mlp"][1] <= 1024 and side["covers"]["active"] == [0, 1]  # issue 43: what it saw
    pw = side["pairwise"]  # issue 51: its odds, fit on the same held-out rows as its interval, with their hash
    assert pw["provenance"]["n_rows"] == res["n_test"] and "held-out test split" in pw["provenance"]["source"]
    assert pw["provenance"]["rows_hash"] and pw["provenance"]["check"]["folds"] == 5
    import csv  # the training curve is logged by Lightning's CSVLogger in the run folder

    logs = sorted((tmp_path / "train" / "logs").rglob("metrics.csv"))
    assert logs, "no Lightning CSV log in <out_dir>/logs"
    rows = list(csv.DictReader(logs[0].open()))
    assert any(r.get("val_mae") for r in rows) and any(r.get("train_loss") for r in rows)
    ev = run(_cfg("mode=eval", f"ckpt={stem}.json", f"data={tiny_jsonl}", f"out_dir={tmp_path / 'eval'}"))
    assert ev["n_rows"] == 160 and -1 <= ev["metrics"]["spearman"] <= 1
    ft = run(_cfg("mode=finetune", f"ckpt={stem}", f"new={tiny_jsonl}", f"data={tiny_jsonl}", "ft_epochs=1",
                  f"out={tmp_path / 'ft'}", f"out_dir={tmp_path / 'fto'}"))
    assert (tmp_path / "ft.safetensors").is_file() and ft["n_new"] == 160
    ft_pw = json.loads((tmp_path / "ft.json").read_text())["pairwise"]  # the parent's odds, and it says so
    assert ft_pw["x"] == pw["x"] and ft_pw["provenance"]["inherited_from"] == stem.name


def test_compare_writes_summary_and_table(tiny_jsonl, tmp_path):
    res = run(_cfg("mode=compare", f"data={tiny_jsonl}", "seeds=2", "models=[rf,rf_rank,scaling_law]",
                   "workers=1", f"out_dir={tmp_path}"))  # spawned workers: tests/surrogate/test_compare.py
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


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory, tiny_jsonl):
    """The bad inputs of tests/test_bad_inputs.py, made in-process (fast): every mode names what is wrong."""
    from tests.bad_input_kit import _make_files

    w = tmp_path_factory.mktemp("bad")
    _make_files(w)
    return w


@pytest.mark.parametrize("overrides,says", [
    (("mode=eval", "data={w}/nope.jsonl"), "nope.jsonl"),
    (("mode=train", "data={w}/allnan.csv", "space=iha-tiny"), "allnan.csv: no finite labels"),
    (("mode=eval", "data={w}/nocol.csv"), "nocol.csv: missing column.s. global_n_embd"),
    (("mode=eval", "ckpt=forgeformer-iha-tiny", "data={w}/torn.jsonl"), "torn.jsonl:3: corrupt label line"),
    (("mode=eval", "ckpt={w}/trunc.json", "data={w}/labels.jsonl"), "trunc.safetensors: unreadable weights"),
    (("mode=eval", "data={w}/binary.jsonl"), "binary.jsonl: not a UTF-8 text label file"),
    (("mode=compare", "data={w}/binary.jsonl"), "binary.jsonl: not a UTF-8"),
    (("mode=finetune", "ckpt=forgeformer-iha-tiny", "new={w}/paper.jsonl", "data={w}/paper.jsonl", "out={w}/ft"),
     "iha-tiny"),
    (("mode=calibrate", "ckpt={w}/nope"), "nope"),
    (("mode=eval", "data=[{w}/labels.jsonl,{w}/torn.jsonl]"), "torn.jsonl:3: corrupt label line"),
    (("mode=eval", "data=[]"), "data=.. names no label file"),
    (("mode=finetune", "ckpt=forgeformer-iha-tiny", "new={w}/labels.jsonl", "data=[{w}/labels.jsonl,{w}/labels.jsonl]",
      "out={w}/ft2"), "is several files; allowed: one replay label file"),
])
def test_every_mode_names_the_bad_file(bad_files, tmp_path, overrides, says):
    with pytest.raises((ValueError, OSError), match=says):
        run(_cfg(*(o.format(w=bad_files) for o in overrides), f"out_dir={tmp_path}"))
    assert not (tmp_path / "summary.json").exists()


def test_dropped_rows_are_reported_on_the_console(tiny_jsonl, tmp_path, capsys):
    lines = tiny_jsonl.read_text().splitlines()
    rows = [json.loads(x) for x in lines[:30]]
    for r in rows[:2]:
        r["label"] = float("inf") if r is rows[0] else float("nan")
    (tmp_path / "some_inf.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = run(_cfg("mode=eval", "ckpt=forgeformer-iha-tiny", f"data={tmp_path / 'some_inf.jsonl'}",
                   f"out_dir={tmp_path}"))
    assert res["dropped"] == 2 and res["n_rows"] == 28
    assert "some_inf.jsonl: dropped 2 row(s) with a non-finite label (NaN/inf); using 28" in capsys.readouterr().out


def test_an_unwritable_checkpoint_path_fails_before_training(tiny_jsonl, tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("not a folder")
    import surrogate.cli as cli

    built = []
    monkeypatch.setattr(cli, "build_model", lambda *a, **k: built.append(a) or pytest.fail("a model was built"))
    with pytest.raises(OSError, match="afile"):
        run(_cfg(f"data={tiny_jsonl}", "space=iha-tiny", "surrogate.epochs=400", f"out={tmp_path}/afile/ckpt",
                 f"out_dir={tmp_path / 'o'}"))
    assert built == []  # refused up front: no model built, let alone 400 epochs trained



def test_compare_counts_its_fits_as_they_end(tiny_jsonl, tmp_path, capsys):
    """Issue 37 leftover: `mode=compare` shows n-of-m fits (a line per fit when stderr is not a terminal);
    in worker processes: tests/surrogate/test_compare.py."""
    run(_cfg("mode=compare", f"data={tiny_jsonl}", "seeds=2", "models=[rf,scaling_law]", "workers=1",
             f"out_dir={tmp_path}"))
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("forge-surrogate: mode=compare: fits")]
    assert lines[0] == "forge-surrogate: mode=compare: fits: 0/4 to do", lines
    lines = lines[1:]
    assert [ln.split(": fits ")[1].split(" ")[0] for ln in lines] == ["1/4", "2/4", "3/4", "4/4"], lines
    assert "(seed 0 rf)" in lines[0] and "(seed 1 scaling_law)" in lines[-1]
