"""kiln.attention_varlen on CUDA tensors: forward and gradients against a float64 reference per sequence and
against dense kiln.attention per sequence, the backward API against autograd, torch.compile(fullgraph=True) of a
packed call, a CUDA-graph capture of forward and backward, opcheck, and errors. Skipped where torch, CUDA or a GPU
kiln can use is missing (tests/python/test_varlen.py covers the interpreter in CI)."""

import os

import pytest

from gpu_torch import require_torch_on_gpu

torch = require_torch_on_gpu()

import kiln  # noqa: E402

DEV = torch.device("cuda", int(os.environ.get("KILN_DEVICE", "0") or 0))

# (seqlens_q, seqlens_k, H, H_KV, D, dtype, causal)
CASES = [
    ([100, 0, 300, 1], [120, 7, 300, 0], 4, 4, 64, torch.float16, None),
    ([128, 77, 200], [256, 77, 50], 8, 2, 128, torch.bfloat16, "bottom-right"),  # GQA; rows that see no key
    ([64, 130], [64, 130], 4, 1, 64, torch.float16, "top-left"),                 # MQA
]


def case_id(c):
    return f"q{c[0]}-k{c[1]}-H{c[2]}-Hkv{c[3]}-D{c[4]}-{str(c[5])[6:]}-{c[6] or 'none'}"


def offsets(lens):
    return torch.tensor([0] + lens, device=DEV).cumsum(0).to(torch.int32)


def make(case, seed=0, requires_grad=True):
    lq, lk, h, hkv, d, dt, _ = case
    g = torch.Generator(device=DEV).manual_seed(seed)
    q = torch.randn(sum(lq), h, d, generator=g, device=DEV, dtype=dt)
    k, v = (torch.randn(sum(lk), hkv, d, generator=g, device=DEV, dtype=dt) for _ in range(2))
    for t in (q, k, v):
        t.requires_grad_(requires_grad)
    return q, k, v, offsets(lq), offsets(lk), max(lq), max(lk)


def reference(q, k, v, lq, lk, causal):
    """O per sequence in the inputs' precision (float64 for the reference): softmax over visible keys, GQA by
    repeating kv heads; a row that sees no key gets 0."""
    outs, q0, k0 = [], 0, 0
    for nq, nk in zip(lq, lk):
        qs, ks, vs = q[q0:q0 + nq].transpose(0, 1), k[k0:k0 + nk].transpose(0, 1), v[k0:k0 + nk].transpose(0, 1)
        rep = qs.shape[0] // ks.shape[0]
        ks, vs = ks.repeat_interleave(rep, 0), vs.repeat_interleave(rep, 0)
        s = qs @ ks.transpose(-1, -2) / q.shape[-1] ** 0.5
        i = torch.arange(nq, device=DEV)[:, None]
        j = torch.arange(nk, device=DEV)[None, :]
        visible = torch.ones(nq, nk, dtype=torch.bool, device=DEV)
        if causal is not None:
            visible = j <= i if causal == "top-left" else j <= i + nk - nq
        seen = visible.any(-1, keepdim=True)  # rows without a visible key: P = 0, no NaN, zero gradients
        p = torch.softmax(s.masked_fill(~visible & seen, float("-inf")), dim=-1) * seen
        outs.append((p @ vs).transpose(0, 1))
        q0, k0 = q0 + nq, k0 + nk
    return torch.cat(outs)


