"""forge-export format=hf: the exported folder loads in transformers and computes what forge.lm.model computes."""
from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest
import torch
import yaml
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from forge.genomes.genome import genome_from_dict
from forge.lm.model import build_model
from search.cli import run as run_search
from search.export import load_exported
from search.export import run as run_export
from search.hf_export import HFExportError, llama_misfit, modeling_source, require_transformers, write_hf
from tests.forge.lm.windows import with_window

transformers = pytest.importorskip("transformers")
from transformers import AutoModelForCausalLM, LlamaForCausalLM  # noqa: E402

HETERO = [dict(n_h=4, n_kv=2, d_qk=16, d_v=8, d_mlp=96),           # GQA, d_qk != d_v
          dict(n_h=2, n_kv=1, d_qk=8, d_v=8, d_mlp=64, attn=False),  # identity attention: no KV cache slot
          dict(n_h=2, n_kv=2, d_qk=8, d_v=8, d_mlp=32, active=False),  # pruned slot
          dict(n_h=3, n_kv=3, d_qk=12, d_v=20, d_mlp=48),          # MHA, d_v > d_qk
          dict(n_h=6, n_kv=1, d_qk=8, d_v=8, d_mlp=80)]            # MQA
VOCAB = 97


def _genome(layers, **glob):
    base = dict(d_model=32, block_size=64, vocab_size=VOCAB, layers=layers, mlp="swiglu", norm="rmsnorm",
                tied=True, pos="rope")
    return genome_from_dict({**base, **glob})


def _model(genome, seed=3):
    """Forge's model with larger random weights than the GPT-2 init, so greedy decoding does not repeat one token."""
    model = build_model(genome, seed=seed).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    return model


def _check_same(model, hf, n_new=12):
    x = torch.randint(0, VOCAB, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref, got = model(x)[0], hf(x).logits
    assert got.shape == ref.shape
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)
    want = model.generate(x, n_new)
    out = hf.generate(x, max_new_tokens=n_new, do_sample=False, pad_token_id=0)
    assert out.tolist() == want.tolist()
    assert len(set(want[:, -n_new:].flatten().tolist())) > 2  # the check is not satisfied by one repeated token


@pytest.mark.parametrize("glob", [{}, dict(pos="learned", norm="layernorm", mlp="gelu", parallel=True, bias="qkv",
                                           tied=False)])
def test_heterogeneous_iha_matches_forge_logits_and_greedy_generation(tmp_path, glob):
    genome = _genome(HETERO, **glob)
    model = _model(genome)
    info = write_hf(model, genome, tmp_path)
    hf = AutoModelForCausalLM.from_pretrained(tmp_path, trust_remote_code=True).eval()
    assert type(hf).__name__ == "ForgeForCausalLM" and hf.config.num_hidden_layers == 3  # KV slots: attention blocks
    cfg = json.loads((tmp_path / "config.json").read_text())  # both counts are in the file, and the card says so
    assert cfg["num_blocks"] == genome.n_active > cfg["num_hidden_layers"] == 3 and hf.config.num_blocks == genome.n_active
    assert "`num_hidden_layers` counts those" in (tmp_path / "README.md").read_text()
    _check_same(model, hf)
    assert info["native"] is None and not (tmp_path / "llama").exists()
    assert info["not_native_because"] in (glob and "mlp is not swiglu" or "identity-attention layers")


def test_generate_uses_the_kv_cache(tmp_path):
    """Decoding feeds one token per step with the cache: the cache grows, and a cache-less model would differ."""
    genome = _genome(HETERO)
    write_hf(_model(genome), genome, tmp_path)
    hf = AutoModelForCausalLM.from_pretrained(tmp_path, trust_remote_code=True).eval()
    x = torch.randint(0, VOCAB, (1, 6))
    out = hf(x, use_cache=True)
    cache = getattr(out, "cache", None) or out.past_key_values
    assert cache.get_seq_length() == 6
    step = hf(x[:, -1:] * 0 + 5, cache=cache, use_cache=True).logits[:, -1]
    full = hf(torch.cat([x, x[:, -1:] * 0 + 5], 1), use_cache=False).logits[:, -1]
    torch.testing.assert_close(step, full, atol=1e-5, rtol=0)


