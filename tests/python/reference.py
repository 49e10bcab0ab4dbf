"""Attention in double precision with NumPy, written from the definition (not from kiln): the forward's O and
natural-log LSE, and the analytic gradients. Rows that see no key get O = 0, LSE = -inf and no gradient."""

import numpy as np


def to_bhsd(x, layout):
    x = np.asarray(x, dtype=np.float64)
    return x.transpose(0, 2, 1, 3) if layout == "bshd" else x


def from_bhsd(x, layout):
    return x.transpose(0, 2, 1, 3) if layout == "bshd" else x


def visible(n_q, n_k, causal):
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    if causal in (None, False):
        return np.ones((n_q, n_k), dtype=bool)
    if causal in ("top-left", True):
        return j <= i
    return j <= i + n_k - n_q


def _expand_kv(x, heads):
    return np.repeat(x, heads // x.shape[1], axis=1)


def _probabilities(q, k, causal, scale):
    """P = softmax(scale q kᵀ) over visible keys, and the LSE; q, k bhsd in double, k already expanded."""
    s = scale * q @ k.transpose(0, 1, 3, 2)  # (B, H, N_Q, N_K)
    mask = visible(q.shape[2], k.shape[2], causal)
    s = np.where(mask, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    seen = np.isfinite(m)
    m_safe = np.where(seen, m, 0.0)
    p = np.where(mask, np.exp(s - m_safe), 0.0)
    l = p.sum(axis=-1, keepdims=True)
    p = np.where(seen, p / np.where(seen, l, 1.0), 0.0)
    lse = np.where(seen, m_safe + np.log(np.where(seen, l, 1.0)), -np.inf)[..., 0]
    return p, lse


def forward(q, k, v, causal=None, scale=None, layout="bhsd"):
    q, k, v = (to_bhsd(x, layout) for x in (q, k, v))
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    heads = q.shape[1]
    p, lse = _probabilities(q, _expand_kv(k, heads), causal, scale)
    return from_bhsd(p @ _expand_kv(v, heads), layout), lse


def backward(dout, q, k, v, causal=None, scale=None, layout="bhsd"):
    q, k, v, dout = (to_bhsd(x, layout) for x in (q, k, v, dout))
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    heads, kv_heads = q.shape[1], k.shape[1]
    ke, ve = _expand_kv(k, heads), _expand_kv(v, heads)
    p, _ = _probabilities(q, ke, causal, scale)
    dv = p.transpose(0, 1, 3, 2) @ dout
    dp = dout @ ve.transpose(0, 1, 3, 2)
    ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True))
    dq = scale * ds @ ke
    dk = scale * ds.transpose(0, 1, 3, 2) @ q

    def fold(x):  # sum each kv head's group of query heads
        b, _, n, d = x.shape
        return x.reshape(b, kv_heads, heads // kv_heads, n, d).sum(axis=2)

    return from_bhsd(dq, layout), from_bhsd(fold(dk), layout), from_bhsd(fold(dv), layout)


def rel_l2(out, ref):
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    finite = np.isfinite(ref)
    assert np.array_equal(np.isfinite(out), finite), "non-finite entries differ from the reference's"
    num = np.linalg.norm(out[finite] - ref[finite])
    den = np.linalg.norm(ref[finite])
    return num / den if den > 0 else num


def varlen_forward(q, k, v, cu_q, cu_k, causal=None, scale=None):
    """Packed attention: each sequence b (rows cu_q[b]:cu_q[b+1] of q [total_q, H, D] against cu_k[b]:cu_k[b+1]
    of k, v) its own problem. O [total_q, H, D] and LSE [H, total_q]; a sequence without keys gives its rows
    O = 0 and LSE = -inf."""
    total_q, heads, d = q.shape
    o = np.zeros((total_q, heads, d))
    lse = np.full((heads, total_q), -np.inf)
    for b in range(len(cu_q) - 1):
        q0, q1, k0, k1 = cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]
        if q1 == q0 or k1 == k0:
            continue
        ob, lb = forward(q[None, q0:q1], k[None, k0:k1], v[None, k0:k1], causal=causal, scale=scale, layout="bshd")
        o[q0:q1], lse[:, q0:q1] = ob[0], lb[0]
    return o, lse


def varlen_backward(dout, q, k, v, cu_q, cu_k, causal=None, scale=None):
    """dQ, dK, dV of varlen_forward; keys no row sees get dK = dV = 0, rows that see no key dQ = 0."""
    dq, dk, dv = np.zeros(q.shape), np.zeros(k.shape), np.zeros(v.shape)
    for b in range(len(cu_q) - 1):
        q0, q1, k0, k1 = cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]
        if q1 == q0 or k1 == k0:
            continue
        g = backward(dout[None, q0:q1], q[None, q0:q1], k[None, k0:k1], v[None, k0:k1], causal=causal, scale=scale,
                     layout="bshd")
        dq[q0:q1], dk[k0:k1], dv[k0:k1] = (x[0] for x in g)
    return dq, dk, dv


def decode_forward(q, k_cache, v_cache, seqlens=None, block_table=None, causal=None, scale=None):
    """Decoding against a KV cache: q [B, N_Q, H, D]; the cache [B, N_K, H_KV, D], or pages [num_pages,
    page_size, H_KV, D] through block_table [B, max_pages]; sequence b sees its first seqlens[b] cache rows (all
    without seqlens). O [B, N_Q, H, D], LSE [B, H, N_Q]; a query that sees no key gets O = 0, LSE = -inf."""
    batch, n_q, heads, d = q.shape
    o = np.zeros(q.shape)
    lse = np.full((batch, heads, n_q), -np.inf)
    for b in range(batch):
        page = k_cache.shape[1]
        capacity = page * (1 if block_table is None else block_table.shape[1])
        n_k = capacity if seqlens is None else int(seqlens[b])
        if n_k == 0:
            continue
        if block_table is None:
            keys, values = k_cache[b, :n_k], v_cache[b, :n_k]
        else:  # only the pages the sequence's keys reach are looked up
            rows = [(block_table[b, j // page], j % page) for j in range(n_k)]
            keys = np.stack([k_cache[p, r] for p, r in rows])
            values = np.stack([v_cache[p, r] for p, r in rows])
        ob, lb = forward(q[b:b + 1], keys[None], values[None], causal=causal, scale=scale, layout="bshd")
        o[b], lse[b] = ob[0], lb[0]
    return o, lse
