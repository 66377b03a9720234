"""The training protocol: a real (tiny) run learns, is reproducible, records provenance; divergence → inf."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from forge.labelling.corpus import build_corpus
from forge.labelling.train import Protocol, ProtocolError, lr_factor, train_genome
from tests.forge.labelling._train_helpers import TINY_CORPUS, TINY_PROTOCOL, tiny_genome


@pytest.fixture(scope="module")
def corpus():
    return build_corpus(TINY_CORPUS)


def test_tiny_run_learns_and_records_provenance(corpus):
    p = Protocol.from_config(TINY_PROTOCOL)
    lab = train_genome(tiny_genome(), p, corpus)
    assert lab.finite and lab.reason == ""
    assert lab.label < math.log(256) - 0.3  # better than uniform over bytes after a few steps
    prov = lab.provenance
    assert prov["tokens"] == p.steps * p.batch * p.seq_len == TINY_PROTOCOL["tokens"]
    assert prov["tokens_per_s"] > 0 and prov["wall_s"] > 0 and prov["steps"] == p.steps
    assert prov["corpus_hash"] == corpus.content_hash and prov["protocol"] == "test-tiny"
    assert prov["params"] == sum(q.numel() for q in __import__("forge.lm.model", fromlist=["x"]).build_model(tiny_genome()).parameters())


def test_same_seed_same_label_other_seed_differs(corpus):
    p = Protocol.from_config(TINY_PROTOCOL)
    a = train_genome(tiny_genome(), p, corpus).label
    b = train_genome(tiny_genome(), p, corpus).label
    c = train_genome(tiny_genome(), Protocol.from_config({**TINY_PROTOCOL, "seed": 1}), corpus).label
    assert a == pytest.approx(b, abs=1e-5) and a != pytest.approx(c, abs=1e-5)


def test_divergence_is_an_inf_label_not_a_crash(corpus, monkeypatch):
    import forge.lm.model as M

    real = M.build_model

    def poisoned(genome, **kw):  # a model whose loss turns NaN at the third step
        model = real(genome, **kw)
        fwd, calls = model.forward, [0]

        def forward(idx, targets=None, kv_cache=None):
            logits, loss = fwd(idx, targets, kv_cache)
            calls[0] += 1
            return logits, (loss * float("nan") if loss is not None and calls[0] >= 3 else loss)

        model.forward = forward
        return model

    monkeypatch.setattr(M, "build_model", poisoned)
    lab = train_genome(tiny_genome(), Protocol.from_config(TINY_PROTOCOL), corpus)
    assert lab.label == math.inf and "non-finite training loss" in lab.reason and "step 2" in lab.reason
    assert lab.provenance["steps"] < Protocol.from_config(TINY_PROTOCOL).steps


def test_protocol_validation():
    with pytest.raises(ProtocolError, match="allowed: 32-true"):
        Protocol(precision="fp8")
    with pytest.raises(ProtocolError, match=r"\['colour'\] are unknown"):
        Protocol.from_config({"colour": 1})
    with pytest.raises(ProtocolError, match="tokens"):
        Protocol(tokens=0)
    with pytest.raises(ProtocolError, match="schedule"):
        Protocol(schedule="linear")


def test_lr_schedule_warmup_then_cosine():
    p = Protocol(tokens=100 * 1024, seq_len=256, batch=4, warmup_steps=10, schedule="cosine", min_lr_ratio=0.1)
    f = np.array([lr_factor(s, p) for s in range(p.steps)])
    assert f[0] == pytest.approx(0.1) and f[9] == pytest.approx(1.0) and f[10] == pytest.approx(1.0)
    assert np.all(np.diff(f[10:]) <= 1e-12) and f[-1] == pytest.approx(0.1, abs=0.01)
    assert lr_factor(50, Protocol(warmup_steps=10)) == 1.0  # constant


def test_vocab_mismatch_is_refused(corpus):
    g = tiny_genome()
    small = type(g)(**{**g.__dict__, "vocab_size": 128})
    with pytest.raises(ProtocolError, match="vocab"):
        train_genome(small, Protocol.from_config(TINY_PROTOCOL), corpus)


def test_shipped_protocol_configs_load():
    import yaml

    from forge.runtime.config import conf_dir

    for name in ("paper", "cpu-proxy"):
        p = Protocol.from_config(yaml.safe_load((conf_dir() / "protocol" / f"{name}.yaml").read_text()))
        assert p.name == name
    paper = Protocol.from_config(yaml.safe_load((conf_dir() / "protocol" / "paper.yaml").read_text()))
    # LLMForge App. B: 655M tokens, seq 512, batch 128, lr 1e-3, 100 warmup steps, bf16
    assert (paper.tokens, paper.seq_len, paper.batch, paper.lr, paper.warmup_steps, paper.precision) == \
        (655_000_000, 512, 128, 1e-3, 100, "bf16-mixed")


@pytest.mark.slow
def test_cpu_proxy_budget_is_self_consistent():
    """Labels at the shipped budget B and at 2B rank a random sample of iha-tiny genomes alike."""
    import yaml
    from scipy.stats import spearmanr

    from forge.runtime.config import conf_dir
    from forge.labelling.corpus import stdlib_corpus
    from forge.spaces.space import load_space

    torch.set_num_threads(1)
    cfg = yaml.safe_load((conf_dir() / "protocol" / "cpu-proxy.yaml").read_text())
    # 16 genomes like the bench: at n = 10 the sampling spread of Spearman is about ±0.15 (one draw
    # with seed 123 gave 0.794, the bench's 16 genomes 0.947)
    gs = load_space("iha-tiny").sample(16, np.random.default_rng(123))
    c = stdlib_corpus()
    at = {B: [train_genome(g, Protocol.from_config({**cfg, "tokens": B}), c).label for g in gs]
          for B in (cfg["tokens"], 2 * cfg["tokens"])}
    rho = spearmanr(at[cfg["tokens"]], at[2 * cfg["tokens"]])[0]
    assert rho >= 0.8, f"cpu-proxy budget not self-consistent: Spearman {rho:.3f}"


def test_weights_dir_keeps_the_trained_model(corpus, tmp_path):
    """forge-verify's trainer keeps each trained model, so forge-export can ship it (not a random init)."""
    from safetensors.torch import load_file

    from forge.lm.model import build_model

    g = tiny_genome()
    lab = train_genome(g, Protocol.from_config(TINY_PROTOCOL), corpus, weights_dir=str(tmp_path))
    path = tmp_path / f"{g.id}.safetensors"
    assert lab.provenance["checkpoint"] == str(path) and path.is_file()
    init = build_model(g, seed=TINY_PROTOCOL["seed"]).state_dict()
    saved = load_file(str(path))
    assert any(not torch.equal(saved[k], init[k]) for k in saved)  # trained, not the seeded init


def test_training_logs_through_a_lightning_logger(corpus, tmp_path):
    """CSV by default in the CLIs (conf logger node): the training curve and the label, one run per genome."""
    import csv

    g = tiny_genome()
    node = {"_target_": "lightning.pytorch.loggers.CSVLogger", "save_dir": str(tmp_path)}
    lab = train_genome(g, Protocol.from_config(TINY_PROTOCOL), corpus, logger=node)
    (metrics,) = (tmp_path / g.id).rglob("metrics.csv")
    rows = list(csv.DictReader(metrics.open()))
    assert any(r.get("train_loss") for r in rows)
    assert float([r for r in rows if r.get("val_loss")][-1]["val_loss"]) == pytest.approx(lab.label)
