"""kiln.tune: the autotuner from Python, as `kiln tune` runs it: every candidate config of a kernel timed on the
GPU for one problem, the fastest remembered in the tuning cache (where later calls, and later processes, find
it), and the pick returned as a dict. Tuning times kernels, so it needs CUDA tensors on a GPU."""

import ctypes
import json

from . import _lib
from ._attention import (causal_code, described_mods, layout_code, lse_shape, mod_tensor_items, mods_spec,
                         scale_value)
from ._tensor import describe, is_numpy, is_torch
from .errors import KilnError, KilnUnavailableError
from .kernels import _params, _scalars

_ATTENTION_OPTIONS = ("causal", "scale", "layout", "tf32", "exact_masked_v", "mods", "mod_tensors")


def _require_cuda(what, tensors):
    for i, t in enumerate(tensors):
        if is_numpy(t) or (is_torch(t) and t.device.type != "cuda"):
            where = "a NumPy array" if is_numpy(t) else f"a tensor on {t.device}"
            raise KilnUnavailableError(
                f"{what}: tuning times kernels on a GPU and needs CUDA tensors; tensor {i} is {where} (host "
                f"memory runs in kiln's interpreter, which is not timed)")
        if not is_torch(t):
            raise KilnError(f"{what}: tensor {i} must be a CUDA torch tensor; got {type(t).__name__}")


def _mode(what, cached):
    if not isinstance(cached, bool):
        raise KilnError(f"{what}: cached must be True or False; got {cached!r}")
    return _lib.AUTOTUNE_CACHED if cached else _lib.AUTOTUNE_FORCE


def _tune_attention(q, k, v, cached, causal=None, scale=None, layout="bhsd", tf32=False, exact_masked_v=False,
                    mods=None, mod_tensors=None):
    import torch
    what = "kiln.tune('attention')"
    opts = _lib.attention_options(causal_code(causal), layout_code(layout), scale_value(scale), tf32=bool(tf32),
                                  stream=torch.cuda.current_stream(q.device).cuda_stream,
                                  exact_masked_v=bool(exact_masked_v), autotune=_mode(what, cached))
    described_mods(opts, mods_spec(mods), mod_tensor_items(mod_tensors))
    shape = lse_shape(q, layout)
    o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = None if shape is None else torch.empty(shape, dtype=torch.float32, device=q.device)
    structs = [None if t is None else describe(t, n) for t, n in zip((q, k, v, o, lse), ("q", "k", "v", "o", "lse"))]
    out = ctypes.c_char_p()
    _lib.check(_lib.lib().kiln_tune_attention_cuda(*structs, opts, ctypes.byref(out)))
    return json.loads(_lib.text(out))


def tune(kernel, *tensors, cached=False, config=None, **kwargs):
    """Tunes `kernel` for the problem these CUDA tensors describe and returns the pick as a dict: "kernel",
    "config" ({param: value, ..., "num_warps", "num_stages"}), "source" (where the pick came from:
    "tuned" when this process timed it, "disk" for the tuning cache, "default" when cached=True found nothing), "ms" (the winner's time, when there is one), "key" (the tuning key) and
    "table" (every candidate: "config", "status", "ms" or "reason").

      kiln.tune("attention", q, k, v, causal="top-left")   # what kiln.attention's forward will run
      kiln.tune("vector_add", x, y, out, n=x.numel())       # a registered kernel, bound as kiln.run binds it

    "attention": q, k, v as kiln.attention takes them, with its options causal, scale, layout, tf32,
    exact_masked_v, mods and mod_tensors (CUDA tensors). Any other name: a registered kernel (kiln.list_kernels()), its tensors and scalars as in
    kiln.run, `config` fixing parameters of its default config; every tensor is copied to scratch for the
    timing launches, so none is written. cached=True returns a remembered pick (or the default) without timing.
    NumPy arrays and CPU tensors raise KilnUnavailableError: tuning needs a GPU."""
    if not isinstance(kernel, str) or not kernel:
        raise KilnError(f"kiln.tune: kernel must be 'attention' or a registered kernel's name (kiln.list_kernels()); "
                        f"got {kernel!r}")
    what = f"kiln.tune('{kernel}')"
    if not tensors:
        raise KilnError(f"{what}: no tensors given; tuning times the kernel on CUDA tensors of the problem")
    _mode(what, cached)
    if kernel == "attention":
        if len(tensors) != 3:
            raise KilnError(f"{what}: expected the tensors q, k, v; got {len(tensors)} tensor(s)")
        unknown = sorted(set(kwargs) - set(_ATTENTION_OPTIONS))
        if unknown or config is not None:
            raise KilnError(f"{what}: unknown option(s) {', '.join(unknown or ['config'])}; it takes "
                            f"{', '.join(_ATTENTION_OPTIONS)} and cached")
        _require_cuda(what, tensors)
        return _tune_attention(*tensors, cached, **kwargs)
    _require_cuda(what, tensors)
    descs = (_lib.Tensor * len(tensors))(*[describe(t, f"tensor {i}") for i, t in enumerate(tensors)])
    sc, ns = _scalars(kwargs)
    params, n_params = _params(config)
    out = ctypes.c_char_p()
    _lib.check(_lib.lib().kiln_tune_cuda(kernel.encode(), descs, len(tensors), sc, ns, params, n_params,
                                         _mode(what, cached), ctypes.byref(out)))
    return json.loads(_lib.text(out))
