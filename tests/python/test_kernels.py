"""kiln.list_kernels, kiln.emit and kiln.run over kiln's registered kernels, on NumPy arrays (interpreter)."""

import numpy as np
import pytest

import kiln


def test_list_kernels():
    kernels = {k["name"]: k for k in kiln.list_kernels()}
    for name in ("vector_add", "softmax", "matmul", "fa2_fwd", "fa2_bwd_dkdv"):
        assert name in kernels
    va = kernels["vector_add"]
    assert va["size_args"] == ["n"]
    assert va["params"][0]["name"] == "BLOCK" and va["params"][0]["default"] == 1024
    assert "power of two" in va["params"][0]["takes"]


def test_emit_stages():
    ir = kiln.emit("vector_add", "ir", config={"BLOCK": 256})
    assert "vector_add" in ir and "BLOCK=256" in ir
    cuda = kiln.emit("vector_add", "cuda", arch="sm_80")
    assert "__global__" in cuda
    lowered = kiln.emit("fa2_fwd", "lowered", arch="sm_90a")
    assert "layout" in lowered.lower()


def test_emit_ptx_where_nvrtc_exists():
    try:
        ptx = kiln.emit("vector_add", "ptx", arch="sm_80")
    except kiln.KilnError as e:
        if "NVRTC" in str(e) or "nvrtc" in str(e):
            pytest.skip(f"no NVRTC here: {str(e)[:120]}")
        raise
    assert ".entry" in ptx


def test_run_vector_add():
    rng = np.random.default_rng(0)
    n = 3000  # not a multiple of BLOCK: the mask matters
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    kiln.run("vector_add", x, y, out, n=n)
    np.testing.assert_array_equal(out, x + y)


def test_run_with_config_and_grid():
    x = np.arange(100, dtype=np.float32)
    out = np.full(100, -1, np.float32)
    # BLOCK=32 and an explicit grid of 2 programs: only the first 64 elements are written.
    kiln.run("vector_add", x, x, out, n=100, config={"BLOCK": 32}, grid=(2,))
    np.testing.assert_array_equal(out[:64], 2 * x[:64])
    np.testing.assert_array_equal(out[64:], -1)


def test_run_softmax_with_strided_rows():
    rng = np.random.default_rng(1)
    rows, cols = 5, 48
    a = rng.standard_normal((rows, 64)).astype(np.float32)  # rows of 64, only 48 used
    out = np.zeros((rows, cols), np.float32)
    kiln.run("softmax", out, a, in_row_stride=64, out_row_stride=cols, n_rows=rows, n_cols=cols,
             config={"BLOCK": 64})
    x = a[:, :cols].astype(np.float64)
    ref = np.exp(x - x.max(axis=1, keepdims=True))
    ref /= ref.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
