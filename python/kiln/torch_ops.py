"""kiln's attention as PyTorch custom ops (torch.library): `kiln::attention_fwd` -> (O, LSE) and
`kiln::attention_bwd` -> (dQ, dK, dV), with fake (meta) implementations, so that torch.compile traces them
without a graph break, and an autograd formula, so that kiln.attention is differentiable.

Each op allocates its outputs (and the backward its f32 workspace) with torch, whose caching allocator is
capture-safe, and calls libkiln on the tensors' own memory (data_ptr and strides, no copy), on torch's current
stream: CUDA tensors through kiln_attention_forward_cuda / kiln_attention_backward_cuda_workspace, CPU tensors
through the interpreter (kiln_attention_*_host). The forward always asks for LSE (the backward needs it), which
keeps kiln's forward free of the temporary it would otherwise allocate and synchronise on; the backward runs on
the workspace and does not synchronise. So both can be captured in a CUDA graph once their kernels are
compiled: while the current stream is capturing, the ops ask libkiln for KILN_AUTOTUNE_CACHED (a remembered
pick, else the default config; KILN_AUTOTUNE=off stays off), so no timing run happens inside a capture. Warm up
(one eager call per shape) before capturing.

Per call, the ctypes structs describing the tensors and options are built once per signature (dtypes, shapes,
strides, devices, options), after that signature's checks, and reused with fresh data pointers and stream (per
thread): a call whose signature was seen runs no Python-side check again (libkiln checks every call), since
building and checking cost more than the C call itself.

A block mask (kiln.block_mask) reaches the ops as an int, BlockMask.id, which the op's body looks up in
kiln._block_mask's weak registry of live block masks: op arguments must be what torch.compile traces, and a block
mask is a libkiln handle, not tensors (docs/design.md, "kiln from Python"). The forward's autograd context holds
the BlockMask until the backward. Calls with a block mask take the uncached path, as calls with mods do.

Importing this module needs torch; `import kiln` does not import it."""

import ctypes
import os
import sys
import threading
from typing import Optional

import torch

from . import _lib
from ._tensor import describe
from . import _attention, _block_mask
from ._attention import lse_shape
from .errors import KilnError

# The device kiln runs on: KILN_DEVICE, which libkiln reads once, at its first device call; read here at the
# first CUDA call too.
_kiln_device = None
_CACHE_LIMIT = 256  # signatures remembered per thread; the cache is emptied when it grows past this
_SCRATCH_STREAMS = 8  # scratch LSEs kept per signature (one per stream); past it they are dropped
_local = threading.local()


def _check_device(tensors, names):
    global _kiln_device
    dev = tensors[0].device
    for t, n in zip(tensors, names):
        if t.device != dev:
            raise KilnError(f"kiln attention: {n} is on {t.device}, {names[0]} on {dev}; all must be on one device")
    if dev.type == "cuda":
        if _kiln_device is None:
            _kiln_device = int(os.environ.get("KILN_DEVICE", "0") or 0)
        if dev.index is not None and dev.index != _kiln_device:
            raise KilnError(f"kiln attention: the tensors are on {dev} but kiln runs on cuda:{_kiln_device} "
                            f"(KILN_DEVICE); set KILN_DEVICE={dev.index} before the first kiln call")
    elif dev.type != "cpu":
        raise KilnError(f"kiln attention runs on CUDA or CPU tensors; got {dev}")


# Whether torch's current CUDA stream is capturing a graph, without torch.cuda's Python wrapper around it.
_capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None) or torch.cuda.is_current_stream_capturing


def autotune_mode(is_cuda, capturing=None):
    """kiln_autotune for a call now: KILN_AUTOTUNE_ENV, except while torch's current stream is capturing a CUDA
    graph, when nothing may be timed: KILN_AUTOTUNE_CACHED (or OFF where KILN_AUTOTUNE=off asks for defaults,
    whose compiled kernels a capture should find, not a cache lookup's). capturing: whether the current stream
    is capturing, where the caller asked already (None: asked here)."""
    if capturing is None:
        capturing = is_cuda and _capturing()
    if not capturing:
        return _lib.AUTOTUNE_ENV
    if os.environ.get("KILN_AUTOTUNE", "").strip().lower() == "off":
        return _lib.AUTOTUNE_OFF
    return _lib.AUTOTUNE_CACHED


