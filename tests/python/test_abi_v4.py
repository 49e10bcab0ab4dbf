"""What version 4 of libkiln's C ABI added, through ctypes: kiln_block_mask (create on the host or the device,
info, destroy) and kiln_attention_options.block_mask beside a version-3 caller's smaller struct (whose bytes
past its end are never read); a block mask of the other memory given to a call; the malformed calls' statuses
and messages."""

import ctypes
import json

import numpy as np
import pytest

import kiln
from kiln import _lib
from kiln._tensor import describe
from kiln.errors import ERROR, ERROR_INVALID_ARGUMENT, ERROR_UNAVAILABLE, OK

from abi_calls import HAS_GPU, LIB, last_error, options
from test_abi_v2 import fake_device_tensors, host_call

V3_SIZE = _lib.AttentionOptions.block_mask.offset  # the version-3 struct ends before block_mask


def create_host(sizes=(1, 2, 2, 16, 16), tiles=(16, 16), mods=b"causal", opts=None):
    """(status, handle) of kiln_block_mask_create_host."""
    o = opts if opts is not None else options()
    if opts is None:
        o.mods = mods
    handle = ctypes.c_void_p()
    status = LIB.kiln_block_mask_create_host(*sizes, *tiles, ctypes.byref(o), ctypes.byref(handle))
    return status, handle


def info(handle):
    text = ctypes.c_char_p()
    assert LIB.kiln_block_mask_info(handle, ctypes.byref(text)) == OK, last_error()
    return json.loads(text.value)


def test_abi_version_is_at_least_4_and_the_struct_grew_by_one_pointer():
    assert LIB.kiln_abi_version() >= 4 and _lib.ABI_VERSION >= 4
    assert V3_SIZE == 80 and ctypes.sizeof(_lib.AttentionOptions) == 88


def test_init_clears_block_mask_and_version_3_init_stops_at_its_size():
    assert not options().block_mask
    size = ctypes.sizeof(_lib.AttentionOptions)
    raw = (ctypes.c_uint8 * size)(*([0x7F] * size))
    o = _lib.AttentionOptions.from_buffer(raw)
    LIB.kiln_attention_options_init_sized(ctypes.byref(o), V3_SIZE)
    assert o.struct_size == V3_SIZE and o.num_mod_tensors == 0 and not o.dsink
    assert bytes(raw[V3_SIZE:]) == b"\x7f" * (size - V3_SIZE)


def test_version_3_struct_is_accepted_and_its_block_mask_never_read():
    arrays, descs = host_call()  # arrays: kept alive for the call
    o = options()
    o.mods = b"causal"
    o.block_mask = 0xDEAD0  # past a version-3 struct: never read
    o.struct_size = V3_SIZE
    assert LIB.kiln_attention_forward_host(*descs, o) == OK, last_error()
    grads = [np.zeros_like(arrays[0]) for _ in range(4)]
    args = descs + [describe(g, "g") for g in grads]
    assert LIB.kiln_attention_backward_host(*args, o) == OK, last_error()
    status, handle = create_host(opts=o)  # the create calls read version-3 structs too
    assert status == OK, last_error()
    LIB.kiln_block_mask_destroy(handle)
    o.struct_size = V3_SIZE + 4  # no version's size
    assert LIB.kiln_attention_forward_host(*descs, o) == ERROR_INVALID_ARGUMENT
    assert "struct_size must be 88" in last_error() and "or 40 / 48 / 80 for a version-1 / 2 / 3 caller" in last_error()


def test_host_block_mask_reaches_the_forward_and_says_what_it_was_built_for():
    arrays, descs = host_call((1, 2, 40, 16))
    q, k, v, out, _ = arrays
    rng = np.random.default_rng(0)
    q[...], k[...], v[...] = (rng.uniform(-1, 1, q.shape) for _ in range(3))
    status, handle = create_host(sizes=(1, 2, 2, 40, 40), tiles=(16, 32))
    assert status == OK, last_error()
    assert info(handle) == {"memory": "host", "B": 1, "H": 2, "H_KV": 2, "N_Q": 40, "N_K": 40, "block_m": 16,
                            "block_n": 32, "causal": "none", "mask_mods": "causal_top_left", "runs": True}
    o = options()
    o.mods = b"causal"
    assert LIB.kiln_attention_forward_host(*descs, o) == OK, last_error()
    expected = out.copy()
    o.block_mask = handle
    out[...] = np.nan
    assert LIB.kiln_attention_forward_host(*descs, o) == OK, last_error()
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)
    o.mods = b"causal=bottom-right"  # N_Q == N_K: the same mask, but another mod (by its code)
    assert LIB.kiln_attention_forward_host(*descs, o) == ERROR
    assert "block mask built for the mask mods [causal_top_left]" in last_error()
    LIB.kiln_block_mask_destroy(handle)


