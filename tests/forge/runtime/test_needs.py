"""A command that would train under a protocol or corpus this machine cannot run says so before any work."""
from __future__ import annotations

import importlib.util

import pytest

import forge.runtime.needs as needs
from forge.runtime.config import group_yaml


def _spec_without(*names):
    real = importlib.util.find_spec
    return lambda name, *a: None if name in names else real(name, *a)


def test_paper_protocol_without_a_gpu_names_the_gpu_and_the_cpu_recipe(monkeypatch):
    monkeypatch.setattr(needs, "_cuda", lambda: False)
    with pytest.raises(needs.NeedsError) as e:
        needs.check_training(group_yaml("protocol", "paper"), group_yaml("corpus", "stdlib"), "forge-verify run=r")
    msg = str(e.value)
    assert "\n" not in msg and "a CUDA GPU" in msg and "protocol=cpu-proxy corpus=stdlib" in msg
    monkeypatch.setattr(needs, "_cuda", lambda: True)
    needs.check_training(group_yaml("protocol", "paper"), group_yaml("corpus", "stdlib"), "x")  # no error


def test_hf_corpus_without_datasets_names_the_data_extra(monkeypatch):
    monkeypatch.setattr(needs.importlib.util, "find_spec", _spec_without("datasets", "tiktoken"))
    missing = needs.training_needs(group_yaml("protocol", "cpu-proxy"), group_yaml("corpus", "hf"))
    assert len(missing) == 2 and all("install -e '.[data]'" in m for m in missing)
    assert needs.training_needs(group_yaml("protocol", "cpu-proxy"), group_yaml("corpus", "stdlib")) == []


def test_forge_label_refuses_before_touching_the_store(monkeypatch, tmp_path):
    from omegaconf import OmegaConf

    from forge.labelling.cli import run

    monkeypatch.setattr(needs, "_cuda", lambda: False)
    cfg = OmegaConf.create({"action": "label", "protocol": group_yaml("protocol", "paper"),
                            "corpus": group_yaml("corpus", "stdlib"), "store": str(tmp_path / "s.db"), "n": 1})
    with pytest.raises(needs.NeedsError, match="forge-label trains under protocol=paper"):
        run(cfg)
    assert not (tmp_path / "s.db").exists()


def test_a_refusal_names_each_missing_thing_once_in_one_short_line(monkeypatch):
    """Issue 56 §5: the paper protocol on the HF corpus, on a CPU without the data extra: one line, the GPU and
    the extra named once (it was a 600-character line naming the extra twice)."""
    monkeypatch.setattr(needs, "_cuda", lambda: False)
    monkeypatch.setattr(needs.importlib.util, "find_spec", _spec_without("datasets", "tiktoken"))
    with pytest.raises(needs.NeedsError) as e:
        needs.check_training(group_yaml("protocol", "paper"), group_yaml("corpus", "hf"), "run=r")
    msg = str(e.value)
    assert "\n" not in msg and msg.count("pip install") == 1 and "a CUDA GPU" in msg and len(msg) < 300
    assert "datasets, tiktoken (pip install -e '.[data]'" in msg
