"""Token corpora for real training: the running Python's stdlib (default), local text, or HF datasets.

`corpus=stdlib` works on every machine with nothing to download: the `.py` files of the interpreter's
standard library, read at run time (never copied into the repository), as a fixed sorted file list.
Train/validation is split per file by a hash of its relative path, so the split is deterministic and
no file straddles both sides. Every corpus carries a content hash that goes into each label's
provenance: labels from different stdlib versions are different objectives and must not be mixed.
"""
from __future__ import annotations

import hashlib
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from forge.errors import ForgeError
from forge.labelling.tokenizer import get_tokenizer

_CACHE: dict[tuple, "Corpus"] = {}


class CorpusError(ForgeError):
    """A corpus that cannot be built: missing path, empty, unknown option, missing optional extra."""


@dataclass(frozen=True, eq=False)
class Corpus:
    """A tokenized train stream and validation stream plus where they came from."""

    name: str
    train: np.ndarray
    val: np.ndarray
    vocab_size: int
    content_hash: str
    meta: dict[str, Any] = field(default_factory=dict)

    def provenance(self) -> dict[str, Any]:
        return {"corpus": self.name, "corpus_hash": self.content_hash, "tokenizer": self.meta.get("tokenizer", "byte"),
                "corpus_train_tokens": int(self.train.size), "corpus_val_tokens": int(self.val.size)}

    def train_batches(self, batch: int, seq_len: int, seed: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Endless random windows (x, y=x shifted by one); the seed fixes the exact sequence."""
        _check_len(self.train, seq_len, "train")
        rng = np.random.default_rng(seed)
        offs = np.arange(seq_len + 1)
        while True:
            starts = rng.integers(0, self.train.size - seq_len - 1, size=batch)
            w = self.train[starts[:, None] + offs].astype(np.int64)
            yield w[:, :-1], w[:, 1:]

    def val_windows(self, seq_len: int, n_tokens: int) -> tuple[np.ndarray, np.ndarray]:
        """Fixed, evenly spaced validation windows covering about `n_tokens` (same for every genome)."""
        _check_len(self.val, seq_len, "validation")
        n = max(1, n_tokens // seq_len)
        starts = np.linspace(0, self.val.size - seq_len - 1, n).astype(np.int64)
        w = self.val[starts[:, None] + np.arange(seq_len + 1)].astype(np.int64)
        return w[:, :-1], w[:, 1:]


def _check_len(stream: np.ndarray, seq_len: int, what: str) -> None:
    if stream.size < seq_len + 2:
        raise CorpusError(f"the {what} stream has {stream.size} tokens; need more than seq_len+1 = {seq_len + 1}")


def _is_val(rel: str, val_fraction: float) -> bool:
    h = int(hashlib.sha1(rel.encode()).hexdigest()[:8], 16)
    return h / 0xFFFFFFFF < val_fraction


def _from_files(name: str, root: Path, files: Sequence[Path], tokenizer: str, val_fraction: float,
                max_bytes: int | None) -> Corpus:
    """Concatenate sorted files into train/val streams, hashing exactly the bytes used."""
    if not 0.0 < val_fraction < 1.0:
        raise CorpusError(f"val_fraction = {val_fraction} is invalid; allowed: strictly between 0 and 1")
    tok = get_tokenizer(tokenizer)
    h, parts, used = hashlib.sha256(), {True: [], False: []}, 0
    for p in files:
        rel = p.relative_to(root).as_posix() if p != root else p.name
        data = p.read_bytes()
        if max_bytes is not None and used + len(data) > max_bytes:
            break
        used += len(data)
        h.update(rel.encode() + b"\0" + data + b"\0")
        parts[_is_val(rel, val_fraction)].append(data + b"\n")
    if not parts[False] or not parts[True]:
        raise CorpusError(f"corpus {name} at {root}: {len(files)} file(s) give an empty train or validation split; "
                          "add files or change val_fraction")
    train, val = tok.encode(b"".join(parts[False])), tok.encode(b"".join(parts[True]))
    meta = {"root": str(root), "files": len(parts[False]) + len(parts[True]), "bytes": used, "tokenizer": tok.name}
    return Corpus(name, train, val, tok.vocab_size, h.hexdigest()[:16], meta)


def stdlib_files(root: Path | None = None) -> tuple[Path, list[Path]]:
    """The stdlib's `.py` files (no site-packages, no caches) in a fixed sorted order."""
    root = Path(root or sysconfig.get_paths()["stdlib"])
    skip = {"site-packages", "dist-packages", "__pycache__"}
    files = sorted((p for p in root.rglob("*.py") if not skip & set(p.relative_to(root).parts)),
                   key=lambda p: p.relative_to(root).as_posix())
    return root, files


def stdlib_corpus(tokenizer: str = "byte", val_fraction: float = 0.02, max_bytes: int | None = None) -> Corpus:
    key = ("stdlib", tokenizer, val_fraction, max_bytes)
    if key not in _CACHE:
        root, files = stdlib_files()
        _CACHE[key] = _from_files("stdlib", root, files, tokenizer, val_fraction, max_bytes)
    return _CACHE[key]


def text_corpus(path: str | None = None, tokenizer: str = "byte", val_fraction: float = 0.05,
                pattern: str = "*", max_bytes: int | None = None) -> Corpus:
    """A text file, or every file matching `pattern` under a folder (recursive, sorted)."""
    if not path:
        raise CorpusError("corpus=text needs path=<a text file or a folder of text files>")
    p = Path(path).expanduser()
    if not 0.0 < val_fraction < 1.0:
        raise CorpusError(f"val_fraction = {val_fraction} is invalid; allowed: strictly between 0 and 1")
    if not p.exists():
        raise CorpusError(f"corpus=text: path {p} does not exist")
    if not p.is_file() and not p.is_dir():  # a FIFO would block the read forever
        raise CorpusError(f"corpus=text: path {p} is not a regular file or folder (a FIFO, socket or device); "
                          "allowed: a text file or a folder of text files")
    key = ("text", str(p.resolve()), tokenizer, val_fraction, pattern, max_bytes)
    if key not in _CACHE:
        if p.is_file():  # a single file: split it in 64 KiB pieces so it has both sides
            return _single_file(p, tokenizer, val_fraction, key)
        files = sorted((f for f in p.rglob(pattern) if f.is_file()), key=lambda f: f.relative_to(p).as_posix())
        if not files:
            raise CorpusError(f"corpus=text: no files matching {pattern!r} under {p}")
        _CACHE[key] = _from_files(f"text:{p.name}", p, files, tokenizer, val_fraction, max_bytes)
    return _CACHE[key]


def _single_file(p: Path, tokenizer: str, val_fraction: float, key: tuple) -> Corpus:
    """One file: the last `val_fraction` of its bytes is the validation stream."""
    data = p.read_bytes()
    cut = int(len(data) * (1 - val_fraction))
    tok = get_tokenizer(tokenizer)
    c = Corpus(f"text:{p.name}", tok.encode(data[:cut]), tok.encode(data[cut:]), tok.vocab_size,
               hashlib.sha256(data).hexdigest()[:16], {"root": str(p), "files": 1, "bytes": len(data),
                                                       "tokenizer": tok.name})
    _CACHE[key] = c
    return c


def hf_corpus(name: str = "JeanKaddour/minipile", split: str = "train", val_split: str = "validation",
              text_field: str = "text", tokenizer: str = "gpt2", max_docs: int | None = 20000) -> Corpus:
    """A Hugging Face dataset (MiniPile, FineWeb-Edu, ...): the optional `hf` extra; clear errors offline."""
    try:
        import datasets
    except ImportError:
        raise CorpusError("corpus=hf needs the optional package `datasets`: pip install -e '.[data]' in the Forge clone "
                          "(or use corpus=stdlib / corpus=text path=...)") from None
    key = ("hf", name, split, val_split, text_field, tokenizer, max_docs)
    if key in _CACHE:
        return _CACHE[key]
    tok, h, streams = get_tokenizer(tokenizer), hashlib.sha256(), []
    for sp in (split, val_split):
        try:
            ds = datasets.load_dataset(name, split=sp if max_docs is None else f"{sp}[:{max_docs}]")
        except Exception as e:  # offline, unknown name or split
            raise CorpusError(f"corpus=hf name={name} split={sp}: could not load ({type(e).__name__}: {e}); "
                              "check the name/split, network access or HF_DATASETS_OFFLINE cache") from None
        if text_field not in ds.column_names:
            raise CorpusError(f"corpus=hf: text_field={text_field!r} not in {ds.column_names}")
        data = "\n".join(ds[text_field]).encode()
        h.update(data)
        streams.append(tok.encode(data))
    _CACHE[key] = Corpus(f"hf:{name}", streams[0], streams[1], tok.vocab_size, h.hexdigest()[:16],
                         {"split": split, "val_split": val_split, "tokenizer": tok.name, "max_docs": max_docs})
    return _CACHE[key]


CORPORA = {"stdlib": stdlib_corpus, "text": text_corpus, "hf": hf_corpus}


def build_corpus(cfg: dict[str, Any]) -> Corpus:
    """From a plain config (conf/corpus/*.yaml): `_target_: forge.labelling.corpus.<x>_corpus` plus its options,
    or the short form `{kind: stdlib|text|hf, ...}`."""
    cfg = dict(cfg)
    target, kind = cfg.pop("_target_", None), cfg.pop("kind", None)
    if target is not None:
        kind = {f"forge.labelling.corpus.{f.__name__}": k for k, f in CORPORA.items()}.get(target)
        if kind is None:
            allowed = ", ".join(f"forge.labelling.corpus.{f.__name__}" for f in CORPORA.values())
            raise CorpusError(f"corpus _target_ = {target!r} is unknown; allowed: {allowed}")
    if kind not in CORPORA:
        raise CorpusError(f"corpus kind = {kind!r} is unknown; allowed: {', '.join(CORPORA)}")
    try:
        return CORPORA[kind](**cfg)
    except TypeError as e:
        raise CorpusError(f"corpus={kind}: {e}") from None
