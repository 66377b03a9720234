"""forge.lm.hooks: plug-in hooks on one operator run in a declared order or are refused naming both modules; a model
hook ships in the HF export with its helpers or is refused when registered; the workload's parameter count is
checked against the model's wherever plug-ins hook an operator, and nowhere else."""
from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

from forge.lm import hooks, model, workload
from forge.genomes.genome import genome_from_dict
from forge.lm.hooks import HookError, check_agreement

LAYER = {"n_h": 2, "n_kv": 1, "d_qk": 16, "d_v": 16, "d_mlp": 64}
GENOME = {"d_model": 32, "block_size": 16, "vocab_size": 64, "mlp": "gelu", "norm": "layernorm", "layers": [LAYER]}
HEAD = "import torch\nimport torch.nn as nn\nfrom forge.lm.hooks import hook\n"


@pytest.fixture
def modules(tmp_path, monkeypatch):
    """Write plug-in modules `hk_<name>` into a folder on sys.path; import them; forget their hooks after."""
    monkeypatch.syspath_prepend(str(tmp_path))
    made: list[str] = []

    def make(name: str, body: str):
        (tmp_path / f"hk_{name}.py").write_text(HEAD + textwrap.dedent(body))
        made.append(f"hk_{name}")
        return importlib.import_module(f"hk_{name}")

    yield make
    for name in made:
        hooks.forget(name)
        sys.modules.pop(name, None)


def test_two_modules_on_one_operator_without_an_order_are_refused_naming_both(modules):
    modules("a", "def a_ops(pop, t):\n    pass\nhook('mlp', workload=a_ops)\n")
    with pytest.raises(HookError, match=r"hk_a and hk_b both hook the mlp operator.*after=\['hk_a'\]"):
        modules("b", "def b_ops(pop, t):\n    pass\nhook('mlp', workload=b_ops)\n")
    assert [h.module for h in hooks.ordered()] == ["hk_a"]  # nothing of the refused module stays
    modules("c", "def c_ops(pop, t):\n    pass\nhook('attention', workload=c_ops)\n")  # another operator: free


def test_the_declared_order_holds_whichever_module_is_imported_first(modules):
    later = modules("late", "def late_ops(pop, t):\n    pass\nhook('mlp', workload=late_ops, after=['hk_early'])\n")
    early = modules("early", "def early_ops(pop, t):\n    pass\nhook('mlp', workload=early_ops)\n")
    assert [h.module for h in hooks.ordered()][-2:] == ["hk_early", "hk_late"]
    assert workload.OP_HOOKS[-2:] == [early.early_ops, later.late_ops]


def test_a_cycle_in_the_declared_order_is_refused(modules):
    modules("x", "def x_ops(pop, t):\n    pass\nhook('mlp', workload=x_ops, after=['hk_y'])\n")
    with pytest.raises(HookError, match="cycle"):
        modules("y", "def y_ops(pop, t):\n    pass\nhook('mlp', workload=y_ops, after=['hk_x'])\n")


def test_a_model_hook_that_cannot_ship_in_the_export_is_refused_when_registered(modules):
    with pytest.raises(HookError, match=r"hk_bad.bad_block cannot be exported: bad_block uses atomic_write_json"):
        modules("bad", """
            from forge.disk.io import atomic_write_json
            def bad_block(block, cfg, gene):
                atomic_write_json
            hook('block', model=bad_block)
            """)
    assert model.Block.hooks == []


def test_a_model_hook_ships_with_the_helpers_and_constants_it_uses(modules):
    from forge.lm.hook_export import export_source

    mod = modules("good", """
        import math as m
        SCALE = 2
        def width(d):
            return SCALE * d
        class Twice(nn.Module):
            def forward(self, x, d_mlp=None):
                return 2 * x * m.pi
        def good_block(block, cfg, gene):
            width(1)
            block.extra = Twice()
        hook('block', model=good_block)
        """)
    src = export_source([mod.good_block])
    for line in ("import math as m", "SCALE = 2", "def width(d):", "class Twice(nn.Module):", "def good_block(",
                 "Block.hooks.append(good_block)"):
        assert line in src
    assert src.index("SCALE = 2") < src.index("def width") < src.index("def good_block")  # each before its user


def test_disagreeing_hooks_are_one_line_naming_the_genome_and_both_counts(modules):
    modules("miscount", """
        def mc_block(block, cfg, gene):
            block.extra = nn.Linear(2, 2)
        def mc_ops(pop, t):
            pass
        hook('block', model=mc_block, workload=mc_ops)
        """)
    g = genome_from_dict(GENOME)
    with pytest.raises(HookError, match=rf"genome {g.id} has [0-9,]+ parameters in the workload but [0-9,]+ in the "
                                        r"model \(hooks, in run order: hk_miscount\)"):
        check_agreement([g])


