"""libkiln's C ABI called directly through ctypes: status codes for each kind of failure, the per-thread last
error, device and cache queries, the exported symbols, and that this suite runs the installed package."""

import ctypes
import importlib.metadata
import os
import shutil
import subprocess
import threading

import numpy as np
import pytest

import kiln
from kiln import _lib
from kiln._tensor import describe
from kiln.errors import (ERROR, ERROR_INVALID_ARGUMENT, ERROR_UNAVAILABLE, OK, STATUS_NAMES)

from abi_calls import HAS_GPU, LIB, last_error, options

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def tensors(*arrays):
    descs = [describe(a, f"t{i}") for i, a in enumerate(arrays)]
    return descs, [ctypes.byref(d) for d in descs]


def valid_host_call():
    q = np.zeros((1, 2, 16, 16), np.float32)
    arrays = (q, q.copy(), q.copy(), np.empty_like(q), np.empty((1, 2, 16), np.float32))
    return arrays, tensors(*arrays)


def test_installed_package_not_source_tree():
    here = os.path.realpath(kiln.__file__)
    assert not here.startswith(os.path.realpath(os.path.join(REPO, "python")) + os.sep), here
    assert os.path.exists(os.path.join(os.path.dirname(here), "libkiln.so"))
    assert importlib.metadata.version("kiln") == kiln.version()


def test_version_and_abi():
    assert LIB.kiln_version().decode() == kiln.version()
    assert kiln.version().count(".") == 2
    assert LIB.kiln_abi_version() == _lib.ABI_VERSION == 6


def test_status_names():
    for code, name in STATUS_NAMES.items():
        assert LIB.kiln_status_name(code).decode() == name
    assert LIB.kiln_status_name(99).decode() == "(not a kiln_status)"


def test_options_init_defaults():
    o = options()
    assert o.struct_size == ctypes.sizeof(_lib.AttentionOptions)
    assert (o.causal, o.layout, o.deterministic, o.tf32, o.scale) == (0, 0, 1, 0, 0.0)
    assert not o.stream
    assert (o.exact_masked_v, o.autotune) == (0, _lib.AUTOTUNE_ENV)


def test_valid_call_is_ok_and_clears_last_error():
    (q, _, _, o, _), (_, refs) = valid_host_call()
    opts = options()
    bad = options(causal=7)
    assert LIB.kiln_attention_forward_host(*refs, ctypes.byref(bad)) == ERROR_INVALID_ARGUMENT
    assert last_error() != ""
    assert LIB.kiln_attention_forward_host(*refs, ctypes.byref(opts)) == OK
    assert last_error() == ""
    np.testing.assert_array_equal(o, np.zeros_like(q))  # zero inputs: uniform P over zero V


def test_null_tensor_is_invalid_argument():
    _, (_, refs) = valid_host_call()
    refs[0] = None
    assert LIB.kiln_attention_forward_host(*refs, ctypes.byref(options())) == ERROR_INVALID_ARGUMENT
    assert last_error() == "q must not be NULL"


def test_null_options_means_defaults():
    _, (_, refs) = valid_host_call()
    assert LIB.kiln_attention_forward_host(*refs, None) == OK


def test_backward_without_lse_is_invalid_argument():
    (q, k, v, o, lse), _ = valid_host_call()
    _, refs = tensors(q, k, v, o, lse, q.copy(), np.empty_like(q), np.empty_like(k), np.empty_like(v))
    refs[4] = None
    assert LIB.kiln_attention_backward_host(*refs, ctypes.byref(options())) == ERROR_INVALID_ARGUMENT
    assert "lse" in last_error()


@pytest.mark.parametrize("field,value,message", [
    ("struct_size", 12, "struct_size must be"),
    ("causal", 3, "causal must be KILN_CAUSAL_NONE"),
    ("layout", -1, "layout must be KILN_LAYOUT_BHSD"),
])
def test_bad_options_are_invalid_argument(field, value, message):
    _, (_, refs) = valid_host_call()
    assert LIB.kiln_attention_forward_host(*refs, ctypes.byref(options(**{field: value}))) == ERROR_INVALID_ARGUMENT
    assert message in last_error()


@pytest.mark.parametrize("field,value,message", [
    ("dtype", 99, "dtype must be a kiln_dtype"),
    ("ndim", 9, "ndim must be from 0 to 8"),
    ("ndim", -1, "ndim must be from 0 to 8"),
])
def test_bad_tensor_is_invalid_argument(field, value, message):
    _, (descs, refs) = valid_host_call()
    setattr(descs[1], field, value)
    assert LIB.kiln_attention_forward_host(*refs, ctypes.byref(options())) == ERROR_INVALID_ARGUMENT
    assert message in last_error() and last_error().startswith("k: ")  # the C side names the argument


