"""kiln.attention with library mods on torch tensors (CUDA on the GPU, and CPU tensors through the
interpreter): forward and gradients against a float64 torch reference with the same mods, the sink logits'
gradient through autograd, constants' requires_grad refused, torch.compile(fullgraph=True) with mods, and
kiln.attention_backward's return_dsink. Skipped where torch, CUDA or a GPU kiln can use is missing."""

import os

import pytest

from gpu_torch import require_torch_on_gpu

torch = require_torch_on_gpu()

import kiln  # noqa: E402

DEV = torch.device("cuda", int(os.environ.get("KILN_DEVICE", "0") or 0))
B, H, N, D = 2, 4, 128, 64
CPU_SIZES = (1, 4, 48, 16)  # the interpreter runs CPU tensors: small


def sizes(device):
    return CPU_SIZES if torch.device(device).type == "cpu" else (B, H, N, D)


def reference(q, k, v, score=None, mask=None, sinks=None):
    """Attention in float64 with a score function score(s, b, h, i, j), a boolean mask(b, h, i, j) and per-head
    sink logits; differentiable in q, k, v and sinks (torch's autograd)."""
    q, k, v = (t.double() for t in (q, k, v))
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    b = torch.arange(s.shape[0], device=s.device)[:, None, None, None]
    h = torch.arange(s.shape[1], device=s.device)[None, :, None, None]
    i = torch.arange(s.shape[2], device=s.device)[None, None, :, None]
    j = torch.arange(s.shape[3], device=s.device)[None, None, None, :]
    if score is not None:
        s = score(s, b, h, i, j)
    if mask is not None:
        s = s.masked_fill(~mask(b, h, i, j).expand(s.shape), float("-inf"))
    if sinks is not None:
        sink = sinks.double()[None, :, None, None].expand(s.shape[0], -1, s.shape[2], 1)
        p = torch.softmax(torch.cat([s, sink], dim=-1), dim=-1)[..., :-1]
    else:
        p = torch.softmax(s, dim=-1)
    return p @ v


def inputs(dtype=torch.float16, device=DEV, seed=0):
    g = torch.Generator(device=device).manual_seed(seed)
    return [torch.randn(sizes(device), generator=g, device=device, dtype=dtype).requires_grad_() for _ in range(3)]


SLOPES = [2.0 ** (-8 * (h + 1) / H) for h in range(H)]


