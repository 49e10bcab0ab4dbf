"""kiln.attention as a PyTorch op on the GPU: forward and gradients against a float64 reference and SDPA,
torch.compile(fullgraph=True), CUDA-graph capture and replay (forward, and forward with backward), a
non-default stream, opcheck, kiln.tune, exact_masked_v, kiln.run on CUDA tensors. Skipped where torch, CUDA or
a GPU kiln can use is missing (the CPU suite covers the rest)."""

import os

import pytest

from gpu_torch import require_torch_on_gpu

torch = require_torch_on_gpu()

import torch.nn.functional as F  # noqa: E402

import kiln  # noqa: E402

DEV = torch.device("cuda", int(os.environ.get("KILN_DEVICE", "0") or 0))

# (B, H, H_KV, N_Q, N_K, D, dtype, causal, layout)
CASES = [
    (2, 4, 4, 128, 128, 64, torch.float16, None, "bhsd"),
    (1, 8, 2, 256, 256, 128, torch.bfloat16, "top-left", "bhsd"),     # GQA
    (2, 4, 1, 100, 300, 64, torch.float16, "bottom-right", "bhsd"),   # MQA, N_Q < N_K (KV-cache style)
    (1, 4, 2, 300, 200, 64, torch.bfloat16, "top-left", "bshd"),      # N_Q > N_K, bshd
    (1, 2, 2, 77, 140, 96, torch.float16, "bottom-right", "bshd"),
    (1, 2, 2, 64, 64, 32, torch.float32, None, "bhsd"),
]


def case_id(c):
    b, h, hkv, nq, nk, d, dt, causal, layout = c
    return f"B{b}-H{h}-Hkv{hkv}-Nq{nq}-Nk{nk}-D{d}-{str(dt)[6:]}-{causal or 'none'}-{layout}"


def make_inputs(case, requires_grad=True, seed=0):
    b, h, hkv, nq, nk, d, dt, _, layout = case
    g = torch.Generator(device=DEV).manual_seed(seed)
    qs, ks = ((b, h, nq, d), (b, hkv, nk, d)) if layout == "bhsd" else ((b, nq, h, d), (b, nk, hkv, d))
    q, k, v = (torch.randn(s, generator=g, device=DEV, dtype=dt) for s in (qs, ks, ks))
    return [t.requires_grad_(requires_grad) for t in (q, k, v)]


def sdpa(q, k, v, causal, layout):
    """SDPA in the inputs' dtype (or float64 for the reference): GQA by repeating kv heads, bottom-right
    causality by an explicit mask (SDPA's is_causal is top-left)."""
    if layout == "bshd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    nq, nk = q.shape[2], k.shape[2]
    mask = None
    if causal is not None:
        i = torch.arange(nq, device=q.device)[:, None]
        j = torch.arange(nk, device=q.device)[None, :]
        mask = j <= i if causal == "top-left" else j <= i + nk - nq
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return o.transpose(1, 2) if layout == "bshd" else o


def err(x, ref):
    return ((x.double() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_forward_and_gradients_match_reference_as_closely_as_sdpa(case):
    causal, layout = case[7], case[8]
    q, k, v = make_inputs(case)
    o = kiln.attention(q, k, v, causal=causal, layout=layout)
    do = torch.randn_like(o)
    o.backward(do)
    grads = [t.grad.clone() for t in (q, k, v)]

    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    o64 = sdpa(q64, k64, v64, causal, layout)
    o64.backward(do.double())
    qs, ks, vs = (t.detach().clone().requires_grad_() for t in (q, k, v))
    os_ = sdpa(qs, ks, vs, causal, layout)
    os_.backward(do)

    slack = 1e-3 if case[6] != torch.float32 else 1e-5
    assert err(o, o64) <= 2 * err(os_, o64) + slack, (err(o, o64), err(os_, o64))
    for name, mine, theirs, ref in zip("qkv", grads, (qs.grad, ks.grad, vs.grad), (q64.grad, k64.grad, v64.grad)):
        assert mine.shape == ref.shape and mine.dtype == q.dtype
        assert err(mine, ref) <= 2 * err(theirs, ref) + 2 * slack, (name, err(mine, ref), err(theirs, ref))


def test_lse_matches_logsumexp():
    case = CASES[1]
    q, k, v = make_inputs(case, requires_grad=False)
    o, lse = kiln.attention(q, k, v, causal="top-left", return_lse=True)
    ke = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1).double()
    s = q.double() @ ke.transpose(-1, -2) / q.shape[-1] ** 0.5
    s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool, device=DEV).tril(), float("-inf"))
    torch.testing.assert_close(lse.double(), torch.logsumexp(s, dim=-1), rtol=1e-4, atol=1e-4)
    assert not lse.requires_grad