def err(x, ref):
    return ((x.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_forward_and_gradients_match_reference(case):
    lq, lk, causal = case[0], case[1], case[6]
    q, k, v, cu_q, cu_k, mq, mk = make(case)
    o = kiln.attention_varlen(q, k, v, cu_q, cu_k, mq, mk, causal=causal)
    do = torch.randn_like(o)
    o.backward(do)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    o64 = reference(q64, k64, v64, lq, lk, causal)
    o64.backward(do.double())
    tol = 1e-2  # f16/bf16 inputs and outputs
    assert err(o, o64) < tol
    for name, mine, ref in zip("qkv", (q.grad, k.grad, v.grad), (q64.grad, k64.grad, v64.grad)):
        assert mine.shape == ref.shape and mine.dtype == q.dtype and torch.isfinite(mine).all(), name
        assert err(mine, ref) < 2 * tol, (name, err(mine, ref))


def test_gradients_equal_dense_attention_per_sequence():
    """Each sequence's gradients as kiln.attention (bshd, batch 1) gives them for that sequence alone."""
    case = CASES[1]
    lq, lk, causal = case[0], case[1], case[6]
    q, k, v, cu_q, cu_k, mq, mk = make(case, seed=3)
    o = kiln.attention_varlen(q, k, v, cu_q, cu_k, mq, mk, causal=causal)
    do = torch.randn_like(o)
    o.backward(do)
    q0 = k0 = 0
    for nq, nk in zip(lq, lk):
        qs, ks, vs = (t.detach()[a:a + n][None].clone().requires_grad_()
                      for t, a, n in ((q, q0, nq), (k, k0, nk), (v, k0, nk)))
        od = kiln.attention(qs, ks, vs, causal=causal, layout="bshd")
        od.backward(do[q0:q0 + nq][None])
        # bf16: a few units in the last place between two kernels' tilings (the same tiles give equal bits).
        torch.testing.assert_close(o[q0:q0 + nq], od[0], rtol=1e-2, atol=1e-2)
        for mine, dense in ((q.grad[q0:q0 + nq], qs.grad[0]), (k.grad[k0:k0 + nk], ks.grad[0]),
                            (v.grad[k0:k0 + nk], vs.grad[0])):
            torch.testing.assert_close(mine, dense, rtol=3e-2, atol=3e-2)
        q0, k0 = q0 + nq, k0 + nk


def test_backward_api_matches_autograd_and_lse():
    case = CASES[0]
    q, k, v, cu_q, cu_k, mq, mk = make(case, requires_grad=False)
    o, lse = kiln.attention_varlen(q, k, v, cu_q, cu_k, mq, mk, return_lse=True)
    assert lse.shape == (q.shape[1], q.shape[0]) and lse.dtype == torch.float32
    do = torch.randn_like(o)
    grads = kiln.attention_varlen_backward(do, q, k, v, o, lse, cu_q, cu_k, mq, mk)
    qa, ka, va = (t.clone().requires_grad_() for t in (q, k, v))
    kiln.attention_varlen(qa, ka, va, cu_q, cu_k, mq, mk).backward(do)
    for x, y in zip(grads, (qa.grad, ka.grad, va.grad)):
        torch.testing.assert_close(x, y, rtol=0, atol=0)  # deterministic: bitwise equal


def test_torch_compile_fullgraph_matches_eager():
    case = CASES[2]
    q, k, v, cu_q, cu_k, mq, mk = make(case)

    def f(q, k, v):
        return kiln.attention_varlen(q, k, v, cu_q, cu_k, mq, mk, causal="top-left").float().square().sum()

    eager = f(q, k, v)
    eager_grads = torch.autograd.grad(eager, (q, k, v))
    compiled = torch.compile(f, fullgraph=True)
    out = compiled(q, k, v)
    grads = torch.autograd.grad(out, (q, k, v))
    torch.testing.assert_close(out, eager, rtol=1e-3, atol=1e-3)
    for a, b in zip(grads, eager_grads):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-3)


def test_cuda_graph_capture_and_replay_forward_and_backward():
    """Forward and backward captured in one CUDA graph (the offsets' check skipped while capturing, the workspace
    torch's), replayed on new inputs: bitwise the eager gradients."""
    case = CASES[1]
    q, k, v, cu_q, cu_k, mq, mk = make(case)
    do = torch.randn(q.shape, device=DEV, dtype=q.dtype)

    def step():
        for t in (q, k, v):
            t.grad = None
        kiln.attention_varlen(q, k, v, cu_q, cu_k, mq, mk, causal=case[6]).backward(do)
        return q.grad, k.grad, v.grad

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()  # warm up on the capture stream: compile outside the capture
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        grads = step()
    q2, k2, v2 = make(case, seed=11)[:3]
    with torch.no_grad():
        q.copy_(q2), k.copy_(k2), v.copy_(v2)
        do.copy_(torch.randn_like(do))
    g.replay()
    torch.cuda.synchronize()
    captured = [t.clone() for t in grads]
    for x, y in zip(captured, step()):
        assert torch.isfinite(x).all()
        torch.testing.assert_close(x, y, rtol=0, atol=0)


def test_opcheck():
    q, k, v, cu_q, cu_k, mq, mk = make(CASES[2])
    torch.library.opcheck(torch.ops.kiln.attention_varlen_fwd,
                          (q, k, v, cu_q, cu_k, mq, mk, 1, 0.0, False, True, False, True, "", "", []))


def test_errors_name_the_mistake():
    q, k, v, cu_q, cu_k, mq, mk = make(CASES[0], requires_grad=False)
    with pytest.raises(kiln.KilnError, match="cu_seqlens_q is on cpu"):
        kiln.attention_varlen(q, k, v, cu_q.cpu(), cu_k, mq, mk)
    with pytest.raises(kiln.KilnError, match="sequence 2 has 300 tokens"):
        kiln.attention_varlen(q, k, v, cu_q, cu_k, 200, mk)
    with pytest.raises(kiln.KilnError, match="i32"):
        kiln.attention_varlen(q, k, v, cu_q.long(), cu_k, mq, mk)
    slopes = torch.ones(4, device=DEV, requires_grad=True)
    with pytest.raises(kiln.KilnError, match="requires grad"):
        kiln.attention_varlen(q, k, v, cu_q, cu_k, mq, mk, mods="alibi", mod_tensors={"alibi_slopes": slopes})
