"""What version 2 of libkiln's C ABI added, through ctypes: the options struct's new fields beside a version-1
caller's smaller struct, the backward's workspace query and its capturable entry point, and the tuning entry
points' answers without a GPU."""

import ctypes

import numpy as np
import pytest

import kiln
from kiln import _lib
from kiln._tensor import describe
from kiln.errors import ERROR, ERROR_INVALID_ARGUMENT, ERROR_UNAVAILABLE, OK

from abi_calls import HAS_GPU, LIB, last_error, options

V1_SIZE = _lib.AttentionOptions.exact_masked_v.offset  # the version-1 struct ends before exact_masked_v


def host_call(shape=(1, 2, 16, 16)):
    """The arrays of a valid host call (the caller keeps them alive) and their kiln_tensor structs."""
    q = np.zeros(shape, np.float32)
    arrays = (q, q.copy(), q.copy(), np.empty_like(q), np.empty(shape[:3], np.float32))
    return arrays, [describe(a, f"t{i}") for i, a in enumerate(arrays)]


def test_version_1_init_writes_only_the_version_1_struct():
    size = ctypes.sizeof(_lib.AttentionOptions)
    assert V1_SIZE == 40 and _lib.AttentionOptions.mods.offset == 48  # version 2 ended at 48 bytes
    raw = (ctypes.c_uint8 * size)(*([0x7F] * size))
    o = _lib.AttentionOptions.from_buffer(raw)
    LIB.kiln_attention_options_init(ctypes.byref(o))  # the exported name of ABI version 1
    assert o.struct_size == V1_SIZE and o.deterministic == 1
    assert bytes(raw[V1_SIZE:]) == b"\x7f" * (size - V1_SIZE)  # nothing written past a version-1 caller's struct
    LIB.kiln_attention_options_init_sized(ctypes.byref(o), 12)  # an unknown size: left untouched
    assert o.struct_size == V1_SIZE


def test_version_1_struct_is_accepted_and_its_new_fields_ignored():
    arrays, descs = host_call()  # arrays: kept alive for the call
    o = options(exact_masked_v=1, autotune=99)  # past a version-1 struct: never read
    o.struct_size = V1_SIZE
    assert LIB.kiln_attention_forward_host(*descs, o) == OK, last_error()


def test_bad_autotune_is_invalid_argument():
    arrays, descs = host_call()  # arrays: kept alive for the call
    assert LIB.kiln_attention_forward_host(*descs, options(autotune=5)) == ERROR_INVALID_ARGUMENT
    assert "autotune must be a kiln_autotune" in last_error()


@pytest.mark.parametrize("layout,shape", [(_lib.LAYOUT_BHSD, (2, 3, 40, 16)), (_lib.LAYOUT_BSHD, (2, 40, 3, 16))])
def test_workspace_size(layout, shape):
    q = describe(np.zeros(shape, np.float16), "q")
    n = ctypes.c_uint64()
    rows = 2 * 3 * 40
    assert LIB.kiln_attention_backward_workspace_size(q, options(layout=layout), ctypes.byref(n)) == OK
    assert n.value == rows * 4  # Delta only
    assert LIB.kiln_attention_backward_workspace_size(q, options(layout=layout, deterministic=0),
                                                      ctypes.byref(n)) == OK
    assert n.value == (rows * 4 + 255) // 256 * 256 + rows * 16 * 4  # and the f32 dQ accumulator
    q.data = None  # only the shape is read
    assert LIB.kiln_attention_backward_workspace_size(q, options(), ctypes.byref(n)) == OK
    q.ndim = 3
    assert LIB.kiln_attention_backward_workspace_size(q, options(), ctypes.byref(n)) == ERROR
    assert "q must have rank 4" in last_error()
    assert LIB.kiln_attention_backward_workspace_size(q, options(), None) == ERROR_INVALID_ARGUMENT


def fake_device_tensors():
    """q, k, v, o, lse, dout, dq, dk, dv at fake, aligned device addresses (nothing is dereferenced)."""
    shape, strides = (1, 2, 64, 64), (8192, 4096, 64, 1)
    out = []
    for i in range(9):
        t = _lib.Tensor(ctypes.c_void_p(0x10000000 * (i + 1)), _lib.F16, 4)
        if i == 4:
            t.dtype, t.ndim = _lib.F32, 3
        for d in range(t.ndim):
            t.shape[d], t.strides[d] = shape[d], strides[d] // (64 if i == 4 else 1)
        out.append(t)
    return out


@pytest.mark.skipif(HAS_GPU, reason="checks the no-GPU answers")
def test_capturable_backward_without_gpu():
    t = fake_device_tensors()
    status = LIB.kiln_attention_backward_cuda_workspace(*t, ctypes.c_void_p(0xA0000000), 1 << 20, options())
    assert status == ERROR_UNAVAILABLE and "kiln_attention_backward_cuda_workspace needs a GPU" in last_error()
    # A workspace too small is the caller's mistake, with a GPU or without one.
    status = LIB.kiln_attention_backward_cuda_workspace(*t, ctypes.c_void_p(0xA0000000), 16, options())
    assert status == ERROR and "the workspace has 16 bytes" in last_error()
    t[6].shape[3] = 32  # dq shaped unlike q: still reported as the mistake
    status = LIB.kiln_attention_backward_cuda_workspace(*t, ctypes.c_void_p(0xA0000000), 1 << 20, options())
    assert status == ERROR and "dq has shape" in last_error()


@pytest.mark.skipif(HAS_GPU, reason="checks the no-GPU answers")
def test_tuning_entry_points_without_gpu():
    t = fake_device_tensors()
    out = ctypes.c_char_p()
    status = LIB.kiln_tune_attention_cuda(*t[:4], None, options(), ctypes.byref(out))
    assert status == ERROR_UNAVAILABLE and "kiln_tune_attention_cuda needs a GPU" in last_error()
    assert LIB.kiln_tune_attention_cuda(*t[:4], None, options(), None) == ERROR_INVALID_ARGUMENT
    x = np.zeros(4, np.float32)
    descs = (_lib.Tensor * 3)(*(describe(x, "t") for _ in range(3)))
    sc = (_lib.Scalar * 1)(_lib.Scalar(b"n", 0, 4, 0.0))
    assert LIB.kiln_tune_cuda(b"vector_add", descs, 3, sc, 1, None, 0, 0, ctypes.byref(out)) == ERROR_UNAVAILABLE
    assert "kiln_tune_cuda needs a GPU" in last_error()
    assert LIB.kiln_tune_cuda(b"no_such_kernel", descs, 3, sc, 1, None, 0, 0, ctypes.byref(out)) == ERROR
    assert "no_such_kernel" in last_error()
    assert LIB.kiln_tune_cuda(b"vector_add", descs, 3, sc, 1, None, 0, 7, ctypes.byref(out)) == \
        ERROR_INVALID_ARGUMENT
