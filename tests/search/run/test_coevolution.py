"""Co-evolution: acquisition, real labels, dropping non-finite, refit from the base, hot-swap, logs, resume."""
from __future__ import annotations

import numpy as np
import pytest

from forge import plugins
from search.coevolution import CoEvolution, first_front, pick
from search.components import build_coevolution
from search.settings import settle_config
from search.errors import SearchConfigError
from search.state import read_jsonl
from tests.search.conftest import tiny_cfg
from tests.search.fakes import FakeTrainer, fake_finetune


def test_pick_exploits_the_front_and_explores_the_rest():
    mu = np.array([3.0, 2.0, 2.5, 4.0, 1.0, 3.5])
    sigma = np.array([0.1, 0.9, 0.2, 0.8, 0.3, 0.5])
    front = np.array([True, True, True, False, False, False])
    exploit, explore = pick(mu, sigma, front, b=4)
    assert exploit.tolist() == [1, 2] and explore.tolist() == [3, 5]
    exploit, explore = pick(mu, sigma, front, b=4, taken=np.array([0, 1, 0, 1, 0, 0], bool))
    assert exploit.tolist() == [2, 0] and explore.tolist() == [5, 4]
    exploit, explore = pick(mu, sigma, np.array([True] + [False] * 5), b=8)  # capped by the front size
    assert exploit.tolist() == [0] and len(explore) == 5


def test_first_front_under_constraint_dominance():
    F = np.array([[1.0, 2.0], [2.0, 1.0], [0.5, 0.5], [3.0, 3.0]])
    assert first_front(F, np.array([0.0, 0.0, 1.0, 0.0])).tolist() == [True, True, False, False]
    assert first_front(F, np.array([2.0, 1.0, 1.0, 3.0])).tolist() == [False, True, True, False]


def _coevo(trainer=None, every=2):
    return CoEvolution(every, trainer or FakeTrainer(), fake_finetune, "base", None, batch=4, n_mc=3, seed=0)


def test_events_train_drop_refit_and_hot_swap(make_search, tmp_path):
    trainer = FakeTrainer()
    s = make_search(tmp_path, tiny_cfg(search={"generations": 4}), coevolution=_coevo(trainer))
    summary = s.run()
    events = read_jsonl(tmp_path / "coevolution.jsonl")
    assert [e["generation"] for e in events] == [2, 4] and summary["coevolution"]["events"] == 2
    labels = read_jsonl(tmp_path / "labels.jsonl")
    assert len(labels) == len(trainer.trained) == sum(len(e["picked"]) for e in events) <= 8
    assert len(set(trainer.trained)) == len(trainer.trained)  # never re-trains a labelled genome
    n_inf = sum(1 for lab in labels if lab["label"] == "inf")
    assert summary["coevolution"]["dropped"] == n_inf and summary["coevolution"]["labels"] == len(labels) - n_inf
    refits = [e for e in events if e["refit"]]
    assert refits and s.problem.evaluator.version == len(refits)
    # the fake refit learns the +0.1 offset of the "real" labels: error drops, next generation uses it
    scored = [e for e in refits if e["mae_before"] is not None]
    assert scored[0]["mae_after"] < scored[0]["mae_before"] - 0.05
    assert all(e["mae_after"] <= e["mae_before"] + 1e-9 for e in scored)
    hist = read_jsonl(tmp_path / "history.jsonl")
    assert hist[2]["surrogate_version"] == 1 and hist[1]["surrogate_version"] == 0
    gen3 = [r for r in read_jsonl(tmp_path / "archive.jsonl") if r["generation"] == 3]
    assert all(r["surrogate_version"] == 1 for r in gen3)


