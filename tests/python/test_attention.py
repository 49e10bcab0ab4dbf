"""kiln.attention and kiln.attention_backward on NumPy arrays (kiln's interpreter) against the double-precision
reference: several shapes, every causal mode, GQA/MQA, N_Q != N_K, both layouts, strided views."""

import numpy as np
import pytest

import kiln
import reference

# Relative L2 error allowed: the dtype's rounding of the inputs and O (f16: 2^-11), f32 accumulation; gradients
# twice the forward's and a margin for dS rounded to the dtype.
FWD_TOL = {np.float32: 1e-5, np.float16: 2e-3}
BWD_TOL = {np.float32: 1e-4, np.float16: 1e-2}

# (B, H, H_KV, N_Q, N_K, D, dtype, causal, layout)
CASES = [
    (1, 2, 2, 64, 64, 32, np.float32, None, "bhsd"),
    (1, 2, 2, 48, 48, 16, np.float16, "top-left", "bhsd"),
    (1, 4, 2, 40, 72, 16, np.float16, "top-left", "bhsd"),       # GQA, N_Q < N_K
    (2, 2, 1, 72, 40, 32, np.float32, "bottom-right", "bhsd"),   # MQA, N_Q > N_K: rows that see no key
    (1, 4, 1, 24, 56, 8, np.float32, "bottom-right", "bshd"),    # decoding-style, bshd
    (1, 2, 2, 33, 50, 64, np.float16, None, "bshd"),             # tails in both sequence dims
]


def case_id(c):
    b, h, hkv, nq, nk, d, dt, causal, layout = c
    return f"B{b}-H{h}-Hkv{hkv}-Nq{nq}-Nk{nk}-D{d}-{np.dtype(dt).name}-{causal or 'none'}-{layout}"


def make(shape, dtype, rng):
    return rng.uniform(-1, 1, size=shape).astype(dtype)


def qkv(case, rng):
    b, h, hkv, nq, nk, d, dt, _, layout = case
    if layout == "bhsd":
        qs, ks = (b, h, nq, d), (b, hkv, nk, d)
    else:
        qs, ks = (b, nq, h, d), (b, nk, hkv, d)
    return make(qs, dt, rng), make(ks, dt, rng), make(ks, dt, rng)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_forward_matches_reference(case):
    rng = np.random.default_rng(1)
    q, k, v = qkv(case, rng)
    causal, layout, dt = case[7], case[8], case[6]
    o, lse = kiln.attention(q, k, v, causal=causal, layout=layout, return_lse=True)
    assert o.shape == q.shape and o.dtype == q.dtype
    assert lse.dtype == np.float32 and lse.shape == (case[0], case[1], case[3])
    ref_o, ref_lse = reference.forward(q, k, v, causal=causal, layout=layout)
    assert reference.rel_l2(o, ref_o) < FWD_TOL[dt]
    assert reference.rel_l2(lse, ref_lse) < 1e-6
    if causal == "bottom-right" and case[3] > case[4]:  # the first N_Q - N_K rows see no key
        first = case[3] - case[4]
        assert np.all(np.isneginf(lse[:, :, :first]))
        assert np.all(reference.to_bhsd(o, layout)[:, :, :first, :] == 0)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_backward_matches_reference(case):
    rng = np.random.default_rng(2)
    q, k, v = qkv(case, rng)
    causal, layout, dt = case[7], case[8], case[6]
    dout = make(q.shape, dt, rng)
    o, lse = kiln.attention(q, k, v, causal=causal, layout=layout, return_lse=True)
    dq, dk, dv = kiln.attention_backward(dout, q, k, v, o, lse, causal=causal, layout=layout)
    ref = reference.backward(dout, q, k, v, causal=causal, layout=layout)
    for name, got, want in zip(("dq", "dk", "dv"), (dq, dk, dv), ref):
        assert got.shape == want.shape and got.dtype == q.dtype, name
        err = reference.rel_l2(got, want)
        assert err < BWD_TOL[dt], f"{name}: relative L2 error {err:.2e}"


