from dataclasses import replace

import torch

from forge.genomes.genome import LayerGene
from surrogate.features import featurize, field_names
from surrogate.forgeformer import FFConfig, ForgeFormer, n_params


def test_paper_encoder_has_exactly_203713_parameters():
    assert n_params(ForgeFormer(FFConfig())) == 203_713


def test_derived_fields_only_add_lifts():
    extra = len(field_names("derived")) - len(field_names("paper"))
    assert n_params(ForgeFormer(FFConfig(n_fields=9 + extra))) == 203_713 + extra * 128


def test_trailing_padding_does_not_change_the_output():
    torch.manual_seed(0)
    m = ForgeFormer(FFConfig()).eval()
    x = torch.rand(3, 40, 9)
    mask = torch.zeros(3, 40, dtype=torch.bool)
    mask[0, :5], mask[1, :12], mask[2, :7] = True, True, True
    x = x * mask[..., None]
    full = m(x, mask)
    one = torch.stack([m(x[i:i + 1, :int(mask[i].sum())], mask[i:i + 1, :int(mask[i].sum())])[0] for i in range(3)])
    assert torch.allclose(full, one, atol=1e-5)


def test_features_follow_genome_id(tiny_jsonl):
    from forge.genomes.labels import read_labels

    g = next(lab.genome for lab in read_labels(tiny_jsonl) if any(x.active and x.attn for x in lab.genome.layers))
    i = next(j for j, x in enumerate(g.layers) if x.active and x.attn)
    # change a pruned slot and the attention fields of an identity layer: same id, same features
    layers = list(g.layers) + [LayerGene(8, 8, 64, 64, 1024, active=False)]
    layers[i] = replace(layers[i], attn=False)
    a = g.with_layers(layers)
    layers[i] = replace(layers[i], n_h=7, n_kv=7, d_qk=40, d_v=24)
    b = g.with_layers(layers)
    assert a.id == b.id and a.id != g.id
    for fs in ("paper", "derived"):
        fa, fb = featurize([a], fs, 40), featurize([b], fs, 40)
        assert (fa.x == fb.x).all() and (fa.mask == fb.mask).all()
    assert featurize([a], "paper", 40).mask.sum() == g.n_active


def _batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lens = torch.tensor([1, 5, 40, 17, 9])
    mask = torch.arange(40)[None, :] < lens[:, None]
    return torch.rand(5, 40, 9, generator=g) * mask[..., None], mask


def test_packed_forward_equals_the_stock_padded_encoder():
    torch.manual_seed(1)
    m = ForgeFormer(FFConfig()).eval()
    x, mask = _batch()
    with torch.no_grad():
        assert torch.allclose(m(x, mask), m.reference_forward(x, mask), atol=1e-5)
    # gradients agree too (training uses the packed path)
    ga = torch.autograd.grad(m(x, mask).sum(), m.lift_w)[0]
    gb = torch.autograd.grad(m.reference_forward(x, mask).sum(), m.lift_w)[0]
    assert torch.allclose(ga, gb, atol=1e-4)


def test_dropout_stream_is_seeded_and_drops_the_configured_fraction():
    from surrogate.forgeformer import MaskStream

    keep = MaskStream(0.2, seed=3)(torch.Size([200_000]))
    assert set(torch.unique(keep).tolist()) == {0.0, 1.25}
    assert abs(float((keep == 0).float().mean()) - 0.2) < 0.005
    assert torch.equal(keep, MaskStream(0.2, seed=3)(torch.Size([200_000])))
    m = ForgeFormer(FFConfig()).train()
    x, mask = _batch()
    m.seed_dropout(7)
    a = m(x, mask)
    m.seed_dropout(7)
    assert torch.equal(a, m(x, mask)) and not torch.equal(a, m(x, mask))
