"""Synthetic Azure-shaped traces and the CSV loader (ours and Azure's columns; missing columns: one line)."""
from __future__ import annotations

import numpy as np
import pytest
import yaml

from backends.serving.trace import TraceError, load_csv, resolve_trace, synthetic
from forge.runtime.config import conf_dir

AZ = yaml.safe_load((conf_dir() / "serve" / "trace" / "azure-conv.yaml").read_text())


def test_synthetic_is_seeded_and_has_the_configured_shape():
    a, b, c = synthetic(AZ, 0), synthetic(AZ, 0), synthetic(AZ, 1)
    assert np.array_equal(a.prompt, b.prompt) and not np.array_equal(a.prompt, c.prompt)
    assert len(a) == 2454 and a.arrival_s[0] == 0 and np.all(np.diff(a.arrival_s) >= 0)
    assert a.summary()["duration_s"] == pytest.approx(120, rel=0.1)
    assert np.median(a.prompt) == pytest.approx(1020, rel=0.1) and np.median(a.output) == pytest.approx(129, rel=0.1)
    assert a.prompt.max() <= 8192 and a.output.min() >= 1


def test_csv_roundtrip_and_sorting(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens\n2.5,100,7\n1.0,50,3\n")
    t = resolve_trace(str(p), AZ, 0)
    assert t.arrival_s.tolist() == [0.0, 1.5] and t.prompt.tolist() == [50, 100] and t.output.tolist() == [3, 7]


def test_azure_columns(tmp_path):
    p = tmp_path / "az.csv"
    p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
                 "2023-11-16 18:15:50.9951690,396,109\n")
    t = load_csv(p)
    assert t.arrival_s[1] == pytest.approx(4.314579, abs=1e-5) and t.output.tolist() == [44, 109]


def test_missing_columns_name_what_is_allowed(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("arrival_s,prompt_tokens\n0,5\n")
    with pytest.raises(TraceError, match="lacks columns output_tokens; allowed: arrival_s, prompt_tokens, output_tokens"):
        load_csv(p)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_csv(tmp_path / "none.csv")
