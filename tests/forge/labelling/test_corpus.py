"""Corpora: deterministic stdlib corpus with content hash, local text, hf extra errors, batching."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from forge.labelling import corpus as C
from forge.labelling.tokenizer import TokenizerError, get_tokenizer


@pytest.fixture()
def fresh_cache(monkeypatch):
    monkeypatch.setattr(C, "_CACHE", {})


def test_stdlib_corpus_is_deterministic_and_hashed(fresh_cache):
    a = C.stdlib_corpus(val_fraction=0.1, max_bytes=1_000_000)
    C._CACHE.clear()
    b = C.stdlib_corpus(val_fraction=0.1, max_bytes=1_000_000)
    assert a is not b and a.content_hash == b.content_hash
    assert np.array_equal(a.train, b.train) and np.array_equal(a.val, b.val)
    assert a.train.size > 10 * a.val.size > 0 and a.vocab_size == 256 and a.train.max() < 256
    assert a.meta["bytes"] <= 1_000_000
    c = C.stdlib_corpus(val_fraction=0.1, max_bytes=2_000_000)
    assert c.content_hash != a.content_hash  # the hash covers exactly the bytes used
    assert a.provenance()["corpus_hash"] == a.content_hash


def test_stdlib_file_list_is_sorted_and_excludes_site_packages():
    root, files = C.stdlib_files()
    rel = [f.relative_to(root).as_posix() for f in files]
    assert rel == sorted(rel) and len(rel) > 100
    assert not any("site-packages" in r or "__pycache__" in r for r in rel)
    assert all(r.endswith(".py") for r in rel)


def test_text_corpus_file_and_folder(tmp_path, fresh_cache):
    f = tmp_path / "a.txt"
    f.write_bytes(bytes(range(256)) * 40)
    one = C.text_corpus(str(f), val_fraction=0.25)
    assert one.val.size == pytest.approx(0.25 * 10240, abs=2) and one.train.size + one.val.size == 10240
    d = tmp_path / "docs"
    d.mkdir()
    for i in range(40):
        (d / f"doc{i:02d}.txt").write_text(f"document {i} " * 50)
    folder = C.text_corpus(str(d), val_fraction=0.2)
    assert folder.meta["files"] == 40 and folder.val.size > 0 and folder.train.size > folder.val.size
    assert C.build_corpus({"_target_": "forge.labelling.corpus.text_corpus", "path": str(d), "val_fraction": 0.2}) is folder


def test_text_corpus_errors(tmp_path):
    with pytest.raises(C.CorpusError, match="needs path"):
        C.text_corpus(None)
    with pytest.raises(C.CorpusError, match="does not exist"):
        C.text_corpus(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(C.CorpusError, match="no files"):
        C.text_corpus(str(tmp_path / "empty"))
    with pytest.raises(C.CorpusError, match="val_fraction"):
        C.text_corpus(str(tmp_path / "empty"), val_fraction=1.5)


def test_hf_corpus_without_the_extra_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # import fails as when the extra is absent
    with pytest.raises(C.CorpusError, match=r"optional package `datasets`.*pip install -e '\.\[data\]' in the Forge clone"):
        C.hf_corpus()


def test_build_corpus_rejects_unknown_kinds():
    with pytest.raises(C.CorpusError, match="allowed: stdlib, text, hf"):
        C.build_corpus({"kind": "webcrawl"})
    with pytest.raises(C.CorpusError, match="_target_"):
        C.build_corpus({"_target_": "os.system"})
    with pytest.raises(C.CorpusError, match="corpus=stdlib"):
        C.build_corpus({"kind": "stdlib", "colour": "red"})


def test_batches_are_seeded_and_shifted(fresh_cache):
    c = C.stdlib_corpus(val_fraction=0.1, max_bytes=1_000_000)
    x1, y1 = next(c.train_batches(4, 16, seed=3))
    x2, _ = next(c.train_batches(4, 16, seed=3))
    x3, _ = next(c.train_batches(4, 16, seed=4))
    assert x1.shape == (4, 16) and np.array_equal(x1, x2) and not np.array_equal(x1, x3)
    assert np.array_equal(x1[:, 1:], y1[:, :-1])
    vx, vy = c.val_windows(16, 160)
    vx2, _ = c.val_windows(16, 160)
    assert vx.shape == (10, 16) and np.array_equal(vx, vx2) and np.array_equal(vx[:, 1:], vy[:, :-1])
    with pytest.raises(C.CorpusError, match="seq_len"):
        c.val_windows(c.val.size, 10)


def test_tokenizers():
    assert get_tokenizer("byte").encode("aé".encode()).tolist() == [97, 195, 169]
    with pytest.raises(TokenizerError, match="allowed: byte, gpt2"):
        get_tokenizer("sentencepiece")
    try:
        import tiktoken  # noqa: F401
    except ImportError:
        with pytest.raises(TokenizerError, match="tiktoken"):
            get_tokenizer("gpt2")
