"""kiln.decode on CUDA tensors against a float64 reference: contiguous and paged caches (a shuffled block table,
pages of 16 and 64), GQA, 1 to 4 queries, bottom-right causality, an empty sequence; agreement with the CPU
interpreter; torch.compile(fullgraph=True); a CUDA-graph capture whose workspace torch allocates. Skipped where
torch, CUDA or a GPU kiln can use is missing (tests/python/test_decode.py covers the interpreter in CI)."""

import os

import pytest

from gpu_torch import require_torch_on_gpu

torch = require_torch_on_gpu()

import kiln  # noqa: E402

DEV = torch.device("cuda", int(os.environ.get("KILN_DEVICE", "0") or 0))

# (B, N_Q, H, H_KV, D, seqlens, page_size (0: contiguous), dtype, causal, num_splits)
CASES = [
    (4, 1, 32, 8, 128, [1000, 0, 1, 777], 64, torch.float16, None, 0),
    (3, 4, 8, 2, 64, [300, 17, 64], 16, torch.bfloat16, "bottom-right", 0),
    (2, 2, 4, 4, 64, [513, 200], 0, torch.float16, "bottom-right", 5),
    (2, 3, 16, 1, 128, None, 64, torch.float16, None, 0),  # MQA, the whole capacity
]


def case_id(c):
    return (f"B{c[0]}-Nq{c[1]}-H{c[2]}-Hkv{c[3]}-D{c[4]}-page{c[6]}-{str(c[7])[6:]}-{c[8] or 'none'}-"
            f"splits{c[9]}")


