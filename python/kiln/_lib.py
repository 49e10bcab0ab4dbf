"""libkiln.so through ctypes: finding and loading it, the C ABI's structs (capi/kiln_c.h) and the functions'
signatures, and turning a failed status into KilnError. No other module touches ctypes' loader."""

import ctypes
import os
import sys
import threading

from .errors import OK, KilnError, error_for

MAX_DIMS = 8
ABI_VERSION = 6

# enum kiln_dtype
I1, U8, I32, I64, F16, BF16, F32, F64 = range(1, 9)
# enum kiln_causal, kiln_layout
CAUSAL_NONE, CAUSAL_TOP_LEFT, CAUSAL_BOTTOM_RIGHT = 0, 1, 2
LAYOUT_BHSD, LAYOUT_BSHD = 0, 1
# enum kiln_autotune
AUTOTUNE_ENV, AUTOTUNE_OFF, AUTOTUNE_CACHED, AUTOTUNE_ON, AUTOTUNE_FORCE = range(5)


class Tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("strides", ctypes.c_int64 * MAX_DIMS),
    ]


class ModTensor(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("tensor", Tensor)]


class AttentionOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("causal", ctypes.c_int32),
        ("layout", ctypes.c_int32),
        ("deterministic", ctypes.c_int32),
        ("tf32", ctypes.c_int32),
        ("scale", ctypes.c_double),
        ("stream", ctypes.c_void_p),
        # ABI version 2
        ("exact_masked_v", ctypes.c_int32),
        ("autotune", ctypes.c_int32),
        # ABI version 3
        ("mods", ctypes.c_char_p),
        ("mod_tensors", ctypes.POINTER(ModTensor)),
        ("num_mod_tensors", ctypes.c_int32),
        ("dsink", ctypes.POINTER(Tensor)),
        # ABI version 4
        ("block_mask", ctypes.c_void_p),  # const kiln_block_mask*
    ]


class VarlenBatch(ctypes.Structure):
    """kiln_varlen_batch (ABI version 5): the packing of a variable-length batch."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("cu_seqlens_q", Tensor),
        ("cu_seqlens_k", Tensor),
        ("max_seqlen_q", ctypes.c_int64),
        ("max_seqlen_k", ctypes.c_int64),
        ("check_offsets", ctypes.c_int32),
    ]


class DecodeOptions(ctypes.Structure):
    """kiln_decode_options (ABI version 5)."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("causal", ctypes.c_int32),
        ("scale", ctypes.c_double),
        ("num_splits", ctypes.c_int32),
        ("autotune", ctypes.c_int32),
        ("stream", ctypes.c_void_p),
        ("seqlens_k", ctypes.POINTER(Tensor)),
        ("block_table", ctypes.POINTER(Tensor)),
    ]


class Scalar(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("is_float", ctypes.c_int32),
        ("i", ctypes.c_int64),
        ("f", ctypes.c_double),
    ]


class Param(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_int64)]


