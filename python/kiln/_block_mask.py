"""kiln.block_mask: FlexAttention's BlockMask through libkiln (kiln_block_mask, C ABI version 4). Per query tile,
the key tiles the mask shows fully and those it shows partly, computed once from the mask mods (and the causal
mode) by kiln's classifier kernels, then passed to kiln.attention / kiln.attention_backward as block_mask= for as
many calls as share the sizes and the mask, which then visit only the listed tiles.

A BlockMask owns its libkiln handle and frees it when it is garbage-collected. The torch custom ops cannot take
a Python object (torch.compile traces their arguments: tensors, ints, strings), so each BlockMask has an integer
`id` that the ops take instead and look up in a registry of the live block masks. The registry holds them
weakly: it never keeps one alive, so a block mask is freed when the caller drops it (and the autograd context of
a forward that used it, which keeps it until the backward). Ids are never reused, so a stale id is an error,
never another mask."""

import ctypes
import itertools
import json
import operator
import os
import sys
import weakref

from . import _attention, _lib
from ._tensor import is_torch, on_cuda
from .errors import KilnError

_ids = itertools.count(1)
_live = weakref.WeakValueDictionary()  # id -> BlockMask, for the torch ops


def _size(value, what):
    try:
        if not isinstance(value, bool):
            return operator.index(value)
    except TypeError:
        pass
    raise KilnError(f"kiln.block_mask: {what} must be an int; got {value!r}")


def _on_cuda(device, named):
    """Whether the block mask is made for CUDA tensors: `device` when given ("cuda", "cuda:0", a torch.device,
    "cpu"), else where the mod tensors are (CUDA torch tensors: the GPU; NumPy arrays or none: the host)."""
    if device is None:
        kinds = {on_cuda(t) for _, t in named}
        if len(kinds) > 1:
            raise KilnError("kiln.block_mask: the mod tensors are partly on CUDA, partly on the host; expected all on "
                            "one")
        return kinds == {True}
    kind = str(device).split(":")[0]
    if kind not in ("cuda", "cpu"):
        raise KilnError(f"kiln.block_mask: device must be 'cuda' (a kiln_block_mask_create_cuda mask, for CUDA "
                        f"tensors) or 'cpu' (the interpreter's, for NumPy arrays and CPU tensors); got {device!r}")
    return kind == "cuda"


def _stream(device, named):
    """torch's current stream on kiln's device when torch is loaded (the ops launch on it too), else NULL (the
    legacy default stream)."""
    tensors = [t for _, t in named if is_torch(t)]
    if not tensors and "torch" not in sys.modules:
        return None
    from . import torch_ops
    index = tensors[0].get_device() if tensors else int(os.environ.get("KILN_DEVICE", "0") or 0)
    return torch_ops.torch.cuda.current_stream(index).cuda_stream


class BlockMask:
    """A block mask made by kiln.block_mask. Attributes: block_m, block_n (the tiles the forward and the
    backward then run at), runs (every list is one run of consecutive key tiles or empty: the forward runs its
    two-range kernel), on_cuda, sizes (B, H, H_KV, N_Q, N_K), causal ("none", "top-left", "bottom-right"),
    mask_mods (their names, "" for none) and id (what the torch ops take)."""

    def __init__(self, handle, info):
        self._handle = handle
        self._finalizer = weakref.finalize(self, _lib.lib().kiln_block_mask_destroy, handle)
        self._finalizer.atexit = False  # the process's exit frees it; the driver may be gone by then
        self.on_cuda = info["memory"] == "cuda"
        self.sizes = tuple(info[k] for k in ("B", "H", "H_KV", "N_Q", "N_K"))
        self.block_m, self.block_n = info["block_m"], info["block_n"]
        self.causal, self.mask_mods, self.runs = info["causal"], info["mask_mods"], info["runs"]
        self.id = next(_ids)
        _live[self.id] = self

    @property
    def handle(self):
        """The kiln_block_mask* as an integer, for kiln_attention_options.block_mask."""
        return self._handle

    def __repr__(self):
        b, h, h_kv, n_q, n_k = self.sizes
        return (f"BlockMask({'cuda' if self.on_cuda else 'host'}, B={b} H={h} H_KV={h_kv} N_Q={n_q} N_K={n_k}, "
                f"tiles {self.block_m}x{self.block_n}, causal {self.causal}, mask mods [{self.mask_mods}], "
                f"runs={self.runs})")


