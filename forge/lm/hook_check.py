"""Per-operator traffic of one genome, counted twice: by the workload (what every backend costs) and by one forward
pass of its model on the meta device (what the plug-in hooks built). forge.lm.hooks.check_agreement compares them.

Counted for each layer's weight-bearing operators (the projections of `attention`, the matrices of `mlp`, which
plug-in hooks add, remove or replace): FLOPs (2·M·K·N per GEMM), weight elements and activation elements (a GEMM's
input rows and its output rows; K and V go to the cache, counted as its writes). Elements, not bytes, so the
genome's precision genes need no second reading; the score/value products and element-wise operators are the
workload's conventions (PLAS), not something a module computes, and are left out.
"""
from __future__ import annotations

from typing import Any

import numpy as np

GROUPS = {"attention": ("q_proj", "k_proj", "v_proj", "o_proj"), "mlp": ("mlp_gate", "mlp_up", "mlp_down")}
MODULE_GROUP = {"attn": "attention", "mlp": "mlp"}  # the block's child that holds each operator
FIELDS = ("FLOPs", "weight elements", "activation elements")
TOKENS = 8  # the forward pass's length (at most the genome's block_size)


def workload_traffic(genome: Any, tokens: int) -> dict[tuple[int, str], tuple[float, float, float]]:
    """(slot, operator) -> (FLOPs, weight elements, activation elements) of one forward pass of `tokens`."""
    from forge.lm.workload import PopArrays, Precision, genome_bytes, layer_ops

    pop = PopArrays.from_genomes([genome])
    t = layer_ops(pop, tokens=tokens, context=tokens)
    bw, ba, bkv = (float(np.ravel(b)[0]) for b in genome_bytes(pop, Precision()))
    out = {}
    for slot, layer in enumerate(genome.layers):
        if not layer.active:
            continue
        for group, names in GROUPS.items():
            j = [t.names.index(n) for n in names]
            acts = float(t.act_bytes[0, slot, j].sum()) / ba + float(t.kv_write_bytes[0, slot, j].sum()) / bkv
            out[slot, group] = (float(t.flops[0, slot, j].sum()), float(t.weight_bytes[0, slot, j].sum()) / bw, acts)
    return out


def model_traffic(model: Any, tokens: int) -> dict[tuple[int, str], tuple[float, float, float]]:
    """The same, from a forward pass of `model` (on the meta device): every nn.Linear call inside a block, by the
    block's child that holds it (`attn`, `mlp`; anything else a hook added counts as the layer's `block`)."""
    import torch
    import torch.nn as nn

    sums: dict[tuple[int, str], list[float]] = {}
    handles = []

    def counter(key: tuple[int, str]) -> Any:
        def count(mod: nn.Linear, args: tuple, out: torch.Tensor) -> None:
            rows = args[0].numel() // mod.in_features
            weights = mod.weight.numel() + (mod.bias.numel() if mod.bias is not None else 0)
            acc = sums.setdefault(key, [0.0, 0.0, 0.0])
            acc[0] += 2.0 * rows * mod.in_features * mod.out_features
            acc[1] += weights
            acc[2] += rows * (mod.in_features + mod.out_features)
        return count

    for i, block in enumerate(model.blocks):
        for name, child in block.named_modules():
            if isinstance(child, nn.Linear):
                key = (model.slots[i], MODULE_GROUP.get(name.split(".")[0], "block"))
                handles.append(child.register_forward_hook(counter(key)))
    try:
        with torch.no_grad():
            model(torch.zeros(1, tokens, dtype=torch.long, device=model.wte.weight.device))
    finally:
        for h in handles:
            h.remove()
    return {k: tuple(v) for k, v in sums.items()}


def first_difference(genome: Any, model: Any) -> str | None:
    """'layer 0 mlp: 262,144 FLOPs in the workload but 393,216 in the model' for the first operator whose counts
    differ, else None."""
    tokens = max(1, min(TOKENS, int(genome.block_size)))
    counted, built = workload_traffic(genome, tokens), model_traffic(model, tokens)
    zero = (0.0, 0.0, 0.0)
    for key in sorted(set(counted) | set(built)):
        for field, a, b in zip(FIELDS, counted.get(key, zero), built.get(key, zero)):
            if round(a) != round(b):
                return (f"layer {key[0]} {key[1]}: {a:,.0f} {field} in the workload but {b:,.0f} in the model "
                        f"(one forward pass of {tokens} tokens)")
    return None