def test_labels_give_forges_training_loss(tmp_path):
    """HF convention (labels = inputs, shifted inside) equals Forge's next-token loss: Trainer trains the same thing."""
    genome = _genome(HETERO)
    model = _model(genome)
    write_hf(model, genome, tmp_path)
    hf = AutoModelForCausalLM.from_pretrained(tmp_path, trust_remote_code=True)
    x = torch.randint(0, VOCAB, (2, 10))
    loss = hf(x, labels=x).loss
    torch.testing.assert_close(loss, model(x[:, :-1], targets=x[:, 1:])[1], atol=1e-5, rtol=0)
    loss.backward()
    assert hf.model.blocks[0].attn.q_proj.weight.grad.abs().sum() > 0


def test_left_padded_batch_generates_what_each_prompt_generates_alone(tmp_path):
    """attention_mask and generate()'s position ids are honoured: padding changes nothing."""
    genome = _genome(HETERO)
    model = _model(genome)
    write_hf(model, genome, tmp_path)
    hf = AutoModelForCausalLM.from_pretrained(tmp_path, trust_remote_code=True).eval()
    a, b = torch.randint(1, VOCAB, (1, 7)), torch.randint(1, VOCAB, (1, 4))
    ids = torch.cat([a, torch.cat([torch.zeros(1, 3, dtype=torch.long), b], 1)])
    mask = (torch.arange(7)[None] >= torch.tensor([[0], [3]])).long()
    out = hf.generate(ids, attention_mask=mask, max_new_tokens=8, do_sample=False, pad_token_id=0)
    assert out[0, -8:].tolist() == model.generate(a, 8)[0, -8:].tolist()
    assert out[1, -8:].tolist() == model.generate(b, 8)[0, -8:].tolist()


def test_llama_shaped_genome_also_exports_native_llama(tmp_path):
    genome = _genome([dict(n_h=4, n_kv=2, d_qk=8, d_v=8, d_mlp=64)] * 3)
    assert llama_misfit(genome) is None
    model = _model(genome)
    info = write_hf(model, genome, tmp_path)
    assert info["native"] == "llama"
    cfg = json.loads((tmp_path / "llama" / "config.json").read_text())
    assert cfg["model_type"] == "llama" and "auto_map" not in cfg  # no remote code needed
    hf = AutoModelForCausalLM.from_pretrained(tmp_path / "llama").eval()  # no trust_remote_code
    assert isinstance(hf, LlamaForCausalLM)
    _check_same(model, hf)
    _check_same(model, AutoModelForCausalLM.from_pretrained(tmp_path, trust_remote_code=True).eval())


@pytest.mark.parametrize("change, why", [(dict(mlp="gelu"), "swiglu"), (dict(bias="qkv"), "bias=qkv"),
                                         (dict(parallel=True), "parallel")])
def test_llama_misfit_names_the_reason(change, why):
    assert why in llama_misfit(_genome([dict(n_h=4, n_kv=2, d_qk=8, d_v=8, d_mlp=64)] * 2, **change))
    assert "differ" in llama_misfit(_genome([dict(n_h=4, n_kv=2, d_qk=8, d_v=8, d_mlp=64),
                                             dict(n_h=2, n_kv=2, d_qk=8, d_v=8, d_mlp=64)]))


def test_modeling_file_stands_alone():
    """Remote code travels without Forge: it may import only torch, transformers and the standard library."""
    roots = set()
    for node in ast.walk(ast.parse(modeling_source())):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative import in remote code"
            roots.add(node.module.split(".")[0])
    assert roots <= {"__future__", "dataclasses", "math", "types", "torch", "transformers"}, roots


