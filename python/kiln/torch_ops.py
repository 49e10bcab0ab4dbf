"""kiln's attention as PyTorch custom ops (torch.library): `kiln::attention_fwd` -> (O, LSE) and
`kiln::attention_bwd` -> (dQ, dK, dV), with fake (meta) implementations, so that torch.compile traces them
without a graph break, and an autograd formula, so that kiln.attention is differentiable.

Each op allocates only its outputs and calls libkiln on the tensors' own memory (data_ptr and strides, no
copy), on torch's current stream: CUDA tensors through kiln_attention_*_cuda, CPU tensors through the
interpreter (kiln_attention_*_host). The forward always asks for LSE (the backward needs it), which also keeps
kiln's forward free of the temporary it would otherwise allocate and synchronise on, so the forward can be
captured in a CUDA graph once its kernel is compiled (autotuning never runs inside the op unless
KILN_AUTOTUNE asks: warm up before capturing). The backward allocates f32 scratch and synchronises
(kiln::attention::backward does), so it cannot be captured.

Importing this module needs torch; `import kiln` does not import it."""

import ctypes
import os
import sys

import torch

from . import _lib
from ._tensor import describe
from . import _attention
from ._attention import layout_code, lse_shape
from .errors import KilnError


def _check_device(tensors, names):
    dev = tensors[0].device
    for t, n in zip(tensors, names):
        if t.device != dev:
            raise KilnError(f"kiln attention: {n} is on {t.device}, {names[0]} on {dev}; all must be on one device")
    if dev.type == "cuda":
        kiln_device = int(os.environ.get("KILN_DEVICE", "0") or 0)
        if dev.index is not None and dev.index != kiln_device:
            raise KilnError(f"kiln attention: the tensors are on {dev} but kiln runs on cuda:{kiln_device} "
                            f"(KILN_DEVICE); set KILN_DEVICE={dev.index} before the first kiln call")
    elif dev.type != "cpu":
        raise KilnError(f"kiln attention runs on CUDA or CPU tensors; got {dev}")


def _stream(t):
    return torch.cuda.current_stream(t.device).cuda_stream if t.is_cuda else None


def _last_dim_contiguous(t):
    # kiln reads rows as 16-byte vectors: the head dim must have stride 1; other strides may be anything.
    return t if t.stride(-1) == 1 else t.contiguous()


def _ref(t, what):
    return ctypes.byref(describe(t, what))


@torch.library.custom_op("kiln::attention_fwd", mutates_args=())
def attention_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: int, scale: float, layout: str,
                  tf32: bool, deterministic: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """O and LSE (f32 [B, H, N_Q]) of softmax(q kᵀ · scale) v; `deterministic` is kept for the backward."""
    q, k, v = (_last_dim_contiguous(t) for t in (q, k, v))
    _check_device((q, k, v), ("q", "k", "v"))
    shape = lse_shape(q, layout)
    if shape is None:
        raise KilnError(f"kiln attention: q must have rank 4 ([B, H, N, D] or [B, N, H, D]); got shape {tuple(q.shape)}")
    o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty(shape, dtype=torch.float32, device=q.device)
    opts = _lib.attention_options(causal, layout_code(layout), scale, deterministic=deterministic, tf32=tf32,
                                  stream=_stream(q))
    fn = _lib.lib().kiln_attention_forward_cuda if q.is_cuda else _lib.lib().kiln_attention_forward_host
    _lib.check(fn(_ref(q, "q"), _ref(k, "k"), _ref(v, "v"), _ref(o, "o"), _ref(lse, "lse"), ctypes.byref(opts)))
    return o, lse


@attention_fwd.register_fake
def _attention_fwd_fake(q, k, v, causal, scale, layout, tf32, deterministic):
    shape = lse_shape(q, layout)
    if shape is None:
        raise KilnError(f"kiln attention: q must have rank 4 ([B, H, N, D] or [B, N, H, D]); got shape {tuple(q.shape)}")
    return q.new_empty(q.shape), q.new_empty(shape, dtype=torch.float32)


@torch.library.custom_op("kiln::attention_bwd", mutates_args=())
def attention_bwd(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                  lse: torch.Tensor, causal: int, scale: float, layout: str, tf32: bool,
                  deterministic: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dQ, dK, dV of attention from its inputs, O, LSE and dO."""
    dout, q, k, v, o = (_last_dim_contiguous(t) for t in (dout, q, k, v, o))
    _check_device((q, k, v, o, lse, dout), ("q", "k", "v", "o", "lse", "dout"))
    dq, dk, dv = (torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))
    opts = _lib.attention_options(causal, layout_code(layout), scale, deterministic=deterministic, tf32=tf32,
                                  stream=_stream(q))
    fn = _lib.lib().kiln_attention_backward_cuda if q.is_cuda else _lib.lib().kiln_attention_backward_host
    _lib.check(fn(_ref(q, "q"), _ref(k, "k"), _ref(v, "v"), _ref(o, "o"), _ref(lse, "lse"), _ref(dout, "dout"),
                  _ref(dq, "dq"), _ref(dk, "dk"), _ref(dv, "dv"), ctypes.byref(opts)))
    return dq, dk, dv


@attention_bwd.register_fake
def _attention_bwd_fake(dout, q, k, v, o, lse, causal, scale, layout, tf32, deterministic):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _setup_context(ctx, inputs, output):
    q, k, v, causal, scale, layout, tf32, deterministic = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.options = (causal, scale, layout, tf32, deterministic)
    ctx.mark_non_differentiable(lse)


def _backward(ctx, grad_o, grad_lse):
    q, k, v, o, lse = ctx.saved_tensors
    if grad_o is None:
        return (None,) * 8
    dq, dk, dv = torch.ops.kiln.attention_bwd(grad_o.contiguous(), q, k, v, o, lse, *ctx.options)
    return dq, dk, dv, None, None, None, None, None


attention_fwd.register_autograd(_backward, setup_context=_setup_context)


def attention_fwd_op():
    return torch.ops.kiln.attention_fwd


def attention_bwd_op():
    return torch.ops.kiln.attention_bwd


_attention._torch_ops = sys.modules[__name__]
