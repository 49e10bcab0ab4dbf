"""kiln.attention and kiln.attention_backward: FlashAttention-2 through libkiln. NumPy arrays run in kiln's
interpreter; torch tensors go through the torch custom ops (kiln/torch_ops.py: CUDA tensors on the GPU, CPU
tensors in the interpreter), which are differentiable and traceable by torch.compile."""

import ctypes

from . import _lib
from ._block_mask import check_block_mask
from ._tensor import describe, is_numpy, is_torch
from .errors import KilnError

_CAUSAL = {None: _lib.CAUSAL_NONE, False: _lib.CAUSAL_NONE, "none": _lib.CAUSAL_NONE,
           True: _lib.CAUSAL_TOP_LEFT, "top-left": _lib.CAUSAL_TOP_LEFT,
           "bottom-right": _lib.CAUSAL_BOTTOM_RIGHT}
_LAYOUT = {"bhsd": _lib.LAYOUT_BHSD, "bshd": _lib.LAYOUT_BSHD}


def causal_code(causal):
    """None/False, "top-left"/True (PyTorch's is_causal) or "bottom-right" as kiln_causal."""
    code = _CAUSAL.get(causal, -1) if isinstance(causal, (str, bool, type(None))) else -1
    if code < 0:
        raise KilnError(f"causal must be None, 'top-left' (or True) or 'bottom-right'; got {causal!r}")
    return code


def layout_code(layout):
    code = _LAYOUT.get(layout, -1) if isinstance(layout, str) else -1
    if code < 0:
        raise KilnError(f"layout must be 'bhsd' ([B, H, N, D]) or 'bshd' ([B, N, H, D]); got {layout!r}")
    return code


def scale_value(scale):
    """None: 1/sqrt(D) (kiln's 0). An explicit 0 would silently mean the default, so it is refused."""
    if scale is None:
        return 0.0
    if not isinstance(scale, (int, float)) or isinstance(scale, bool):
        raise KilnError(f"scale must be a number or None (1/sqrt(D)); got {scale!r}")
    if scale == 0:
        raise KilnError("scale must be nonzero (None means 1/sqrt(D)); got 0")
    return float(scale)


def mods_spec(mods):
    """`mods` (None, a spec string or a list/tuple of them) as one ';'-separated spec string ("" for none);
    kiln parses it (kernels/attention/attention_mod_spec.h) and names a bad spec."""
    if mods is None:
        return ""
    if isinstance(mods, str):
        return mods
    if isinstance(mods, (list, tuple)) and all(isinstance(m, str) for m in mods):
        return ";".join(mods)
    raise KilnError(f"mods must be None, a mod spec string (e.g. 'causal;softcap=30') or a list of them; got "
                    f"{mods!r}")


def mod_tensor_items(mod_tensors):
    """`mod_tensors` (None or a dict name -> array/tensor) as a list of (name, array) pairs, in the dict's order."""
    if mod_tensors is None:
        return []
    if not isinstance(mod_tensors, dict):
        raise KilnError(f"mod_tensors must be None or a dict from the tensor's name (e.g. 'alibi_slopes') to an "
                        f"array; got {type(mod_tensors).__name__}")
    for name in mod_tensors:
        if not isinstance(name, str) or not name:
            raise KilnError(f"mod_tensors: names must be non-empty strings; got {name!r}")
    return list(mod_tensors.items())


def lse_shape(q, layout):
    """[B, H, N_Q] of q in `layout`, or None when q is not 4-D (kiln then names the rank error)."""
    if len(q.shape) != 4:
        return None
    b, x, y, _ = q.shape
    return (b, x, y) if layout == "bhsd" else (b, y, x)


# kiln.torch_ops once it is imported (it sets this): torch tensors are then told apart by one isinstance against
# torch.Tensor, which torch.compile traces without a graph break.
_torch_ops = None


def _torch_ops_for(x):
    """kiln.torch_ops when `x` is a torch tensor, else None; torch is never imported for a NumPy array."""
    if _torch_ops is not None:
        return _torch_ops if isinstance(x, _torch_ops.torch.Tensor) else None
    if is_torch(x):
        from . import torch_ops
        return torch_ops
    return None


