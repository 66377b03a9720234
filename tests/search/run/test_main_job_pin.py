"""The main job's front, pinned, for two predictors: `forge-search` with no arguments (issue 35: the default
`evaluator.predictor=auto`, i.e. `forgeformer-iha-paper-all`, fit on every shared label) and with the previous
default (`evaluator.predictor=forgeformer-iha-paper`). Each must keep its Pareto ids and hypervolume through any
refactor of genes, spaces, decoding or checkpoints (issue 26), on any machine (issue 33: the search rounds every
surrogate and backend float before comparing it, and the surrogate runs in float64, so the ids are exact
everywhere; the HV is checked at 1e-6 relative). Pinned on the machine MACHINE names; a change that moves a front
on purpose re-pins both with `python bench/repin_main_job.py --write` and says so in bench/RESULTS.md."""
from __future__ import annotations

import json

import pytest
from hydra import compose, initialize_config_module

from search.cli import run
from search.state import read_jsonl

FRONT_IDS = [
    '020141e38b6b1576', '020639083b3551cf', '05c4bc50fd02a09d', '0637fbfab92ef55b', '06a04d908c43cabd', '0a9c4f7efa5eeddd',
    '0b5ec84c53386419', '0bfaaa0b87518615', '0ce69ce7bded64e6', '0cf9bb7912f0e787', '0e9aadc8923e4562', '11d74731ec36a9a7',
    '136a93c9802b9436', '1413e4063ae514ff', '14a8b89d15b034f1', '150b581d2da47076', '1b1993b4b612b1d8', '229c745f69defb72',
    '2696dd80ca48977d', '2a4f7a57076303c5', '2e3528ca294ad9c7', '2f045fd2fd7d79fb', '312fca33e09a223b', '3385d3583bc92231',
    '33c7e967bdcae69d', '33f5795133696a32', '37f4f7712a132462', '3aa445410bbfaf35', '3de25c95b481fbd0', '3ec0faf168ab3b76',
    '3f33818c9608b2f3', '469e8b46da13fa6f', '49eecf86c7e12531', '4a4e1663674c7cc5', '4f56458900bb423b', '506215bd0d0e5ad7',
    '50a90ba02ebcd387', '50d0d36a51c617a8', '51e1e8918fc908ff', '52262ac7a4a4637e', '52c5b025ac65acfa', '55d453f6915aeed3',
    '581ebdb47900c2e6', '590bee6a76299c29', '6145f6ca62ae4595', '659ef2c7aabf1b55', '68c8ae8197ba58a9', '69a0e7bf60cf473a',
    '6e471a68ca9f205f', '6f8121f658077e47', '718b31df8faab4a6', '72d31b6f4bae6c62', '74036184c9fa5973', '74228794c0a42389',
    '798856b6c0a5faed', '804badc4ff701516', '8629184b51a45321', '862a3cab088ffe4b', '877247478d46a21d', '8ba17aa0015c4c62',
    '8e3285240a0f5fbe', '9085552e9c4cded2', '91616dda8e09d118', '921be5aa2440d9c3', '9382974c36441dae', '95e408560cba0e91',
    '9601e2ce57ba6c2a', '986599790b23be67', '9b18147010e68b51', 'a021c5b2ea334216', 'a158df4764b67294', 'a850431bb45f23fd',
    'a8937f73cc5fa07f', 'aa2bc7b027dfe695', 'ac7f7ec8082eae55', 'ad663152488b7945', 'afc5a099a42aef93', 'b3bd371d49dc94f1',
    'b3c757cbeb438ae8', 'b4ab5c2665ef4b3d', 'b4dbe31b5569d674', 'bf9500a0d22247fe', 'c1975f733c5db1bb', 'c33e28fb2c49e6ea',
    'd36b9ee411956bff', 'd6101c39be4ff87e', 'daa07d69b329bcfc', 'dd3c734e3fb8de16', 'e06113faabaeb632', 'e1bfda3d4caa338d',
    'e699c6abe7644d91', 'ea67b736e9f1ad22', 'ee5ac97b226f27cf', 'f1479ea8565285b3', 'f22ce4c37a9ff4de', 'f399fb6fb1be4842',
    'f65ddb3378c92df1',
]
HV = 7.201
MACHINE = 'AMD EPYC, 2 cores'


