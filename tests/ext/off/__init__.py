"""A second plug-in package on the operator tests/ext/genes.py hooks (the MLP): a bool gene that removes a layer's
MLP. Its hooks run after the glu gene's (`after=`), so a layer with both has no MLP, gate included, in the model, the
workload and the HF export alike; its model hook uses a helper class defined beside it (exported with it)."""
from __future__ import annotations

import torch
import torch.nn as nn

from forge.genomes.genes import Gene, register
from forge.lm.hooks import hook

OFF = register(Gene("mlp_off", kind="bool", lo=0, default=False, doc="true: this layer has no MLP"))
MLP_OPS = ("mlp_gate", "mlp_up", "mlp_act", "mlp_down")


class ZeroMLP(nn.Module):
    """No MLP: the block's MLP branch adds nothing to the residual stream."""

    def forward(self, x: torch.Tensor, d_mlp: int | None = None) -> torch.Tensor:
        return torch.zeros_like(x)


def off_block(block, cfg, gene):
    """A hook of forge.lm.model.Block: the layers that set mlp_off get ZeroMLP instead of their MLP (gate and all)."""
    if getattr(gene, "mlp_off", False):
        block.mlp = ZeroMLP()


def off_ops(pop, t):
    """A hook of forge.lm.workload.layer_ops: every MLP operator (the glu gate too) is absent where mlp_off is set."""
    on = 1.0 - t["f"](pop.mlp_off)
    for name in MLP_OPS:
        t["scale"](name, on)


hook("mlp", model=off_block, workload=off_ops, after=["tests.ext.genes"])
