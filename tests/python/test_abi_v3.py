"""What version 3 of libkiln's C ABI added, through ctypes: kiln_attention_options' mods spec, mod tensors and
dsink beside a version-2 caller's smaller struct (whose bytes past its end are never read), and the malformed
calls' statuses and messages."""

import ctypes

import numpy as np

import kiln
from kiln import _lib
from kiln._tensor import describe
from kiln.errors import ERROR, ERROR_INVALID_ARGUMENT, OK

from abi_calls import LIB, last_error, options
from test_abi_v2 import host_call

V2_SIZE = _lib.AttentionOptions.mods.offset  # the version-2 struct ends before mods


def test_abi_version_is_3():
    assert LIB.kiln_abi_version() == 3 and _lib.ABI_VERSION == 3


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