def test_the_exported_model_is_forge_model_verbatim(tmp_path):
    """One source: every definition of forge/lm/model.py but its own plumbing is in the exported file as written
    there, the shell keeps none of its own, and a model.py change (a new helper, a gene's meaning) ships."""
    import inspect

    import forge.lm.model
    from search.hf_export import SHELL_ONLY, load_modeling

    src = modeling_source()
    model_src = inspect.getsource(forge.lm.model)
    names = [n.name for n in ast.parse(model_src).body if isinstance(n, (ast.ClassDef, ast.FunctionDef))]
    for name in names:
        if name not in SHELL_ONLY:
            assert inspect.getsource(getattr(forge.lm.model, name)) in src, name
    shell = Path(__import__("forge_hf").__file__).with_name("modeling_forge.py").read_text()
    shell_defs = {n.name for n in ast.parse(shell).body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    assert not shell_defs & (set(names) - {"rope_tables"})  # no second copy of a model definition
    (tmp_path / "modeling_forge.py").write_text(src)
    hf = load_modeling(tmp_path / "modeling_forge.py")
    assert issubclass(hf.ForgeBlock, hf.Block) and issubclass(hf.ForgeAttention, hf.Attention)


def _tiny_run(tmp_path):
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search", overrides=["space=iha-tiny", "search.pop_size=4", "search.offspring=4",
                                                 "search.generations=1", "progress=false", f"out_dir={tmp_path}"])
    OmegaConf.set_struct(cfg, False)
    cfg.backend = {"_target_": "tests.search.fakes.FakeBackend"}
    cfg.evaluator.predictor = {"_target_": "tests.search.fakes.FakePredictor"}
    run_search(cfg)
    return tmp_path


def test_forge_export_format_hf_writes_a_loadable_folder_with_a_model_card(tmp_path):
    run_dir = _tiny_run(tmp_path / "run")
    s = run_export({"run": str(run_dir), "select": "knee", "format": "hf", "out": str(tmp_path / "out")})
    folder = tmp_path / "out" / s["exported"][0]["id"]
    for name in ("config.json", "modeling_forge.py", "model.safetensors", "README.md", "genome.yaml"):
        assert (folder / name).is_file(), name
    card = (folder / "README.md").read_text()
    meta = yaml.safe_load(card.split("---\n")[1])
    assert meta["license"] == "mit" and meta["pipeline_tag"] == "text-generation"
    assert meta["library_name"] == "transformers" and "datasets" not in meta  # iha-tiny: the stdlib corpus
    assert "estimates of the `tests.search.fakes.FakeBackend` hardware backend" in card
    assert "cpu-proxy protocol" in card and "Python standard library" in card and "bytes (256 tokens" in card
    assert str(tmp_path) not in card and "trust_remote_code=True" in card  # no local absolute path
    hf = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True).eval()
    assert sum(p.numel() for p in hf.parameters()) == s["exported"][0]["params"]
    genome, model = load_exported(folder)  # and back into Forge's own model, same weights
    x = torch.randint(0, genome.vocab_size, (1, 5))
    with torch.no_grad():
        torch.testing.assert_close(hf(x).logits, model(x)[0], atol=1e-5, rtol=0)


def test_missing_transformers_is_one_clear_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers -> ImportError
    with pytest.raises(HFExportError, match=r"optional package transformers.*pip install -e '\.\[export\]' in the Forge clone"):
        require_transformers()
    with pytest.raises(HFExportError) as e:
        run_export({"run": str(_tiny_run(tmp_path / "run")), "format": "hf", "out": str(tmp_path / "o")})
    assert "\n" not in str(e.value) and not (tmp_path / "o").exists()


