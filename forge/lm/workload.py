"""Workload analyzer: the one source of truth for operators, FLOPs and bytes, used by every backend.

For each active layer it lists the operators of one forward pass over `tokens` new tokens attending
to `context` keys (prefill: tokens = context = L_p; one decode step: tokens = 1, context = c, the
cache length *including* the new token). Conventions follow PLAS (paper 000, Appendix E):

- A GEMM multiplies (M × K) by (K × N), `batch` times; FLOPs = 2·batch·M·K·N (Tables 8–12).
- Projections: M = B·tokens. Attention score/value run per query head: batch = B·n_h,
  score M = tokens, K = d_qk, N = context; value M = tokens, K = context, N = d_v.
  Prefill counts the full square score matrix (no causal halving), as PLAS Table 10 does.
- Softmax ≈ 5 FLOPs per score (Table 11); norms ≈ 5 per element; the MLP activation 5 per element.
- Bytes: weights at `weight_bytes`, activations at `act_bytes`, K/V cache at `kv_bytes`. K and V
  projections store into the cache (kv_write); score and value products read K and V of `context`
  positions from it (kv_read), per KV group (Table 10's "Load K Cache"), shared by R = n_h/n_kv heads.
- Identity-attention layers have no attention operators and no attention norm; pruned layers none.
- Per-genome precision: where `PopArrays` carries a genome's own bytes per element (its precision
  genes), they replace `prec`'s, so every backend that takes bytes from the OpTable follows them.
- `batch` may be a scalar or a (P,) array (a per-genome batch, e.g. `batch=max`).
- Sliding-window layers (the per-layer `window` gene w > 0; 0 = full): every query attends
  min(w, context) keys, in prefill and decode, so score/value FLOPs, softmax and KV reads count
  min(w, context) keys, and a sequence's KV cache holds min(w, context) positions of that layer
  (`kv_cache_bytes`). A decode step still writes one position (the rolling cache overwrites the oldest).
- Long contexts: every quantity is a closed form in `context` (no per-token loop); decode sums over a
  growing context are affine in it up to each layer's window and constant after it (`window_steps`
  says after how many steps), summed in closed form by the backends.

Everything is vectorized over a population (`PopArrays`): each field of `OpTable` is a (P, L, O)
array, O = len(OP_NAMES); operators that do not exist (pruned layers, identity attention, the gate of
a GELU MLP) are all-zero rows. The per-genome `describe()` is derived from the same arrays.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from forge.spaces.arrays import PopArrays
from forge.genomes.genome import Genome
from forge.lm.hook_lists import HookList
from forge.lm.windows import (_bcast, attended_keys, causal_keys, decode_sum, layer_windows,  # noqa: F401 (re-exported)
                           sum_capped_steps, window_steps)

OP_NAMES = ("norm_attn", "q_proj", "k_proj", "v_proj", "attn_score", "softmax", "attn_value", "o_proj",
            "norm_mlp", "mlp_gate", "mlp_up", "mlp_act", "mlp_down")
OP_KINDS = ("elementwise", "gemm", "gemm", "gemm", "attn_score", "elementwise", "attn_value", "gemm",
            "elementwise", "gemm", "gemm", "elementwise", "gemm")
GEMM_J = [j for j, k in enumerate(OP_KINDS) if k == "gemm"]  # indices of the projection/MLP GEMMs
ELEM_J = [j for j, k in enumerate(OP_KINDS) if k == "elementwise"]  # norms, softmax, activation
HEAD_OP_NAMES = ("embed", "final_norm", "lm_head")
HEAD_OP_KINDS = ("elementwise", "elementwise", "gemm")
OP_FIELDS = ("batch", "M", "K", "N", "flops", "weight_bytes", "act_bytes", "kv_read_bytes", "kv_write_bytes")
ELEMENTWISE_FLOPS = 5.0  # per element: softmax (PLAS Table 11), norms and MLP activation
OP_HOOKS: list = HookList("forge.lm.workload.OP_HOOKS")  # fn(pop, terms): plug-in genes' operators, filled by
# forge.lm.hooks.hook() only, in its order (terms: WORKLOAD_TERMS)


@dataclass(frozen=True)
class Precision:
    """Bytes per element of weights, activations and the KV cache (bf16 = 2, int8 = 1)."""

    weight_bytes: float = 2.0
    act_bytes: float = 2.0
    kv_bytes: float = 2.0

    @classmethod
    def from_bits(cls, weight_bits: float = 16, act_bits: float = 16, kv_bits: float = 16) -> "Precision":
        return cls(weight_bits / 8, act_bits / 8, kv_bits / 8)


@dataclass
class OpTable:
    """Operator fields as (P, L, O) arrays; names/kinds describe the last axis."""

    names: tuple[str, ...]
    kinds: tuple[str, ...]
    batch: np.ndarray
    M: np.ndarray
    K: np.ndarray
    N: np.ndarray
    flops: np.ndarray
    weight_bytes: np.ndarray
    act_bytes: np.ndarray
    kv_read_bytes: np.ndarray
    kv_write_bytes: np.ndarray

    @property
    def bytes(self) -> np.ndarray:
        """All memory traffic of each operator (weights + activations + KV reads and writes)."""
        return self.weight_bytes + self.act_bytes + self.kv_read_bytes + self.kv_write_bytes

    @property
    def exists(self) -> np.ndarray:
        return self.flops > 0

    def total(self, name: str) -> np.ndarray:
        """Sum of one field over layers and operators → (P,)."""
        return getattr(self, name).sum(axis=(1, 2))

    def op(self, name: str) -> dict[str, np.ndarray]:
        j = self.names.index(name)
        return {f: getattr(self, f)[:, :, j] for f in OP_FIELDS}


def genome_bytes(pop: PopArrays, prec: Precision, dtype: Any = np.float64) -> tuple[np.ndarray, ...]:
    """(weight, act, KV) bytes per element as (P, 1): each genome's own where set, else `prec`'s."""
    out = []
    for own, dflt in ((pop.weight_bytes, prec.weight_bytes), (pop.act_bytes, prec.act_bytes),
                      (pop.kv_bytes, prec.kv_bytes)):
        out.append(np.where(np.isfinite(own), own, dflt).astype(dtype).reshape(-1, 1))
    return tuple(out)


def layer_ops(pop: PopArrays, tokens: Any, context: Any, batch: int = 1,
              prec: Precision = Precision(), dtype: Any = np.float64,
              fields: tuple[str, ...] = OP_FIELDS) -> OpTable:
    """All per-layer operators of a forward pass of `tokens` tokens over `context` keys (vectorized).

    `dtype=np.float32` halves memory traffic for bulk costing of large populations (about 1e-7
    relative error); the default float64 keeps parameter counts exact. `fields` limits the table to
    those fields (the others are None): the model totals read three of nine, once per generation."""
    P = pop.P
    S, B = _bcast(tokens, P, dtype), _bcast(batch, P, dtype)  # keys per query: attended_keys(pop, context)
    f = lambda a: a.astype(dtype)  # noqa: E731
    act, att = f(pop.active), f(pop.attn)
    nh, nkv, dqk, dv, dm = f(pop.n_h), f(pop.n_kv), f(pop.d_qk), f(pop.d_v), f(pop.d_mlp)
    d = _bcast(pop.d_model, P, dtype)
    bw, ba, bkv = genome_bytes(pop, prec, dtype)
    bq, ball = _bcast(pop.bias_qkv, P, dtype), _bcast(pop.bias_all, P, dtype)
    nbias = _bcast(pop.layernorm & pop.bias_all, P, dtype)  # norm bias vector
    sw = _bcast(pop.swiglu, P, dtype)
    rows = B * S * act  # activation rows of a projection, 0 on pruned layers
    zero = 0.0  # an absent field: _stack leaves it zero
    ops: dict[str, dict[str, np.ndarray]] = {}

    def gemm(name, M, K, N, wparams, kv_write=zero, batch_=None, act_bytes=None, kv_read=zero):
        bt = np.ones_like(M) if batch_ is None else batch_
        ops[name] = dict(batch=bt * (M > 0), M=M, K=K * (M > 0), N=N * (M > 0), flops=2 * bt * M * K * N,
                         weight_bytes=wparams * bw,
                         act_bytes=(M * K + M * N) * bt * ba if act_bytes is None else act_bytes,
                         kv_read_bytes=kv_read, kv_write_bytes=kv_write)

    def elementwise(name, elements, wparams, reads=1.0):
        ops[name] = dict(batch=(elements > 0) * 1.0, M=elements, K=zero, N=zero, flops=ELEMENTWISE_FLOPS * elements,
                         weight_bytes=wparams * bw, act_bytes=(reads + 1.0) * elements * ba,
                         kv_read_bytes=zero, kv_write_bytes=zero)

    r_att = rows * att
    elementwise("norm_attn", r_att * d, att * d * (1 + nbias))
    gemm("q_proj", r_att, d, nh * dqk, d * nh * dqk + bq * nh * dqk)
    kdim, vdim = nkv * dqk, nkv * dv
    gemm("k_proj", r_att, d, kdim, d * kdim + bq * kdim, kv_write=r_att * kdim * bkv,
         act_bytes=r_att * d * ba)
    gemm("v_proj", r_att, d, vdim, d * vdim + bq * vdim, kv_write=r_att * vdim * bkv,
         act_bytes=r_att * d * ba)
    heads = B * nh * att
    s_att, c_att = S * att, attended_keys(pop, context, dtype) * att  # keys per query: min(window, context)
    scores = heads * s_att * c_att
    gemm("attn_score", s_att, dqk, c_att, zero, batch_=heads,
         act_bytes=(heads * s_att * dqk + scores) * ba, kv_read=B * c_att * kdim * bkv)
    elementwise("softmax", scores, zero)
    gemm("attn_value", s_att, c_att, dv, zero, batch_=heads,
         act_bytes=(scores + heads * s_att * dv) * ba, kv_read=B * c_att * vdim * bkv)
    gemm("o_proj", r_att, nh * dv, d, nh * dv * d + ball * d * att)
    elementwise("norm_mlp", rows * d, act * d * (1 + nbias))
    gemm("mlp_gate", rows * sw, d, dm, sw * d * dm + sw * ball * dm)
    gemm("mlp_up", rows, d, dm, d * dm + ball * dm)
    elementwise("mlp_act", rows * dm, zero, reads=1.0 + sw)
    gemm("mlp_down", rows, dm, d, dm * d + ball * d * act)
    def scale(name, factor):  # a hook thinning or removing (0) an operator already declared, on each layer
        ops[name] = {k: v * factor for k, v in ops[name].items()}

    for hook in OP_HOOKS:  # a plug-in gene's count: it re-declares the operators it changes (forge.lm.hooks)
        hook(pop, dict(gemm=gemm, elementwise=elementwise, scale=scale, f=f, rows=rows, act=act, d=d, dm=dm, ball=ball,
                       sw=sw))
    return _stack(ops, OP_NAMES, OP_KINDS, P, pop.L, dtype, fields)


def head_ops(pop: PopArrays, tokens: Any, logits_tokens: Any = None, batch: int = 1,
             prec: Precision = Precision()) -> OpTable:
    """Model-level operators (L = 1): embedding lookup, final norm and LM head over `logits_tokens`."""
    P = pop.P
    S = _bcast(tokens, P)
    St = S if logits_tokens is None else _bcast(logits_tokens, P)
    d, V, B = _bcast(pop.d_model, P), _bcast(pop.vocab_size, P), _bcast(batch, P)
    bw, ba, _ = genome_bytes(pop, prec)
    nbias = _bcast(pop.layernorm & pop.bias_all, P)
    z = np.zeros((P, 1))
    emb_rows = B * S * d * (1 + _bcast(pop.learned_pos, P))  # token (+ position) rows gathered
    ops = {
        "embed": dict(batch=z + 1, M=B * S, K=z, N=z, flops=B * S * d * _bcast(pop.learned_pos, P),
                      weight_bytes=emb_rows * bw, act_bytes=B * S * d * ba,
                      kv_read_bytes=z, kv_write_bytes=z),
        "final_norm": dict(batch=z + 1, M=B * S * d, K=z, N=z, flops=ELEMENTWISE_FLOPS * B * S * d,
                           weight_bytes=d * (1 + nbias) * bw, act_bytes=2 * B * S * d * ba,
                           kv_read_bytes=z, kv_write_bytes=z),
        "lm_head": dict(batch=z + 1, M=B * St, K=d, N=V, flops=2 * B * St * d * V, weight_bytes=d * V * bw,
                        act_bytes=(B * St * d + B * St * V) * ba, kv_read_bytes=z, kv_write_bytes=z),
    }
    return _stack(ops, HEAD_OP_NAMES, HEAD_OP_KINDS, P, 1)


def _stack(ops: dict, names: tuple, kinds: tuple, P: int, L: int, dtype: Any = np.float64,
           fields: tuple[str, ...] = OP_FIELDS) -> OpTable:
    """Fill one (field, op, P, L) block and expose (P, L, O) views: contiguous writes, no copies.
    A field not in `fields` is None (never silently zero)."""
    data = np.zeros((len(fields), len(names), P, L), dtype=dtype)
    for j, n in enumerate(names):
        for fi, fld in enumerate(fields):
            v = ops[n][fld]
            if not (type(v) is float and v == 0.0):  # an absent field stays zero
                data[fi, j] = v
    views = dict.fromkeys(OP_FIELDS)
    views.update({fld: np.moveaxis(data[fi], 0, -1) for fi, fld in enumerate(fields)})
    return OpTable(names=names, kinds=kinds, **views)


# ---------------------------------------------------------------------------------------------- totals
def model_totals(pop: PopArrays, kv_bytes: float = 2.0) -> dict[str, np.ndarray]:
    """Whole-model figures per genome (P,): parameters, KV bytes per token and forward FLOPs per token.

    params counts every weight and bias (analytic; equals `sum(p.numel())` of the built model).
    flops_per_token is the forward cost of one token at the mean causal context (T+1)/2 of the block:
    2 FLOPs per matmul weight (layers + LM head) plus the score/value products.
    """
    nan = np.full(pop.P, np.nan)  # parameters are counted at 1 byte each, whatever the genome's formats
    ops = layer_ops(pop.with_bytes(weight_bytes=nan, act_bytes=nan), tokens=1, context=1,
                    prec=Precision(1.0, 1.0, kv_bytes), fields=("flops", "weight_bytes", "kv_write_bytes"))
    layer_params = ops.total("weight_bytes")  # weight bytes at 1 byte/param = parameter count
    d, V, T = pop.d_model.astype(float), pop.vocab_size.astype(float), pop.block_size.astype(float)
    emb = V * d * (2 - pop.tied) + pop.learned_pos * T * d
    final_norm = d * (1 + (pop.layernorm & pop.bias_all))
    params = layer_params + emb + final_norm
    gemm = np.array([k == "gemm" for k in ops.kinds])
    matmul_w = (ops.flops[:, :, gemm]).sum(axis=(1, 2)) / 2  # FLOPs at 1 token = 2 × matmul weights
    if layer_windows(pop) is None:
        attn_per_ctx = 2 * (pop.n_h * (pop.d_qk + pop.d_v)).sum(axis=1)  # score + value FLOPs per key
        attn = attn_per_ctx * (T + 1) / 2
    else:  # each layer at its own mean causal key count under its window
        attn = (2 * pop.n_h * (pop.d_qk + pop.d_v) * causal_keys(pop, T)).sum(axis=1)
    flops_tok = 2 * matmul_w + 2 * d * V + attn
    kv = ops.total("kv_write_bytes")
    return {"params": params, "non_embedding_params": params - emb, "kv_bytes_per_token": kv,
            "flops_per_token": flops_tok, "n_active_layers": pop.active.sum(axis=1),
            "n_attn_layers": pop.attn.sum(axis=1)}


# ---------------------------------------------------------------------------------------------- memory
def weight_storage(pop: PopArrays, prec: Precision = Precision(), embedding: bool = True,
                   layers: OpTable | None = None) -> np.ndarray:
    """Bytes of all weights per genome (P,): layers, final norm, LM head, and the input embedding table
    (and learned positions) when `embedding`. PLENA Table XI's "Weight Storage" leaves the input
    embedding out (LLaMA-3.3-70B: 129.46 GiB at 16 bit = every parameter but its 1.05 B embedding rows).
    `layers`: this population's `layer_ops(pop, 1, 1, 1, prec)` when the caller has it already."""
    one = np.ones(pop.P)
    lay = (layers if layers is not None else layer_ops(pop, 1, 1, one, prec)).total("weight_bytes")
    head = head_ops(pop, 1, 1, one, prec)
    w = lay + head.op("final_norm")["weight_bytes"][:, 0] + head.op("lm_head")["weight_bytes"][:, 0]
    if embedding:
        bw = genome_bytes(pop, prec)[0][:, 0]
        w = w + (pop.vocab_size * ~pop.tied + pop.learned_pos * pop.block_size) * pop.d_model * bw
    return w