def test_explicit_scale():
    rng = np.random.default_rng(3)
    q, k, v = (make((1, 2, 32, 16), np.float32, rng) for _ in range(3))
    o = kiln.attention(q, k, v, scale=0.5)
    assert reference.rel_l2(o, reference.forward(q, k, v, scale=0.5)[0]) < FWD_TOL[np.float32]
    # a different scale gives a different answer: the argument is used
    assert reference.rel_l2(o, reference.forward(q, k, v)[0]) > 1e-3


def test_true_means_top_left():
    rng = np.random.default_rng(4)
    q, k, v = (make((1, 1, 24, 16), np.float32, rng) for _ in range(3))
    np.testing.assert_array_equal(kiln.attention(q, k, v, causal=True), kiln.attention(q, k, v, causal="top-left"))


def test_strided_views_of_packed_qkv():
    """q, k, v as views into one packed [B, N, 3, H, D] projection (bshd): strides, not copies."""
    rng = np.random.default_rng(5)
    b, n, h, d = 1, 40, 2, 32
    qkv_packed = make((b, n, 3, h, d), np.float16, rng)
    q, k, v = qkv_packed[:, :, 0], qkv_packed[:, :, 1], qkv_packed[:, :, 2]
    assert not q.flags.c_contiguous
    o = kiln.attention(q, k, v, causal="top-left", layout="bshd")
    ref_o, _ = reference.forward(q, k, v, causal="top-left", layout="bshd")
    assert reference.rel_l2(o, ref_o) < FWD_TOL[np.float16]


def test_deterministic_backward_is_bitwise_repeatable_and_atomic_variant_agrees():
    rng = np.random.default_rng(6)
    q, k, v, dout = (make((1, 2, 40, 16), np.float32, rng) for _ in range(4))
    o, lse = kiln.attention(q, k, v, return_lse=True)
    a = kiln.attention_backward(dout, q, k, v, o, lse)
    b = kiln.attention_backward(dout, q, k, v, o, lse)
    c = kiln.attention_backward(dout, q, k, v, o, lse, deterministic=False)
    for x, y, z in zip(a, b, c):
        np.testing.assert_array_equal(x, y)
        assert reference.rel_l2(z, x) < 1e-5


def test_empty_batch_is_a_no_op():
    q = np.zeros((0, 2, 16, 16), np.float32)
    k = np.zeros((0, 2, 16, 16), np.float32)
    o = kiln.attention(q, k, k)
    assert o.shape == q.shape


def test_exact_masked_v_keeps_rows_finite_when_a_hidden_key_holds_nan():
    """A NaN in V at the last key, which causal top-left hides from every row but the last: by default the
    diagonal tile's 0 · NaN turns the rows that share its tile into NaN; with exact_masked_v they are finite and
    match the reference computed without that key's V (the last row sees it: NaN either way)."""
    rng = np.random.default_rng(7)
    n = 48
    q, k, v = (make((1, 2, n, 16), np.float32, rng) for _ in range(3))
    v[:, :, n - 1, 0] = np.nan
    default = kiln.attention(q, k, v, causal="top-left")
    assert np.isnan(default[:, :, : n - 1]).any()  # hidden key, yet NaN rows
    o, lse = kiln.attention(q, k, v, causal="top-left", exact_masked_v=True, return_lse=True)
    assert np.isfinite(o[:, :, : n - 1]).all()
    assert np.isnan(o[:, :, n - 1, 0]).all()
    ref_o, ref_lse = reference.forward(q, k, np.nan_to_num(v, nan=0.0), causal="top-left")
    assert reference.rel_l2(o[:, :, : n - 1], ref_o[:, :, : n - 1]) < FWD_TOL[np.float32]
    assert reference.rel_l2(lse, ref_lse) < 1e-6  # LSE never reads V
    # The backward takes the option too: the rows that never see the NaN key have finite dQ.
    dout = make(q.shape, np.float32, rng)
    dq, _, _ = kiln.attention_backward(dout, q, k, v, o, lse, causal="top-left", exact_masked_v=True)
    assert np.isfinite(dq[:, :, : n - 1]).all()