# torch's current CUDA stream of a device index as a raw handle, without building a torch.cuda.Stream (which costs
# several microseconds a call); the public path where this torch lacks the private one.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def current_stream_handle(t):
    """The handle of torch's current stream on `t`'s CUDA device."""
    if _raw_stream is not None:
        return _raw_stream(t.get_device())
    return torch.cuda.current_stream(t.device).cuda_stream


def _last_dim_contiguous(t):
    # kiln reads rows as 16-byte vectors: the head dim must have stride 1; other strides may be anything.
    return t if t.dim() == 0 or t.stride(-1) == 1 else t.contiguous()


def _needs_copy(tensors):
    return any(t.dim() and t.stride(-1) != 1 for t in tensors)


def _signature(tensors):
    """What a call's tensors contribute to its cache key: each one's dtype, shape, strides and device (a
    torch.device: its type and index in one attribute)."""
    key = []
    for t in tensors:
        key += (t.dtype, t.shape, t.stride(), t.device)
    return tuple(key)


def _cached_call(key):
    """This thread's cached call for `key` (see _remember), or None."""
    cache = getattr(_local, "calls", None)
    if cache is None:
        cache = _local.calls = {}
    return cache.get(key)


def _remember(key, tensors, names, options, extra_of=None):
    """Caches what a call with this key needs besides its tensors' addresses: the kiln_tensor structs of
    `tensors` (inputs and the outputs allocated for it), the kiln_attention_options of `options` (a tuple of
    attention_options' arguments) and extra_of(structs, opts) (what the op computes once per signature).
    Called only after the call's checks passed, so that a hit skips them: the key holds every dtype, shape,
    stride and device of the inputs and the options, and the outputs are allocated contiguous from the inputs'
    shapes."""
    cache = _local.calls
    if len(cache) >= _CACHE_LIMIT:
        if getattr(_local, "scratch_made", False):
            # A kernel on a stream other than the one a scratch LSE was made on (a stream whose handle was
            # reused) may still write it: none may when torch's allocator takes the scratch back.
            torch.cuda.synchronize()
            _local.scratch_made = False
        cache.clear()
    structs = [describe(t, n) for t, n in zip(tensors, names)]
    opts = _lib.attention_options(*options)
    hit = (structs, opts, extra_of(structs, opts) if extra_of else None)
    cache[key] = hit
    return hit


def _set_addresses(structs, tensors):
    for s, t in zip(structs, tensors):
        s.data = t.data_ptr()


def _options(causal, scale, layout, tf32, deterministic, exact_masked_v):
    return (causal, _attention.layout_code(layout), scale, bool(deterministic), bool(tf32), None,
            bool(exact_masked_v))


def _rank_error(q):
    return KilnError(f"kiln attention: q must have rank 4 ([B, H, N, D] or [B, N, H, D]); got shape {tuple(q.shape)}")


_FWD_NAMES = ("q", "k", "v", "o", "lse")


def _forward_key(q, k, v, causal, scale, layout, tf32, deterministic, exact_masked_v):
    """A plain forward's cache key: the options, then each tensor's dtype, shape, strides and device (a
    torch.device: its type and index in one attribute), in one flat tuple (no list, loop or concatenation)."""
    return ("fwd", causal, scale, layout, tf32, deterministic, exact_masked_v, q.dtype, q.shape, q.stride(), q.device,
            k.dtype, k.shape, k.stride(), k.device, v.dtype, v.shape, v.stride(), v.device)


