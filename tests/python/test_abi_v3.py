"""What version 3 of libkiln's C ABI added, through ctypes: kiln_attention_options' mods spec, mod tensors and
dsink beside a version-2 caller's smaller struct (whose bytes past its end are never read), and the malformed
calls' statuses and messages."""

import ctypes

import numpy as np
import pytest

import kiln
from kiln import _lib
from kiln._tensor import describe
from kiln.errors import ERROR, ERROR_INVALID_ARGUMENT, ERROR_UNAVAILABLE, OK

from abi_calls import HAS_GPU, LIB, last_error, options
from test_abi_v2 import fake_device_tensors, host_call

V2_SIZE = _lib.AttentionOptions.mods.offset  # the version-2 struct ends before mods


def test_abi_version_is_at_least_3():
    assert LIB.kiln_abi_version() >= 3 and _lib.ABI_VERSION >= 3


def test_init_fills_the_version_3_fields_and_version_2_init_stops_at_its_size():
    o = options()
    assert o.mods is None and o.num_mod_tensors == 0 and not o.mod_tensors and not o.dsink
    size = ctypes.sizeof(_lib.AttentionOptions)
    raw = (ctypes.c_uint8 * size)(*([0x7F] * size))
    o = _lib.AttentionOptions.from_buffer(raw)
    LIB.kiln_attention_options_init_sized(ctypes.byref(o), V2_SIZE)
    assert o.struct_size == V2_SIZE and o.autotune == _lib.AUTOTUNE_ENV
    assert bytes(raw[V2_SIZE:]) == b"\x7f" * (size - V2_SIZE)


def test_version_2_struct_is_accepted_and_its_new_fields_ignored():
    arrays, descs = host_call()  # arrays: kept alive for the call
    o = options()
    _lib.set_mods(o, "no_such_mod", [])  # past a version-2 struct: never read
    o.num_mod_tensors = -5
    o.struct_size = V2_SIZE
    assert LIB.kiln_attention_forward_host(*descs, o) == OK, last_error()
    o.struct_size = V2_SIZE + 4  # neither version's size
    assert LIB.kiln_attention_forward_host(*descs, o) == ERROR_INVALID_ARGUMENT
    assert "struct_size must be" in last_error() and str(V2_SIZE) in last_error()


def test_mods_reach_the_forward():
    arrays, descs = host_call((1, 2, 16, 16))
    q, k, v, o, _ = arrays
    rng = np.random.default_rng(0)
    q[...], k[...], v[...] = (rng.uniform(-1, 1, q.shape) for _ in range(3))
    plain = options(causal=_lib.CAUSAL_TOP_LEFT)
    assert LIB.kiln_attention_forward_host(*descs, plain) == OK, last_error()
    expected = o.copy()
    modded = options()
    _lib.set_mods(modded, "causal", [])
    o[...] = np.nan
    assert LIB.kiln_attention_forward_host(*descs, modded) == OK, last_error()
    np.testing.assert_allclose(o, expected, rtol=1e-6, atol=1e-6)


def test_malformed_mod_arguments():
    arrays, descs = host_call()  # arrays: kept alive for the call
    slopes = np.ones(2, np.float32)
    o = options()
    keep = _lib.set_mods(o, "alibi", [("alibi_slopes", describe(slopes, "s")), ("alibi_slopes", describe(slopes, "s"))])
    assert LIB.kiln_attention_forward_host(*descs, o) == ERROR
    assert "mod_tensors[1]: the mod tensor 'alibi_slopes' is given twice" in last_error()
    keep[0][0].name = None
    assert LIB.kiln_attention_forward_host(*descs, o) == ERROR_INVALID_ARGUMENT
    assert last_error() == "kiln_attention_options.mod_tensors[0].name must not be NULL"
    o.mod_tensors = None
    assert LIB.kiln_attention_forward_host(*descs, o) == ERROR_INVALID_ARGUMENT
    assert "mod_tensors must not be NULL when num_mod_tensors > 0" in last_error()
    o.num_mod_tensors = -1
    assert LIB.kiln_attention_forward_host(*descs, o) == ERROR_INVALID_ARGUMENT
    assert "num_mod_tensors must be >= 0; got -1" in last_error()
    o.num_mod_tensors = 0
    o.mods = b"softcap=-1"
    assert LIB.kiln_attention_forward_host(*descs, o) == ERROR
    assert last_error().startswith("kiln_attention_options.mods: softcap: cap is -1")


def test_dsink_belongs_to_the_backward():
    arrays, descs = host_call()  # arrays: kept alive for the call
    sinks, dsink = np.zeros(2, np.float32), np.zeros(2, np.float32)
    o = options()
    _lib.set_mods(o, "sinks", [("sinks", describe(sinks, "sinks"))], describe(dsink, "dsink"))
    assert LIB.kiln_attention_forward_host(*descs, o) == ERROR
    assert "kiln_attention_options.dsink is given to a forward call" in last_error()
    bad = np.zeros(3, np.float32)
    _lib.set_mods(o, "sinks", [("sinks", describe(sinks, "sinks"))], describe(bad, "dsink"))
    grads = [np.zeros_like(arrays[0]) for _ in range(4)]
    args = descs + [describe(g, "g") for g in grads]
    assert LIB.kiln_attention_backward_host(*args, o) == ERROR
    assert "options.dsink has shape [3]" in last_error()
    assert kiln.version()  # the library still answers after every failure


@pytest.mark.skipif(HAS_GPU, reason="checks the no-GPU answers")
def test_device_entry_points_check_mods_before_needing_a_gpu():
    t = fake_device_tensors()  # (1, 2, 64, 64) f16 at fake device addresses; lse t[4]
    o = options()
    _lib.set_mods(o, "causal;softcap=30", [])
    assert LIB.kiln_attention_forward_cuda(*t[:5], o) == ERROR_UNAVAILABLE  # valid: only the GPU is missing
    _lib.set_mods(o, "alibi", [])
    assert LIB.kiln_attention_forward_cuda(*t[:5], o) == ERROR and "'alibi_slopes'" in last_error()
    out = ctypes.c_char_p()
    _lib.set_mods(o, "flash", [])
    assert LIB.kiln_tune_attention_cuda(*t[:4], None, o, ctypes.byref(out)) == ERROR
    assert "unknown mod 'flash'" in last_error()
    slopes = _lib.Tensor(ctypes.c_void_p(0xB0000000), _lib.F32, 1)
    slopes.shape[0], slopes.strides[0] = 2, 1
    dsink = _lib.Tensor(ctypes.c_void_p(0xC0000000), _lib.F32, 1)
    dsink.shape[0], dsink.strides[0] = 2, 1
    _lib.set_mods(o, "sinks", [("sinks", slopes)], dsink)
    status = LIB.kiln_attention_backward_cuda_workspace(*t, ctypes.c_void_p(0xA0000000), 1 << 20, o)
    assert status == ERROR_UNAVAILABLE, last_error()
    dsink.shape[0] = 5
    _lib.set_mods(o, "sinks", [("sinks", slopes)], dsink)
    assert LIB.kiln_attention_backward_cuda(*t, o) == ERROR and "options.dsink has shape [5]" in last_error()