def kv_cache_bytes(pop: PopArrays, context: Any, batch: Any = 1, prec: Precision = Precision()) -> np.ndarray:
    """KV-cache bytes of `batch` sequences of `context` tokens (P,): n_kv·(d_qk + d_v) per attention layer
    and position, min(window, context) positions on a windowed layer (its rolling cache)."""
    ops = layer_ops(pop, 1, 1, batch, prec)
    if layer_windows(pop) is None:
        return ops.total("kv_write_bytes") * np.asarray(context, dtype=float)
    return (ops.kv_write_bytes.sum(axis=2) * attended_keys(pop, context)).sum(axis=1)  # per layer × positions


WORKLOAD_TOTALS = ("kv_bytes", "weight_bytes", "peak_memory_bytes")


def workload_totals(pop: PopArrays, context: Any, batch: Any = 1, prec: Precision = Precision()) -> dict[str, np.ndarray]:
    """Model totals that depend on the workload (P,) each: the KV cache of `batch` sequences of `context`
    tokens, the weight bytes, and their sum, the memory a decode holds at its last token (activations,
    a few rows of d_model, left out). A genome's own precision genes override `prec`, as in the backends."""
    layers = layer_ops(pop, 1, 1, np.ones(pop.P), prec)  # one operator table for both (KV is linear in batch)
    kv = layers.total("kv_write_bytes") * np.asarray(context, dtype=float) * np.asarray(batch, dtype=float)
    w = weight_storage(pop, prec, layers=layers)
    return {"kv_bytes": kv, "weight_bytes": w, "peak_memory_bytes": w + kv}


