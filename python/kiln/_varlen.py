"""kiln.attention_varlen and kiln.attention_varlen_backward: FlashAttention-2 over variable-length (packed)
batches, as FlashAttention's flash_attn_varlen_func, through libkiln. NumPy arrays run in kiln's interpreter;
torch tensors go through the custom ops of kiln/torch_varlen.py (CUDA tensors on the GPU, CPU tensors in the
interpreter), whose forward is differentiable and traceable by torch.compile."""

import ctypes

from . import _lib
from ._attention import _check_numpy, _tensors, causal_code, described_mods, mod_tensor_items, mods_spec, scale_value
from ._tensor import describe, is_numpy, is_torch
from .errors import KilnError

# kiln.torch_varlen once it is imported (it sets this), as _attention._torch_ops: torch tensors are then told
# apart by one isinstance, which torch.compile traces without a graph break.
_torch_varlen = None


def _torch_varlen_for(x):
    """kiln.torch_varlen when `x` is a torch tensor, else None; torch is never imported for a NumPy array."""
    if _torch_varlen is not None:
        return _torch_varlen if isinstance(x, _torch_varlen.torch.Tensor) else None
    if is_torch(x):
        from . import torch_varlen
        return torch_varlen
    return None


def seqlen_value(x, name):
    """A longest sequence length: a Python or NumPy integer (kiln checks its range)."""
    if isinstance(x, int) and not isinstance(x, bool):
        return x
    if is_numpy(x) and x.ndim == 0 and x.dtype.kind in "iu":
        return int(x)
    if type(x).__module__ == "numpy" and hasattr(x, "__index__"):
        return int(x)
    raise KilnError(f"{name} must be an int (the longest sequence's length); got {x!r}")


def flag_value(x, name):
    if not isinstance(x, bool):
        raise KilnError(f"{name} must be True or False; got {x!r}")
    return x