def _forward_impl(q, k, v, causal, scale, layout, tf32, deterministic, exact_masked_v, want_lse=True):
    """The forward op's body: O and LSE from libkiln on the tensors' memory. The per-call path is a cache
    lookup by the call's signature, the outputs' allocations and the C call; the checks run at a signature's
    first call (_forward_first), which for CUDA tensors also makes libkiln's plan of the forward
    (kiln_attention_forward_plan: validated and tuned once). A later call of the signature runs the plan on its
    tensors' addresses (kiln_attention_plan_forward: plain ints, no struct to update), which libkiln checks
    again where they matter (non-null, aligned, outputs apart from inputs); everything else a call could get
    wrong is in the key. The plan asks the autotuner again when its picks change, or when the mode changes
    (KILN_AUTOTUNE_CACHED under capture). CPU tensors run the interpreter on the cached structs.

    want_lse=False (an eager call that returns O alone and records no gradient): the kernel still writes an
    LSE, into a scratch tensor kept with the signature's cached call, one per CUDA stream, instead of a new one
    each call, and LSE is returned as None. Reuse is safe: nothing reads the scratch, and the calls on one
    stream write it in stream order; the scratch is allocated while its stream is current, so torch's caching
    allocator frees it in that stream's order when the cache lets it go (and the device is synchronised first,
    for a stream handle that was reused by a new stream). It costs B * H * N_Q f32 (1/32 of O at f16, D = 64)
    per signature and stream (at most _SCRATCH_STREAMS streams), freed with the cache (at most _CACHE_LIMIT
    signatures a thread). Not while a CUDA graph is captured: a graph would keep writing a scratch the cache may
    free."""
    key = _forward_key(q, k, v, causal, scale, layout, tf32, deterministic, exact_masked_v)
    hit = _cached_call(key)
    if hit is None:
        return _forward_first(key, q, k, v, causal, scale, layout, tf32, deterministic, exact_masked_v, want_lse)
    structs, opts, (shape, q_contiguous, scratch, plan) = hit
    # O contiguous, as the fake implementation makes it; empty_like costs 2-3 us less than new_empty and, for a
    # contiguous q, gives the same strides.
    o = torch.empty_like(q) if q_contiguous else q.new_empty(q.shape)
    if plan is None:  # CPU tensors
        lse = q.new_empty(shape, dtype=torch.float32)
        _set_addresses(structs, (q, k, v, o, lse))
        _lib.check(_lib.lib().kiln_attention_forward_host(*structs, opts))
        return o, (lse if want_lse else None)
    stream = _raw_stream(plan.device) if _raw_stream is not None else current_stream_handle(q)
    capturing = _capturing()
    if want_lse or capturing:
        lse = q.new_empty(shape, dtype=torch.float32)
    else:
        lse = scratch.get(stream)
        if lse is None:
            lse = _new_scratch_lse(q, shape, scratch, stream)
    status = plan.run(plan.handle, q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(), stream,
                      autotune_mode(True, True) if capturing else _lib.AUTOTUNE_ENV)
    if status:
        _lib.check(status)
    return o, (lse if want_lse else None)


def _forward_first(key, q, k, v, causal, scale, layout, tf32, deterministic, exact_masked_v, want_lse):
    """_forward_impl's first call of a signature: the Python-side checks, then the structs and, for CUDA tensors,
    the plan (made on this call's tensors, tuned in this call's autotune mode), cached under `key` once libkiln
    accepted them, then the call itself."""
    if _needs_copy((q, k, v)):
        return _forward_impl(*(_last_dim_contiguous(t) for t in (q, k, v)), causal, scale, layout, tf32,
                             deterministic, exact_masked_v, want_lse)
    _check_device((q, k, v), ("q", "k", "v"))
    shape = lse_shape(q, layout)
    if shape is None:
        raise _rank_error(q)
    o = q.new_empty(q.shape)
    lse = q.new_empty(shape, dtype=torch.float32)
    options = _options(causal, scale, layout, tf32, deterministic, exact_masked_v)
    if not q.is_cuda:
        structs, opts, _ = _remember(key, (q, k, v, o, lse), _FWD_NAMES, options,
                                     extra_of=lambda structs, opts: (shape, q.is_contiguous(), {}, None))
        _lib.check(_lib.lib().kiln_attention_forward_host(*structs, opts))
        return o, (lse if want_lse else None)
    autotune = autotune_mode(True)

    def with_plan(structs, opts):
        opts.autotune = autotune
        return shape, q.is_contiguous(), {}, _lib.AttentionPlan(structs, opts, q.get_device())

    plan = _remember(key, (q, k, v, o, lse), _FWD_NAMES, options, extra_of=with_plan)[2][3]
    _lib.check(plan.run(plan.handle, q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(),
                        current_stream_handle(q), autotune))
    return o, (lse if want_lse else None)


def _new_scratch_lse(q, shape, scratch, stream):
    """A new scratch LSE of a cached call (`scratch`: stream handle -> tensor) for torch's current stream,
    `stream`, made there (see _forward_impl)."""
    if len(scratch) >= _SCRATCH_STREAMS:  # a new stream per call must not grow the scratches without end
        torch.cuda.synchronize()
        scratch.clear()
    lse = scratch[stream] = q.new_empty(shape, dtype=torch.float32)
    _local.scratch_made = True
    return lse