def test_a_hook_with_the_right_parameters_but_the_wrong_traffic_is_refused_naming_the_operator(modules):
    """A gate the model builds and the workload counts (at the right size) but that the forward pass never calls:
    the parameter counts agree, the traffic does not (8 tokens x 32 x 64 x 2 FLOPs per MLP matrix: 3 counted, 2 run)."""
    modules("traffic", """
        def tr_block(block, cfg, gene):
            block.mlp.gate_unused = nn.Linear(cfg.genome.d_model, gene.d_mlp, bias=False)
        def tr_ops(pop, t):
            t["gemm"]("mlp_gate", t["rows"], t["d"], t["dm"], t["d"] * t["dm"])
        hook('mlp', model=tr_block, workload=tr_ops)
        """)
    g = genome_from_dict(GENOME)
    from forge.lm.workload import analyze

    assert analyze(g)["params"] == model.build_model(g, device="meta").num_params()  # parameters alone agree
    with pytest.raises(HookError, match=rf"genome {g.id} has layer 0 mlp: 98,304 FLOPs in the workload but 65,536 in the "
                                        r"model \(one forward pass of 8 tokens\) \(hooks, in run order: hk_traffic\)"):
        check_agreement([g])


def test_the_counts_of_the_shipped_model_agree_per_operator_with_the_workload():
    from forge.lm.hook_check import first_difference, model_traffic

    for extra in ({}, {"mlp": "swiglu", "bias": "all"}):
        g = genome_from_dict({**GENOME, **extra, "layers": [LAYER, {**LAYER, "attn": False}, {**LAYER, "n_kv": 2}]})
        m = model.build_model(g, device="meta")
        assert first_difference(g, m) is None and set(model_traffic(m, 8)) == {
            (0, "attention"), (0, "mlp"), (1, "mlp"), (2, "attention"), (2, "mlp")}


@pytest.mark.parametrize("where", ["model", "workload"])
def test_a_direct_append_to_the_hook_lists_is_refused_naming_the_call(where):
    fns = model.Block.hooks if where == "model" else workload.OP_HOOKS
    before = list(fns)
    for change in (lambda: fns.append(print), lambda: fns.insert(0, print), lambda: fns.extend([print]),
                   lambda: fns.__iadd__([print]), lambda: fns.__setitem__(slice(None), [print])):
        with pytest.raises(HookError, match=r"is filled by forge.lm.hooks only.*allowed: forge.lm.hooks.hook\('mlp', "
                                            r"model=my_block, workload=my_ops"):
            change()
    assert list(fns) == before


def test_without_hooks_the_check_builds_no_model(monkeypatch):
    import forge.lm.model

    monkeypatch.setattr(forge.lm.model, "build_model", lambda *a, **k: pytest.fail("a model was built"))
    assert not hooks.active()
    check_agreement([genome_from_dict(GENOME)])


def test_an_error_raised_inside_a_plugin_is_that_plugins_naming_its_module(modules, capsys):
    """The traceback stays (it is a bug), but in the plug-in: the last line names its module, not Forge."""
    from forge.shell.app import user_errors
    from forge.genomes.genes import register

    mod = modules("boom", """
        def boom_block(block, cfg, gene):
            block.mlp.gate.weight  # the crash of issue 43: a hook reading what another replaced
        hook('mlp', model=boom_block)
        """)
    with pytest.raises(SystemExit) as e, user_errors("forge-x"):
        mod.boom_block(type("B", (), {"mlp": object()})(), None, None)
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 1 and "Traceback" in err[0]
    assert err[-1].startswith("forge-x: error in plug-in module hk_boom (") and "AttributeError" in err[-1]
    assert "bug in Forge" not in err[-1]
    with pytest.raises(SystemExit), user_errors("forge-x"):
        register(object())  # Forge's own TypeError (a caller's bug inside forge.genomes.genes): still Forge's
    assert "bug in Forge" in capsys.readouterr().err.strip().splitlines()[-1]


def test_a_module_imported_again_replaces_its_hooks(modules):
    mod = modules("again", "def again_ops(pop, t):\n    pass\nhook('mlp', workload=again_ops)\n")
    importlib.reload(mod)
    assert [h.module for h in hooks.ordered()].count("hk_again") == 1 and workload.OP_HOOKS.count(mod.again_ops) == 1
    assert len([f for f in workload.OP_HOOKS if f.__module__ == "hk_again"]) == 1
