"""kiln.block_mask with torch tensors: a block mask made on the GPU (kiln_block_mask_create_cuda, on torch's
current stream) or for CPU tensors (the interpreter), then kiln.attention and its gradients through the custom
ops over it, equal to the same calls without it and to a float64 reference; a document mask read from CUDA
tensors; a block mask of the other memory refused; torch.compile(fullgraph=True) over one; opcheck of the ops
with a block mask id; a freed block mask's id refused. Skipped where torch, CUDA or a GPU kiln can use is
missing."""

import gc
import os

import pytest

from gpu_torch import require_torch_on_gpu

torch = require_torch_on_gpu()

import kiln  # noqa: E402

DEV = torch.device("cuda", int(os.environ.get("KILN_DEVICE", "0") or 0))
B, H, N, D = 2, 4, 256, 64
CPU_SIZES = (1, 2, 48, 16)  # the interpreter runs CPU tensors: small
TILES = {"cuda": (128, 64), "cpu": (16, 16)}


def sizes(device):
    return CPU_SIZES if device.type == "cpu" else (B, H, N, D)


def inputs(device, dtype, seed=0):
    g = torch.Generator(device=device).manual_seed(seed)
    return [torch.randn(sizes(device), generator=g, device=device, dtype=dtype).requires_grad_() for _ in range(3)]


