"""kiln.decode: split-KV decoding (FlashDecoding) over a contiguous or paged KV cache, as FlashAttention's
flash_attn_with_kvcache without the cache update, through libkiln. NumPy arrays run in kiln's interpreter; torch
tensors go through torch.ops.kiln.decode (kiln/torch_decode.py: CUDA tensors on the GPU, CPU tensors in the
interpreter)."""

import ctypes

from . import _lib
from ._attention import scale_value
from ._tensor import describe, is_numpy, is_torch
from .errors import KilnError

_CAUSAL = {None: _lib.CAUSAL_NONE, False: _lib.CAUSAL_NONE, "none": _lib.CAUSAL_NONE,
           True: _lib.CAUSAL_BOTTOM_RIGHT, "bottom-right": _lib.CAUSAL_BOTTOM_RIGHT}

# kiln.torch_decode once it is imported (it sets this); see _attention._torch_ops.
_torch_decode = None


def _torch_decode_for(x):
    if _torch_decode is not None:
        return _torch_decode if isinstance(x, _torch_decode.torch.Tensor) else None
    if is_torch(x):
        from . import torch_decode
        return torch_decode
    return None


def decode_causal_code(causal):
    """None/False or "bottom-right"/True (FlashAttention's causal for a KV cache) as kiln_causal."""
    code = _CAUSAL.get(causal, -1) if isinstance(causal, (str, bool, type(None))) else -1
    if code < 0:
        raise KilnError(f"decode: causal must be None or 'bottom-right' (True: query i of N_Q sees the keys up to "
                        f"n_k - N_Q + i); got {causal!r}")
    return code


def num_splits_value(num_splits):
    if not isinstance(num_splits, int) or isinstance(num_splits, bool):
        raise KilnError(f"decode: num_splits must be an int (0: chosen for the GPU); got {num_splits!r}")
    return num_splits


def decode(q, k_cache, v_cache, *, cache_seqlens=None, block_table=None, causal=None, scale=None, num_splits=0,
           return_lse=False):
    """o = softmax(q k_cacheᵀ · scale) v_cache per sequence over its cached keys, by split-KV decoding:
    q [B, N_Q, H, D] (a few queries a sequence), k_cache and v_cache [B, N_K, H_KV, D] or, with block_table
    (int32 [B, max_pages]: key j of sequence b is row j % page_size of page block_table[b, j // page_size]),
    pages [num_pages, page_size, H_KV, D] with page_size a power of two >= 16. cache_seqlens: int32 [B] (or an
    int for every sequence) keys of each sequence, its first cache rows; None: the whole capacity. H a multiple
    of H_KV (GQA/MQA). causal: None or "bottom-right" (True). scale None is 1/sqrt(D). num_splits: how many
    ranges each sequence's keys are cut into, 0 to choose for the GPU. Returns O shaped like q and, with
    return_lse, LSE f32 [B, H, N_Q]; a query that sees no key gets O = 0, LSE = -inf. NumPy arrays run in
    kiln's interpreter (seqlens and the pages they reach checked); torch tensors go through torch.ops.kiln.decode
    on torch's current stream (capturable in a CUDA graph after one eager call; no autograd)."""
    c, s, n = decode_causal_code(causal), scale_value(scale), num_splits_value(num_splits)
    ops = _torch_decode_for(q)
    if ops is not None:
        o, lse = ops.decode(q, k_cache, v_cache, cache_seqlens, block_table, c, s, n)
        return (o, lse) if return_lse else o
    import numpy as np
    if not is_numpy(q):
        raise KilnError(f"decode: q: expected a NumPy array or a torch tensor; got {type(q).__name__}")
    if isinstance(cache_seqlens, int) and not isinstance(cache_seqlens, bool):
        cache_seqlens = np.full((q.shape[0] if q.ndim else 0,), cache_seqlens, dtype=np.int32)
    for a, name in ((k_cache, "k_cache"), (v_cache, "v_cache"), (cache_seqlens, "cache_seqlens"),
                    (block_table, "block_table")):
        if a is not None and not is_numpy(a):
            raise KilnError(f"decode: {name}: expected NumPy arrays or torch tensors like q; got {type(a).__name__}")
    o = np.empty(q.shape, dtype=q.dtype)
    lse = np.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=np.float32) if (return_lse and q.ndim == 4) else None
    decode_host(q, k_cache, v_cache, o, lse, cache_seqlens, block_table, c, s, n)
    return (o, lse) if return_lse else o


def options_struct(cache_seqlens, block_table, causal, scale, num_splits, stream=None, autotune=_lib.AUTOTUNE_ENV):
    return _lib.decode_options(causal, scale, num_splits,
                               None if cache_seqlens is None else describe(cache_seqlens, "cache_seqlens"),
                               None if block_table is None else describe(block_table, "block_table"), stream,
                               autotune)


def decode_host(q, k_cache, v_cache, o, lse, cache_seqlens, block_table, causal, scale, num_splits):
    """kiln_decode_host on caller-owned host arrays (o and lse written in place)."""
    opts = options_struct(cache_seqlens, block_table, causal, scale, num_splits)
    args = [None if a is None else ctypes.byref(describe(a, n))
            for a, n in zip((q, k_cache, v_cache, o, lse), ("q", "k_cache", "v_cache", "o", "lse"))]
    _lib.check(_lib.lib().kiln_decode_host(*args, ctypes.byref(opts)))