_P = ctypes.POINTER
_T = _P(Tensor)
_STR_OUT = _P(ctypes.c_char_p)
_SIGNATURES = {
    "kiln_version": ([], ctypes.c_char_p),
    "kiln_abi_version": ([], ctypes.c_int32),
    "kiln_last_error": ([], ctypes.c_char_p),
    "kiln_status_name": ([ctypes.c_int32], ctypes.c_char_p),
    "kiln_attention_options_init": ([_P(AttentionOptions)], None),
    "kiln_attention_options_init_sized": ([_P(AttentionOptions), ctypes.c_uint32], None),
    "kiln_device_count": ([_P(ctypes.c_int32), _STR_OUT], ctypes.c_int),
    "kiln_device_info": ([ctypes.c_int32, _STR_OUT], ctypes.c_int),
    "kiln_gpu_available": ([_STR_OUT], ctypes.c_int32),
    "kiln_cache_path": ([_STR_OUT], ctypes.c_int),
    "kiln_cache_clear": ([_P(ctypes.c_int64)], ctypes.c_int),
    "kiln_attention_forward_cuda": ([_T, _T, _T, _T, _T, _P(AttentionOptions)], ctypes.c_int),
    "kiln_attention_forward_host": ([_T, _T, _T, _T, _T, _P(AttentionOptions)], ctypes.c_int),
    "kiln_attention_backward_cuda": ([_T] * 9 + [_P(AttentionOptions)], ctypes.c_int),
    "kiln_attention_backward_host": ([_T] * 9 + [_P(AttentionOptions)], ctypes.c_int),
    "kiln_attention_backward_workspace_size": ([_T, _P(AttentionOptions), _P(ctypes.c_uint64)], ctypes.c_int),
    "kiln_attention_backward_cuda_workspace": ([_T] * 9 + [ctypes.c_void_p, ctypes.c_uint64, _P(AttentionOptions)],
                                               ctypes.c_int),
    # ABI version 6: forward plans. The run takes plain addresses (c_void_p converts a Python int fastest).
    "kiln_attention_forward_plan": ([_T] * 5 + [_P(AttentionOptions), _P(ctypes.c_void_p)], ctypes.c_int),
    "kiln_attention_plan_forward": ([ctypes.c_void_p] * 7 + [ctypes.c_int32], ctypes.c_int),
    "kiln_attention_plan_destroy": ([ctypes.c_void_p], None),
    "kiln_tune_attention_cuda": ([_T] * 5 + [_P(AttentionOptions), _STR_OUT], ctypes.c_int),
    "kiln_tune_cuda": ([ctypes.c_char_p, _T, ctypes.c_int32, _P(Scalar), ctypes.c_int32, _P(Param), ctypes.c_int32,
                        ctypes.c_int32, _STR_OUT], ctypes.c_int),
    "kiln_varlen_batch_init_sized": ([_P(VarlenBatch), ctypes.c_uint32], None),
    "kiln_attention_varlen_forward_cuda": ([_T] * 5 + [_P(VarlenBatch), _P(AttentionOptions)], ctypes.c_int),
    "kiln_attention_varlen_forward_host": ([_T] * 5 + [_P(VarlenBatch), _P(AttentionOptions)], ctypes.c_int),
    "kiln_attention_varlen_backward_cuda": ([_T] * 9 + [_P(VarlenBatch), _P(AttentionOptions)], ctypes.c_int),
    "kiln_attention_varlen_backward_host": ([_T] * 9 + [_P(VarlenBatch), _P(AttentionOptions)], ctypes.c_int),
    "kiln_attention_varlen_backward_workspace_size": ([_T, _P(AttentionOptions), _P(ctypes.c_uint64)],
                                                      ctypes.c_int),
    "kiln_attention_varlen_backward_cuda_workspace": ([_T] * 9 + [_P(VarlenBatch), ctypes.c_void_p, ctypes.c_uint64,
                                                                  _P(AttentionOptions)], ctypes.c_int),
    "kiln_decode_options_init_sized": ([_P(DecodeOptions), ctypes.c_uint32], None),
    "kiln_decode_cuda": ([_T] * 5 + [_P(DecodeOptions)], ctypes.c_int),
    "kiln_decode_host": ([_T] * 5 + [_P(DecodeOptions)], ctypes.c_int),
    "kiln_decode_workspace_size": ([_T] * 5 + [_P(DecodeOptions), _P(ctypes.c_uint64), _P(ctypes.c_int32)],
                                   ctypes.c_int),
    "kiln_decode_cuda_workspace": ([_T] * 5 + [ctypes.c_void_p, ctypes.c_uint64, _P(DecodeOptions)], ctypes.c_int),
    "kiln_block_mask_create_cuda": ([ctypes.c_int64] * 7 + [_P(AttentionOptions), _P(ctypes.c_void_p)], ctypes.c_int),
    "kiln_block_mask_create_host": ([ctypes.c_int64] * 7 + [_P(AttentionOptions), _P(ctypes.c_void_p)], ctypes.c_int),
    "kiln_block_mask_destroy": ([ctypes.c_void_p], None),
    "kiln_block_mask_info": ([ctypes.c_void_p, _STR_OUT], ctypes.c_int),
    "kiln_list_kernels": ([_STR_OUT], ctypes.c_int),
    "kiln_emit": ([ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, _P(Param), ctypes.c_int32, _STR_OUT],
                  ctypes.c_int),
    "kiln_run_host": ([ctypes.c_char_p, _T, ctypes.c_int32, _P(Scalar), ctypes.c_int32, _P(Param), ctypes.c_int32,
                       _P(ctypes.c_int64)], ctypes.c_int),
    "kiln_run_cuda": ([ctypes.c_char_p, _T, ctypes.c_int32, _P(Scalar), ctypes.c_int32, _P(Param), ctypes.c_int32,
                       _P(ctypes.c_int64), ctypes.c_void_p], ctypes.c_int),
}

LIBRARY_ENV = "KILN_LIBRARY"
_lock = threading.Lock()
_lib = None


def library_path():
    """Where libkiln.so is loaded from: $KILN_LIBRARY when set, else the copy installed inside the package."""
    explicit = os.environ.get(LIBRARY_ENV)
    if explicit:
        return explicit
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "libkiln.so")