def _launch_forward(q, structs, opts):
    """The forward through libkiln on q's device: on the current stream, tuned, for CUDA tensors; the
    interpreter for CPU tensors."""
    lib = _lib.lib()
    if q.is_cuda:
        opts.stream = current_stream_handle(q)
        opts.autotune = autotune_mode(True)
        _lib.check(lib.kiln_attention_forward_cuda(*structs, opts))
    else:
        _lib.check(lib.kiln_attention_forward_host(*structs, opts))


@torch.library.custom_op("kiln::attention_fwd", mutates_args=())
def attention_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: int, scale: float, layout: str,
                  tf32: bool, deterministic: bool, exact_masked_v: bool, mods: str, mod_names: str,
                  mod_tensors: list[torch.Tensor], sinks: Optional[torch.Tensor],
                  block_mask: int) -> tuple[torch.Tensor, torch.Tensor]:
    """O and LSE (f32 [B, H, N_Q]) of softmax(q kᵀ · scale) v with the mods `mods` (a ';'-separated spec, "" for
    none) reading mod_tensors by mod_names (their names ';'-separated: the schema has no str[]), and the "sinks"
    tensor apart (it is differentiable); `deterministic` is kept for the backward. block_mask: the id of a live
    kiln.BlockMask (BlockMask.id; 0 for none). An op's arguments must be what torch.compile traces (tensors,
    ints, strings), and a block mask is a libkiln handle owning device memory, not tensors, so the op takes its
    id and looks it up in kiln._block_mask's registry of live block masks (weak: the caller's BlockMask, and the
    autograd context of a forward that used one, keep it alive; ids are never reused)."""
    if not mods and not mod_names and sinks is None and block_mask == 0:
        return _forward_impl(q, k, v, causal, scale, layout, tf32, deterministic, exact_masked_v)
    return _forward_mods_impl(q, k, v, causal, scale, layout, tf32, deterministic, exact_masked_v, mods, mod_names,
                              mod_tensors, sinks, block_mask)


def _named(mod_names, mod_tensors, sinks):
    """The (name, tensor) pairs of the op's arguments: mod_names ';'-separated, the sinks as "sinks"."""
    names = mod_names.split(";") if mod_names else []
    if len(names) != len(mod_tensors):
        raise KilnError(f"kiln attention: {len(names)} mod tensor name(s) ({mod_names!r}) for {len(mod_tensors)} "
                        f"mod tensor(s); expected one name per tensor")
    named = list(zip(names, mod_tensors))
    return named + [("sinks", sinks)] if sinks is not None else named


def _set_block_mask(opts, block_mask):
    """opts.block_mask from a block mask id (0: none), the BlockMask held by opts (after described_mods, whose
    keep_alive list it joins) for the call."""
    bm = _block_mask.by_id(block_mask)
    opts.block_mask = None if bm is None else bm.handle
    opts.keep_alive.append(bm)


def _forward_mods_impl(q, k, v, causal, scale, layout, tf32, deterministic, exact_masked_v, mods, mod_names,
                       mod_tensors, sinks, block_mask):
    """The forward op's body with mods or a block mask: as _forward_impl's first call of a signature, every call
    (no cache)."""
    if _needs_copy((q, k, v)):
        q, k, v = (_last_dim_contiguous(t) for t in (q, k, v))
    named = _named(mod_names, mod_tensors, sinks)
    _check_device((q, k, v) + tuple(t for _, t in named), ("q", "k", "v") + tuple(n for n, _ in named))
    shape = lse_shape(q, layout)
    if shape is None:
        raise _rank_error(q)
    o = q.new_empty(q.shape)
    lse = q.new_empty(shape, dtype=torch.float32)
    structs = [describe(t, n) for t, n in zip((q, k, v, o, lse), _FWD_NAMES)]
    opts = _lib.attention_options(*_options(causal, scale, layout, tf32, deterministic, exact_masked_v))
    _attention.described_mods(opts, mods, named)
    _set_block_mask(opts, block_mask)
    _launch_forward(q, structs, opts)
    return o, lse


_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or torch._dynamo.is_compiling
# The number of active __torch_dispatch__ modes (FakeTensorMode and the like): torch 2.x calls it
# _len_torch_dispatch_stack; without either, every call goes through the op.
_dispatch_modes = getattr(torch._C, "_len_torch_dispatch_stack", None) or getattr(torch._C, "_len_torch_dispatch_mode",
                                                                                  None)
