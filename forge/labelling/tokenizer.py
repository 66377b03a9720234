"""Tokenizers for the training corpora: byte-level by default, GPT-2 BPE where `tiktoken` is installed.

Byte-level needs nothing and matches the `iha-tiny` space (vocab 256); GPT-2 BPE (vocab 50257) is what
the LLMForge paper uses (tiktoken's `gpt2` encoding, LLMForge App. G) and is an optional extra.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np

from forge.errors import ForgeError


class TokenizerError(ForgeError):
    """An unknown tokenizer name, or an optional tokenizer whose package is missing."""


class Tokenizer(Protocol):
    name: str
    vocab_size: int

    def encode(self, data: bytes) -> np.ndarray: ...


class ByteTokenizer:
    """Every byte is a token: deterministic, dependency-free, vocab 256."""

    name = "byte"
    vocab_size = 256

    def encode(self, data: bytes) -> np.ndarray:
        return np.frombuffer(data, dtype=np.uint8).astype(np.uint16)


class GPT2Tokenizer:
    """GPT-2 BPE through tiktoken (the `hf` extra)."""

    name = "gpt2"
    vocab_size = 50257

    def __init__(self) -> None:
        try:
            import tiktoken
        except ImportError:
            raise TokenizerError("tokenizer=gpt2 needs the optional package tiktoken: "
                                 "pip install -e '.[data]' in the Forge clone (or use tokenizer=byte)") from None
        try:
            self._enc = tiktoken.get_encoding("gpt2")
        except Exception as e:  # offline without a cached BPE file
            raise TokenizerError(f"tokenizer=gpt2: tiktoken could not load the gpt2 encoding ({e}); "
                                 "it downloads once, so run it online once or use tokenizer=byte") from None

    def encode(self, data: bytes) -> np.ndarray:
        ids = self._enc.encode_ordinary(data.decode("utf-8", errors="replace"))
        return np.asarray(ids, dtype=np.uint16)  # 50257 < 2**16


TOKENIZERS = {"byte": ByteTokenizer, "gpt2": GPT2Tokenizer}


def get_tokenizer(name: str) -> Tokenizer:
    if name not in TOKENIZERS:
        raise TokenizerError(f"tokenizer = {name!r} is unknown; allowed: {', '.join(TOKENIZERS)}")
    return TOKENIZERS[name]()
