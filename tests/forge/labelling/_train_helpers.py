"""Tiny genomes/protocols shared by the training, dispatch and label-CLI tests (a label in ~1 s)."""
from __future__ import annotations

from forge.genomes.genome import Genome, LayerGene

TINY_CORPUS = {"_target_": "forge.labelling.corpus.stdlib_corpus", "tokenizer": "byte", "val_fraction": 0.1,
               "max_bytes": 1_000_000}
TINY_PROTOCOL = {"name": "test-tiny", "tokens": 4 * 32 * 6, "seq_len": 32, "batch": 4, "lr": 3e-3,
                 "warmup_steps": 2, "val_tokens": 512, "threads": 1, "seed": 0}


def tiny_genome(d_mlp: int = 64, n_h: int = 2, attn2: bool = True) -> Genome:
    return Genome(d_model=32, block_size=32, vocab_size=256,
                  layers=(LayerGene(n_h, 1, 16, 16, d_mlp), LayerGene(1, 1, 8, 16, 32, attn=attn2)))


def tiny_genomes(n: int) -> list[Genome]:
    return [tiny_genome(d_mlp=32 * (i + 1)) for i in range(n)]