def test_coevolution_resume_restores_the_refitted_surrogate(make_search, tmp_path):
    cfg = tiny_cfg(search={"generations": 5})
    make_search(tmp_path / "full", cfg, coevolution=_coevo()).run()
    make_search(tmp_path / "part", cfg, coevolution=_coevo()).run(stop_after=3)
    s = make_search(tmp_path / "part", cfg, coevolution=_coevo())
    s.load()
    assert s.problem.evaluator.version == 1
    s.run()
    for f in ("pareto.jsonl", "archive.jsonl", "labels.jsonl", "coevolution.jsonl"):
        assert (tmp_path / "full" / f).read_text() == (tmp_path / "part" / f).read_text(), f


def test_coevolution_config(tmp_path, tiny_space):
    assert build_coevolution(settle_config(tiny_cfg()), tiny_space, tmp_path) is None
    cfg = tiny_cfg(evaluator={"kind": "train"})
    cfg["search"]["coevolve"] = {"every": 5}
    with pytest.raises(SearchConfigError, match="evaluator.kind=surrogate"):
        build_coevolution(settle_config(cfg), tiny_space, tmp_path)
    cfg = tiny_cfg(evaluator={"kind": "surrogate", "predictor": "x"})
    cfg["search"]["coevolve"] = {"every": 5, "replay": "r.jsonl", "trainer": {"_target_": "tests.search.fakes.FakeTrainer"},
                                 "finetune": "tests.search.fakes.fake_finetune"}
    cfg["plugins"] = {"finetune": ["tests.search.fakes.fake_finetune", "no.such.function"]}
    plugins.trust(cfg)  # the test's own config: its trainer and its listed fine-tune functions are allowed
    co = build_coevolution(settle_config(cfg), tiny_space, tmp_path)
    assert co.every == 5 and isinstance(co.trainer, FakeTrainer) and co.finetune is fake_finetune
    assert co.acquire == "paper"  # today's rule stays the default
    cfg["search"]["coevolve"]["acquire"] = "widest"
    assert build_coevolution(settle_config(cfg), tiny_space, tmp_path).acquire == "widest"
    cfg["search"]["coevolve"]["finetune"] = "no.such.function"
    with pytest.raises(SearchConfigError, match="cannot be imported"):
        build_coevolution(settle_config(cfg), tiny_space, tmp_path)
    cfg["search"]["coevolve"]["finetune"] = "os.system"  # named by a saved run, not listed: refused unimported
    with pytest.raises(SearchConfigError, match="'os.system' is not an allowed finetune plug-in"):
        build_coevolution(settle_config(cfg), tiny_space, tmp_path)


def test_replay_corpus_resolution(tmp_path):
    from forge.runtime.config import data_dir
    from search.coevolution import replay_labels

    assert replay_labels(None, "iha-paper").endswith("llmforge_iha_200M.csv")
    assert replay_labels(None, "iha-tiny") == []  # no replay corpus known: new labels only
    assert replay_labels("labels/iha-tiny-cpu-proxy.jsonl", "iha-tiny") == str(data_dir() / "labels" / "iha-tiny-cpu-proxy.jsonl")
    own = tmp_path / "mine.jsonl"
    own.write_text("")
    assert replay_labels(str(own), "iha-tiny") == str(own)


def test_coevolution_says_what_it_trains_when_not_a_terminal(make_search, tmp_path, capsys):
    """A co-evolving search shows each real training (n of m) and each refit: one stderr line apiece here."""
    from tests.search.fakes import FakeTrainer

    class HookedTrainer(FakeTrainer):  # the dispatchers' on_label hook, called per trained genome
        on_label = None

        def train(self, genomes):
            out = super().train(genomes)
            for lab in out:
                if self.on_label is not None:
                    self.on_label(lab)
            return out

    s = make_search(tmp_path, tiny_cfg(search={"generations": 2}), coevolution=_coevo(HookedTrainer()))
    s.progress = True
    s.run()
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("forge-search: generation 2")]
    n = len(read_jsonl(tmp_path / "coevolution.jsonl")[0]["picked"])
    assert err[0] == f"forge-search: generation 2: co-evolution trains {n} picks"
    assert [ln.split("(")[0] for ln in err[1:1 + n]] == [f"forge-search: generation 2: co-evolution trained {k}/{n} "
                                                        for k in range(1, n + 1)]
    assert err[-1].startswith("forge-search: generation 2: co-evolution refits the surrogate on ")