def max_batch(pop: PopArrays, context: Any, memory_bytes: float, prec: Precision = Precision(),
              embedding: bool = True, cap: int = 1 << 16) -> np.ndarray:
    """The largest batch whose weights plus KV cache of `context` tokens fit `memory_bytes` (P,) int.

    0 means batch 1 does not fit. A genome with no KV cache (identity attention only) gets `cap`."""
    free = memory_bytes - weight_storage(pop, prec, embedding)
    per_seq = kv_cache_bytes(pop, context, 1, prec)
    with np.errstate(divide="ignore", invalid="ignore"):
        b = np.where(per_seq > 0, np.floor(free / np.where(per_seq > 0, per_seq, 1.0)), cap)
    return np.clip(np.where(free < 0, 0, b), 0, cap).astype(np.int64)


def analyze(genome: Genome, kv_bytes: float = 2.0) -> dict[str, Any]:
    """Totals of one genome as plain Python numbers (for summaries and tests)."""
    t = model_totals(PopArrays.from_genomes([genome]), kv_bytes=kv_bytes)
    return {k: (int(v[0]) if k not in ("flops_per_token",) else float(v[0])) for k, v in t.items()}


def describe(genome: Genome, phase: str = "prefill", tokens: int = 256, context: int | None = None,
             batch: int = 1, prec: Precision = Precision()) -> list[dict[str, Any]]:
    """Operator records of one genome: [{layer, name, kind, M, K, N, batch, flops, bytes...}], existing ops only."""
    pop = PopArrays.from_genomes([genome])
    if phase == "decode":
        table = layer_ops(pop, tokens=1, context=context or tokens, batch=batch, prec=prec)
    else:
        table = layer_ops(pop, tokens=tokens, context=context or tokens, batch=batch, prec=prec)
    out = []
    slots = [i for i, g in enumerate(genome.layers)]
    for i in slots:
        for j, (n, k) in enumerate(zip(table.names, table.kinds)):
            if table.flops[0, i, j] > 0:
                rec = {"layer": i, "name": n, "kind": k}
                rec.update({f: float(getattr(table, f)[0, i, j]) for f in OP_FIELDS})
                out.append(rec)
    return out
