"""A tokenizer for an exported model whose vocabulary Forge cannot build offline (GPT-2's BPE): one the user names
(`forge-export tokenizer=<folder>`) or the Hugging Face cache's `gpt2`, loaded with no network access and used
only when its size matches the model's vocabulary exactly (a mismatched tokenizer would emit ids the model lacks).
"""
from __future__ import annotations

from typing import Any

from search.errors import TokenizerError

CACHED = {50257: ("gpt2", "openai-community/gpt2")}  # vocabularies Forge trains with, and their Hub names


def local_tokenizer(vocab_size: int, source: str | None = None) -> tuple[str, Any] | None:
    """(name, tokenizer) with exactly `vocab_size` tokens, from `source` or the local HF cache; None if none."""
    from transformers import AutoTokenizer

    for name in [str(source)] if source else CACHED.get(vocab_size, ()):
        try:
            tok = AutoTokenizer.from_pretrained(name, local_files_only=True)
        except (OSError, ValueError) as e:
            if source:
                raise TokenizerError(f"tokenizer={source}: cannot load it offline ({str(e).splitlines()[0]}); "
                                     "allowed: a folder holding a transformers tokenizer") from None
            continue
        if len(tok) == vocab_size:
            return name, tok
        if source:
            raise TokenizerError(f"tokenizer={source} has {len(tok)} tokens; allowed: a tokenizer with the model's "
                                 f"vocabulary, {vocab_size} tokens")
    return None
