"""Issue 38: the supernet's slices equal standalone models with the same weights; inherited-weight scoring, its
interval, save/load through `load_predictor`, the CLI and the API on a tiny budget."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from forge.genomes.genome import Genome, LayerGene
from forge.labelling.train import Protocol, evaluate
from forge.lm.model import IHAModel, build_model
from surrogate.dataset import LabelSet
from surrogate.supernet import SupernetPredictor, calibrate_interval, check_slice, score
from surrogate.features import FeatureError

D, T, V = 32, 24, 64
TOP = dict(n_h=4, n_kv=4, d_qk=16, d_v=12, d_mlp=48)


def genome(layers, **kw) -> Genome:
    base = dict(d_model=D, block_size=T, vocab_size=V, norm="layernorm", bias="none", pos="rope")
    return Genome(**{**base, **kw}, layers=tuple(layers))


def supernet(**kw) -> IHAModel:
    """The largest genome's model with every parameter random (biases and norms too, so slicing shows)."""
    net = build_model(genome([LayerGene(**TOP)] * 4, **kw), seed=0)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
    return net.eval()


def standalone(net: IHAModel, g: Genome) -> IHAModel:
    """The genome's own model with the supernet's leading weights copied in, by index arithmetic on tensors."""
    m = build_model(g, seed=5).eval()
    H, KV, Dq, Dv = TOP["n_h"], TOP["n_kv"], TOP["d_qk"], TOP["d_v"]
    sd, out = net.state_dict(), {}
    for k, t in m.state_dict().items():
        if not k.startswith("blocks."):
            out[k] = sd[k]
            continue
        j, rest = k.split(".", 2)[1:]
        i, gene = m.slots[int(j)], g.layers[m.slots[int(j)]]
        src = sd[f"blocks.{i}.{rest}"]
        groups = {"q_proj": (H, Dq, gene.n_h, gene.d_qk), "k_proj": (KV, Dq, gene.n_kv, gene.d_qk),
                  "v_proj": (KV, Dv, gene.n_kv, gene.d_v), "up": (1, TOP["d_mlp"], 1, gene.d_mlp),
                  "gate": (1, TOP["d_mlp"], 1, gene.d_mlp)}
        name = rest.split(".")[-2]
        if name in groups:  # output rows: first heads, first dims per head
            G, P, n, d = groups[name]
            out[k] = src.view(G, P, *src.shape[1:])[:n, :d].reshape(t.shape)
        elif name in ("o_proj", "down") and rest.endswith("weight"):  # input columns
            G, P, n, d = (H, Dv, gene.n_h, gene.d_v) if name == "o_proj" else (1, TOP["d_mlp"], 1, gene.d_mlp)
            out[k] = src.view(src.shape[0], G, P)[:, :n, :d].reshape(t.shape)
        else:  # norms, output biases
            out[k] = src
    m.load_state_dict(out)
    return m


L = LayerGene
GENOMES = [
    [L(**TOP)] * 4,  # the supernet itself
    [L(2, 1, 8, 4, 16), L(4, 2, 16, 12, 48, attn=False), L(1, 1, 8, 8, 8, active=False), L(3, 3, 10, 6, 32)],
    [L(4, 2, 12, 8, 24, extra=(("window", 5),)), L(2, 2, 16, 4, 16, active=False), L(1, 1, 8, 12, 40)],
    [L(1, 1, 8, 4, 8, active=False), L(2, 2, 8, 8, 8, attn=False), L(4, 1, 16, 12, 48, extra=(("window", 3),))],
]
VARIANTS = [{}, {"pos": "learned", "mlp": "swiglu", "bias": "all", "norm": "rmsnorm"}, {"parallel": True, "bias": "qkv"}]


@pytest.mark.parametrize("kw", VARIANTS, ids=["rope-gelu", "learned-swiglu-bias", "parallel-qkvbias"])
@pytest.mark.parametrize("layers", GENOMES, ids=["largest", "mixed", "windowed-pruned", "attnfalse-window"])
def test_slice_forward_equals_standalone_model_with_copied_weights(layers, kw):
    if kw.get("pos") == "rope" or "pos" not in kw:
        layers = [x if x.d_qk % 2 == 0 else x.replace(d_qk=x.d_qk - 1) for x in layers]
    net, g = supernet(**kw), genome(layers, **kw)
    idx = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        a, la = net(idx, idx, sub=g)
        b, lb = standalone(net, g)(idx, idx)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(la, lb, atol=1e-5, rtol=1e-5)


