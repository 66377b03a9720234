"""The default main job's front, pinned: `forge-search` with no arguments and today's predictor
(`evaluator.predictor=forgeformer-iha-paper`) must keep these Pareto ids and this hypervolume through
any refactor of genes, spaces, decoding or checkpoints (issue 26), on any machine (issue 33: the search
rounds every surrogate and backend float before comparing it, and the surrogate runs in float64, so the
ids are exact everywhere; the HV is checked at 1e-6 relative). Pinned on the machine MACHINE names; a
change that moves the front on purpose re-pins with
`python bench/repin_main_job.py --write` and says so in bench/RESULTS.md."""
from __future__ import annotations

import json

import pytest
from hydra import compose, initialize_config_module

from search.cli import run
from search.state import read_jsonl

FRONT_IDS = [
    '0046d4c6ca68ae80', '0218b807952c2e27', '0559d4b3e6b779b1', '06086e4c63b3394b', '0f2bb55f25462eb9', '0f9902c9ab6c9bd4',
    '1489e1f4f96ec20e', '1a9dd1643a76f8f4', '1f3723c3c9054cff', '21dc95ed4dd53d5c', '250152e84c494de9', '2900ed595a0eec47',
    '2a31af624d8745c1', '31445c84ab6f8654', '39aa93c8462890ac', '3a5f4546d8192abd', '3ae11a94719b686b', '404c97c6a9fd8482',
    '48ec0dd9de5bed54', '4a85634449b88716', '4c0e29e7709db638', '5f600e9a492141fd', '614dfa6fa5226084', '67da565a353f694d',
    '762a25e457a0524b', '76caa2908a2adae1', '78e2823908406d8c', '7e1a9d618829058b', '84ace08f4c91c1a9', '88717c47fae280de',
    '8deed6a4f3349526', '9c30e87519a0d9bc', 'a7b2864a2c00e228', 'ab234562b67a8fd5', 'afb1d635a2c4a364', 'b2879de1dda18bfe',
    'b4cdb19dca3b1350', 'b6e9cfea564dac3e', 'c201fce4d27cb82e', 'c24941593a4293ca', 'c815b39de2571826', 'cab9796c16f6d3e8',
    'cbb1840f0118f6c9', 'cd07f615c2801c38', 'd4dfe4b7bad14215', 'd52d1790d46e0cba', 'd60329307dfb313a', 'd74277445c59202a',
    'dad84a94e65b27ee', 'dc1d8aacca0bcf1e', 'e08e51b1ad437776', 'e1fce7b349657ac3', 'e3bf310daec1d673', 'e3fe51ecb20e13d2',
    'e8ba2dba91c79788', 'e95e63e834523c92', 'ebc7a5c53794cf71', 'eff90980ce240080', 'f4c058c328732345', 'f4c35152f9cc336a',
    'f516a2a7d012c6cb',
]
HV = 7.17841
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