def test_pick_widest_spends_every_label_on_the_widest_front_intervals():
    """acquire=widest (issue 35 §5): front members by interval width, widest first, ties by genome id; then others."""
    from search.coevolution import pick_widest

    lo = np.array([2.0, 2.0, 2.0, 2.0, 2.0, 2.0])
    hi = np.array([2.5, 3.0, 2.5, 4.0, 2.1, 3.5])
    front = np.array([True, True, True, False, False, True])
    ids = ["f", "e", "a", "d", "c", "b"]
    assert pick_widest(lo, hi, front, 3, ids).tolist() == [5, 1, 2]  # widths 1.5, 1.0, then 0.5 tie: id a < f
    assert pick_widest(lo, hi, front, 6, ids).tolist() == [5, 1, 2, 0, 3, 4]  # front first, then widest others
    taken = np.array([False, False, False, False, False, True])
    assert pick_widest(lo, hi, front, 2, ids, taken).tolist() == [1, 2]
    hi_nan = hi.copy()
    hi_nan[5] = np.nan  # no interval: ranked after every finite width
    assert pick_widest(lo, hi_nan, front, 4, ids).tolist() == [1, 2, 0, 5]


def test_acquire_widest_picks_the_front_members_with_the_widest_interval(make_search, tmp_path):
    """In a run: each event's picks are the b unlabelled front members with the widest calibrated interval."""
    from search.coevolution import pick_widest

    seen = []  # the expected picks, recomputed from what the event saw
    co = CoEvolution(2, FakeTrainer(), fake_finetune, "base", None, batch=3, n_mc=3, seed=0, acquire="widest")
    s = make_search(tmp_path, tiny_cfg(search={"generations": 2}), coevolution=co)
    ev = s.problem.evaluator
    ev.interval = lambda mu, sigma: (np.asarray(mu) - 0.1, np.asarray(mu) + 10 * np.asarray(sigma))
    fire = co.fire

    def spy(g, pop, slot, run_dir):
        mu, sigma = slot.predictor.predict(list(pop.genomes), n_mc=3)
        seen.append(pick_widest(mu - 0.1, mu + 10 * sigma, first_front(pop.F, pop.CV), 3,
                                          [x.id for x in pop.genomes]))
        seen.append([x.id for x in pop.genomes])
        return fire(g, pop, slot, run_dir)
    co.fire = spy
    s.run()
    event = read_jsonl(tmp_path / "coevolution.jsonl")[0]
    idx, ids = seen[0], seen[1]
    assert event["picked"] == [ids[i] for i in idx] and event["explore"] == [] and len(event["picked"]) == 3


def test_acquire_refuses_an_unknown_rule():
    assert _coevo().acquire == "paper"
    with pytest.raises(SearchConfigError, match="acquire = 'ucb'; allowed: paper | widest"):
        CoEvolution(2, FakeTrainer(), fake_finetune, "base", None, acquire="ucb")


def test_coevolution_logs_its_steps_with_progress_off(make_search, tmp_path, caplog):
    """progress=false: no display, but each training and refit of an event is a line of Python logging (the
    run's cli.log under Hydra), so a long event is never a silent gap (issue 54)."""
    import logging

    s = make_search(tmp_path, tiny_cfg(search={"generations": 2}), coevolution=_coevo())
    s.progress = False
    with caplog.at_level(logging.INFO, logger="search.coevolution"):
        s.run()
    said = [r.getMessage() for r in caplog.records if r.name == "search.coevolution"]
    assert said[0].startswith("generation 2: co-evolution trains ") and "refits the surrogate" in said[-1]