def block_mask(batch, heads, n_q, n_k, *, kv_heads=None, block_m=128, block_n=64, causal=None, mods=None,
               mod_tensors=None, device=None):
    """A block mask for kiln.attention(..., block_mask=) calls of `batch` batches, `heads` query heads
    (`kv_heads` kv heads, default `heads`), n_q queries and n_k keys, at tiles block_m x block_n (powers of two
    in [16, 256]: the forward and the backward then run at these tiles). `causal`, `mods` and `mod_tensors` are
    those of the calls (as kiln.attention takes them); only the mask mods ("causal", "sliding_window",
    "prefix_lm", "document") and the tensors they read ("q_doc", "kv_doc") are evaluated, so the calls may add
    score mods and sinks, and must keep the mask mods and their tensors' values. `device`: "cuda" (evaluated on
    the GPU, for CUDA tensors; on torch's current stream when torch is loaded) or "cpu" (in the interpreter, for
    NumPy arrays and CPU tensors); None: "cuda" when the mod tensors are CUDA tensors, else "cpu".

        bm = kiln.block_mask(B, H, N, N, block_m=128, block_n=64, mods="document",
                             mod_tensors={"q_doc": docs, "kv_doc": docs})
        o = kiln.attention(q, k, v, mods="document;softcap=30", mod_tensors={...}, block_mask=bm)
    """
    sizes = [_size(v, w) for v, w in ((batch, "batch"), (heads, "heads"),
                                      (heads if kv_heads is None else kv_heads, "kv_heads"), (n_q, "n_q"),
                                      (n_k, "n_k"), (block_m, "block_m"), (block_n, "block_n"))]
    spec, named = _attention.mods_spec(mods), _attention.mod_tensor_items(mod_tensors)
    cuda = _on_cuda(device, named)
    opts = _lib.attention_options(_attention.causal_code(causal), _lib.LAYOUT_BHSD, 0.0,
                                  stream=_stream(device, named) if cuda else None)
    _attention.described_mods(opts, spec, named)
    handle = ctypes.c_void_p()
    lib = _lib.lib()
    create = lib.kiln_block_mask_create_cuda if cuda else lib.kiln_block_mask_create_host
    _lib.check(create(*sizes, ctypes.byref(opts), ctypes.byref(handle)))
    text = ctypes.c_char_p()
    status = lib.kiln_block_mask_info(handle, ctypes.byref(text))
    if status != 0:
        lib.kiln_block_mask_destroy(handle)
        _lib.check(status)
    return BlockMask(handle.value, json.loads(_lib.text(text)))


def check_block_mask(bm):
    """`bm` (None or a BlockMask) as the kiln_block_mask* for the options (None for none)."""
    if bm is None:
        return None
    if not isinstance(bm, BlockMask):
        raise KilnError(f"block_mask must be None or a kiln.BlockMask from kiln.block_mask(); got "
                        f"{type(bm).__name__}")
    return bm.handle


def by_id(block_mask_id):
    """The live BlockMask of an id the torch ops were given (None for 0); a KilnError for a freed one."""
    if block_mask_id == 0:
        return None
    bm = _live.get(block_mask_id)
    if bm is None:
        raise KilnError(f"kiln attention: block mask id {block_mask_id} was freed (its kiln.BlockMask was garbage-"
                        f"collected); keep the BlockMask referenced while calls use it")
    return bm