def test_a_block_mask_of_the_other_memory_is_a_kiln_error():
    status, handle = create_host(sizes=(1, 2, 2, 64, 64))
    assert status == OK, last_error()
    t = fake_device_tensors()  # (1, 2, 64, 64) f16 at fake device addresses
    o = options()
    o.mods, o.block_mask = b"causal", handle
    assert LIB.kiln_attention_forward_cuda(*t[:5], o) == ERROR
    assert last_error() == ("kiln_attention_forward_cuda: kiln_attention_options.block_mask was made by "
                            "kiln_block_mask_create_host (host memory, for the *_host calls); expected one from "
                            "kiln_block_mask_create_cuda")
    assert LIB.kiln_attention_backward_cuda(*t, o) == ERROR and "kiln_attention_backward_cuda:" in last_error()
    n = ctypes.c_uint64()
    assert LIB.kiln_attention_backward_workspace_size(t[0], o, ctypes.byref(n)) == ERROR
    assert "kiln_attention_backward_workspace_size: kiln_attention_options.block_mask was made by" in last_error()
    out = ctypes.c_char_p()
    assert LIB.kiln_tune_attention_cuda(*t[:5], o, ctypes.byref(out)) == ERROR
    LIB.kiln_block_mask_destroy(handle)


def test_malformed_block_mask_calls():
    handle = ctypes.c_void_p()
    o = options()
    assert LIB.kiln_block_mask_create_host(1, 2, 2, 16, 16, 16, 16, o, None) == ERROR_INVALID_ARGUMENT
    assert last_error() == "block_mask must not be NULL"
    status, first = create_host()
    assert status == OK
    o.block_mask = first
    assert LIB.kiln_block_mask_create_host(1, 2, 2, 16, 16, 16, 16, o, ctypes.byref(handle)) == ERROR
    assert "kiln_attention_options.block_mask is set; expected NULL" in last_error() and not handle
    o.block_mask = None
    status, _ = create_host(sizes=(1, 3, 2, 16, 16))
    assert status == ERROR and "H=3 must be a multiple of H_KV=2" in last_error()
    status, _ = create_host(tiles=(16, 512))
    assert status == ERROR and "block_n = 512; expected a power of two in [16, 256]" in last_error()
    o.causal = 7
    assert LIB.kiln_block_mask_create_host(1, 2, 2, 16, 16, 16, 16, o, ctypes.byref(handle)) == \
        ERROR_INVALID_ARGUMENT
    text = ctypes.c_char_p()
    assert LIB.kiln_block_mask_info(None, ctypes.byref(text)) == ERROR_INVALID_ARGUMENT
    assert LIB.kiln_block_mask_info(first, None) == ERROR_INVALID_ARGUMENT
    LIB.kiln_block_mask_destroy(first)
    LIB.kiln_block_mask_destroy(None)  # nothing
    assert kiln.version()  # the library still answers after every failure


@pytest.mark.skipif(HAS_GPU, reason="checks the no-GPU answers")
def test_device_block_mask_checks_its_arguments_before_needing_a_gpu():
    handle = ctypes.c_void_p()
    o = options()
    o.mods = b"sliding_window=64,0"
    assert LIB.kiln_block_mask_create_cuda(1, 2, 2, 64, 64, 64, 64, o, ctypes.byref(handle)) == ERROR_UNAVAILABLE
    assert "kiln_block_mask_create_cuda needs a GPU" in last_error() and not handle
    assert LIB.kiln_block_mask_create_cuda(1, 2, 2, 64, 64, 64, 48, o, ctypes.byref(handle)) == ERROR
    assert "block_n = 48" in last_error()
    o.mods = b"document"
    assert LIB.kiln_block_mask_create_cuda(1, 2, 2, 64, 64, 64, 64, o, ctypes.byref(handle)) == ERROR
    assert "'q_doc'" in last_error()