def lib():
    """The loaded libkiln with every function's signature declared (loaded once, on first use)."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            path = library_path()
            if not os.path.exists(path):
                raise KilnError(
                    f"libkiln.so not found at {path}: install the package built with kiln (pip install "
                    f"build-ci/python, see README 'Using it') or set {LIBRARY_ENV} to the library's path")
            try:
                handle = ctypes.CDLL(path)
            except OSError as e:
                raise KilnError(f"cannot load libkiln from {path}: {e}") from None
            # The version first: an older library lacks the newer functions, and should be named as older.
            handle.kiln_abi_version.restype = ctypes.c_int32
            abi = handle.kiln_abi_version()
            if abi < ABI_VERSION:
                raise KilnError(f"{path} has C ABI version {abi}; this package needs {ABI_VERSION} or later")
            for name, (args, res) in _SIGNATURES.items():
                fn = getattr(handle, name)
                fn.argtypes = args
                fn.restype = res
            _lib = handle
    return _lib


def check(status):
    """Raises KilnError (KilnUnavailableError for KILN_ERROR_UNAVAILABLE) with kiln's message unless OK."""
    if status != OK:
        message = lib().kiln_last_error().decode("utf-8", "replace")
        raise error_for(status, message)


class AttentionPlan:
    """A libkiln forward plan (kiln_attention_forward_plan) and its owner: destroyed when this object goes. `run`
    is kiln_attention_plan_forward, to be called as run(handle, q, k, v, o, lse, stream, autotune) with device
    addresses as ints; `device` is the CUDA device index it was made for. Nothing is destroyed while the
    interpreter shuts down (a plan is host memory, which the process's exit takes back, and libkiln may be
    half torn down by then)."""
    __slots__ = ("handle", "run", "device", "_destroy", "_finalizing")

    def __init__(self, tensors, opts, device):
        """The plan of a forward on `tensors` (q, k, v, o, lse as Tensor structs) with options `opts`."""
        lib_ = lib()
        out = ctypes.c_void_p()
        self.handle = None
        check(lib_.kiln_attention_forward_plan(*tensors, opts, ctypes.byref(out)))
        self.handle, self.run, self.device = out.value, lib_.kiln_attention_plan_forward, device
        self._destroy, self._finalizing = lib_.kiln_attention_plan_destroy, sys.is_finalizing

    def __del__(self):
        handle, self.handle = self.handle, None
        if handle and not self._finalizing():
            self._destroy(handle)


_OPTIONS_SIZE = ctypes.sizeof(AttentionOptions)


def attention_options(causal, layout, scale, deterministic=True, tf32=False, stream=None, exact_masked_v=False,
                      autotune=AUTOTUNE_ENV):
    """kiln_attention_options with struct_size set, as kiln_attention_options_init makes it, and these fields."""
    return AttentionOptions(_OPTIONS_SIZE, causal, layout, int(deterministic), int(tf32), scale, stream,
                            int(exact_masked_v), autotune)


def varlen_batch(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, check_offsets=True):
    """kiln_varlen_batch as kiln_varlen_batch_init makes it, with the offsets' Tensor structs and these fields."""
    b = VarlenBatch()
    lib().kiln_varlen_batch_init_sized(ctypes.byref(b), ctypes.sizeof(b))
    b.cu_seqlens_q, b.cu_seqlens_k = cu_seqlens_q, cu_seqlens_k
    b.max_seqlen_q, b.max_seqlen_k = max_seqlen_q, max_seqlen_k
    b.check_offsets = int(check_offsets)
    return b


def decode_options(causal, scale, num_splits, seqlens_k=None, block_table=None, stream=None, autotune=AUTOTUNE_ENV):
    """kiln_decode_options as kiln_decode_options_init makes it, with these fields (seqlens_k and block_table:
    Tensor structs or None, kept alive by the struct)."""
    o = DecodeOptions()
    lib().kiln_decode_options_init_sized(ctypes.byref(o), ctypes.sizeof(o))
    o.causal, o.scale, o.num_splits, o.stream, o.autotune = causal, scale, num_splits, stream, autotune
    o.seqlens_k = None if seqlens_k is None else ctypes.pointer(seqlens_k)
    o.block_table = None if block_table is None else ctypes.pointer(block_table)
    o.keep_alive = [seqlens_k, block_table]
    return o


def set_mods(opts, spec, named_tensors, dsink=None):
    """Sets opts' mods (a ';'-separated spec string, or None), its mod tensors (name, kiln Tensor struct) pairs
    and its dsink (a Tensor struct or None). What the pointers reach is kept alive by opts (and returned)."""
    keep = []
    opts.mods = spec.encode() if spec else None
    if named_tensors:
        arr = (ModTensor * len(named_tensors))(*(ModTensor(n.encode(), t) for n, t in named_tensors))
        opts.mod_tensors, opts.num_mod_tensors = arr, len(named_tensors)
        keep.append(arr)
    else:
        opts.mod_tensors, opts.num_mod_tensors = None, 0
    if dsink is not None:
        opts.dsink = ctypes.pointer(dsink)
        keep.append(dsink)
    else:
        opts.dsink = None
    opts.keep_alive = keep
    return keep


def text(ptr):
    return ptr.value.decode("utf-8") if isinstance(ptr, ctypes.c_char_p) else ptr.decode("utf-8")
