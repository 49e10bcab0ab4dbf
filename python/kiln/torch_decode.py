"""kiln.decode on torch tensors: the custom op `kiln::decode` -> (O, LSE [B, H, N_Q]) with a fake implementation,
so that torch.compile traces it without a graph break; no autograd (decoding is inference). CUDA tensors run
kiln_decode_cuda_workspace on torch's current stream with the f32 workspace torch allocates (sized, with the
split count it was sized for, by kiln_decode_workspace_size), so a call allocates nothing in libkiln and does not
synchronise: after one eager call per shape compiled the kernels, it can be captured in a CUDA graph (the op asks
for KILN_AUTOTUNE_CACHED while capturing, as the attention ops do). CPU tensors run in the interpreter.

Importing this module needs torch; `import kiln` does not import it."""

import ctypes
import sys
from typing import Optional

import torch

from . import _decode, _lib
from ._tensor import describe
from .errors import KilnError
from .torch_ops import _check_device, _last_dim_contiguous, _needs_copy, autotune_mode, current_stream_handle


def _lse_shape(q):
    if q.dim() != 4:
        raise KilnError(f"kiln decode: q must have rank 4 ([B, N_Q, H, D]); got shape {tuple(q.shape)}")
    return (q.shape[0], q.shape[2], q.shape[1])


@torch.library.custom_op("kiln::decode", mutates_args=())
def decode_op(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, cache_seqlens: Optional[torch.Tensor],
              block_table: Optional[torch.Tensor], causal: int, scale: float,
              num_splits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """O and LSE (f32 [B, H, N_Q]) of q against its sequences' cached keys (see kiln.decode)."""
    if _needs_copy((q, k_cache, v_cache)):
        q, k_cache, v_cache = (_last_dim_contiguous(t) for t in (q, k_cache, v_cache))
    given = [(t, n) for t, n in ((cache_seqlens, "cache_seqlens"), (block_table, "block_table")) if t is not None]
    _check_device((q, k_cache, v_cache) + tuple(t for t, _ in given),
                  ("q", "k_cache", "v_cache") + tuple(n for _, n in given))
    o = q.new_empty(q.shape)
    lse = q.new_empty(_lse_shape(q), dtype=torch.float32)
    structs = [ctypes.byref(describe(t, n))
               for t, n in zip((q, k_cache, v_cache, o, lse), ("q", "k_cache", "v_cache", "o", "lse"))]
    lib = _lib.lib()
    if not q.is_cuda:
        opts = _decode.options_struct(cache_seqlens, block_table, causal, scale, num_splits)
        _lib.check(lib.kiln_decode_host(*structs, ctypes.byref(opts)))
        return o, lse
    opts = _decode.options_struct(cache_seqlens, block_table, causal, scale, num_splits,
                                  stream=current_stream_handle(q), autotune=autotune_mode(True))
    n, splits = ctypes.c_uint64(), ctypes.c_int32()
    _lib.check(lib.kiln_decode_workspace_size(*structs, ctypes.byref(opts), ctypes.byref(n), ctypes.byref(splits)))
    opts.num_splits = splits.value  # the count the workspace is sized for
    ws = q.new_empty(max(n.value, 1), dtype=torch.uint8)
    _lib.check(lib.kiln_decode_cuda_workspace(*structs, ws.data_ptr(), n.value, ctypes.byref(opts)))
    return o, lse


@decode_op.register_fake
def _decode_fake(q, k_cache, v_cache, cache_seqlens, block_table, causal, scale, num_splits):
    return q.new_empty(q.shape), q.new_empty(_lse_shape(q), dtype=torch.float32)


def decode(q, k_cache, v_cache, cache_seqlens, block_table, causal, scale, num_splits):
    """kiln.decode's torch path: an int cache_seqlens becomes an int32 tensor on q's device."""
    if isinstance(cache_seqlens, int) and not isinstance(cache_seqlens, bool):
        cache_seqlens = torch.full((q.shape[0],), cache_seqlens, dtype=torch.int32, device=q.device)
    for t, name in ((k_cache, "k_cache"), (v_cache, "v_cache"), (cache_seqlens, "cache_seqlens"),
                    (block_table, "block_table")):
        if t is not None and not isinstance(t, torch.Tensor):
            raise KilnError(f"kiln decode: {name} must be a torch tensor like q; got {type(t).__name__}")
    return torch.ops.kiln.decode(q, k_cache, v_cache, cache_seqlens, block_table, causal, scale, num_splits)


_decode._torch_decode = sys.modules[__name__]
