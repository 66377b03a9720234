"""The main job's front, pinned: `forge-search` with the previous default predictor
(`evaluator.predictor=forgeformer-iha-paper`) must keep these Pareto ids and this hypervolume through
any refactor of genes, spaces, decoding or checkpoints (issue 26). The values are what the code gave
at commit 37be8c6, before the gene registry (the issue text quoted HV 7.3246 from an older tree).

`forge-search` with no arguments (issue 35: `evaluator.predictor=auto`, i.e. `forgeformer-iha-paper-all`, fit on
every shared label) is pinned below it: ids exact, HV to 1e-6 relative (measured on AMD EPYC, 2 cores)."""
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


FRONT_IDS_DEFAULT = [
    '0102ded6dd271326', '03b05bde9bd093e5', '07542ff3f5f8c32b', '0d25827352819abc', '1715d4ae9e5cb5a0', '1aa9faa947fe1b90',
    '1b3f884397a0b46f', '1e313f809c93d5a3', '1e5487ac3a2e4483', '1f74586482d050f3', '25bc80730fc8ae1a', '273e1c941507920b',
    '2d834612e489054a', '2f3c2d4b839a923d', '37b673e961d6d4ae', '392c8a7bac70da72', '3fb96023dba69d63', '401fb14ca11a721d',
    '44a42ad526f1a014', '4768136abde73008', '4ae0f1e358ba89da', '57f71c94df86e635', '5a6e04378730ac80', '5bb39b62905e4f0a',
    '5f6a3819abc0b75e', '5ffc6c0019f1ca54', '60ab4b82ea8a4c21', '61c17c141771e9ff', '6bbd3734bede16c2', '6d30b370f24e49e9',
    '70276d9d78bd420d', '7141480606365050', '7393375fe987bdc4', '752b0ed0bae9140a', '79ae8187d6c92fc7', '7bcc3d7609dacae0',
    '7ed9a2aa067ee394', '808c7fd2ca3253ef', '81977d0e8c659964', '837aec15ab4d2010', '8570c64dd80fe4fd', '85e80aefe3141e86',
    '86e99a0278c2163a', '89760f6a08d8547b', '8cb27fff87580862', '8ecc806de401d7ed', '90f9f6b153dd1f8a', '95af1fc0e0025922',
    '9930f77b1cc8be64', '99a939fba85fe3d3', '9e49b06dbfbae87e', 'b6eef3760aff6e45', 'b7a1bb910fabc719', 'bb840922e48ecf8f',
    'bee939f38639ae20', 'c4e52bb264cb377d', 'ca0635382f50831e', 'cba351ba834e71d0', 'cfe36d7c76db5c58', 'd144ae8e1691868f',
    'd1e60c599ddfcbd1', 'd5e3ef3e842506db', 'da48a5d9fc76779c', 'dcf28f2ec474d650', 'dea6e6880a4d853b', 'e24a0f0f4fb4519d',
    'e467174ab1f683f9', 'e572875f1075cddc', 'e5f7f075d18d134f', 'ebb79deb967dc4c6', 'f100521c279f57eb', 'f47d6375d0d8f2c9',
    'f876a511f3a798a0', 'fcb6504ff5ba93f9', 'fe8acff22547b619',
]
HV_DEFAULT = 7.051138256524568


@pytest.mark.slow
def test_default_main_job_with_no_arguments_is_pinned(tmp_path):
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search", overrides=["progress=false", f"out_dir={tmp_path}"])
    summary = run(cfg)
    ids = sorted(r["id"] for r in read_jsonl(tmp_path / "pareto.jsonl"))
    assert ids == FRONT_IDS_DEFAULT
    assert summary["hypervolume"] == pytest.approx(HV_DEFAULT, rel=1e-6)
    assert summary["loss_interval"]["source"]["n_rows"] == 1753  # cross-conformal on every shared label
