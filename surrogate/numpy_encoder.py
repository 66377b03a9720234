"""The Forge-Former encoder's forward pass in numpy float64: inference without importing torch (issue 45).

The search, `forge.predict`, `forge.cost` and the other inference commands load a checkpoint's weights with
`safetensors.numpy` and run them here; torch is imported only to train, label, fine-tune, export or run on a
GPU. The pass is `surrogate.forgeformer.ForgeFormer.forward` operation for operation (packed tokens, pre-LN
blocks, exact GELU (x·Φ(x)), masked mean pooling) and agrees with torch's float64 path to ~1e-15 relative
(tests/surrogate/test_numpy_encoder.py holds every shipped checkpoint to 1e-12). MC dropout draws the same
numpy PCG64 masks as the torch module (`DropoutStream`, which `forgeformer.MaskStream` wraps), in the same
order, so a seeded run gives the same σ on either path.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Mapping

import numpy as np
from scipy.special import ndtr


@dataclass
class FFConfig:
    """Encoder shape (paper values, App. C) and training recipe."""

    n_fields: int = 9
    d_enc: int = 64
    n_heads: int = 4
    n_layers: int = 4
    d_ffn: int = 256
    dropout: float = 0.2
    L_max: int = 40

    def to_dict(self) -> dict:
        return asdict(self)


class DropoutStream:
    """Inverted-dropout multipliers (0 or 1/(1-p)) drawn from a seeded numpy PCG64 generator.

    Keep probability is round((1-p)·65536)/65536 (|error| < 8e-6). One seed → the same masks."""

    def __init__(self, p: float, seed: int) -> None:
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.thr = np.uint16(min(65535, round((1.0 - p) * 65536)))
        self.scale = np.float32(1.0 / (1.0 - p))

    def draw(self, shape: tuple[int, ...]) -> np.ndarray:
        """The next float32 multipliers of `shape` (4 masks per 64-bit draw)."""
        n = math.prod(shape)
        bits = self.rng.bit_generator.random_raw((n + 3) // 4).view(np.uint16)[:n]
        return np.multiply(bits < self.thr, self.scale, dtype=np.float32).reshape(shape)


WHOLE = 128  # a batch up to this size runs as one pass (the default job's generations of 48: the pinned bytes)
CHUNK = 32  # genomes per pass of a larger batch without dropout: 0.51 -> 0.39 ms a genome at 3,200 offspring


def param_shapes(cfg: FFConfig) -> dict[str, tuple[int, ...]]:
    """The state-dict names and shapes of a `ForgeFormer(cfg)` (what a checkpoint member must hold)."""
    d, f = cfg.d_enc, cfg.d_ffn
    out: dict[str, tuple[int, ...]] = {"lift_w": (cfg.n_fields, d), "lift_b": (cfg.n_fields, d), "pos": (cfg.L_max, d)}
    for i in range(cfg.n_layers):
        p = f"encoder.layers.{i}."
        out |= {p + "self_attn.in_proj_weight": (3 * d, d), p + "self_attn.in_proj_bias": (3 * d,),
                p + "self_attn.out_proj.weight": (d, d), p + "self_attn.out_proj.bias": (d,),
                p + "linear1.weight": (f, d), p + "linear1.bias": (f,), p + "linear2.weight": (d, f),
                p + "linear2.bias": (d,), p + "norm1.weight": (d,), p + "norm1.bias": (d,),
                p + "norm2.weight": (d,), p + "norm2.bias": (d,)}
    return out | {"head.weight": (1, d), "head.bias": (1,)}


def _layer_norm(z: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    mu = z.mean(-1, keepdims=True)
    c = z - mu
    return c * (1.0 / np.sqrt((c * c).mean(-1, keepdims=True) + eps)) * w + b


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


class NumpyForgeFormer:
    """One encoder member as numpy arrays: `weights` as saved (float32), run in float64."""

    def __init__(self, cfg: FFConfig, weights: Mapping[str, np.ndarray]) -> None:
        shapes = param_shapes(cfg)
        if set(weights) != set(shapes) or any(tuple(weights[k].shape) != s for k, s in shapes.items()):
            bad = sorted(set(weights) ^ set(shapes)) or [k for k, s in shapes.items() if tuple(weights[k].shape) != s]
            raise ValueError(f"parameters {bad[:3]} missing, unexpected or of another shape")
        self.cfg, self.weights = cfg, dict(weights)
        self.w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
        self.masks: DropoutStream | None = None

    def seed_dropout(self, seed: int) -> None:
        self.masks = DropoutStream(self.cfg.dropout, seed)

    def state_dict(self) -> dict[str, np.ndarray]:
        return dict(self.weights)

    def parameters(self) -> list[np.ndarray]:
        return list(self.weights.values())

    def __call__(self, x: np.ndarray, mask: np.ndarray, masks: DropoutStream | None = None) -> np.ndarray:
        """x: (B, L, F) normalized fields, mask: (B, L) bool real tokens → (B,). `masks`: dropout on (MC).

        Without dropout a batch over `WHOLE` runs in chunks of `CHUNK` genomes of similar depth (a stable sort by
        active layers): the padded attention tensors stay in cache and short genomes are not padded to the longest,
        so the cost per genome stays flat up to thousands of offspring (issue 45 §3). A genome's value does not
        depend on its batch beyond the last bits. With dropout the batch runs whole: the masks are drawn in the
        order the torch module draws them."""
        if masks is not None or len(x) <= WHOLE:
            return self._forward(x, mask, masks)
        order = np.argsort(mask.sum(axis=1), kind="stable")
        out = np.empty(len(x))
        for i in range(0, len(x), CHUNK):
            part = order[i:i + CHUNK]
            out[part] = self._forward(x[part], mask[part], None)
        return out

    def _forward(self, x: np.ndarray, mask: np.ndarray, masks: DropoutStream | None) -> np.ndarray:
        w, cfg = self.w, self.cfg
        drop = (lambda t: t * masks.draw(t.shape)) if masks is not None and cfg.dropout > 0 else (lambda t: t)
        B, x = x.shape[0], np.asarray(x, dtype=np.float64)
        n = int(mask.sum(axis=1).max())
        x, mask = x[:, :n], mask[:, :n]
        flat = np.flatnonzero(mask.reshape(-1))  # row-major b·n + position of the active tokens
        z = x.reshape(-1, x.shape[-1])[flat] @ w["lift_w"] + w["lift_b"].sum(0) + w["pos"][flat % n]
        H, d = cfg.n_heads, cfg.d_enc
        bias = np.where(mask, 0.0, -np.inf)[:, None, None, :]  # (B, 1, 1, n): padded keys get no attention
        sc = np.ones(3 * d)
        sc[:d] = 1.0 / math.sqrt(d // H)  # the query scale folded into the projection, as the torch pass does
        for i in range(cfg.n_layers):
            p = f"encoder.layers.{i}."
            h = _layer_norm(z, w[p + "norm1.weight"], w[p + "norm1.bias"])
            qkv = np.zeros((B * n, 3 * d))
            qkv[flat] = h @ (w[p + "self_attn.in_proj_weight"] * sc[:, None]).T + w[p + "self_attn.in_proj_bias"] * sc
            q, k, v = qkv.reshape(B, n, 3, H, d // H).transpose(2, 0, 3, 1, 4)  # each (B, H, n, d_h)
            with np.errstate(invalid="ignore"):  # a sequence's padded query rows: never read back
                att = drop(_softmax(bias + q @ k.transpose(0, 1, 3, 2)))  # masks in (B·H, n, n) order
            o = (att @ v).transpose(0, 2, 1, 3).reshape(B * n, d)[flat]
            z = z + drop(o @ w[p + "self_attn.out_proj.weight"].T + w[p + "self_attn.out_proj.bias"])
            u = _layer_norm(z, w[p + "norm2.weight"], w[p + "norm2.bias"]) @ w[p + "linear1.weight"].T + w[p + "linear1.bias"]
            u = drop(u * ndtr(u))  # exact GELU, x·Φ(x): Φ through erfc in the tails, ~2x faster than 1 + erf
            z = z + drop(u @ w[p + "linear2.weight"].T + w[p + "linear2.bias"])
        zs = np.zeros((B * n, d))
        zs[flat] = z  # summed over positions in order, as torch's index_add: padded rows add zeros
        pooled = zs.reshape(B, n, d).sum(1) / np.maximum(mask.sum(axis=1, keepdims=True), 1.0)
        return (pooled @ w["head.weight"].T + w["head.bias"])[:, 0]


def from_torch(module: object) -> NumpyForgeFormer:
    """A torch `ForgeFormer`'s weights as a numpy member (its dropout stream shared, so σ continues its sequence)."""
    out = NumpyForgeFormer(module.cfg, {k: t.detach().cpu().numpy() for k, t in module.state_dict().items()})
    out.masks = module.masks
    return out