def test_byte_vocabulary_folder_ships_its_tokenizer_and_runs_in_a_pipeline(tmp_path):
    """pipeline("text-generation") runs on the folder as exported: the tokenizer maps byte i to token i."""
    genome = _genome(HETERO, vocab_size=256)
    write_hf(_model(genome), genome, tmp_path)
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path)
    text = "héllo\n\x00 ✓"
    assert tok(text)["input_ids"] == list(text.encode()) and tok.decode(list(text.encode())) == text
    generate = transformers.pipeline("text-generation", model=str(tmp_path), trust_remote_code=True)
    out = generate("def f(x):", max_new_tokens=5, do_sample=False)[0]["generated_text"]
    assert out.startswith("def f(x):") and len(out.encode()) > len("def f(x):")


def _small_tokenizer(folder, n: int):
    """A word-level tokenizer of exactly `n` tokens, built here (no network)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel(vocab={f"w{i}": i for i in range(n - 1)} | {"[UNK]": n - 1}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(str(folder))
    return folder


def test_a_local_tokenizer_of_the_right_size_is_written_into_the_folder(tmp_path):
    from search.hf_tokenizer import TokenizerError

    genome = _genome(HETERO, vocab_size=300)
    src = _small_tokenizer(tmp_path / "tok", 300)
    info = write_hf(build_model(genome, seed=0), genome, tmp_path / "out", {"tokenizer_source": str(src)})
    assert info["tokenizer"] == str(src) and (tmp_path / "out" / "tokenizer.json").is_file()
    assert len(transformers.AutoTokenizer.from_pretrained(tmp_path / "out")) == 300
    assert f"copied from `{src}`" in (tmp_path / "out" / "README.md").read_text()
    with pytest.raises(TokenizerError, match="has 300 tokens; allowed: .* 512 tokens"):
        write_hf(build_model(_genome(HETERO, vocab_size=512), seed=0), _genome(HETERO, vocab_size=512),
                 tmp_path / "bad", {"tokenizer_source": str(src)})


def test_gpt2_vocabulary_card_names_the_tokenizer_it_cannot_ship(tmp_path, monkeypatch):
    import search.hf_tokenizer as hf_tokenizer

    monkeypatch.setattr(hf_tokenizer, "CACHED", {50257: (str(tmp_path / "no-cache"),)})  # an empty HF cache
    genome = _genome(HETERO, vocab_size=50257)
    info = write_hf(build_model(genome, seed=0), genome, tmp_path)
    assert info["tokenizer"] is None and not (tmp_path / "tokenizer.json").exists()
    assert 'AutoTokenizer.from_pretrained("gpt2")' in (tmp_path / "README.md").read_text()


def test_export_ships_the_weights_forge_verify_trained(tmp_path):
    """forge-verify keeps each trained pick as <verify>/weights/<id>.safetensors; `weights=` exports it."""
    from safetensors.torch import save_model

    run_dir = _tiny_run(tmp_path / "run")
    knee = run_export({"run": str(run_dir), "format": "yaml", "out": str(tmp_path / "plain")})["exported"][0]
    genome, _ = load_exported(tmp_path / "plain" / knee["id"])
    trained = _model(genome, seed=11)  # stands in for a trained model: weights no seeded init has
    save_model(trained, str((tmp_path / "w").mkdir() or tmp_path / "w" / f"{genome.id}.safetensors"))
    s = run_export({"run": str(run_dir), "format": "hf", "out": str(tmp_path / "out"), "weights": str(tmp_path / "w")})
    assert s["exported"][0]["weights"].startswith("trained")
    folder = tmp_path / "out" / genome.id
    assert "Weights: trained (`forge-verify`)" in (folder / "README.md").read_text()
    hf = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True).eval()
    x = torch.randint(0, genome.vocab_size, (1, 5))
    with torch.no_grad():
        torch.testing.assert_close(hf(x).logits, trained(x)[0], atol=1e-5, rtol=0)


def _windowed_genome(windows, **glob):
    """HETERO with a window on each slot (the identity and pruned slots ignore theirs)."""
    genome = _genome(HETERO, **glob)
    return genome.with_layers(with_window(g, w) for g, w in zip(genome.layers, windows))


@pytest.mark.parametrize("glob", [{}, dict(pos="learned", norm="layernorm", mlp="gelu", parallel=True)])
def test_sliding_window_layers_match_forge_with_and_without_cache(tmp_path, glob):
    genome = _windowed_genome((3, 0, 2, 0, 4), **glob)  # windows shorter than the 9-token prompt
    model = _model(genome)
    info = write_hf(model, genome, tmp_path, "")
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert [x.get("window", 0) for x in cfg["layers"]] == [3, 0, 0, 4]  # identity block: none; full: absent
    assert info["not_native_because"] in ("identity-attention layers", "mlp is not swiglu")
    hf = AutoModelForCausalLM.from_pretrained(tmp_path, trust_remote_code=True).eval()
    assert [b.attn.window for b in hf.model.blocks if b.attn is not None] == [3, 0, 4]
    _check_same(model, hf, n_new=12)  # greedy generation runs the cache past every window
    x = torch.randint(0, VOCAB, (2, 11), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        out = hf(x[:, :7], use_cache=True)
        cache = getattr(out, "cache", None) or out.past_key_values
        steps = [hf(x[:, t:t + 1], cache=cache, use_cache=True).logits for t in range(7, 11)]
        got = torch.cat([out.logits, *steps], dim=1)
    torch.testing.assert_close(got, model(x)[0], atol=1e-5, rtol=0)
    llama = _genome([dict(n_h=4, n_kv=2, d_qk=8, d_v=8, d_mlp=64)] * 2)
    assert llama_misfit(llama) is None
    assert "window" in llama_misfit(llama.with_layers([llama.layers[0], with_window(llama.layers[1], 16)]))


@pytest.mark.parametrize("pre", [False, True])
def test_a_failed_export_leaves_out_as_it_was(tmp_path, monkeypatch, pre):
    """An error half-way through (here the card, after weights and modeling file are written) leaves no partial
    out= folder: neither a new one nor files in an existing one (overwrite=true keeps the old export whole)."""
    import search.hf_card

    run_dir = _tiny_run(tmp_path / "run")
    cfg = {"run": str(run_dir), "select": "knee", "format": "hf", "out": str(tmp_path / "deep" / "out")}
    if pre:
        run_export({**cfg, "format": "yaml"})
    before = sorted((p.relative_to(tmp_path), p.read_bytes() if p.is_file() else None) for p in tmp_path.rglob("*"))
    monkeypatch.setattr(search.hf_card, "hf_card", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("half-way")))
    with pytest.raises(RuntimeError, match="half-way"):
        run_export({**cfg, "overwrite": True})
    assert sorted((p.relative_to(tmp_path), p.read_bytes() if p.is_file() else None)
                  for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("vocab", [256, 50257])
def test_the_cards_first_snippet_runs_offline_as_printed(tmp_path, monkeypatch, vocab):
    """Issue 56 §6: the card's first snippet runs as printed, offline (HF_HUB_OFFLINE, no stdin: transformers'
    interactive trust prompt would fail it), from inside the folder, whether the folder ships its tokenizer
    (bytes) or none (GPT-2's vocabulary with an empty HF cache: it feeds token ids and its first line says so)."""
    import os
    import re
    import subprocess
    import sys

    import search.hf_tokenizer as hf_tokenizer

    monkeypatch.setattr(hf_tokenizer, "CACHED", {50257: (str(tmp_path / "no-cache"),)})
    genome = _genome(HETERO, vocab_size=vocab)
    write_hf(build_model(genome, seed=0), genome, tmp_path / "f")
    snippet = re.search(r"```python\n(.*?)```", (tmp_path / "f" / "README.md").read_text(), re.S).group(1)
    assert snippet.startswith("# offline, run inside this folder")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    p = subprocess.run([sys.executable, "-c", snippet], cwd=tmp_path / "f", env=env, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip()
