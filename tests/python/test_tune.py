"""kiln.tune's argument checking and its answer where there is no GPU (tuning times kernels, so host memory is
refused with a clear error). On a GPU, tests/python/gpu covers a real tuning run."""

import numpy as np
import pytest

import kiln


def arrays(n=3):
    return [np.zeros((1, 2, 16, 16), np.float32) for _ in range(n)]


def test_numpy_arrays_need_a_gpu():
    with pytest.raises(kiln.KilnUnavailableError, match="tuning times kernels on a GPU and needs CUDA tensors"):
        kiln.tune("attention", *arrays(), causal="top-left")
    x = np.zeros(8, np.float32)
    with pytest.raises(kiln.KilnUnavailableError, match=r"kiln.tune\('vector_add'\).*tensor 0 is a NumPy array"):
        kiln.tune("vector_add", x, x.copy(), x.copy(), n=8)


@pytest.mark.parametrize("kernel,tensors,kwargs,message", [
    (None, 3, {}, "kernel must be 'attention' or a registered kernel's name"),
    ("", 3, {}, "kernel must be 'attention'"),
    ("attention", 0, {}, "no tensors given"),
    ("attention", 2, {}, "expected the tensors q, k, v; got 2"),
    ("attention", 3, {"cached": "yes"}, "cached must be True or False; got 'yes'"),
    ("attention", 3, {"block_m": 64}, "unknown option"),
    ("attention", 3, {"config": {"BLOCK_M": 64}}, "unknown option.*config"),
])
def test_argument_errors(kernel, tensors, kwargs, message):
    with pytest.raises(kiln.KilnError, match=message):
        kiln.tune(kernel, *arrays(tensors), **kwargs)


def test_other_objects_are_refused():
    with pytest.raises(kiln.KilnError, match="tensor 0 must be a CUDA torch tensor; got list"):
        kiln.tune("vector_add", [1.0, 2.0], n=2)
