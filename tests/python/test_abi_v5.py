"""What version 5 of libkiln's C ABI added, through ctypes: kiln_varlen_batch and kiln_decode_options (their
initializers write no byte past the caller's size; an unknown struct_size is refused), the packed-attention and
decoding entry points' statuses and messages for malformed calls, the workspace queries, and the *_cuda entry
points' answers without a GPU (the argument mistakes still reported as such)."""

import ctypes

import numpy as np
import pytest

from kiln import _lib
from kiln._tensor import describe
from kiln.errors import ERROR, ERROR_INVALID_ARGUMENT, ERROR_UNAVAILABLE, OK

from abi_calls import HAS_GPU, LIB, last_error, options


def batch(cu_q, cu_k, max_q, max_k):
    return _lib.varlen_batch(describe(cu_q, "cu_q"), describe(cu_k, "cu_k"), max_q, max_k)


def host_varlen(total_q=6, total_k=5, heads=2, d=16):
    """Arrays of a valid packed host call (two sequences; kept alive by the caller), their structs and batch."""
    q = np.random.default_rng(0).uniform(-1, 1, (total_q, heads, d)).astype(np.float32)
    k = np.random.default_rng(1).uniform(-1, 1, (total_k, heads, d)).astype(np.float32)
    cu_q = np.array([0, 2, total_q], np.int32)
    cu_k = np.array([0, 3, total_k], np.int32)
    arrays = [q, k, k.copy(), np.empty_like(q), np.empty((heads, total_q), np.float32), cu_q, cu_k]
    return arrays, [describe(a, f"t{i}") for i, a in enumerate(arrays[:5])], batch(cu_q, cu_k, 4, 3)


def test_abi_version_is_at_least_5_and_the_new_structs_are_sized_once():
    assert LIB.kiln_abi_version() >= 5 and _lib.ABI_VERSION >= 5
    assert ctypes.sizeof(_lib.VarlenBatch) == 320 and ctypes.sizeof(_lib.DecodeOptions) == 48


@pytest.mark.parametrize("struct,init", [(_lib.VarlenBatch, "kiln_varlen_batch_init_sized"),
                                         (_lib.DecodeOptions, "kiln_decode_options_init_sized")])
def test_init_writes_its_size_only_and_refuses_other_sizes(struct, init):
    size = ctypes.sizeof(struct)
    raw = (ctypes.c_uint8 * (size + 8))(*([0x7F] * (size + 8)))
    s = struct.from_buffer(raw)
    getattr(LIB, init)(ctypes.byref(s), size - 8)  # no size of this struct: untouched
    assert bytes(raw) == b"\x7f" * (size + 8)
    getattr(LIB, init)(ctypes.byref(s), size)
    assert s.struct_size == size and bytes(raw[size:]) == b"\x7f" * 8
    if struct is _lib.VarlenBatch:
        assert s.check_offsets == 1 and s.max_seqlen_q == 0 and s.cu_seqlens_q.dtype == _lib.I32
    else:
        assert (s.causal, s.scale, s.num_splits, s.autotune) == (0, 0.0, 0, _lib.AUTOTUNE_ENV)
        assert not s.seqlens_k and not s.block_table and not s.stream
    getattr(LIB, init)(None, size)  # nothing


def test_varlen_host_call_and_its_malformed_variants():
    arrays, t, b = host_varlen()
    assert LIB.kiln_attention_varlen_forward_host(*t, b, options()) == OK, last_error()
    assert np.isfinite(arrays[3]).all()
    assert LIB.kiln_attention_varlen_forward_host(*t, None, options()) == ERROR_INVALID_ARGUMENT
    assert last_error() == "batch must not be NULL"
    b.struct_size -= 8
    assert LIB.kiln_attention_varlen_forward_host(*t, b, options()) == ERROR_INVALID_ARGUMENT
    assert "kiln_varlen_batch.struct_size must be 320 (call kiln_varlen_batch_init); got 312" in last_error()
    b.struct_size += 8
    assert LIB.kiln_attention_varlen_forward_host(*t, b, options(layout=_lib.LAYOUT_BSHD)) == ERROR
    assert "packed tensors have one layout" in last_error()
    o = options()
    o.block_mask = 0xB10C
    assert LIB.kiln_attention_varlen_forward_host(*t, b, o) == ERROR
    assert last_error() == ("kiln_attention_varlen_forward_host: kiln_attention_options.block_mask is set, but block "
                            "masks are not built for variable-length batches yet; expected NULL")
    o = options()
    o.dsink = ctypes.pointer(t[4])
    assert LIB.kiln_attention_varlen_forward_host(*t, b, o) == ERROR and "dsink" in last_error()
    b.max_seqlen_q = 3  # the second sequence has 4 rows
    assert LIB.kiln_attention_varlen_forward_host(*t, b, options()) == ERROR
    assert "sequence 1 has 4 tokens" in last_error() and "attention::forward_varlen" in last_error()


