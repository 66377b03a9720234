"""A per-layer gene declared outside Forge, with its meaning in the model and its count in the workload: importing
this module (`plugins.modules=[tests.ext.genes]`) registers all three. Nothing in the package names it."""
from __future__ import annotations

import numpy as np
import torch.nn as nn

from forge.genomes.genes import Gene, register
from forge.lm.hooks import hook

GLU = register(Gene("glu", lo=0, default=0, doc="1: a gated (GLU) MLP on this layer, 0: a plain one"))


# its meaning in the model: a gate on this layer's MLP, down(silu(gate x) * up x) (forge.lm.model.MLP's SwiGLU path)
def glu_block(block, cfg, gene):
    """A hook of forge.lm.model.Block: torch and forge.lm.model's names only, since it ships in the HF export."""
    if getattr(gene, "glu", 0) and block.mlp.gate is None:
        block.mlp.gate = nn.Linear(cfg.genome.d_model, gene.d_mlp, bias=cfg.genome.bias == "all")


# its count in the workload: the gate GEMM and a gated activation on the layers that set it
def glu_ops(pop, t):
    """A hook of forge.lm.workload.layer_ops: the MLP gate exists where the genome is SwiGLU or the layer sets glu."""
    gated = np.maximum(t["sw"], t["f"](pop.glu) * t["act"])
    t["gemm"]("mlp_gate", t["rows"] * gated, t["d"], t["dm"], gated * t["d"] * t["dm"] + gated * t["ball"] * t["dm"])
    t["elementwise"]("mlp_act", t["rows"] * t["dm"], 0.0, reads=1.0 + gated)


hook("mlp", model=glu_block, workload=glu_ops)