def make(case, seed=0):
    b, n_q, h, hkv, d, lens, page, dt, _, _ = case
    g = torch.Generator(device=DEV).manual_seed(seed)
    q = torch.randn(b, n_q, h, d, generator=g, device=DEV, dtype=dt)
    capacity = max(lens) if lens else 256
    seqlens = None if lens is None else torch.tensor(lens, dtype=torch.int32, device=DEV)
    if page == 0:
        k, v = (torch.randn(b, capacity, hkv, d, generator=g, device=DEV, dtype=dt) for _ in range(2))
        for x in (k, v):
            for i, n in enumerate(lens or []):
                x[i, n:] = float("nan")
        return q, k, v, seqlens, None
    max_pages = -(-capacity // page)
    num_pages = b * max_pages + 3
    k, v = (torch.randn(num_pages, page, hkv, d, generator=g, device=DEV, dtype=dt) for _ in range(2))
    table = torch.randperm(num_pages, generator=g, device=DEV)[: b * max_pages].view(b, max_pages).to(torch.int32)
    pages = table.tolist()
    for i, n in enumerate(lens or []):  # rows past the keys: NaN, never read
        for slot in range(n // page, max_pages):
            first = n - slot * page if slot == n // page else 0
            k[pages[i][slot], first:] = v[pages[i][slot], first:] = float("nan")
    return q, k, v, seqlens, table


def reference(q, k, v, seqlens, table, causal):
    b, n_q, h, d = q.shape
    o = torch.zeros(q.shape, dtype=torch.float64, device=DEV)
    for i in range(b):
        if table is None:
            keys, vals = k[i], v[i]
        else:
            keys = k[table[i].long()].flatten(0, 1)
            vals = v[table[i].long()].flatten(0, 1)
        n = keys.shape[0] if seqlens is None else int(seqlens[i])
        if n == 0:
            continue
        qs = q[i].transpose(0, 1).double()  # (H, N_Q, D)
        ks, vs = (x[:n].transpose(0, 1).double().repeat_interleave(h // x.shape[1], 0) for x in (keys, vals))
        s = qs @ ks.transpose(-1, -2) / d ** 0.5
        if causal is not None:
            r = torch.arange(n_q, device=DEV)[:, None]
            j = torch.arange(n, device=DEV)[None, :]
            s = s.masked_fill(~(j <= r + n - n_q), float("-inf"))
        o[i] = (torch.softmax(s, -1).nan_to_num(0.0) @ vs).transpose(0, 1)
    return o


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_decode_matches_reference(case):
    q, k, v, seqlens, table = make(case)
    causal, splits = case[8], case[9]
    o, lse = kiln.decode(q, k, v, cache_seqlens=seqlens, block_table=table, causal=causal, num_splits=splits,
                         return_lse=True)
    assert o.shape == q.shape and o.dtype == q.dtype and lse.shape == (q.shape[0], q.shape[2], q.shape[1])
    ref = reference(q, k, v, seqlens, table, causal)
    assert torch.isfinite(o).all()
    assert ((o.double() - ref).norm() / ref.norm()).item() < 1e-2
    if seqlens is not None:
        empty = seqlens == 0
        assert (o[empty] == 0).all() and torch.isneginf(lse[empty]).all()


def test_gpu_equals_interpreter():
    case = (2, 2, 4, 2, 64, [70, 33], 16, torch.float16, "bottom-right", 2)
    q, k, v, seqlens, table = make(case, seed=4)
    o, lse = kiln.decode(q, k, v, cache_seqlens=seqlens, block_table=table, causal="bottom-right", num_splits=2,
                         return_lse=True)
    args = [x.cpu() for x in (q, k, v)]
    oc, lsec = kiln.decode(*args, cache_seqlens=seqlens.cpu(), block_table=table.cpu(), causal="bottom-right",
                           num_splits=2, return_lse=True)
    torch.testing.assert_close(o.cpu(), oc, rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(lse.cpu(), lsec, rtol=1e-4, atol=1e-4)


def test_torch_compile_fullgraph():
    q, k, v, seqlens, table = make(CASES[1])

    def f(q):
        return kiln.decode(q * 2, k, v, cache_seqlens=seqlens, block_table=table, causal="bottom-right") + 1

    torch.testing.assert_close(torch.compile(f, fullgraph=True)(q), f(q), rtol=0, atol=0)


def test_cuda_graph_capture_with_workspace_and_replay():
    """decode captured in a CUDA graph: its workspace torch's (the graph's pool), the split count fixed by the
    size query, nothing timed; replayed after new queries and a longer cache fill, it equals an eager call."""
    case = CASES[0]
    q, k, v, seqlens, table = make(case)
    kiln.decode(q, k, v, cache_seqlens=seqlens, block_table=table)  # compile outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        with torch.cuda.graph(g):
            o = kiln.decode(q, k, v, cache_seqlens=seqlens, block_table=table)
    torch.cuda.current_stream().wait_stream(s)
    q.copy_(torch.randn_like(q))
    seqlens.copy_(torch.tensor([1001, 5, 0, 700], dtype=torch.int32, device=DEV))
    pages = table.tolist()
    for i, (old, new) in enumerate(zip(case[5], seqlens.tolist())):  # the newly filled cache rows
        for j in range(old, new):
            k[pages[i][j // 64], j % 64] = torch.randn_like(k[0, 0])
            v[pages[i][j // 64], j % 64] = torch.randn_like(v[0, 0])
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(o, kiln.decode(q, k, v, cache_seqlens=seqlens, block_table=table), rtol=0, atol=0)


def test_opcheck():
    q, k, v, seqlens, table = make(CASES[1])
    torch.library.opcheck(torch.ops.kiln.decode, (q, k, v, seqlens, table, 2, 0.0, 0))


def test_errors_name_the_mistake():
    q, k, v, seqlens, table = make(CASES[1])
    with pytest.raises(kiln.KilnError, match="block_table is on cpu"):
        kiln.decode(q, k, v, cache_seqlens=seqlens, block_table=table.cpu())
    with pytest.raises(kiln.KilnError, match="i32"):
        kiln.decode(q, k, v, cache_seqlens=seqlens.long(), block_table=table)
    with pytest.raises(kiln.KilnError, match="causal must be None or 'bottom-right'"):
        kiln.decode(q, k, v, block_table=table, causal="top-left")
