"""Tiny genomes/protocols shared by the training, dispatch and label-CLI tests (a label in ~1 s)."""
from __future__ import annotations

from forge.genomes.genome import Genome, LayerGene

TINY_CORPUS = {"_target_": "forge.labelling.corpus.stdlib_corpus", "tokenizer": "byte", "val_fraction": 0.1,
               "max_bytes": 1_000_000}
TINY_PROTOCOL = {"name": "test-tiny", "tokens": 4 * 32 * 6, "seq_len": 32, "batch": 4, "lr": 3e-3,
                 "warmup_steps": 2, "val_tokens": 512, "threads": 1, "seed": 0,
                 "rungs": 1}  # no curve: the fastest label (tests of curves set their own rungs, test_curves.py)


def tiny_genome(d_mlp: int = 64, n_h: int = 2, attn2: bool = True) -> Genome:
    return Genome(d_model=32, block_size=32, vocab_size=256,
                  layers=(LayerGene(n_h, 1, 16, 16, d_mlp), LayerGene(1, 1, 8, 16, 32, attn=attn2)))


def tiny_genomes(n: int) -> list[Genome]:
    return [tiny_genome(d_mlp=32 * (i + 1)) for i in range(n)]


def ray_local():
    """A local 2-CPU Ray instance whose workers import this checkout (pytest skips when ray is not installed)."""
    import os

    import pytest

    ray = pytest.importorskip("ray", reason="ray is an optional extra (pip install -e '.[ray]' in the Forge clone)")
    import tempfile

    # an instance of its own: address="local" never joins another live cluster (Ray's None does, through the
    # shared /tmp/ray/ray_current_cluster), its own temp folder (short: Ray's socket paths must fit 107 bytes),
    # and the ports Ray picks free at random (the dashboard, on a fixed port, is off)
    own = tempfile.mkdtemp(prefix="fray-", dir="/tmp")
    ray_init(ray, address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True,
             _temp_dir=own, runtime_env={"env_vars": {"PYTHONPATH": os.getcwd()}})
    return ray


def ray_init(ray, attempts: int = 3, **kw) -> None:
    """`ray.init(**kw)`, started again when Ray's own fixed 30 s wait for its raylet runs out ("The current node
    timed out during startup": a loaded machine, seen at load 20, issue 56 §1), so no test depends on the
    scheduler to start Ray in time; any other error, and the last attempt's, propagates."""
    for attempt in range(attempts):
        try:
            ray.init(**kw)
            return
        except Exception as e:  # noqa: BLE001 - Ray raises a bare Exception for this
            if "timed out during startup" not in str(e) or attempt == attempts - 1:
                raise
            ray.shutdown()