def _check_numpy(arrays, names):
    for a, n in zip(arrays, names):
        if not is_numpy(a):
            raise KilnError(f"{n}: expected NumPy arrays or torch tensors; got {type(a).__name__}")


def attention(q, k, v, *, causal=None, scale=None, layout="bhsd", return_lse=False, deterministic=True,
              tf32=False, exact_masked_v=False, mods=None, mod_tensors=None, block_mask=None):
    """softmax(q kᵀ · scale) v per (batch, head): O shaped like q, and LSE f32 [B, H, N_Q] (natural log) when
    return_lse. q [B, H, N_Q, D], k and v [B, H_KV, N_K, D] (bshd: [B, N, H, D]); H a multiple of H_KV
    (GQA/MQA). causal: None, "top-left" (PyTorch's is_causal; True is accepted) or "bottom-right"
    (FlashAttention >= 2.1). scale None is 1/sqrt(D). tf32: f32 inputs on tensor cores (GPU). exact_masked_v:
    keys a row does not see add exactly nothing to it even where their V holds NaN or inf (by default, as in
    PyTorch and FlashAttention, such a V can turn rows of the causal diagonal's tiles into NaN; the exact code
    costs 7-18 %).
    mods: kiln's library score/mask/sink mods as a spec string or a list of them ("causal", "sliding_window=
    LEFT[,RIGHT]", "prefix_lm=N", "softcap=CAP", "alibi", "document", "bias[=f32|f16|bf16]", "sinks"; several
    in one string are ';'-separated), applied on top of `causal`, or your own as expressions, "score=30 *
    tanh(score / 30)", "mask=kv_idx <= q_idx && kv_idx > q_idx - 256", "score=score + slopes[h] * (kv_idx -
    q_idx)" (kernels/attention/attention_mod_expr.h has the language). mod_tensors: the tensors they read, by name
    ("alibi_slopes" f32 [H], "q_doc" / "kv_doc" int32 [B, N_Q] / [B, N_K], "bias" [B, H, N_Q, N_K], "sinks"
    f32 [H]; any dim may be 1), NumPy arrays or tensors like q. Under autograd, "sinks" gets its gradient; the
    other mod tensors are constants (one that requires grad is an error: detach it).
    block_mask: a kiln.BlockMask (kiln.block_mask) built for these sizes, this causal mode and these mask mods
    (with the same tensors' values), made for this memory ("cuda" for CUDA tensors, "cpu" for NumPy arrays and CPU
    tensors): the kernels visit only the key tiles it lists, at its tiles. The result is the same as without it.
    torch tensors go through the custom op torch.ops.kiln.attention_fwd (differentiable; `deterministic`
    applies to its backward; eager calls that need no gradient run its body without the dispatch): CUDA tensors on the GPU, CPU tensors in the interpreter. NumPy arrays run in
    kiln's interpreter."""
    c, lay, s = causal_code(causal), layout_code(layout), scale_value(scale)
    spec, named = mods_spec(mods), mod_tensor_items(mod_tensors)
    bm = check_block_mask(block_mask)
    ops = _torch_ops_for(q)
    if ops is not None:
        if spec or named or bm is not None:
            o, lse = ops.forward_with_mods(q, k, v, c, s, layout, bool(tf32), bool(deterministic),
                                           bool(exact_masked_v), spec, named, block_mask)
        else:
            o, lse = ops.forward(q, k, v, c, s, layout, bool(tf32), bool(deterministic), bool(exact_masked_v),
                                 want_lse=bool(return_lse))
        return (o, lse) if return_lse else o
    _check_numpy((q, k, v), ("q", "k", "v"))
    _check_numpy([t for _, t in named], [f"mod_tensors['{n}']" for n, _ in named])
    import numpy as np
    o = np.empty(q.shape, dtype=q.dtype)
    shape = lse_shape(q, layout)
    lse = np.empty(shape, dtype=np.float32) if (return_lse and shape is not None) else None
    forward_host(q, k, v, o, lse, c, lay, s, tf32=tf32, exact_masked_v=exact_masked_v, mods=spec, mod_tensors=named,
                 block_mask=bm)
    return (o, lse) if return_lse else o