def test_varlen_backward_host_and_its_workspace_query():
    arrays, t, b = host_varlen()
    assert LIB.kiln_attention_varlen_forward_host(*t, b, options()) == OK, last_error()
    grads = [np.zeros_like(arrays[i]) for i in (0, 0, 1, 2)]  # dout, dq, dk, dv
    g = [describe(x, "g") for x in grads]
    assert LIB.kiln_attention_varlen_backward_host(*t, *g, b, options()) == OK, last_error()
    assert np.abs(grads[3]).sum() == 0  # dout = 0: no gradient
    assert LIB.kiln_attention_varlen_backward_host(*t[:4], None, *g, b, options()) == ERROR_INVALID_ARGUMENT
    assert "lse (the backward needs the forward's LSE) must not be NULL" in last_error()
    n = ctypes.c_uint64()
    assert LIB.kiln_attention_varlen_backward_workspace_size(t[0], options(), ctypes.byref(n)) == OK
    assert n.value == 2 * 6 * 4  # Delta, f32 [H, total_q]: the deterministic pair
    assert LIB.kiln_attention_varlen_backward_workspace_size(t[0], options(deterministic=0), ctypes.byref(n)) == OK
    assert n.value == 256 + 2 * 6 * 16 * 4  # and the atomic pair's dQ accumulator, f32 [H, total_q, D], at 256 bytes
    assert LIB.kiln_attention_varlen_backward_workspace_size(t[4], options(), ctypes.byref(n)) == ERROR
    assert "q must have rank 3" in last_error()
    assert LIB.kiln_attention_varlen_backward_workspace_size(t[0], options(), None) == ERROR_INVALID_ARGUMENT


def decode_host_call(page=16):
    """A valid paged decode call's arrays (kept alive by the caller), structs and options."""
    rng = np.random.default_rng(2)
    q = rng.uniform(-1, 1, (2, 1, 4, 16)).astype(np.float32)
    k = rng.uniform(-1, 1, (4, page, 2, 16)).astype(np.float32)
    table = np.array([[3, 0], [1, 2]], np.int32)
    lens = np.array([page + 1, 0], np.int32)
    arrays = [q, k, k.copy(), np.empty_like(q), np.empty((2, 4, 1), np.float32), table, lens]
    t = [describe(a, f"t{i}") for i, a in enumerate(arrays[:5])]
    return arrays, t, _lib.decode_options(_lib.CAUSAL_BOTTOM_RIGHT, 0.0, 0, describe(lens, "lens"),
                                          describe(table, "table"))


def test_decode_host_call_and_its_malformed_variants():
    arrays, t, o = decode_host_call()
    assert LIB.kiln_decode_host(*t, o) == OK, last_error()
    assert np.all(arrays[3][1] == 0) and np.all(np.isneginf(arrays[4][1]))  # the empty sequence
    assert LIB.kiln_decode_host(*t, None) == ERROR  # defaults: no block table, so the cache must be [B, N_K, ...]
    assert "k_cache has batch 4 but q has 2" in last_error()
    o.causal = _lib.CAUSAL_TOP_LEFT
    assert LIB.kiln_decode_host(*t, o) == ERROR and "options.causal is TopLeft" in last_error()
    o.causal = 7
    assert LIB.kiln_decode_host(*t, o) == ERROR_INVALID_ARGUMENT
    assert "kiln_decode_options.causal must be KILN_CAUSAL_NONE (0), KILN_CAUSAL_TOP_LEFT (1) or " \
           "KILN_CAUSAL_BOTTOM_RIGHT (2); got 7" in last_error()
    o.causal, o.autotune = _lib.CAUSAL_NONE, 9
    assert LIB.kiln_decode_host(*t, o) == ERROR_INVALID_ARGUMENT and "autotune" in last_error()
    o.autotune, o.struct_size = _lib.AUTOTUNE_ENV, 40
    assert LIB.kiln_decode_host(*t, o) == ERROR_INVALID_ARGUMENT
    assert "kiln_decode_options.struct_size must be 48 (call kiln_decode_options_init); got 40" in last_error()
    o.struct_size = 48
    assert LIB.kiln_decode_host(None, *t[1:], o) == ERROR_INVALID_ARGUMENT and last_error() == "q must not be NULL"


