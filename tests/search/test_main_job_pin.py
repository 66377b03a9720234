"""The default main job's front, pinned: `forge-search` with no arguments and today's predictor
(`evaluator.predictor=forgeformer-iha-paper`) must keep these Pareto ids and this hypervolume through
any refactor of genes, spaces, decoding or checkpoints (issue 26). The values are what the code gave
at commit 37be8c6, before the gene registry (the issue text quoted HV 7.3246 from an older tree)."""
from __future__ import annotations

import json

import pytest
from hydra import compose, initialize_config_module

from search.cli import run
from search.state import read_jsonl

FRONT_IDS = [
    '00558875408bfab6', '00b0b9657755bf61', '018ed382af1b8c17', '0301cad0d3c0a640', '04e9b3e020a0425a', '06cc2d549f45a8fe',
    '07b2d3cb5a33574d', '095c91e8c6fa472b', '17c0b8c37274c596', '22cda8bbb8919181', '386e151cc7e5a14e', '38d3148f31c5bc04',
    '420b4e8d87bd9858', '43dabeeb1493d074', '482f7ad37206bd5e', '498d1fe6f887402c', '4aa1bb4f9f3a56e8', '59034006ffcd3d4a',
    '595b91466385fb19', '5dd101c6a275ca9e', '5e6e0ccad7e9d417', '68184468e0fafad5', '6ab887add2b35ead', '6ac1aec816016fc0',
    '6c6b48fcefcb7c76', '6eb27d948f43796c', '750aefb7abd2a604', '795f764da653c557', '80d1f4c216913924', '81c98952d844e278',
    '85a7d704ca78bdce', '8bbc4230148c0f90', '8f6776ea2b51ee1d', '8f6c3805453a94a7', '9255c92f95752cee', '92e145b5d4241a1a',
    '933bd21146a588d0', '9881af47b05587b6', '9be584681f1b2d5c', '9c641a568d5e4c51', '9cb446d55679f3d7', '9ece4e4c0cda878c',
    '9f14ec59d744e591', 'a63635c8c0884785', 'a912c69ae59c2f97', 'ac3d14ae59cf45f7', 'ad7e2c85470eefa8', 'ae08a06e913c3c14',
    'b5163ee4bdf117fe', 'b557e95f4e7af0be', 'b59f8f1135881740', 'bd40479f263d6b34', 'bf920ba384e8f3ac', 'ce027659aa57c966',
    'cec2adf6ff92485e', 'cf23e18d5890d6b3', 'd7c8f7aead3f1245', 'dc8c3e92381fd49b', 'dda67b74ba34b600', 'e8ba015e50abfa4f',
    'eb3951e78977334d', 'f3fc9b867136ab59', 'f5dc1386bea85264', 'f61778ba4e92d4d3', 'f7853183c47aac0b', 'f7a73298262ddeea',
    'fe7a7dcc2b37a52e', 'ff40202cf2708d8c',
]
HV = 7.286428743702038


@pytest.mark.slow
def test_default_main_job_front_and_hv_are_pinned(tmp_path):
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search", overrides=["evaluator.predictor=forgeformer-iha-paper", "progress=false",
                                                 f"out_dir={tmp_path}"])
    summary = run(cfg)
    ids = sorted(r["id"] for r in read_jsonl(tmp_path / "pareto.jsonl"))
    assert ids == FRONT_IDS
    assert summary["hypervolume"] == pytest.approx(HV, rel=1e-12)
    assert json.loads((tmp_path / "summary.json").read_text())["evaluations"] == 1944