def reference(q, k, v, mask):
    """softmax(q kᵀ / sqrt(D), hidden keys -inf) v in float64, differentiable in q, k, v."""
    q, k, v = (t.double() for t in (q, k, v))
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    b = torch.arange(s.shape[0], device=s.device)[:, None, None, None]
    i = torch.arange(s.shape[2], device=s.device)[None, None, :, None]
    j = torch.arange(s.shape[3], device=s.device)[None, None, None, :]
    s = s.masked_fill(~mask(b, i, j).expand(s.shape), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def close(out, ref, tol):
    err = (out.double() - ref).norm() / ref.norm()
    assert err < tol, f"relative L2 error {err:.2e} >= {tol:.0e}"


def cases(device):
    b, _, n, _ = sizes(device)
    doc = (torch.arange(n, device=device) * 3 // n).to(torch.int32).expand(b, n).contiguous()  # three documents
    return {
        "causal": ("causal", {}, lambda b, i, j: j <= i),
        "sliding_window": ("sliding_window=40,0", {}, lambda b, i, j: (j >= i - 40) & (j <= i)),
        "document": ("document", {"q_doc": doc, "kv_doc": doc}, lambda b, i, j: doc[b, i] == doc[b, j]),
    }


def lists_are_runs(mask, device, block_m, block_n):
    """Whether every query tile's full and partial key tiles (of every batch) are each one run of tiles."""
    b, _, n, _ = sizes(device)
    seen = mask(torch.arange(b, device=device)[:, None, None], torch.arange(n, device=device)[None, :, None],
                torch.arange(n, device=device)[None, None, :]).expand(b, n, n).cpu()
    for bi in range(b):
        for m0 in range(0, n, block_m):
            full, partial = [], []
            for t, n0 in enumerate(range(0, n, block_n)):
                tile = seen[bi, m0:m0 + block_m, n0:n0 + block_n]
                if bool(tile.all()):
                    full.append(t)
                elif bool(tile.any()):
                    partial.append(t)
            for tiles in (full, partial):
                if tiles and tiles != list(range(tiles[0], tiles[-1] + 1)):
                    return False
    return True


def block_mask_for(device, mods, tensors, **kw):
    b, h, n, _ = sizes(device)
    block_m, block_n = TILES[device.type]
    return kiln.block_mask(b, h, n, n, block_m=block_m, block_n=block_n, mods=mods, mod_tensors=tensors,
                           device=device.type, **kw)


@pytest.mark.parametrize("device", ["cuda", "cpu"])
@pytest.mark.parametrize("name", ["causal", "sliding_window", "document"])
def test_forward_and_gradients_over_a_block_mask(name, device):
    dev = DEV if device == "cuda" else torch.device("cpu")
    dtype = torch.float16 if device == "cuda" else torch.float32
    mods, tensors, mask = cases(dev)[name]
    bm = block_mask_for(dev, mods, tensors)
    assert bm.on_cuda == (device == "cuda") and (bm.block_m, bm.block_n) == TILES[device]
    assert bm.runs == lists_are_runs(mask, dev, *TILES[device])
    q, k, v = inputs(dev, dtype)
    o = kiln.attention(q, k, v, mods=mods, mod_tensors=tensors, block_mask=bm)
    plain = kiln.attention(q, k, v, mods=mods, mod_tensors=tensors)
    ref = reference(q, k, v, mask)
    tol = 2e-3 if dtype == torch.float16 else 1e-5
    close(o, ref, tol)
    torch.testing.assert_close(o, plain, rtol=tol, atol=tol)
    do = torch.randn_like(o)
    grads = torch.autograd.grad(o, (q, k, v), do)
    plain_grads = torch.autograd.grad(plain, (q, k, v), do)
    ref_grads = torch.autograd.grad(ref, (q, k, v), do.double())
    for g, p, r in zip(grads, plain_grads, ref_grads):
        close(g, r, 10 * tol)
        close(g, p.double(), 10 * tol)


def test_attention_backward_over_a_block_mask():
    mods, tensors, _ = cases(DEV)["document"]
    bm = block_mask_for(DEV, mods, tensors)
    q, k, v = (t.detach() for t in inputs(DEV, torch.float16, seed=1))
    o, lse = kiln.attention(q, k, v, mods=mods, mod_tensors=tensors, block_mask=bm, return_lse=True)
    do = torch.randn_like(o)
    got = kiln.attention_backward(do, q, k, v, o, lse, mods=mods, mod_tensors=tensors, block_mask=bm)
    want = kiln.attention_backward(do, q, k, v, o, lse, mods=mods, mod_tensors=tensors)
    for g, w in zip(got, want):
        close(g, w.double(), 2e-2)


def test_block_mask_of_the_other_memory_is_refused():
    q, k, v = (t.detach() for t in inputs(DEV, torch.float16))
    b, h, n, _ = sizes(DEV)
    host_bm = kiln.block_mask(b, h, n, n, block_m=128, block_n=64, mods="causal", device="cpu")
    with pytest.raises(kiln.KilnError, match="made by kiln_block_mask_create_host"):
        kiln.attention(q, k, v, mods="causal", block_mask=host_bm)
    cuda_bm = kiln.block_mask(1, 2, 48, 48, block_m=16, block_n=16, mods="causal", device="cuda")
    qc, kc, vc = (torch.randn(1, 2, 48, 16) for _ in range(3))
    with pytest.raises(kiln.KilnError, match="made by kiln_block_mask_create_cuda"):
        kiln.attention(qc, kc, vc, mods="causal", block_mask=cuda_bm)


def test_device_inferred_from_the_mod_tensors():
    mods, tensors, _ = cases(DEV)["document"]
    b, h, n, _ = sizes(DEV)
    assert kiln.block_mask(b, h, n, n, mods=mods, mod_tensors=tensors).on_cuda
    assert not kiln.block_mask(b, h, n, n, mods="causal").on_cuda  # no tensors, no device: the host


def test_mismatched_block_mask_is_a_kiln_error():
    bm = block_mask_for(DEV, "causal", {})
    q, k, v = (t.detach() for t in inputs(DEV, torch.float16))
    with pytest.raises(kiln.KilnError, match=r"block mask built for the mask mods \[causal_top_left\]"):
        kiln.attention(q, k, v, mods="sliding_window=40,0", block_mask=bm)
    with pytest.raises(kiln.KilnError, match=r"block mask built for B2 H4 H_KV4 N_Q256 N_K256"):
        kiln.attention(q[:, :, :128], k, v, mods="causal", block_mask=bm)


def test_torch_compile_fullgraph_over_a_block_mask():
    mods, tensors, _ = cases(DEV)["sliding_window"]
    bm = block_mask_for(DEV, mods, tensors)
    q, k, v = inputs(DEV, torch.float16, seed=3)

    def f(q, k, v):
        o = kiln.attention(q, k, v, mods=mods, block_mask=bm)
        return (o.float() ** 2).sum()

    eager = f(q, k, v)
    eager_grads = torch.autograd.grad(eager, (q, k, v))
    compiled = torch.compile(f, fullgraph=True)
    out = compiled(q, k, v)
    grads = torch.autograd.grad(out, (q, k, v))
    torch.testing.assert_close(out, eager, rtol=1e-3, atol=1e-3)
    for g, e in zip(grads, eager_grads):
        torch.testing.assert_close(g, e, rtol=1e-2, atol=1e-2)


def test_opcheck_with_a_block_mask():
    bm = block_mask_for(DEV, "causal", {})
    q, k, v = (t.detach() for t in inputs(DEV, torch.float16, seed=4))
    args = (q, k, v, 0, 0.125, "bhsd", False, True, False, "causal", "", [], None, bm.id)
    torch.library.opcheck(torch.ops.kiln.attention_fwd.default, args, test_utils=("test_schema", "test_faketensor"))


def test_a_freed_block_mask_id_is_refused_and_autograd_keeps_it_alive():
    q, k, v = inputs(DEV, torch.float16, seed=5)
    bm = block_mask_for(DEV, "causal", {})
    ident = bm.id
    o = kiln.attention(q, k, v, mods="causal", block_mask=bm)
    del bm
    gc.collect()
    o.float().sum().backward()  # the autograd context held the block mask until here
    assert q.grad is not None and torch.isfinite(q.grad).all()
    del o
    gc.collect()
    with pytest.raises(kiln.KilnError, match=rf"block mask id {ident} was freed"):
        torch.ops.kiln.attention_fwd(q.detach(), k.detach(), v.detach(), 0, 0.0, "bhsd", False, True, False,
                                     "causal", "", [], None, ident)
