"""What version 6 of libkiln's C ABI added, through ctypes: forward plans (kiln_attention_forward_plan,
kiln_attention_plan_forward, kiln_attention_plan_destroy) as _lib declares them, their statuses and messages for
malformed calls, a plan of an empty problem (made and run without a GPU), the answer without a GPU, and
_lib.AttentionPlan, the owner torch_ops keeps per signature. The runs on a GPU: tests/python/gpu and
tests/gpu/attention_forward_plan_gpu_test.cpp."""

import ctypes
import gc

import numpy as np
import pytest

from kiln import _lib
from kiln._tensor import describe
from kiln.errors import ERROR, ERROR_INVALID_ARGUMENT, ERROR_UNAVAILABLE, OK, KilnError

from abi_calls import HAS_GPU, LIB, last_error, options


def structs(b=1, h=2, n=8, d=16):
    """Host arrays of a valid f32 forward (kept alive by the caller) and their Tensor structs: q, k, v, o, lse."""
    arrays = [np.zeros((b, h, n, d), np.float32) for _ in range(4)] + [np.zeros((b, h, n), np.float32)]
    return arrays, [describe(a, f"t{i}") for i, a in enumerate(arrays)]


def test_abi_version_is_6_and_the_plan_calls_take_plain_arguments():
    assert LIB.kiln_abi_version() == 6 and _lib.ABI_VERSION == 6
    # The run takes addresses and an int, which ctypes converts without building a struct.
    assert LIB.kiln_attention_plan_forward.argtypes == [ctypes.c_void_p] * 7 + [ctypes.c_int32]
    assert LIB.kiln_attention_plan_forward.restype is ctypes.c_int
    assert LIB.kiln_attention_forward_plan.argtypes[-1] == ctypes.POINTER(ctypes.c_void_p)
    assert LIB.kiln_attention_plan_destroy.restype is None


def test_malformed_creations():
    arrays, t = structs()
    out = ctypes.c_void_p(0xDEAD)
    assert LIB.kiln_attention_forward_plan(*t, options(), None) == ERROR_INVALID_ARGUMENT
    assert last_error() == "plan must not be NULL"
    assert LIB.kiln_attention_forward_plan(*t[:4], None, options(), ctypes.byref(out)) == ERROR_INVALID_ARGUMENT
    assert out.value is None and "lse" in last_error()
    t[1].shape[3] = 8
    assert LIB.kiln_attention_forward_plan(*t, options(), ctypes.byref(out)) == ERROR
    assert "attention::ForwardPlan: k has head dim 8" in last_error()  # validated where there is no GPU too
    t[1].shape[3] = 16
    o = options(autotune=_lib.AUTOTUNE_OFF)
    _lib.set_mods(o, "causal", [])
    assert LIB.kiln_attention_forward_plan(*t, o, ctypes.byref(out)) == ERROR
    assert "a plan runs the plain forward" in last_error() and "kiln_attention_forward_cuda" in last_error()
    assert LIB.kiln_attention_forward_plan(*t, options(autotune=7), ctypes.byref(out)) == ERROR_INVALID_ARGUMENT


@pytest.mark.skipif(HAS_GPU, reason="checks the answer where there is no GPU")
def test_a_valid_plan_needs_a_gpu():
    arrays, t = structs()
    out = ctypes.c_void_p()
    assert LIB.kiln_attention_forward_plan(*t, options(), ctypes.byref(out)) == ERROR_UNAVAILABLE
    assert out.value is None and "kiln_attention_forward_plan needs a GPU" in last_error()
    with pytest.raises(KilnError, match="needs a GPU"):
        _lib.AttentionPlan(t, options(), 0)


def test_an_empty_problems_plan_runs_nothing():
    arrays, t = structs(b=0)
    out = ctypes.c_void_p()
    assert LIB.kiln_attention_forward_plan(*t, options(), ctypes.byref(out)) == OK, last_error()
    assert out.value
    for autotune in (_lib.AUTOTUNE_ENV, _lib.AUTOTUNE_CACHED):
        assert LIB.kiln_attention_plan_forward(out, None, None, None, None, None, None, autotune) == OK, last_error()
    assert LIB.kiln_attention_plan_forward(out, 0, 0, 0, 0, 0, 0, 9) == ERROR_INVALID_ARGUMENT
    assert "autotune" in last_error()
    LIB.kiln_attention_plan_destroy(out)
    LIB.kiln_attention_plan_destroy(None)


def test_running_no_plan():
    assert LIB.kiln_attention_plan_forward(None, 16, 32, 48, 64, 80, None, _lib.AUTOTUNE_ENV) == ERROR_INVALID_ARGUMENT
    assert last_error() == "plan must not be NULL"


def test_the_owner_runs_and_destroys_its_plan():
    arrays, t = structs(b=0)
    plan = _lib.AttentionPlan(t, options(), 0)
    assert plan.handle and plan.device == 0
    assert plan.run(plan.handle, 0, 0, 0, 0, 0, None, _lib.AUTOTUNE_ENV) == OK
    destroyed = []
    plan._destroy = destroyed.append  # instance attribute (__slots__): observe the destroy call
    handle = plan.handle
    del plan
    gc.collect()
    assert destroyed == [handle]
    LIB.kiln_attention_plan_destroy(handle)  # the real destroy, which the spy replaced


def test_a_failed_owner_destroys_nothing():
    arrays, t = structs()
    t[0].dtype = _lib.I32
    with pytest.raises(KilnError, match="q has dtype i32"):
        _lib.AttentionPlan(t, options(), 0)
    gc.collect()  # its __del__ ran on an object without a handle
