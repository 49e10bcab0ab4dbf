"""kiln's packed (variable-length) attention as PyTorch custom ops (torch.library), as torch_ops.py holds the
dense ones: `kiln::attention_varlen_fwd` -> (O, LSE [H, total_q]) and `kiln::attention_varlen_bwd` -> (dQ, dK,
dV), with fake implementations (torch.compile traces them without a graph break) and an autograd formula
registered on the forward, so that kiln.attention_varlen on torch tensors is differentiable in q, k and v.

The ops call libkiln on the tensors' own memory on torch's current stream (CUDA tensors:
kiln_attention_varlen_forward_cuda and kiln_attention_varlen_backward_cuda_workspace, whose f32 workspace torch
allocates; CPU tensors: the interpreter's *_host entry points) and allocate only their outputs. The forward always
writes LSE, which the backward needs. check_offsets copies the offsets to the host and checks them, a
synchronisation that a CUDA graph capture forbids: while torch's current stream is capturing the ops skip it (as
they ask for KILN_AUTOTUNE_CACHED), so forward and backward can be captured after one eager call per shape
compiled their kernels. The mods' tensors are constants here: kiln builds no gradient of them for packed batches
(the sinks' included), and one that requires grad is an error.

Importing this module needs torch; `import kiln` does not import it."""

import ctypes
import sys

import torch

from . import _lib, _varlen
from ._attention import described_mods
from ._tensor import describe
from .errors import KilnError
from .torch_ops import _check_device, _last_dim_contiguous, _needs_copy, autotune_mode, current_stream_handle

_FWD_NAMES = ("q", "k", "v", "o", "lse")
_BWD_NAMES = ("q", "k", "v", "o", "lse", "dout", "dq", "dk", "dv")


def _named(mod_names, mod_tensors):
    names = mod_names.split(";") if mod_names else []
    if len(names) != len(mod_tensors):
        raise KilnError(f"kiln attention_varlen: {len(names)} mod tensor name(s) ({mod_names!r}) for "
                        f"{len(mod_tensors)} mod tensor(s); expected one name per tensor")
    return list(zip(names, mod_tensors))


def _lse_shape(q):
    if q.dim() != 3:
        raise KilnError(f"kiln attention_varlen: q must have rank 3 ([total_q, H, D]); got shape {tuple(q.shape)}")
    return (q.shape[1], q.shape[0])


def _checks_offsets(check_offsets, q):
    """Whether this call copies the offsets to check them: not while a CUDA graph is being captured."""
    return check_offsets and not (q.is_cuda and torch.cuda.is_current_stream_capturing())


def _call_options(q, causal, scale, tf32, deterministic, exact_masked_v, mods, named):
    opts = _lib.attention_options(causal, _lib.LAYOUT_BHSD, scale, deterministic=deterministic, tf32=tf32,
                                  exact_masked_v=exact_masked_v)
    described_mods(opts, mods, named)
    if q.is_cuda:
        opts.stream = current_stream_handle(q)
        opts.autotune = autotune_mode(True)
    return opts


@torch.library.custom_op("kiln::attention_varlen_fwd", mutates_args=())
def attention_varlen_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
                         cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int, causal: int, scale: float,
                         tf32: bool, deterministic: bool, exact_masked_v: bool, check_offsets: bool, mods: str,
                         mod_names: str, mod_tensors: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """O and LSE (f32 [H, total_q]) of the packed batch; mod_names ';'-separated (the schema has no str[]);
    `deterministic` is kept for the backward."""
    if _needs_copy((q, k, v)):
        q, k, v = (_last_dim_contiguous(t) for t in (q, k, v))
    named = _named(mod_names, mod_tensors)
    _check_device((q, k, v, cu_seqlens_q, cu_seqlens_k) + tuple(t for _, t in named),
                  ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k") + tuple(n for n, _ in named))
    o = q.new_empty(q.shape)
    lse = q.new_empty(_lse_shape(q), dtype=torch.float32)
    structs = [describe(t, n) for t, n in zip((q, k, v, o, lse), _FWD_NAMES)]
    batch = _varlen.batch_struct(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                 _checks_offsets(check_offsets, q))
    opts = _call_options(q, causal, scale, tf32, deterministic, exact_masked_v, mods, named)
    lib = _lib.lib()
    entry = lib.kiln_attention_varlen_forward_cuda if q.is_cuda else lib.kiln_attention_varlen_forward_host
    _lib.check(entry(*(ctypes.byref(s) for s in structs), ctypes.byref(batch), ctypes.byref(opts)))
    return o, lse


@attention_varlen_fwd.register_fake
def _attention_varlen_fwd_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale, tf32,
                               deterministic, exact_masked_v, check_offsets, mods, mod_names, mod_tensors):
    return q.new_empty(q.shape), q.new_empty(_lse_shape(q), dtype=torch.float32)


