"""Spaces are chosen by `_target_` like backends: a user's SearchSpace subclass works from config alone."""
from __future__ import annotations

import pytest
import yaml
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from forge import plugins
from forge.runtime.config import group_yaml
from forge.genomes.genome import GenomeError
from forge.spaces.space import SearchSpace, space_from_config
from search.state import read_jsonl
from tests.forge.plugins.user_space import MinDepthSpace

USER = "tests.forge.plugins.user_space.MinDepthSpace"


def _user_node(**over):
    return {**group_yaml("space", "iha-tiny"), "_target_": USER, "name": "iha-tiny-deep", "min_active": 6,
            "p_active": 0.1, **over}


@pytest.fixture(autouse=True)
def _fresh_plugins(monkeypatch):
    from collections import defaultdict

    monkeypatch.setattr(plugins, "_registered", defaultdict(set))
    monkeypatch.setattr(plugins, "_live", {})


def test_the_target_picks_the_class_and_its_extra_field():
    with pytest.raises(GenomeError, match="not an allowed space plug-in"):  # a saved run's config names no code
        space_from_config(_user_node())
    plugins.trust({"space": _user_node()})  # the config the user launched names their class
    s = space_from_config(_user_node())
    assert type(s) is MinDepthSpace and s.min_active == 6
    assert type(space_from_config(group_yaml("space", "iha-tiny"))) is SearchSpace


def test_a_target_that_is_not_a_space_is_refused_in_one_line():
    for bad in ("os.system", "no.such.Module", "forge.genomes.genome.Genome"):
        with pytest.raises(GenomeError, match="not an allowed space plug-in"):
            space_from_config(_user_node(_target_=bad))
    plugins.register("space", "forge.genomes.genome.Genome")  # allowed, but not a space
    with pytest.raises(GenomeError, match="space._target_ = .* is invalid; allowed: forge.spaces.space.SearchSpace"):
        space_from_config(_user_node(_target_="forge.genomes.genome.Genome"))


def test_a_user_space_yaml_runs_a_search_through_the_cli(tmp_path):
    from search.cli import run

    conf = tmp_path / "conf" / "space"
    conf.mkdir(parents=True)
    (conf / "iha-tiny-deep.yaml").write_text(yaml.safe_dump(_user_node()))
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search", overrides=[f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "space=iha-tiny-deep",
                                                 "search.pop_size=6", "search.offspring=8", "search.generations=2",
                                                 "progress=false", f"out_dir={tmp_path / 'run'}"])
    OmegaConf.set_struct(cfg, False)
    cfg.backend = {"_target_": "tests.search.fakes.FakeBackend"}
    cfg.evaluator.predictor = {"_target_": "tests.search.fakes.FakePredictor"}
    assert run(cfg)["space"] == "iha-tiny-deep"
    depths = [sum(lay["active"] for lay in r["genome"]["layers"]) for r in read_jsonl(tmp_path / "run" / "archive.jsonl")]
    assert min(depths) >= 6  # the user's repair ran on every evaluated genome