def cases(device):
    slopes = torch.tensor(SLOPES, device=device)
    b, _, n, _ = sizes(device)
    doc = (torch.arange(n, device=device) // 40).to(torch.int32).expand(b, n).contiguous()
    return {
        "causal": ("causal", {}, None, lambda b, h, i, j: j <= i),
        "sliding_window": ("sliding_window=32,0", {}, None, lambda b, h, i, j: (j >= i - 32) & (j <= i)),
        "softcap": ("softcap=20", {}, lambda s, b, h, i, j: 20 * torch.tanh(s / 20), None),
        "alibi": ("alibi", {"alibi_slopes": slopes},
                  lambda s, b, h, i, j: s + slopes.double()[h] * (j - i), None),
        "document": (["document", "prefix_lm=16"], {"q_doc": doc, "kv_doc": doc}, None,
                     lambda b, h, i, j: (doc[b, i] == doc[b, j]) & ((j < 16) | (j <= i))),
        # Your own mods, as expressions: softcapped ALiBi in a causal window over documents.
        "expressions": (["score=20 * tanh(score / 20) + slopes[h] * (kv_idx - q_idx)",
                         "mask=kv_idx <= q_idx && kv_idx > q_idx - 48 && d:i32[b, q_idx] == d:i32[b, kv_idx]"],
                        {"slopes": slopes, "d": doc},  # one tensor read along the queries and the keys
                        lambda s, b, h, i, j: 20 * torch.tanh(s / 20) + slopes.double()[h] * (j - i),
                        lambda b, h, i, j: (j <= i) & (j > i - 48) & (doc[b, i] == doc[b, j])),
    }


def close(out, ref, tol):
    err = (out.double() - ref).norm() / ref.norm()
    assert err < tol, f"relative L2 error {err:.2e} >= {tol:.0e}"


@pytest.mark.parametrize("device", ["cuda", "cpu"])
@pytest.mark.parametrize("name", ["causal", "sliding_window", "softcap", "alibi", "document", "expressions"])
def test_forward_and_gradients_with_mods(name, device):
    dev = DEV if device == "cuda" else torch.device("cpu")
    dtype = torch.float16 if device == "cuda" else torch.float32
    mods, tensors, score, mask = cases(dev)[name]
    q, k, v = inputs(dtype, dev)
    o = kiln.attention(q, k, v, mods=mods, mod_tensors=tensors)
    ref = reference(q, k, v, score, mask)
    tol = 2e-3 if dtype == torch.float16 else 1e-5
    close(o, ref, tol)
    do = torch.randn_like(o)
    grads = torch.autograd.grad(o, (q, k, v), do)
    ref_grads = torch.autograd.grad(ref, (q, k, v), do.double())
    for g, r in zip(grads, ref_grads):
        close(g, r, 10 * tol)


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_sinks_gradient_through_autograd(device):
    dev = DEV if device == "cuda" else torch.device("cpu")
    dtype = torch.float16 if device == "cuda" else torch.float32
    q, k, v = inputs(dtype, dev, seed=1)
    sinks = torch.tensor([0.5, -1.0, 2.0, 0.0], device=dev, requires_grad=True)
    o = kiln.attention(q, k, v, causal="top-left", mods="sinks;softcap=30", mod_tensors={"sinks": sinks})
    ref = reference(q, k, v, lambda s, b, h, i, j: 30 * torch.tanh(s / 30), lambda b, h, i, j: j <= i, sinks)
    tol = 2e-3 if dtype == torch.float16 else 1e-5
    close(o, ref, tol)
    do = torch.randn_like(o)
    got = torch.autograd.grad(o, (q, k, v, sinks), do)
    want = torch.autograd.grad(ref, (q, k, v, sinks), do.double())
    for g, r in zip(got, want):
        close(g, r, 10 * tol)
    assert got[3].shape == sinks.shape and got[3].dtype == torch.float32


def test_attention_backward_returns_dsink():
    q, k, v = (t.detach() for t in inputs(seed=2))
    sinks = torch.tensor([0.5, -1.0, 2.0, 0.0], device=DEV)
    o, lse = kiln.attention(q, k, v, mods="sinks", mod_tensors={"sinks": sinks}, return_lse=True)
    do = torch.randn_like(o)
    dq, dk, dv, dsink = kiln.attention_backward(do, q, k, v, o, lse, mods="sinks", mod_tensors={"sinks": sinks},
                                                return_dsink=True)
    sinks_ref = sinks.clone().requires_grad_()
    ref = reference(q, k, v, sinks=sinks_ref)
    (want,) = torch.autograd.grad(ref, (sinks_ref,), do.double())
    close(dsink, want, 2e-2)


def test_constant_mod_tensor_that_requires_grad_is_refused():
    q, k, v = inputs()
    slopes = torch.tensor(SLOPES, device=DEV, requires_grad=True)
    with pytest.raises(kiln.KilnError, match="alibi_slopes.*requires grad.*constants"):
        kiln.attention(q, k, v, mods="alibi", mod_tensors={"alibi_slopes": slopes})
    kiln.attention(q, k, v, mods="alibi", mod_tensors={"alibi_slopes": slopes.detach()})


def test_torch_compile_fullgraph_with_mods():
    q, k, v = inputs(seed=3)
    slopes = torch.tensor(SLOPES, device=DEV)
    sinks = torch.zeros(H, device=DEV, requires_grad=True)

    def f(q, k, v, sinks):
        o = kiln.attention(q, k, v, mods=["sliding_window=64,0", "alibi", "sinks"],
                           mod_tensors={"alibi_slopes": slopes, "sinks": sinks})
        return (o.float() ** 2).sum()

    eager = f(q, k, v, sinks)
    eager_grads = torch.autograd.grad(eager, (q, k, v, sinks))
    compiled = torch.compile(f, fullgraph=True)
    out = compiled(q, k, v, sinks)
    grads = torch.autograd.grad(out, (q, k, v, sinks))
    torch.testing.assert_close(out, eager, rtol=1e-3, atol=1e-3)
    for g, e in zip(grads, eager_grads):
        torch.testing.assert_close(g, e, rtol=1e-2, atol=1e-2)


def test_opcheck_with_mods():
    q, k, v = (t.detach() for t in inputs(seed=4))
    slopes = torch.tensor(SLOPES, device=DEV)
    sinks = torch.zeros(H, device=DEV)
    args = (q, k, v, 1, 0.125, "bhsd", False, True, False, "alibi;sinks", "alibi_slopes", [slopes], sinks, 0)
    torch.library.opcheck(torch.ops.kiln.attention_fwd.default, args,
                          test_utils=("test_schema", "test_faketensor"))
