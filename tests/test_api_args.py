"""Issue 34 §4: the Python API refuses what the CLI refuses (search.api_args), as one ForgeError family.

Every bad call of the issue is replayed: each ends in a `forge.errors.ForgeError` whose message is one line
naming the argument and what is allowed, and a refused `forge.search` writes no folder at all.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import forge
from forge.errors import ForgeError, RangeError

FAKES = {"backend": {"_target_": "tests.search.fakes.FakeBackend"},
         "evaluator": {"predictor": {"_target_": "tests.search.fakes.FakePredictor"}}}
SMALL = {"search": {"pop_size": 6, "offspring": 8, "generations": 1}}


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    out = tmp_path_factory.mktemp("api") / "run"
    return forge.search(space="iha-tiny", objectives="val_loss", out_dir=out, **FAKES, **SMALL)


def _refused(call, match: str, cls: type = ForgeError) -> ForgeError:
    with pytest.raises(cls, match=match) as e:
        call()
    assert isinstance(e.value, ForgeError) and "\n" not in str(e.value), str(e.value)
    return e.value


@pytest.mark.parametrize("kwargs, match", [
    ({"seeds": 3}, r"unknown option seeds=3; did you mean 'seed'\?"),
    ({"search": {"pop_sise": 4}}, r"unknown option search.pop_sise=4; did you mean 'pop_size'\?"),
    ({"evaluator": {"n_mcc": 2}}, r"unknown option evaluator.n_mcc=2; did you mean 'n_mc'\?"),
    ({"space": 123}, r"space=123 is invalid; allowed: a config name"),
    ({"backend": 5}, r"backend=5 is invalid"),
    ({"seed": "x"}, r"seed='x' is not an integer"),
    ({"seed": -1}, r"seed=-1 is out of range"),
    ({"search": {"pop_size": 0}}, r"search.pop_size=0 is out of range"),
    ({"space": "nope"}, r"Could not find 'space/nope'.*iha-tiny"),
    ({"out_dir": 5}, r"out_dir=5 is invalid; allowed: a folder path"),
    ({"objectives": 7}, r"objectives=7 is invalid; allowed: a list"),
    ({"overrides": "search.pop_sise=4"}, r"pop_sise"),
    ({"overrides": ["seed=abc"]}, r"seed='abc' is not an integer"),
    ({"overrides": "search.pop_size=0"}, r"search.pop_size=0 is out of range"),
])
def test_a_bad_search_call_is_refused_in_one_line_and_writes_nothing(tmp_path, monkeypatch, kwargs, match):
    monkeypatch.chdir(tmp_path)
    args = {"out_dir": tmp_path / "run", **kwargs}
    _refused(lambda: forge.search(**args), match)
    assert list(tmp_path.iterdir()) == []  # no run folder, no config.yaml holding the typo


def test_one_string_is_a_one_item_list(result):
    assert result.summary["objectives"] == ["val_loss"]  # not ['v', 'a', 'l', ...]
    assert forge.cost("gpt2")["name"].tolist() == ["gpt2"]


@pytest.mark.parametrize("call, match, cls", [
    (lambda: forge.cost(None), r"genomes=None is invalid", ForgeError),
    (lambda: forge.cost([]), r"genomes=\[\] is invalid", ForgeError),
    (lambda: forge.cost([3]), r"genomes: 3 is invalid", ForgeError),
    (lambda: forge.cost("gpt2", backend=5), r"backend=5 is invalid", ForgeError),
    (lambda: forge.cost("gpt2", backend="nope"), r"Could not find 'backend/nope'", ForgeError),
    (lambda: forge.cost("gpt2", workload={"prefil": 3}), r"did you mean 'prefill'", ForgeError),
    (lambda: forge.cost("no-such-arch"), r"neither a genome file nor a known baseline", ForgeError),
    (lambda: forge.predict("gpt2", n_mc="x"), r"n_mc='x' is out of range", RangeError),
    (lambda: forge.predict("gpt2", n_mc=-1), r"n_mc=-1 is out of range", RangeError),
    (lambda: forge.predict("gpt2", level=1.5), r"level=1.5 is out of range", ForgeError),
    (lambda: forge.predict("gpt2", seed=-3), r"seed=-3 is out of range", RangeError),
    (lambda: forge.predict("gpt2", predictor=7), r"predictor=7 is invalid", ForgeError),
    (lambda: forge.predict("gpt2", predictor={"_target_": "nope.Missing"}), r"'nope.Missing'", ForgeError),
    (lambda: forge.load(123), r"run_dir=123 is invalid", ForgeError),
    (lambda: forge.load("/nonexistent/run"), r"no summary.json/pareto.jsonl there", ForgeError),
])
def test_bad_cost_predict_and_load_calls_are_forge_errors(call, match, cls):
    _refused(call, match, cls)


@pytest.mark.parametrize("summary, match", [("[]", r"a JSON list, not an object"),
                                            ('{"status": "comp', r"corrupt summary \(JSONDecodeError\)"),
                                            ("{}", r"missing or mistyped status, hypervolume")])
def test_load_validates_a_run_as_the_clis_do(result, tmp_path, summary, match):
    run = tmp_path / "run"
    shutil.copytree(result.run_dir, run)
    (run / "summary.json").write_text(summary)
    _refused(lambda: forge.load(run), match)
    (run / "summary.json").write_text((result.run_dir / "summary.json").read_text())
    (run / "pareto.jsonl").write_text("{not json\n")
    _refused(lambda: forge.load(run), r"pareto.jsonl:1: corrupt line")


def test_genomes_takes_front_or_archive_only(result):
    _refused(lambda: result.genomes("nope"), r"which='nope' is invalid; allowed: front \| archive")
    assert len(result.genomes("archive")) >= len(result.genomes()) > 0


def test_cost_and_predict_trust_the_callers_own_target():
    from tests.search.fakes import FakeBackend, FakePredictor  # noqa: F401  (what the calls name)

    rows = forge.cost("gpt2", backend={"_target_": "tests.search.fakes.FakeBackend"})
    assert rows["feasible"].tolist() == [True]
    loss = forge.predict("gpt2", predictor={"_target_": "tests.search.fakes.FakePredictor"})
    assert loss["id"].tolist() == [forge.cost("gpt2")["id"][0]] and Path  # one row, the genome's id


def test_a_plain_key_of_a_command_is_a_value_and_an_added_group_a_choice():
    from search.api_compose import compose

    c = compose("forge-verify", run="x", k=4, dispatch="local", protocol="cpu-proxy", corpus="stdlib")
    # forge-verify's dispatch/protocol/corpus are config groups (issue 37 §4), chosen as `forge-verify dispatch=local`
    assert c.dispatch["_target_"].endswith("LocalTrainer") and c.k == 4
    assert c.protocol.name == "cpu-proxy" and c.corpus["_target_"].endswith("stdlib_corpus")
    assert compose("forge-search", hardware="host-cpu").hardware.name == "host-cpu"  # as `+hardware=host-cpu`
    _refused(lambda: compose("forge-verify", run="x", kk=3), r"unknown option kk=3; did you mean 'k'\?")


class NoInterface:
    """A caller's own `_target_` class that implements nothing (issue 42 §5)."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs


class DictBackend(NoInterface):
    """A caller's backend whose evaluate returns a dict, not a CostTable."""

    def evaluate(self, genomes, workload):
        return {"ttft_ms": [1.0] * len(genomes)}


@pytest.mark.parametrize("call, match", [
    (lambda: forge.cost("gpt2", backend={"_target_": "tests.test_api_args.NoInterface"}),
     r"backend: NoInterface is not a backend: it has no evaluate"),
    (lambda: forge.search(space="iha-tiny", backend={"_target_": "tests.test_api_args.NoInterface"}, **SMALL),
     r"backend: NoInterface is not a backend: it has no evaluate"),
    (lambda: forge.cost("gpt2", backend={"_target_": "tests.test_api_args.DictBackend"}),
     r"backend: DictBackend.evaluate returned a dict; allowed: a backends.interface.CostTable"),
    (lambda: forge.search(space="iha-tiny", backend={"_target_": "tests.test_api_args.DictBackend"}, **SMALL),
     r"backend: DictBackend.evaluate returned a dict"),
    (lambda: forge.predict("gpt2", nmc=2), r"forge.predict: nmc=2 is not an argument \(did you mean n_mc\?\)"),
    (lambda: forge.cost("gpt2", bakend="roofline"), r"^forge.cost: unknown option bakend"),
    (lambda: forge.cost("gpt2", workload="nope"), r"^forge.cost: Could not find 'workload/nope'"),
    (lambda: forge.predict(), r"forge.predict: missing a required argument: 'genomes'"),
])
def test_a_callers_own_mistake_is_one_line_in_the_calls_own_name(call, match, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    e = _refused(call, match)
    assert "forge-search" not in str(e)
    assert list(tmp_path.iterdir()) == []  # no run folder, no config.yaml


@pytest.mark.parametrize("override", ["hardware=h100-sxm", "+hardware=h100-sxm"])
def test_forge_search_takes_a_hardware_preset_as_forge_hw_does_and_as_the_docs_showed(override):
    """`hardware` is a group of forge-search's defaults (none chosen): `hardware=x` works as in forge-hw, and the
    `+hardware=x` the docs showed is the same choice (forge.runtime.config.as_choices), on the command line and here."""
    from forge.runtime.config import as_choices
    from search.api_compose import compose

    assert compose("forge-search", overrides=[override]).hardware.name == "h100-sxm"
    assert as_choices("forge-search", [override, "+plugins.modules=[m]"]) == ["hardware=h100-sxm", "+plugins.modules=[m]"]
    assert "hardware" not in compose("forge-search")  # none chosen: the backend's own default