@pytest.mark.slow
def test_default_main_job_front_and_hv_are_pinned(tmp_path):
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search", overrides=["evaluator.predictor=forgeformer-iha-paper", "progress=false",
                                                 f"out_dir={tmp_path}"])
    summary = run(cfg)
    ids = sorted(r["id"] for r in read_jsonl(tmp_path / "pareto.jsonl"))
    assert ids == FRONT_IDS
    assert summary["hypervolume"] == pytest.approx(HV, rel=1e-6)
    assert json.loads((tmp_path / "summary.json").read_text())["evaluations"] == 1944


FRONT_IDS_DEFAULT = [
    '02df3d3148a5a790', '0686da25693047c8', '06bca94d7ebaef8c', '090785e997a43b16', '139e756967289e60', '13d9cd17bf3485ca',
    '19e7a2436043e082', '1a380f1c05a131b1', '1b58933b1c175fb8', '1d4f39900429d48e', '1da6b7e396e05f2c', '1eff561ef81844d8',
    '2130ac3f68f3001e', '24c996cabfda5730', '2727275ffbb71a00', '27c786d97a6e372b', '2ee92d760e4a2c7d', '33f606b3ddc8f7d9',
    '3436ebc886ef0f4a', '3443a5e505d6cb23', '3507ccf234385f95', '3b9cf31ee679b46b', '3d54ede77ddac3de', '3e9a4ba5bac05982',
    '4acde7bd882bcd3b', '4c206d0a755f8a25', '4c91df2f83931945', '52ae9b5a62dcfc03', '5375ab738bfd6592', '54b1937a7aa3b526',
    '54b4c1937a55c17c', '563139a0471e4703', '57e1b8fb33f288d4', '59a586390f2ff9c6', '5ac2e213e33c2d81', '5cb39e2cf1456bd1',
    '5fcf44ddd4a66ede', '625f759e099dce38', '63449d1f384feb26', '6937aa535d1a9479', '694187f311f0da0e', '6b223682bd16fb8a',
    '6e5c6ade4e031b6a', '71a3bb6e788297c8', '7a40df61b2801102', '7c86c6a9255b0056', '7df48a707d0a416b', '814fe5a2ccaa3463',
    '82d97f59cf60bd87', '8aeb147b8b95b3e0', '8c96d0c4bceedfd0', '8d38c89e5340e78a', '8f8b1e18012183eb', '9254ee16baf18494',
    '9becb4c1277d246d', 'a1b38e99ac4ce3d8', 'a721e837a9debb38', 'a80b4230b8cc84f4', 'ac2dc386278bba99', 'afc8c400063a139b',
    'b1e6f71ec9cbc3b4', 'b2943d6f73d075dc', 'b4ec11c6b673a5f2', 'b64ec9fa2f8aedfe', 'b712ccfaebcf1e0e', 'b8638ac10653e23f',
    'bab7cc71d69bbd87', 'bd28995fdaf45749', 'bee49627819b1c77', 'bf09b96719745d07', 'c27890be9690d0ba', 'c2e5ba9e18a996f9',
    'c969825e97b50270', 'cf1cdb015fb319e3', 'd21f5c6dbbcb9e25', 'd4317ab5c47926d5', 'd5301b675550c9e5', 'd686d2387e5a8007',
    'd9b101c6d35870d0', 'e09562261c08b248', 'e20a1f2bfcd2307d', 'e9ee497da39640a7', 'ea070f298aa97f4e', 'ef86f4feb467433e',
    'f08e42aeeef19cc7', 'f2538a36cb077411', 'f51518206c65dce9', 'f5732a3170694745', 'f92883d9cb2edefc', 'ff8db4bb67df2c2f',
]
HV_DEFAULT = 7.13555


@pytest.mark.slow
def test_default_main_job_with_no_arguments_is_pinned(tmp_path):
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search", overrides=["progress=false", f"out_dir={tmp_path}"])
    summary = run(cfg)
    ids = sorted(r["id"] for r in read_jsonl(tmp_path / "pareto.jsonl"))
    assert ids == FRONT_IDS_DEFAULT
    assert summary["hypervolume"] == pytest.approx(HV_DEFAULT, rel=1e-6)
    assert summary["loss_interval"]["source"]["n_rows"] == 1753  # cross-conformal on every shared label