def test_decode_workspace_size_with_a_given_split_count_needs_no_gpu():
    arrays, t, o = decode_host_call()
    o.num_splits = 3
    n, splits = ctypes.c_uint64(), ctypes.c_int32()
    assert LIB.kiln_decode_workspace_size(*t, o, ctypes.byref(n), ctypes.byref(splits)) == OK, last_error()
    rows = 2 * 4 * 1  # B * H * N_Q
    assert splits.value == 3 and n.value == (3 * rows * (16 + 1) + rows) * 4  # partials, then the final LSE
    assert LIB.kiln_decode_workspace_size(*t, o, None, None) == ERROR_INVALID_ARGUMENT


def fake_varlen_device_tensors():
    """q, k, v, o, lse, dout, dq, dk, dv of a packed call at fake aligned device addresses, and its batch."""
    shapes = [(64, 2, 64)] * 4 + [(2, 64)] + [(64, 2, 64)] * 4
    out = []
    for i, shape in enumerate(shapes):
        t = _lib.Tensor(ctypes.c_void_p(0x10000000 * (i + 1)), _lib.F32 if i == 4 else _lib.F16, len(shape))
        stride = 1
        for d in reversed(range(len(shape))):
            t.shape[d], t.strides[d] = shape[d], stride
            stride *= shape[d]
        out.append(t)
    cu = [_lib.Tensor(ctypes.c_void_p(0xF0000000 + 0x100 * i), _lib.I32, 1) for i in range(2)]
    for c in cu:
        c.shape[0], c.strides[0] = 3, 1
    b = _lib.VarlenBatch()
    LIB.kiln_varlen_batch_init_sized(ctypes.byref(b), ctypes.sizeof(b))
    b.cu_seqlens_q, b.cu_seqlens_k, b.max_seqlen_q, b.max_seqlen_k = cu[0], cu[1], 40, 40
    return out, b


@pytest.mark.skipif(HAS_GPU, reason="checks the no-GPU answers")
def test_cuda_entry_points_without_gpu():
    t, b = fake_varlen_device_tensors()
    assert LIB.kiln_attention_varlen_forward_cuda(*t[:5], b, options()) == ERROR_UNAVAILABLE
    assert "kiln_attention_varlen_forward_cuda needs a GPU" in last_error()
    assert LIB.kiln_attention_varlen_backward_cuda(*t, b, options()) == ERROR_UNAVAILABLE
    ws = ctypes.c_void_p(0xA0000000)
    assert LIB.kiln_attention_varlen_backward_cuda_workspace(*t, b, ws, 1 << 20, options()) == ERROR_UNAVAILABLE
    assert "kiln_attention_varlen_backward_cuda_workspace needs a GPU" in last_error()
    # A workspace too small is the caller's mistake, with a GPU or without one.
    assert LIB.kiln_attention_varlen_backward_cuda_workspace(*t, b, ws, 16, options()) == ERROR
    assert "the workspace has 16 bytes" in last_error() and "varlen_backward_workspace_bytes" in last_error()
    t[6].shape[2] = 32  # dq shaped unlike q: still reported as the mistake
    assert LIB.kiln_attention_varlen_backward_cuda_workspace(*t, b, ws, 1 << 20, options()) == ERROR
    assert "dq has shape" in last_error()

    arrays, d, o = decode_host_call()  # host addresses stand in for device ones: nothing is dereferenced
    assert LIB.kiln_decode_cuda(*d, o) == ERROR_UNAVAILABLE and "kiln_decode_cuda needs a GPU" in last_error()
    n, splits = ctypes.c_uint64(), ctypes.c_int32()
    assert LIB.kiln_decode_workspace_size(*d, o, ctypes.byref(n), ctypes.byref(splits)) == ERROR_UNAVAILABLE
    assert "set num_splits to size the workspace without a GPU" in last_error()
    assert LIB.kiln_decode_cuda_workspace(*d, ws, 1 << 20, o) == ERROR_UNAVAILABLE
    o.causal = _lib.CAUSAL_TOP_LEFT
    assert LIB.kiln_decode_cuda_workspace(*d, ws, 1 << 20, o) == ERROR and "TopLeft" in last_error()