def attention_backward(dout, q, k, v, o, lse, *, causal=None, scale=None, layout="bhsd", deterministic=True,
                       tf32=False, exact_masked_v=False, mods=None, mod_tensors=None, return_dsink=False,
                       block_mask=None):
    """dQ, dK, dV of attention from the forward's inputs, its O and LSE (return_lse=True) and the output
    gradient dout (shaped like q), with the forward's mods, mod_tensors and block_mask (over a block mask the
    backward runs at its tiles and is always deterministic). return_dsink (with the "sinks" mod):
    also d loss / d sinks, f32 [H], as a fourth result. torch tensors: torch.ops.kiln.attention_bwd; NumPy: the
    interpreter."""
    c, lay, s = causal_code(causal), layout_code(layout), scale_value(scale)
    spec, named = mods_spec(mods), mod_tensor_items(mod_tensors)
    bm = check_block_mask(block_mask)
    if not isinstance(return_dsink, bool):
        raise KilnError(f"return_dsink must be True or False; got {return_dsink!r}")
    ops = _torch_ops_for(q)
    if ops is not None:
        grads = ops.backward_with_mods(dout, q, k, v, o, lse, c, s, layout, bool(tf32), bool(deterministic),
                                       bool(exact_masked_v), spec, named, return_dsink, block_mask)
        return grads if return_dsink else grads[:3]
    _check_numpy((dout, q, k, v, o, lse), ("dout", "q", "k", "v", "o", "lse"))
    _check_numpy([t for _, t in named], [f"mod_tensors['{n}']" for n, _ in named])
    import numpy as np
    dq, dk, dv = (np.empty(x.shape, dtype=x.dtype) for x in (q, k, v))
    dsink = None
    if return_dsink:
        shape = lse_shape(q, layout)
        dsink = np.empty((shape[1],) if shape else (0,), dtype=np.float32)
    backward_host(q, k, v, o, lse, dout, dq, dk, dv, c, lay, s, deterministic=deterministic, tf32=tf32,
                  exact_masked_v=exact_masked_v, mods=spec, mod_tensors=named, dsink=dsink, block_mask=bm)
    return (dq, dk, dv, dsink) if return_dsink else (dq, dk, dv)


def _tensors(names, arrays):
    return [None if a is None else ctypes.byref(describe(a, n)) for n, a in zip(names, arrays)]


def described_mods(opts, spec, named, dsink=None):
    """Sets opts' mods, mod tensors (pairs name, array/tensor) and dsink (an array/tensor or None) from the
    arrays' descriptions (kept alive by opts)."""
    structs = [(n, describe(t, f"mod_tensors['{n}']")) for n, t in named]
    return _lib.set_mods(opts, spec, structs, None if dsink is None else describe(dsink, "dsink"))


def forward_host(q, k, v, o, lse, causal, layout, scale, tf32=False, exact_masked_v=False, mods="",
                 mod_tensors=(), block_mask=None):
    """kiln_attention_forward_host on caller-owned host arrays (o and lse written in place); block_mask: a
    kiln_block_mask* (BlockMask.handle) or None."""
    opts = _lib.attention_options(causal, layout, scale, tf32=tf32, exact_masked_v=exact_masked_v)
    described_mods(opts, mods, mod_tensors)
    opts.block_mask = block_mask
    args = _tensors(("q", "k", "v", "o", "lse"), (q, k, v, o, lse))
    _lib.check(_lib.lib().kiln_attention_forward_host(*args, ctypes.byref(opts)))


def backward_host(q, k, v, o, lse, dout, dq, dk, dv, causal, layout, scale, deterministic=True, tf32=False,
                  exact_masked_v=False, mods="", mod_tensors=(), dsink=None, block_mask=None):
    """kiln_attention_backward_host on caller-owned host arrays (dq, dk, dv and dsink written in place)."""
    opts = _lib.attention_options(causal, layout, scale, deterministic=deterministic, tf32=tf32,
                                  exact_masked_v=exact_masked_v)
    described_mods(opts, mods, mod_tensors, dsink)
    opts.block_mask = block_mask
    args = _tensors(("q", "k", "v", "o", "lse", "dout", "dq", "dk", "dv"), (q, k, v, o, lse, dout, dq, dk, dv))
    _lib.check(_lib.lib().kiln_attention_backward_host(*args, ctypes.byref(opts)))