def test_slice_gradients_reach_only_its_weights():
    net, g = supernet(), genome(GENOMES[1])
    net.train()
    idx = torch.randint(0, V, (2, T))
    net(idx, idx, sub=g)[1].backward()
    assert net.blocks[2].mlp.up.weight.grad is None  # an inactive slot
    assert net.blocks[1].attn.q_proj.weight.grad is None  # attn=False
    qg = net.blocks[0].attn.q_proj.weight.grad.view(4, 16, D)
    assert qg[:2, :8].abs().sum() > 0 and qg[2:].abs().sum() == 0 and qg[:, 8:].abs().sum() == 0


def test_check_slice_refuses_wider_or_foreign_genomes():
    from forge.spaces.space import load_space
    from surrogate.supernet import space_meta

    meta = space_meta(load_space("iha-tiny"))
    ok = genome([L(8, 8, 64, 64, 1024)], d_model=128, block_size=256, vocab_size=256)
    check_slice(meta, [ok])
    with pytest.raises(FeatureError, match="d_mlp"):
        check_slice(meta, [genome([L(8, 8, 64, 64, 1088)], d_model=128, block_size=256, vocab_size=256)])
    with pytest.raises(FeatureError, match="d_model"):
        check_slice(meta, [genome([L(1, 1, 16, 16, 128)])])


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
    from forge.labelling.corpus import text_corpus

    p = tmp_path_factory.mktemp("corpus") / "c.txt"
    rng = np.random.default_rng(0)
    p.write_bytes(bytes(rng.integers(0, V, 200_000).astype(np.uint8)))
    return text_corpus(str(p), val_fraction=0.2)


def _meta():
    top = genome([LayerGene(**TOP)] * 4)
    return {"name": "toy", "L_max": 4, **{f"max_{k}": v for k, v in TOP.items()}, "genome": top.to_dict()}


PROTO = Protocol(name="toy", seq_len=T, batch=2, val_tokens=6 * T, tokens=T * 2)


def test_inherited_weight_score_is_the_standalone_models_validation_loss(tiny_corpus):
    net = supernet()
    genomes = [genome(x) for x in GENOMES[1:]]
    s = score(net, genomes, tiny_corpus, PROTO, batch=4)
    ref = [evaluate(standalone(net, g), tiny_corpus, replace(PROTO, batch=4), torch.device("cpu")) for g in genomes]
    np.testing.assert_allclose(s, ref, rtol=1e-5)
    assert len(set(np.round(s, 6))) == 3


def _rows(n: int) -> list[Genome]:
    rng = np.random.default_rng(0)
    out = []
    for _ in range(n):
        h = int(rng.integers(1, 5))
        layers = [L(h, 1, 2 * int(rng.integers(4, 9)), int(rng.integers(4, 13)), int(rng.integers(8, 49)),
                    active=bool(i == 0 or rng.random() < 0.6), attn=bool(rng.random() < 0.7)) for i in range(4)]
        out.append(genome(layers))
    return out


def test_predictor_line_interval_and_round_trip(tiny_corpus, tmp_path, monkeypatch):
    from forge.labelling import corpus as corpus_mod
    from surrogate.loading import load_predictor

    monkeypatch.setattr(corpus_mod, "build_corpus", lambda cfg: tiny_corpus)
    p = SupernetPredictor(supernet(), _meta(), {"name": "toy", "seq_len": T, "batch": 2, "val_tokens": 6 * T},
                          {"_target_": "forge.labelling.corpus.text_corpus"}, score_batch=4)
    g = _rows(40)
    s = p.scores(g)
    y = 0.5 * s + 1.0 + np.random.default_rng(1).normal(0, 0.01, len(s))
    p.fit_line(g[:20], y[:20])
    assert p.line[0] == pytest.approx(0.5, rel=0.2)
    held = LabelSet(g[20:], y[20:], [x.id for x in g[20:]])
    calibrate_interval(p, held, {"split": "toy"})
    mu, sigma = p.predict(g[20:])
    lo, hi = p.interval(mu, sigma, 0.9)
    assert np.all(np.isfinite(lo)) and np.all(lo <= mu) and np.all(mu <= hi)
    assert p.interval_info(False)["method"] == "conformal-residual"
    p.save(tmp_path / "sn")
    q = load_predictor(tmp_path / "sn")
    assert isinstance(q, SupernetPredictor)
    np.testing.assert_allclose(q.predict(g[20:])[0], mu, rtol=1e-6)
    np.testing.assert_allclose(q.interval(mu, sigma, 0.9)[1], hi, rtol=1e-6)