def _arguments(causal, scale, max_seqlen_q, max_seqlen_k, tf32, deterministic, exact_masked_v, check_offsets, mods,
               mod_tensors):
    """The forward's and the backward's keyword arguments checked and in the form the calls pass on: (causal
    code, scale, max_seqlen_q, max_seqlen_k, (tf32, deterministic, exact_masked_v, check_offsets), mods spec,
    [(name, mod tensor)])."""
    flags = (flag_value(tf32, "tf32"), flag_value(deterministic, "deterministic"),
             flag_value(exact_masked_v, "exact_masked_v"), flag_value(check_offsets, "check_offsets"))
    return (causal_code(causal), scale_value(scale), seqlen_value(max_seqlen_q, "max_seqlen_q"),
            seqlen_value(max_seqlen_k, "max_seqlen_k"), flags, mods_spec(mods), mod_tensor_items(mod_tensors))


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *, causal=None, scale=None,
                     return_lse=False, deterministic=True, tf32=False, exact_masked_v=False, mods=None,
                     mod_tensors=None, check_offsets=True):
    """Attention over B sequences packed along one token dim (FlashAttention's flash_attn_varlen_func): q
    [total_q, H, D], k and v [total_k, H_KV, D] (H a multiple of H_KV), cu_seqlens_q and cu_seqlens_k int32
    [B + 1] offsets from 0 (sequence b is rows cu_seqlens_q[b]:cu_seqlens_q[b + 1] of q against
    cu_seqlens_k[b]:cu_seqlens_k[b + 1] of k and v; lengths may be 0), max_seqlen_q / max_seqlen_k the longest
    lengths (ints). Returns O shaped like q, and LSE f32 [H, total_q] (natural log, FlashAttention's varlen
    layout) when return_lse. A row that sees no key gets O = 0 and LSE = -inf. causal: None, "top-left" (True) or
    "bottom-right" (FlashAttention >= 2.1), per sequence. scale None is 1/sqrt(D). mods, mod_tensors: kiln's
    library mods as in kiln.attention, applied per sequence (b the sequence, q_idx and kv_idx positions within
    it; a mod tensor's B, N_Q, N_K dims are B, max_seqlen_q, max_seqlen_k, or 1); no gradient of any mod tensor.
    check_offsets (CUDA tensors): copy the offsets to the host and check them before the launch (one
    synchronisation; skipped while a CUDA graph is being captured); False leaves them to the caller (wrong ones
    then give wrong results, never out-of-bounds accesses). NumPy arrays run in kiln's interpreter (offsets always
    checked); torch tensors go through torch.ops.kiln.attention_varlen_fwd (differentiable in q, k, v;
    `deterministic` is kept for the backward: False lets it add dQ by f32 atomics where the tuner times that
    pair of kernels the faster, as kiln.attention's backward does)."""
    c, s, max_q, max_k, flags, spec, named = _arguments(causal, scale, max_seqlen_q, max_seqlen_k, tf32,
                                                        deterministic, exact_masked_v, check_offsets, mods,
                                                        mod_tensors)
    ops = _torch_varlen_for(q)
    if ops is not None:
        o, lse = ops.forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_q, max_k, c, s, *flags, spec, named)
        return (o, lse) if return_lse else o
    _check_numpy((q, k, v, cu_seqlens_q, cu_seqlens_k), ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k"))
    _check_numpy([t for _, t in named], [f"mod_tensors['{n}']" for n, _ in named])
    import numpy as np
    o = np.empty(q.shape, dtype=q.dtype)
    lse = np.empty((q.shape[1], q.shape[0]), dtype=np.float32) if (return_lse and q.ndim == 3) else None
    forward_host(q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, max_q, max_k, c, s, tf32=tf32,
                 exact_masked_v=exact_masked_v, mods=spec, mod_tensors=named)
    return (o, lse) if return_lse else o


def attention_varlen_backward(dout, q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *,
                              causal=None, scale=None, deterministic=True, tf32=False, exact_masked_v=False,
                              mods=None, mod_tensors=None, check_offsets=True):
    """dQ, dK, dV of attention_varlen from its inputs, O and LSE (return_lse=True) and dout (shaped like q), with
    the forward's packing, causal mode, scale and mods. Keys no row sees get dK = dV = 0, rows that see no key
    dQ = 0. deterministic=False lets the GPU add dQ by f32 atomics where the tuner times that faster (not bitwise
    reproducible). torch tensors: torch.ops.kiln.attention_varlen_bwd (its f32 workspace allocated by torch, so
    that it can be captured in a CUDA graph with check_offsets=False or while capturing); NumPy: the
    interpreter."""
    c, s, max_q, max_k, flags, spec, named = _arguments(causal, scale, max_seqlen_q, max_seqlen_k, tf32,
                                                        deterministic, exact_masked_v, check_offsets, mods,
                                                        mod_tensors)
    ops = _torch_varlen_for(q)
    if ops is not None:
        return ops.backward(dout, q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, max_q, max_k, c, s, *flags, spec,
                            named)
    _check_numpy((dout, q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k),
                 ("dout", "q", "k", "v", "o", "lse", "cu_seqlens_q", "cu_seqlens_k"))
    _check_numpy([t for _, t in named], [f"mod_tensors['{n}']" for n, _ in named])
    import numpy as np
    dq, dk, dv = (np.empty(x.shape, dtype=x.dtype) for x in (q, k, v))
    backward_host(q, k, v, o, lse, dout, dq, dk, dv, cu_seqlens_q, cu_seqlens_k, max_q, max_k, c, s,
                  deterministic=deterministic, tf32=tf32, exact_masked_v=exact_masked_v, mods=spec, mod_tensors=named)
    return dq, dk, dv


def batch_struct(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, check_offsets=True):
    """kiln_varlen_batch of the offsets (NumPy arrays or torch tensors) and the longest lengths."""
    return _lib.varlen_batch(describe(cu_seqlens_q, "cu_seqlens_q"), describe(cu_seqlens_k, "cu_seqlens_k"),
                             max_seqlen_q, max_seqlen_k, check_offsets)


def forward_host(q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale,
                 tf32=False, exact_masked_v=False, mods="", mod_tensors=()):
    """kiln_attention_varlen_forward_host on caller-owned host arrays (o and lse written in place)."""
    opts = _lib.attention_options(causal, _lib.LAYOUT_BHSD, scale, tf32=tf32, exact_masked_v=exact_masked_v)
    described_mods(opts, mods, mod_tensors)
    batch = batch_struct(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    args = _tensors(("q", "k", "v", "o", "lse"), (q, k, v, o, lse))
    _lib.check(_lib.lib().kiln_attention_varlen_forward_host(*args, ctypes.byref(batch), ctypes.byref(opts)))


def backward_host(q, k, v, o, lse, dout, dq, dk, dv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
                  scale, deterministic=True, tf32=False, exact_masked_v=False, mods="", mod_tensors=()):
    """kiln_attention_varlen_backward_host on caller-owned host arrays (dq, dk, dv written in place)."""
    opts = _lib.attention_options(causal, _lib.LAYOUT_BHSD, scale, deterministic=deterministic, tf32=tf32,
                                  exact_masked_v=exact_masked_v)
    described_mods(opts, mods, mod_tensors)
    batch = batch_struct(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    args = _tensors(("q", "k", "v", "o", "lse", "dout", "dq", "dk", "dv"), (q, k, v, o, lse, dout, dq, dk, dv))
    _lib.check(_lib.lib().kiln_attention_varlen_backward_host(*args, ctypes.byref(batch), ctypes.byref(opts)))
