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


FRONT_IDS_DEFAULT = [
    '0629cc35e8fb01ae', '063cd39c93499548', '08c60a0c7f416074', '08caa91d767b2a4a', '0aad8aa8249acb6e', '0bf0b762408210ce',
    '0d6f4c3a62be17c1', '1415a90b66626ebd', '1626d844eba6de1f', '16f7f9246630cc8a', '1a83d67910e44da7', '230fe952d75fc443',
    '231e9be15465326c', '2f33c93c586fad98', '32ce57bed7d20ff0', '36ed067cc8fc5cbb', '40121b0bc381dfe5', '408815612dde46c9',
    '45bb1363981bbf16', '4bdcdd297d3e5cbd', '5189ad795c2dc8e2', '528e4ffba7156fed', '589a26610e72f797', '598006b46f0037df',
    '5a8d979a72010620', '5b81506e898dcd24', '5d896bb2eaf399ed', '5ec32eb33d2fafe1', '6098e31fdbe11161', '64d4e5d52eca57ec',
    '722e20d1f37ecc0e', '72ae689a339b8caf', '748c30ce8699356f', '7573bb68315c9b0e', '79e5dcb79a9c7bd4', '7ab673f472c2cc69',
    '7bd1a379f6127487', '7de455918a8847e0', '81a6721c5eafa029', '81e9707d89cd091b', '85f3e5a61ba7bbd1', '862652a2090dd11d',
    '86a0c7b3e710c6e0', '8b591c707a8ca2ea', '8c5057abeb88a87f', '8f6ab1d728c00434', '902784c4f7303583', 'a06050ec961816a2',
    'a18b292077ae778d', 'a279bc90c87e1b6c', 'a4128a52c6661ead', 'a4db089c1ac346d7', 'a789fd99348cf505', 'abad8a23d9562661',
    'adbdbdf76c29514e', 'b2403281b107e778', 'b3a34e8e337c6625', 'b72b8de1c35f7702', 'ba4619f75cf5fe04', 'bab2d3bffcab20e4',
    'c1e1c779470641a8', 'ce7408d204c04b45', 'cfdf9e1ae0e69e22', 'd14c19311d81f943', 'd4c10130b7b80c97', 'd6104fac56ddcbe5',
    'e850865f2b910ba2', 'e907c1e2381bc54a', 'f17caddb86ff1741', 'fe13df8a40a879d1', 'ff67ec354dfc2bfc', 'ffa09e24e11e17e4',
]
HV_DEFAULT = 7.04509


@pytest.mark.slow
def test_default_main_job_with_no_arguments_is_pinned(tmp_path):
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search", overrides=["progress=false", f"out_dir={tmp_path}"])
    summary = run(cfg)
    ids = sorted(r["id"] for r in read_jsonl(tmp_path / "pareto.jsonl"))
    assert ids == FRONT_IDS_DEFAULT
    assert summary["hypervolume"] == pytest.approx(HV_DEFAULT, rel=1e-6)
    assert summary["loss_interval"]["source"]["n_rows"] == 1753  # cross-conformal on every shared label