_functorch_active = getattr(torch._C, "_are_functorch_transforms_active", None)
_FAST_PATH = _dispatch_modes is not None and _functorch_active is not None  # else: always through the op


class _EagerAttention(torch.autograd.Function):
    """The op's forward and its registered autograd formula as a plain autograd.Function, for eager calls that
    want a gradient: the same bodies without the custom op's dispatch and its autograd wrapper (about 70 us a
    call on an H100, more than kiln's C call)."""

    @staticmethod
    def forward(ctx, q, k, v, causal, scale, layout, tf32, deterministic, exact_masked_v):
        o, lse = _forward_impl(q, k, v, causal, scale, layout, tf32, deterministic, exact_masked_v)
        _setup_context(ctx, (q, k, v, causal, scale, layout, tf32, deterministic, exact_masked_v, "", "", [], None,
                             0), (o, lse))
        return o, lse

    @staticmethod
    def backward(ctx, grad_o, grad_lse):
        return _gradients(ctx, grad_o, _backward_impl)[:9]


def forward(q, k, v, causal, scale, layout, tf32, deterministic, exact_masked_v, want_lse=True):
    """O and LSE through the custom op, or, where the op's dispatch would add nothing (eager, plain tensors, no
    dispatch mode such as FakeTensorMode and no torch.func transform active), through its body directly (no
    gradient wanted) or _EagerAttention (a gradient wanted): the dispatcher and the autograd wrapper cost more
    per call than the rest of kiln's Python side together. torch.compile traces the op. want_lse=False: the
    caller drops LSE, which may then come back as None (the body's scratch LSE, see _forward_impl)."""
    if (_FAST_PATH and not _is_compiling() and type(q) is torch.Tensor and type(k) is torch.Tensor
            and type(v) is torch.Tensor and _dispatch_modes() == 0 and not _functorch_active()):
        if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
            return _EagerAttention.apply(q, k, v, causal, scale, layout, tf32, deterministic, exact_masked_v)
        return _forward_impl(q, k, v, causal, scale, layout, tf32, deterministic, exact_masked_v, want_lse)
    return torch.ops.kiln.attention_fwd(q, k, v, causal, scale, layout, tf32, deterministic, exact_masked_v, "", "",
                                        [], None, 0)


def _split_mod_tensors(named, autograd=True):
    """(names, tensors, sinks) of the (name, tensor) pairs: "sinks" apart, as the op takes it (differentiable).
    With `autograd` (the forward), a mod tensor other than "sinks" that requires grad is an error: kiln gives no
    gradient for it."""
    names, tensors, sinks = [], [], None
    for n, t in named:
        if not isinstance(t, torch.Tensor):
            raise KilnError(f"kiln attention: mod_tensors['{n}'] must be a torch tensor like q; got {type(t).__name__}")
        if n == "sinks":
            sinks = t
            continue
        if autograd and t.requires_grad and torch.is_grad_enabled():
            raise KilnError(f"kiln attention: mod_tensors['{n}'] requires grad, but kiln treats mod tensors other "
                            f"than 'sinks' as constants (no gradient); pass {n}.detach()")
        names.append(n)
        tensors.append(t)
    return names, tensors, sinks


def _block_mask_id(block_mask):
    return 0 if block_mask is None else block_mask.id


def forward_with_mods(q, k, v, causal, scale, layout, tf32, deterministic, exact_masked_v, mods, named,
                      block_mask=None):
    """O and LSE with mods (a spec string), named mod tensors and a block mask (a kiln.BlockMask or None),
    always through the custom op (differentiable in q, k, v and the "sinks" tensor)."""
    names, tensors, sinks = _split_mod_tensors(named)
    return torch.ops.kiln.attention_fwd(q, k, v, causal, scale, layout, tf32, deterministic, exact_masked_v, mods,
                                        ";".join(names), tensors, sinks, _block_mask_id(block_mask))


@attention_fwd.register_fake
def _attention_fwd_fake(q, k, v, causal, scale, layout, tf32, deterministic, exact_masked_v, mods, mod_names,
                        mod_tensors, sinks, block_mask):
    shape = lse_shape(q, layout)
    if shape is None:
        raise _rank_error(q)
    return q.new_empty(q.shape), q.new_empty(shape, dtype=torch.float32)


def _workspace_bytes(structs, opts):
    n = ctypes.c_uint64()
    _lib.check(_lib.lib().kiln_attention_backward_workspace_size(structs[0], opts, ctypes.byref(n)))
    return n.value


