"""kiln.decode on NumPy arrays (kiln's interpreter) against the float64 reference: a contiguous cache and a paged
one with a shuffled block table (pages of 16 and 64), GQA, 1 to 4 queries a sequence, bottom-right causality, a
sequence without keys, chosen and given split counts; and argument mistakes as KilnError carrying kiln's
message. Shapes are small: the suite runs on a 2-core CI machine."""

import numpy as np
import pytest

import kiln
import reference
from test_errors import raises

TOL = {np.float32: 1e-5, np.float16: 2e-3}

# (B, N_Q, H, H_KV, D, seqlens, page_size (0: contiguous), dtype, causal, num_splits)
CASES = [
    (2, 1, 4, 2, 16, [37, 0], 0, np.float32, None, 0),                 # contiguous; an empty sequence
    (3, 2, 4, 1, 32, [40, 17, 1], 16, np.float16, "bottom-right", 2),   # MQA, pages of 16
    (2, 4, 2, 2, 16, [100, 70], 64, np.float32, "bottom-right", 0),    # pages of 64, 4 queries
    (1, 3, 8, 2, 16, None, 16, np.float16, None, 3),                    # the whole capacity, no seqlens
]


def case_id(c):
    return (f"B{c[0]}-Nq{c[1]}-H{c[2]}-Hkv{c[3]}-D{c[4]}-lens{c[5]}-page{c[6]}-{np.dtype(c[7]).name}-"
            f"{c[8] or 'none'}-splits{c[9]}")


def make(case, seed=0):
    """q, k_cache, v_cache, seqlens (or None), block_table (or None): the pages dealt to the sequences in a
    shuffled order, rows past a sequence's keys NaN (never read)."""
    b, n_q, h, hkv, d, lens, page, dt, _, _ = case
    rng = np.random.default_rng(seed)
    q = rng.uniform(-1, 1, (b, n_q, h, d)).astype(dt)
    capacity = max(lens or [48]) if lens else 48
    seqlens = None if lens is None else np.array(lens, np.int32)
    if page == 0:
        k, v = (rng.uniform(-1, 1, (b, capacity, hkv, d)).astype(dt) for _ in range(2))
        for x in (k, v):
            for i, n in enumerate(lens or []):
                x[i, n:] = np.nan
        return q, k, v, seqlens, None
    max_pages = -(-capacity // page)
    num_pages = b * max_pages + 1  # a spare page no sequence names
    k, v = (rng.uniform(-1, 1, (num_pages, page, hkv, d)).astype(dt) for _ in range(2))
    table = rng.permutation(num_pages)[: b * max_pages].reshape(b, max_pages).astype(np.int32)
    for i, n in enumerate(lens or []):
        for j in range(n, max_pages * page):
            k[table[i, j // page], j % page] = v[table[i, j // page], j % page] = np.nan
    return q, k, v, seqlens, table


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_decode_matches_reference(case):
    q, k, v, seqlens, table = make(case)
    causal, dt, splits = case[8], case[7], case[9]
    o, lse = kiln.decode(q, k, v, cache_seqlens=seqlens, block_table=table, causal=causal, num_splits=splits,
                         return_lse=True)
    assert o.shape == q.shape and o.dtype == q.dtype and lse.shape == (q.shape[0], q.shape[2], q.shape[1])
    ref_o, ref_lse = reference.decode_forward(q, k, v, seqlens, table, causal=causal)
    assert reference.rel_l2(o, ref_o) < TOL[dt]
    assert reference.rel_l2(lse, ref_lse) < 1e-5
    assert np.all(o[np.isneginf(ref_lse).transpose(0, 2, 1)] == 0)  # a query that sees no key: O = 0


def test_split_counts_agree_and_int_seqlens():
    case = CASES[2]
    q, k, v, _, table = make(case, seed=1)
    one = kiln.decode(q, k, v, cache_seqlens=50, block_table=table, num_splits=1)
    many = kiln.decode(q, k, v, cache_seqlens=np.full(2, 50, np.int32), block_table=table, num_splits=4)
    np.testing.assert_allclose(one, many, rtol=1e-6, atol=1e-6)


def test_argument_mistakes_are_kiln_errors():
    q, k, v, seqlens, table = make(CASES[1])
    dec = kiln.decode
    raises(lambda: dec(q, k, v, cache_seqlens=seqlens, block_table=table, causal="top-left"),
           "causal must be None or 'bottom-right'")
    raises(lambda: dec(q, k[:, :8], v[:, :8], cache_seqlens=seqlens, block_table=table), "k_cache has pages of 8 keys",
           "power of two >= 16")
    raises(lambda: dec(q, k, v, cache_seqlens=seqlens.astype(np.int64), block_table=table),
           "options.seqlens_k has dtype i64; expected i32")
    too_long = seqlens.copy()
    too_long[1] = 10_000
    raises(lambda: dec(q, k, v, cache_seqlens=too_long, block_table=table), "options.seqlens_k[1] = 10000",
           "the cache's capacity")
    bad_table = table.copy()
    bad_table[2, 0] = k.shape[0]
    raises(lambda: dec(q, k, v, cache_seqlens=seqlens, block_table=bad_table), "options.block_table[2, 0]",
           f"expected a page of the cache's {k.shape[0]}")
    raises(lambda: dec(q, k, v, cache_seqlens=seqlens), "k_cache has batch", "options.block_table")
    q2, k2, v2, _, _ = make(CASES[0])
    raises(lambda: dec(q2[:, :, :3], k2, v2), "q has H=3 heads, not a multiple of the cache's H_KV=2")
    raises(lambda: dec(q, k, v, block_table=table, num_splits=-1), "num_splits=-1")
    raises(lambda: dec(q, k, v, block_table=table, num_splits=2.0), "num_splits must be an int")
    raises(lambda: dec(q, list(k), v, block_table=table), "k_cache: expected NumPy arrays")