@torch.library.custom_op("kiln::attention_varlen_bwd", mutates_args=())
def attention_varlen_bwd(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                         lse: torch.Tensor, cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor, max_seqlen_q: int,
                         max_seqlen_k: int, causal: int, scale: float, tf32: bool, deterministic: bool,
                         exact_masked_v: bool, check_offsets: bool, mods: str, mod_names: str,
                         mod_tensors: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dQ, dK, dV of the packed batch from its inputs, O, LSE and dO."""
    if _needs_copy((dout, q, k, v, o)):
        dout, q, k, v, o = (_last_dim_contiguous(t) for t in (dout, q, k, v, o))
    named = _named(mod_names, mod_tensors)
    _check_device((q, k, v, o, lse, dout, cu_seqlens_q, cu_seqlens_k) + tuple(t for _, t in named),
                  ("q", "k", "v", "o", "lse", "dout", "cu_seqlens_q", "cu_seqlens_k") + tuple(n for n, _ in named))
    dq, dk, dv = q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)
    structs = [ctypes.byref(describe(t, n)) for t, n in zip((q, k, v, o, lse, dout, dq, dk, dv), _BWD_NAMES)]
    batch = _varlen.batch_struct(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                 _checks_offsets(check_offsets, q))
    opts = _call_options(q, causal, scale, tf32, deterministic, exact_masked_v, mods, named)
    lib = _lib.lib()
    if q.is_cuda:
        n = ctypes.c_uint64()
        _lib.check(lib.kiln_attention_varlen_backward_workspace_size(structs[0], ctypes.byref(opts), ctypes.byref(n)))
        # The f32 scratch (Delta, and the atomic pair's dQ accumulator where it may run) from torch's caching
        # allocator: capture-safe and stream-ordered.
        ws = q.new_empty(max(n.value, 1), dtype=torch.uint8)
        _lib.check(lib.kiln_attention_varlen_backward_cuda_workspace(*structs, ctypes.byref(batch), ws.data_ptr(),
                                                                     n.value, ctypes.byref(opts)))
    else:
        _lib.check(lib.kiln_attention_varlen_backward_host(*structs, ctypes.byref(batch), ctypes.byref(opts)))
    return dq, dk, dv


@attention_varlen_bwd.register_fake
def _attention_varlen_bwd_fake(dout, q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
                               scale, tf32, deterministic, exact_masked_v, check_offsets, mods, mod_names,
                               mod_tensors):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _setup_context(ctx, inputs, output):
    (q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale, tf32, deterministic,
     exact_masked_v, check_offsets, mods, mod_names, mod_tensors) = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, *mod_tensors)
    ctx.args = (max_seqlen_q, max_seqlen_k, causal, scale, tf32, deterministic, exact_masked_v, check_offsets, mods,
                mod_names)
    ctx.num_mod_tensors = len(mod_tensors)
    ctx.mark_non_differentiable(lse)


def _backward(ctx, grad_o, grad_lse):
    """The gradients of the forward op's 16 inputs: q, k, v's from the backward op, none for the rest (the mod
    tensors are constants)."""
    q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, *mod_tensors = ctx.saved_tensors
    nones = (None,) * 12 + ([None] * ctx.num_mod_tensors,)
    if grad_o is None:
        return (None, None, None) + nones
    dq, dk, dv = torch.ops.kiln.attention_varlen_bwd(grad_o.contiguous(), q, k, v, o, lse, cu_seqlens_q,
                                                     cu_seqlens_k, *ctx.args, mod_tensors)
    return (dq, dk, dv) + nones


attention_varlen_fwd.register_autograd(_backward, setup_context=_setup_context)


def _split_mod_tensors(named):
    """(names, tensors) of the (name, tensor) pairs; a mod tensor that requires grad is an error: kiln gives no
    gradient of a mod tensor over packed batches."""
    if not named:
        return "", []
    for n, t in named:
        if not isinstance(t, torch.Tensor):
            raise KilnError(f"kiln attention_varlen: mod_tensors['{n}'] must be a torch tensor like q; got "
                            f"{type(t).__name__}")
        if t.requires_grad and torch.is_grad_enabled():
            raise KilnError(f"kiln attention_varlen: mod_tensors['{n}'] requires grad, but kiln computes no gradient "
                            f"of mod tensors over packed batches (the sinks' included); pass {n}.detach()")
    return ";".join(n for n, _ in named), [t for _, t in named]


def _offsets(cu_seqlens_q, cu_seqlens_k):
    for name, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        if not isinstance(t, torch.Tensor):
            raise KilnError(f"kiln attention_varlen: {name} must be a torch tensor like q (int32 [B + 1]); got "
                            f"{type(t).__name__}")


def forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale, tf32, deterministic,
            exact_masked_v, check_offsets, mods, named):
    """kiln.attention_varlen's torch path: (O, LSE) through the forward op."""
    _offsets(cu_seqlens_q, cu_seqlens_k)
    names, tensors = _split_mod_tensors(named)
    return torch.ops.kiln.attention_varlen_fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                               causal, scale, tf32, deterministic, exact_masked_v, check_offsets,
                                               mods, names, tensors)


def backward(dout, q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale, tf32,
             deterministic, exact_masked_v, check_offsets, mods, named):
    """kiln.attention_varlen_backward's torch path: (dQ, dK, dV) through the backward op."""
    _offsets(cu_seqlens_q, cu_seqlens_k)
    names, tensors = _split_mod_tensors(named)
    return torch.ops.kiln.attention_varlen_bwd(dout, q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                               max_seqlen_k, causal, scale, tf32, deterministic, exact_masked_v,
                                               check_offsets, mods, names, tensors)


_varlen._torch_varlen = sys.modules[__name__]
