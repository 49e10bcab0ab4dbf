"""Attention with kiln's library mods in double precision with NumPy, written from the mods' definitions (not
from kiln): score mods applied in order to scale·q kᵀ, mask mods and the causal mode hiding keys, a per-head
sink joining each row's softmax as a key with no value; the forward's O and LSE and the analytic gradients,
the sink logits' included. Each mod is a small object: score(s, b, h, i, j) and its derivative in s, or
mask(b, h, i, j), over broadcast index grids; bhsd layout, GQA by repeating kv heads."""

import numpy as np

import reference


class Causal:
    def mask(self, b, h, i, j, n_q, n_k):
        return j <= i


class SlidingWindow:
    def __init__(self, left, right):
        self.left, self.right = left, right

    def mask(self, b, h, i, j, n_q, n_k):
        return (j >= i - self.left) & (j <= i + self.right)


class PrefixLM:
    def __init__(self, prefix):
        self.prefix = prefix

    def mask(self, b, h, i, j, n_q, n_k):
        return (j < self.prefix) | (j <= i)


class Document:
    def __init__(self, q_doc, kv_doc):
        self.q_doc, self.kv_doc = np.asarray(q_doc), np.asarray(kv_doc)

    def mask(self, b, h, i, j, n_q, n_k):
        return self.q_doc[:, None, :, None] == self.kv_doc[:, None, None, :]


class Softcap:
    def __init__(self, cap):
        self.cap = cap

    def score(self, s, b, h, i, j):
        return self.cap * np.tanh(s / self.cap)

    def derivative(self, s, b, h, i, j):
        return 1.0 - np.tanh(s / self.cap) ** 2


class Alibi:
    def __init__(self, slopes):
        self.slopes = np.asarray(slopes, dtype=np.float64)

    def score(self, s, b, h, i, j):
        return s + self.slopes[None, :, None, None] * (j - i)

    def derivative(self, s, b, h, i, j):
        return np.ones_like(s)


def _scores(q, k, scale, causal, mods):
    """The final scores (−inf where hidden), d score / d (scale·q·k) and the visibility, all (B, H, N_Q, N_K)."""
    s = scale * q @ k.transpose(0, 1, 3, 2)
    n_q, n_k = s.shape[2], s.shape[3]
    b = np.arange(s.shape[0])[:, None, None, None]
    h = np.arange(s.shape[1])[None, :, None, None]
    i = np.arange(n_q)[None, None, :, None]
    j = np.arange(n_k)[None, None, None, :]
    deriv = np.ones_like(s)
    for m in mods:
        if hasattr(m, "score"):
            deriv = deriv * m.derivative(s, b, h, i, j)
            s = m.score(s, b, h, i, j)
    seen = np.broadcast_to(reference.visible(n_q, n_k, causal), s.shape).copy()
    for m in mods:
        if hasattr(m, "mask"):
            seen &= np.broadcast_to(m.mask(b, h, i, j, n_q, n_k), s.shape)
    return np.where(seen, s, -np.inf), deriv, seen


def _softmax(s, seen, sinks):
    """P, LSE with the sink (−inf: none) as one more key of each row."""
    sink = np.full(s.shape[:2] + (s.shape[2], 1), -np.inf) if sinks is None else \
        np.broadcast_to(np.asarray(sinks, dtype=np.float64)[None, :, None, None], s.shape[:3] + (1,))
    m = np.maximum(s.max(axis=-1, keepdims=True), sink)
    alive = np.isfinite(m)
    m_safe = np.where(alive, m, 0.0)
    e = np.where(seen, np.exp(s - m_safe), 0.0)
    l = e.sum(axis=-1, keepdims=True) + np.where(np.isfinite(sink), np.exp(sink - m_safe), 0.0)
    p = np.where(alive, e / np.where(alive, l, 1.0), 0.0)
    lse = np.where(alive, m_safe + np.log(np.where(alive, l, 1.0)), -np.inf)[..., 0]
    return p, lse


def _inputs(q, k, v, layout):
    q, k, v = (reference.to_bhsd(x, layout) for x in (q, k, v))
    heads = q.shape[1]
    return q, np.repeat(k, heads // k.shape[1], axis=1), np.repeat(v, heads // v.shape[1], axis=1)


def forward(q, k, v, mods, causal=None, scale=None, layout="bhsd", sinks=None):
    """O (in `layout`) and LSE [B, H, N_Q]."""
    q, ke, ve = _inputs(q, k, v, layout)
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    s, _, seen = _scores(q, ke, scale, causal, mods)
    p, lse = _softmax(s, seen, sinks)
    return reference.from_bhsd(p @ ve, layout), lse


def backward(dout, q, k, v, mods, causal=None, scale=None, layout="bhsd", sinks=None):
    """dQ, dK, dV (in `layout`) and d loss / d sinks [H] (zeros without sinks) of Σ O ∘ dout."""
    kv_heads = k.shape[1] if layout == "bhsd" else k.shape[2]
    q, ke, ve = _inputs(q, k, v, layout)
    dout = reference.to_bhsd(dout, layout)
    heads = q.shape[1]
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    s, deriv, seen = _scores(q, ke, scale, causal, mods)
    p, lse = _softmax(s, seen, sinks)
    o = p @ ve
    dv = p.transpose(0, 1, 3, 2) @ dout
    dp = dout @ ve.transpose(0, 1, 3, 2)
    delta = (dout * o).sum(axis=-1, keepdims=True)
    ds = np.where(seen, p * (dp - delta) * deriv, 0.0)
    dq = scale * ds @ ke
    dk = scale * ds.transpose(0, 1, 3, 2) @ q
    dsink = np.zeros(heads)
    if sinks is not None:
        sink = np.asarray(sinks, dtype=np.float64)[None, :, None]
        share = np.where(np.isfinite(lse), np.exp(sink - np.where(np.isfinite(lse), lse, 0.0)), 0.0)
        dsink = -(share * delta[..., 0]).sum(axis=(0, 2))

    def fold(x):  # sum each kv head's group of query heads
        b, _, n, d = x.shape
        return x.reshape(b, kv_heads, heads // kv_heads, n, d).sum(axis=2)

    return (reference.from_bhsd(dq, layout), reference.from_bhsd(fold(dk), layout),
            reference.from_bhsd(fold(dv), layout), dsink)