_BWD_NAMES = ("q", "k", "v", "o", "lse", "dout", "dq", "dk", "dv")


@torch.library.custom_op("kiln::attention_bwd", mutates_args=())
def attention_bwd(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                  lse: torch.Tensor, causal: int, scale: float, layout: str, tf32: bool, deterministic: bool,
                  exact_masked_v: bool, mods: str, mod_names: str, mod_tensors: list[torch.Tensor],
                  sinks: Optional[torch.Tensor],
                  block_mask: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """dQ, dK, dV of attention from its inputs, O, LSE and dO, and d loss / d sinks (shaped like sinks; an empty
    tensor without sinks); block_mask as the forward op's (the id of a live kiln.BlockMask, 0 for none)."""
    if not mods and not mod_names and sinks is None and block_mask == 0:
        dq, dk, dv = _backward_impl(dout, q, k, v, o, lse, causal, scale, layout, tf32, deterministic,
                                    exact_masked_v)
        return dq, dk, dv, q.new_empty((0,), dtype=torch.float32)
    return _backward_mods_impl(dout, q, k, v, o, lse, causal, scale, layout, tf32, deterministic, exact_masked_v,
                               mods, mod_names, mod_tensors, sinks, block_mask)


def _backward_mods_impl(dout, q, k, v, o, lse, causal, scale, layout, tf32, deterministic, exact_masked_v, mods,
                        mod_names, mod_tensors, sinks, block_mask):
    """The backward op's body with mods or a block mask (no cache): dQ, dK, dV and, with sinks, their
    gradient."""
    if _needs_copy((dout, q, k, v, o)):
        dout, q, k, v, o = (_last_dim_contiguous(t) for t in (dout, q, k, v, o))
    named = _named(mod_names, mod_tensors, sinks)
    _check_device((q, k, v, o, lse, dout) + tuple(t for _, t in named),
                  ("q", "k", "v", "o", "lse", "dout") + tuple(n for n, _ in named))
    dq, dk, dv = q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)
    # kiln writes the per-head gradient [H]; a broadcast sinks tensor ([1]) gets its sum.
    heads = lse.shape[1] if lse.dim() == 3 else 0
    dsink = q.new_empty((heads,) if sinks is not None else (0,), dtype=torch.float32)
    structs = [describe(t, n) for t, n in zip((q, k, v, o, lse, dout, dq, dk, dv), _BWD_NAMES)]
    opts = _lib.attention_options(*_options(causal, scale, layout, tf32, deterministic, exact_masked_v))
    _attention.described_mods(opts, mods, named, dsink if sinks is not None else None)
    _set_block_mask(opts, block_mask)
    lib = _lib.lib()
    if q.is_cuda:
        opts.stream = current_stream_handle(q)
        opts.autotune = autotune_mode(True)
        ws_bytes = _workspace_bytes(structs, opts)
        ws = q.new_empty(max(ws_bytes, 1), dtype=torch.uint8)
        _lib.check(lib.kiln_attention_backward_cuda_workspace(*structs, ws.data_ptr(), ws_bytes, opts))
    else:
        _lib.check(lib.kiln_attention_backward_host(*structs, opts))
    if sinks is not None and tuple(sinks.shape) != (heads,):
        dsink = dsink.sum_to_size(sinks.shape)
    return dq, dk, dv, dsink


def _backward_impl(dout, q, k, v, o, lse, causal, scale, layout, tf32, deterministic, exact_masked_v):
    """The backward op's body: dQ, dK, dV from libkiln on the tensors' memory (checks at a signature's first
    call, as the forward's)."""
    inputs = (q, k, v, o, lse, dout)
    key = ("bwd", causal, scale, layout, tf32, deterministic, exact_masked_v) + _signature(inputs)
    hit = _cached_call(key)
    if hit is None and _needs_copy((dout, q, k, v, o)):
        dout, q, k, v, o = (_last_dim_contiguous(t) for t in (dout, q, k, v, o))
        return _backward_impl(dout, q, k, v, o, lse, causal, scale, layout, tf32, deterministic, exact_masked_v)
    dq, dk, dv = q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)
    tensors = (q, k, v, o, lse, dout, dq, dk, dv)
    if hit is None:
        _check_device(inputs, ("q", "k", "v", "o", "lse", "dout"))
        options = _options(causal, scale, layout, tf32, deterministic, exact_masked_v)
        hit = _remember(key, tensors, _BWD_NAMES, options, extra_of=_workspace_bytes if q.is_cuda else None)
    structs, opts, ws_bytes = hit
    _set_addresses(structs, tensors)
    lib = _lib.lib()
    if q.is_cuda:
        opts.stream = current_stream_handle(q)
        opts.autotune = autotune_mode(True)
        # The f32 scratch (Delta, and the dQ accumulator when atomic dQ may run) from torch's caching allocator,
        # freed back to it (stream-ordered) when this tensor goes.
        ws = q.new_empty(max(ws_bytes, 1), dtype=torch.uint8)
        _lib.check(lib.kiln_attention_backward_cuda_workspace(*structs, ws.data_ptr(), ws_bytes, opts))
    else:
        _lib.check(lib.kiln_attention_backward_host(*structs, opts))
    return dq, dk, dv