def test_backward_api_matches_autograd():
    case = CASES[0]
    q, k, v = make_inputs(case, requires_grad=False)
    o, lse = kiln.attention(q, k, v, return_lse=True)
    do = torch.randn_like(o)
    dq, dk, dv = kiln.attention_backward(do, q, k, v, o, lse)
    qa, ka, va = (t.clone().requires_grad_() for t in (q, k, v))
    kiln.attention(qa, ka, va).backward(do)
    for x, y in zip((dq, dk, dv), (qa.grad, ka.grad, va.grad)):
        torch.testing.assert_close(x, y, rtol=0, atol=0)  # deterministic: bitwise equal


class Block(torch.nn.Module):
    def __init__(self, dim=256, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)

    def forward(self, x):
        b, n, dim = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, dim // self.heads).unbind(2)  # bshd views
        o = kiln.attention(q, k, v, causal="top-left", layout="bshd")
        return self.out(o.reshape(b, n, dim))


def test_torch_compile_fullgraph_matches_eager():
    torch.manual_seed(0)
    block = Block().to(DEV, torch.float16)
    x = torch.randn(2, 128, 256, device=DEV, dtype=torch.float16, requires_grad=True)
    eager = block(x)
    eager.sum().backward()
    eager_grad = x.grad.clone()
    x.grad = None
    compiled = torch.compile(block, fullgraph=True)
    out = compiled(x)
    out.sum().backward()
    torch.testing.assert_close(out, eager, rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(x.grad, eager_grad, rtol=2e-3, atol=2e-3)


def test_cuda_graph_capture_and_replay_forward():
    case = CASES[0]
    q, k, v = make_inputs(case, requires_grad=False)
    kiln.attention(q, k, v)  # compile (and tune, if asked) outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        with torch.cuda.graph(g):
            o = kiln.attention(q, k, v)
    torch.cuda.current_stream().wait_stream(s)
    q2, k2, v2 = make_inputs(case, requires_grad=False, seed=7)
    q.copy_(q2), k.copy_(k2), v.copy_(v2)
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(o, kiln.attention(q2, k2, v2), rtol=0, atol=0)


@pytest.mark.parametrize("deterministic", [True, False])
def test_cuda_graph_capture_and_replay_forward_and_backward(deterministic):
    """Forward and backward captured in one CUDA graph: the backward runs on a workspace torch allocates (no
    allocation or synchronisation inside libkiln) and nothing is tuned while capturing. Replayed on new inputs,
    the gradients equal eager ones bitwise (deterministic) or to f32-atomic rounding."""
    case = CASES[1]  # GQA, causal
    causal = case[7]
    q, k, v = make_inputs(case)
    do = torch.randn(q.shape, device=DEV, dtype=q.dtype)

    def step():
        for t in (q, k, v):
            t.grad = None
        kiln.attention(q, k, v, causal=causal, deterministic=deterministic).backward(do)
        return q.grad, k.grad, v.grad

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()  # warm up on the capture stream: compile (and tune, if asked) outside the capture
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        grads = step()
    q2, k2, v2 = make_inputs(case, seed=11)
    with torch.no_grad():
        q.copy_(q2), k.copy_(k2), v.copy_(v2)
        do.copy_(torch.randn_like(do))
    g.replay()
    torch.cuda.synchronize()
    captured = [t.clone() for t in grads]
    eager = step()
    tol = 0 if deterministic else 1e-2
    for x, y in zip(captured, eager):
        assert torch.isfinite(x).all()
        torch.testing.assert_close(x, y, rtol=tol, atol=tol)


def test_tune_attention_returns_the_config_forward_then_uses():
    case = CASES[0]
    q, k, v = make_inputs(case, requires_grad=False)
    picked = kiln.tune("attention", q, k, v)
    assert picked["kernel"] == "fa2_fwd" and picked["source"] == "tuned"
    assert {"BLOCK_M", "BLOCK_N", "num_warps", "num_stages"} <= set(picked["config"])
    assert picked["ms"] > 0 and any(row["status"] == "ok" for row in picked["table"])
    again = kiln.tune("attention", q, k, v, cached=True)  # remembered: no timing run
    assert again["config"] == picked["config"]


def test_tune_registered_kernel_leaves_its_tensors_alone():
    x = torch.randn(5000, device=DEV)
    y = torch.randn(5000, device=DEV)
    out = torch.zeros_like(x)
    picked = kiln.tune("vector_add", x, y, out, n=x.numel())
    assert picked["kernel"] == "vector_add" and "num_warps" in picked["config"]
    torch.cuda.synchronize()
    assert (out == 0).all()  # timing launches write scratch copies


def test_exact_masked_v_on_cuda():
    case = CASES[0]
    q, k, v = make_inputs(case, requires_grad=False)
    n = q.shape[2]
    v[:, :, n - 1] = float("nan")  # the last key: hidden from every row but the last under top-left causality
    o = kiln.attention(q, k, v, causal="top-left", exact_masked_v=True)
    assert torch.isfinite(o[:, :, : n - 1]).all()
    ref = sdpa(q.double(), k.double(), torch.nan_to_num(v.double()), "top-left", "bhsd")
    torch.testing.assert_close(o[:, :, : n - 1].double(), ref[:, :, : n - 1], rtol=2e-3, atol=2e-3)


def test_eager_no_grad_call_skips_the_dispatch_but_not_the_result():
    q, k, v = make_inputs(CASES[1], requires_grad=False)
    fast = kiln.attention(q, k, v, causal="top-left")  # no gradient wanted: the op's body directly
    through_op, _ = torch.ops.kiln.attention_fwd(q, k, v, 1, 0.0, "bhsd", False, True, False, "", "", [], None, 0)
    torch.testing.assert_close(fast, through_op, rtol=0, atol=0)
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:  # a dispatch mode: the op (its fake implementation) runs
        fq, fk, fv = (mode.from_tensor(t) for t in (q, k, v))
        assert kiln.attention(fq, fk, fv, causal="top-left").shape == q.shape


def test_eager_calls_without_lse_reuse_a_scratch_per_stream_and_give_the_same_o():
    """An eager call that returns O alone writes LSE into a scratch kept per signature and stream: repeated
    calls and calls on a second stream give the O of a call that returns LSE, each stream with its own scratch.
    (A capture allocates instead: test_cuda_graph_capture_and_replay_forward.)"""
    from kiln import torch_ops
    q, k, v = make_inputs(CASES[1], requires_grad=False)
    expected, lse = kiln.attention(q, k, v, causal="top-left", return_lse=True)
    outs = [kiln.attention(q, k, v, causal="top-left") for _ in range(3)]
    # This signature's cached call (the scale as kiln.attention passes it: 0.0 is 1/sqrt(D)).
    hit = torch_ops._local.calls[torch_ops._forward_key(q, k, v, 1, 0.0, "bhsd", False, True, False)]
    scratches = [hit[2][2]]
    assert any(len(sc) == 1 for sc in scratches), "no scratch LSE was kept for the repeated calls"
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        outs.append(kiln.attention(q, k, v, causal="top-left"))
    s.synchronize()
    assert any(len(sc) == 2 for sc in scratches), "the second stream did not get its own scratch"
    for o in outs:
        torch.testing.assert_close(o, expected, rtol=0, atol=0)
    # The scratch was written, not the returned LSE's memory.
    again, lse_again = kiln.attention(q, k, v, causal="top-left", return_lse=True)
    torch.testing.assert_close(lse_again, lse, rtol=0, atol=0)


def test_eager_grad_call_skips_the_dispatch_but_not_the_gradients():
    """An eager call that wants a gradient runs torch_ops' autograd.Function, not the custom op: same O, same
    dQ, dK, dV (deterministic backward) as through the op and its registered autograd formula."""
    q, k, v = make_inputs(CASES[1], requires_grad=True)
    o = kiln.attention(q, k, v, causal="top-left")
    assert "EagerAttention" in type(o.grad_fn).__name__
    dout = torch.randn_like(o)
    fast = torch.autograd.grad(o, (q, k, v), dout)
    through_op, _ = torch.ops.kiln.attention_fwd(q, k, v, 1, 0.0, "bhsd", False, True, False, "", "", [], None, 0)
    assert "EagerAttention" not in type(through_op.grad_fn).__name__
    torch.testing.assert_close(o, through_op, rtol=0, atol=0)
    for a, b in zip(fast, torch.autograd.grad(through_op, (q, k, v), dout)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_non_default_stream():
    case = CASES[1]
    q, k, v = make_inputs(case, requires_grad=False)
    expected = kiln.attention(q, k, v, causal="top-left")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        o = kiln.attention(q, k, v, causal="top-left")
    s.synchronize()
    torch.testing.assert_close(o, expected, rtol=0, atol=0)


def test_opcheck():
    q, k, v = make_inputs(CASES[1])
    torch.library.opcheck(torch.ops.kiln.attention_fwd,
                          (q, k, v, 1, 0.0, "bhsd", False, True, False, "", "", [], None, 0))


def test_errors_name_the_mistake():
    q, k, v = make_inputs(CASES[0], requires_grad=False)
    with pytest.raises(kiln.KilnError, match="rank 4"):
        kiln.attention(q[0], k[0], v[0])
    with pytest.raises(kiln.KilnError, match="f32"):
        kiln.attention(q, k.float(), v)


def test_run_vector_add_on_cuda_tensors():
    x = torch.randn(5000, device=DEV)
    y = torch.randn(5000, device=DEV)
    out = torch.empty_like(x)
    kiln.run("vector_add", x, y, out, n=x.numel())
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)