def test_cli_trains_saves_and_the_search_api_uses_it(tmp_path):
    """A tiny budget end to end: forge-surrogate surrogate=supernet-tiny mode=train, then forge.search with the
    checkpoint as its loss predictor (interval columns filled from the conformal calibration)."""
    from hydra import compose, initialize_config_module

    import forge
    from forge.runtime.config import data_dir
    from surrogate.cli import run

    stem, swa = tmp_path / "sn", data_dir() / "labels" / "iha-tiny-swa-cpu-proxy.jsonl"
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose(config_name="forge-surrogate", overrides=[
            "threads=1", "surrogate=supernet-tiny", "space=iha-tiny-swa", f"data={swa}", "surrogate.steps=2",
            "surrogate.val_tokens=512", f"out={stem}", f"out_dir={tmp_path / 'train'}"])
    res = run(cfg)
    assert res["n_test"] >= 10 and -1 <= res["metrics"]["spearman"] <= 1
    side = __import__("json").loads(stem.with_suffix(".json").read_text())
    assert side["format"] == "forge-surrogate/supernet-v1" and side["training"]["steps"] == 2
    assert side["conformal"]["provenance"]["n_rows"] == res["n_test"]
    out = forge.search(space="iha-tiny-swa", backend="roofline", out_dir=tmp_path / "search",
                       evaluator={"predictor": str(stem.with_suffix(".json"))}, constraints=[],
                       overrides=["search.pop_size=4", "search.offspring=4", "search.generations=1"])
    front = out.front if hasattr(out, "front") else None
    assert out.summary["run_dir"] and front is not None and len(front)


def test_a_config_node_with_init_predicts_and_coevolution_refits_its_line(tiny_corpus, tmp_path, monkeypatch):
    """`evaluator.predictor: {_target_: ...SupernetSurrogate, init: CKPT}` predicts with the saved line;
    co-evolution's `surrogate.generic.refit` re-fits the line on replay + new labels (same scores)."""
    from forge.labelling import corpus as corpus_mod
    from forge.genomes.labels import Label
    from surrogate.generic import refit
    from surrogate.interface import as_loss_predictor
    from surrogate.supernet_train import SupernetSurrogate

    monkeypatch.setattr(corpus_mod, "build_corpus", lambda cfg: tiny_corpus)
    p = SupernetPredictor(supernet(), _meta(), {"name": "toy", "seq_len": T, "batch": 2, "val_tokens": 6 * T},
                          {"_target_": "forge.labelling.corpus.text_corpus"}, line=(2.0, -1.0), score_batch=4)
    p.save(tmp_path / "sn")
    g = _rows(12)
    node = {"_target_": "surrogate.supernet_train.SupernetSurrogate", "init": str(tmp_path / "sn")}
    pred = as_loss_predictor(SupernetSurrogate(init=node["init"]))
    mu, sigma = pred.predict(g)
    np.testing.assert_allclose(mu, 2.0 * p.scores(g) - 1.0, rtol=1e-6)
    y = 0.3 * p.scores(g) + 2.0
    new = refit(node, [Label(genome=x, label=float(v)) for x, v in zip(g[6:], y[6:])],
                [Label(genome=x, label=float(v)) for x, v in zip(g[:6], y[:6])])
    assert new.line[0] == pytest.approx(0.3, rel=1e-4) and new.line[1] == pytest.approx(2.0, rel=1e-4)