@attention_bwd.register_fake
def _attention_bwd_fake(dout, q, k, v, o, lse, causal, scale, layout, tf32, deterministic, exact_masked_v, mods,
                        mod_names, mod_tensors, sinks, block_mask):
    dsink = q.new_empty((0,), dtype=torch.float32) if sinks is None else sinks.new_empty(sinks.shape,
                                                                                           dtype=torch.float32)
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape), dsink


def _setup_context(ctx, inputs, output):
    (q, k, v, causal, scale, layout, tf32, deterministic, exact_masked_v, mods, mod_names, mod_tensors, sinks,
     block_mask) = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse, *mod_tensors, *([] if sinks is None else [sinks]))
    ctx.options = (causal, scale, layout, tf32, deterministic, exact_masked_v)
    ctx.mods = (mods, mod_names, len(mod_tensors), sinks is not None)
    ctx.block_mask = block_mask
    # The BlockMask itself, so that it lives until the backward even if the caller drops it meanwhile.
    ctx.block_mask_object = _block_mask.by_id(block_mask)
    ctx.mark_non_differentiable(lse)


def _gradients(ctx, grad_o, backward):
    """The forward's inputs' gradients by `backward` (the op, or the body without mods) from what
    _setup_context saved: q, k, v, nine option arguments, the mod tensors' (none: constants), the sinks' and the
    block mask id's (none)."""
    q, k, v, o, lse, *rest = ctx.saved_tensors
    mods, mod_names, n_mod, has_sinks = ctx.mods
    mod_tensors, sinks = rest[:n_mod], (rest[n_mod] if has_sinks else None)
    none_mods = [None] * n_mod
    if grad_o is None:
        return (None,) * 11 + (none_mods, None, None)
    if backward is _backward_impl:  # the eager path: no mods
        dq, dk, dv = backward(grad_o.contiguous(), q, k, v, o, lse, *ctx.options)
        dsink = None
    else:
        dq, dk, dv, dsink = backward(grad_o.contiguous(), q, k, v, o, lse, *ctx.options, mods, mod_names,
                                     mod_tensors, sinks, ctx.block_mask)
    return (dq, dk, dv) + (None,) * 8 + (none_mods, dsink if has_sinks else None, None)


def _backward(ctx, grad_o, grad_lse):
    return _gradients(ctx, grad_o, torch.ops.kiln.attention_bwd)


attention_fwd.register_autograd(_backward, setup_context=_setup_context)


def backward_with_mods(dout, q, k, v, o, lse, causal, scale, layout, tf32, deterministic, exact_masked_v, mods,
                       named, want_dsink, block_mask=None):
    """kiln.attention_backward's torch path: (dQ, dK, dV, dsink) through the op; dsink None unless want_dsink
    (which needs the "sinks" mod tensor); block_mask a kiln.BlockMask or None."""
    names, tensors, sinks = _split_mod_tensors(named, autograd=False)
    if want_dsink and sinks is None:
        raise KilnError("kiln.attention_backward: return_dsink needs the sink logits as mod_tensors['sinks'] (with "
                        "the 'sinks' mod)")
    dq, dk, dv, dsink = torch.ops.kiln.attention_bwd(dout, q, k, v, o, lse, causal, scale, layout, tf32,
                                                     deterministic, exact_masked_v, mods, ";".join(names), tensors,
                                                     sinks, _block_mask_id(block_mask))
    return dq, dk, dv, (dsink if want_dsink else None)


_attention._torch_ops = sys.modules[__name__]