def test_user_mistake_is_kiln_error_with_full_message():
    _, (descs, refs) = valid_host_call()
    descs[0].ndim = 3
    assert LIB.kiln_attention_forward_host(*refs, ctypes.byref(options())) == ERROR
    msg = last_error()
    assert "q must have rank 4" in msg and "(at " in msg


def test_last_error_is_per_thread():
    _, (descs, refs) = valid_host_call()
    descs[0].ndim = 3
    assert LIB.kiln_attention_forward_host(*refs, ctypes.byref(options())) == ERROR
    seen = []
    t = threading.Thread(target=lambda: seen.append(last_error()))
    t.start()
    t.join()
    assert seen == [""] and "rank 4" in last_error()


def test_device_count_without_gpu_is_zero_and_ok():
    n, why = ctypes.c_int32(-1), ctypes.c_char_p()
    assert LIB.kiln_device_count(ctypes.byref(n), ctypes.byref(why)) == OK
    if HAS_GPU:
        assert n.value > 0 and why.value == b""
    else:
        assert n.value == 0 and why.value != b""
    assert LIB.kiln_device_count(None, None) == ERROR_INVALID_ARGUMENT


@pytest.mark.skipif(HAS_GPU, reason="checks the no-GPU answers")
def test_gpu_calls_without_gpu_are_unavailable():
    ok, why = kiln.gpu_available()
    assert not ok and why
    # Valid arguments at fake, aligned device addresses: validation passes, then no driver.
    q = _lib.Tensor(ctypes.c_void_p(0x10000000), _lib.F16, 4)
    for i, (n, s) in enumerate(zip((1, 2, 64, 64), (8192, 4096, 64, 1))):
        q.shape[i], q.strides[i] = n, s
    k, v, o = (_lib.Tensor.from_buffer_copy(q) for _ in range(3))
    k.data, v.data, o.data = 0x20000000, 0x30000000, 0x40000000
    status = LIB.kiln_attention_forward_cuda(ctypes.byref(q), ctypes.byref(k), ctypes.byref(v), ctypes.byref(o),
                                             None, ctypes.byref(options()))
    assert status == ERROR_UNAVAILABLE and "needs a GPU" in last_error()
    # A mistake in the arguments is still reported as the mistake.
    k.shape[3] = 32
    status = LIB.kiln_attention_forward_cuda(ctypes.byref(q), ctypes.byref(k), ctypes.byref(v), ctypes.byref(o),
                                             None, ctypes.byref(options()))
    assert status == ERROR
    with pytest.raises(kiln.KilnUnavailableError):
        kiln.device_info(0)
    out = np.zeros(4, np.float32)
    # kiln.run on device memory needs torch; through the ABI, a device call is refused without a GPU.
    descs = (_lib.Tensor * 3)(*(describe(out, "t") for _ in range(3)))
    sc = (_lib.Scalar * 1)(_lib.Scalar(b"n", 0, 4, 0.0))
    assert LIB.kiln_run_cuda(b"vector_add", descs, 3, sc, 1, None, 0, None, None) == ERROR_UNAVAILABLE


def test_cache_path_and_clear(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    p = kiln.cache_path()
    assert p["root"] == str(tmp_path)
    assert p["compile"] == str(tmp_path / "compile") and p["tune"] == str(tmp_path / "tune")
    assert kiln.cache_clear() == 0
    for var in ("KILN_CACHE_DIR", "XDG_CACHE_HOME", "HOME"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(kiln.KilnError, match="no cache directory"):
        kiln.cache_path()


@pytest.mark.skipif(shutil.which("nm") is None, reason="nm (binutils) is not installed")
def test_only_c_abi_symbols_are_exported():
    path = os.path.join(os.path.dirname(kiln.__file__), "libkiln.so")
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    names = [line.split()[-1] for line in out.splitlines() if line.strip()]
    assert "kiln_attention_forward_cuda" in names and "kiln_run_host" in names
    assert [n for n in names if not n.startswith("kiln_")] == []


def test_library_links_no_llvm_or_fmt():
    if shutil.which("ldd") is None:
        pytest.skip("ldd is not installed")
    path = os.path.join(os.path.dirname(kiln.__file__), "libkiln.so")
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    for lib in ("libLLVM", "libfmt", "libcuda", "libnvrtc", "libz3"):
        assert lib not in out, out


def python(code, **env):
    import sys
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, cwd=os.path.dirname(os.path.abspath(__file__)))


def test_import_needs_neither_torch_nor_numpy():
    r = python("import sys, kiln; kiln.version(); print('torch' in sys.modules, 'numpy' in sys.modules)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]


def test_missing_library_is_a_clear_error():
    r = python("import kiln\ntry:\n    kiln.version()\nexcept kiln.KilnError as e:\n    print(e)",
               KILN_LIBRARY="/nonexistent/libkiln.so")
    assert r.returncode == 0, r.stderr
    assert "libkiln.so not found at /nonexistent/libkiln.so" in r.stdout and "KILN_LIBRARY" in r.stdout
