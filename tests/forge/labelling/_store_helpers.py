"""Store test helpers: fake labels (no training) and a PostgreSQL schema per test."""
from __future__ import annotations

import os
import uuid

import numpy as np
import pytest

from forge.genomes.labels import Label
from forge.spaces.space import load_space


def fake_labels(n: int, seed: int = 0) -> list[Label]:
    """n distinct iha-tiny genomes with made-up finite labels (deterministic in seed)."""
    gs, seen = [], set()
    for g in load_space("iha-tiny").sample(3 * n, np.random.default_rng(seed)):
        if g.id not in seen:
            seen.add(g.id)
            gs.append(g)
    assert len(gs) >= n
    return [Label(g, 2.0 + i / 1000, {"protocol": "fake", "i": i}) for i, g in enumerate(gs[:n])]


@pytest.fixture()
def pg_url():
    """A fresh schema on the real server from .ci/postgres.sh; required (fails) when CI=true."""
    url = os.environ.get("FORGE_TEST_PG_URL")
    if not url:
        msg = "FORGE_TEST_PG_URL unset: run `source .ci/postgres.sh` to start a local PostgreSQL"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    from sqlalchemy import create_engine, text

    schema = f"t_{uuid.uuid4().hex[:12]}"
    eng = create_engine(url)
    with eng.begin() as c:
        c.execute(text(f"CREATE SCHEMA {schema}"))
    sep = "&" if "?" in url else "?"
    yield f"{url}{sep}options=-csearch_path%3D{schema}"
    with eng.begin() as c:
        c.execute(text(f"DROP SCHEMA {schema} CASCADE"))
    eng.dispose()
