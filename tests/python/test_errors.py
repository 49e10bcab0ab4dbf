"""Every argument mistake through the Python package raises kiln.KilnError carrying kiln's message (what was
expected and what came), never a crash or a wrong answer."""

import numpy as np
import pytest

import kiln
from kiln.errors import ERROR


def f32(*shape):
    return np.zeros(shape, np.float32)


def raises(fn, *substrings):
    with pytest.raises(kiln.KilnError) as info:
        fn()
    msg = str(info.value)
    for s in substrings:
        assert s in msg, f"{s!r} not in {msg!r}"
    return info.value


GOOD = dict(q=f32(1, 2, 16, 16), k=f32(1, 2, 16, 16), v=f32(1, 2, 16, 16))


def fwd(**changes):
    args = dict(GOOD)
    options = {key: changes.pop(key) for key in list(changes) if key not in args}
    args.update(changes)
    return lambda: kiln.attention(args["q"], args["k"], args["v"], **options)


# (id, call, substrings of kiln's message)
FORWARD_ERRORS = [
    ("rank", fwd(q=f32(2, 16, 16)), ["q must have rank 4", "got rank 3"]),
    ("dtypes-differ", fwd(k=np.zeros((1, 2, 16, 16), np.float16)), ["f16", "f32"]),
    ("dtype-f64", fwd(q=np.zeros((1, 2, 16, 16)), k=np.zeros((1, 2, 16, 16)), v=np.zeros((1, 2, 16, 16))),
     ["f64"]),
    ("numpy-dtype", fwd(q=np.zeros((1, 2, 16, 16), np.complex64)), ["kiln takes NumPy arrays of", "complex64"]),
    ("not-an-array", fwd(q=[[1.0]]), ["expected NumPy arrays or torch tensors", "list"]),
    ("heads-not-multiple", fwd(k=f32(1, 3, 16, 16), v=f32(1, 3, 16, 16)), ["H_KV", "3"]),
    ("head-dim-not-multiple-of-8", fwd(q=f32(1, 2, 16, 12), k=f32(1, 2, 16, 12), v=f32(1, 2, 16, 12)), ["12", "8"]),
    ("head-dim-too-large", fwd(q=f32(1, 1, 8, 264), k=f32(1, 1, 8, 264), v=f32(1, 1, 8, 264)), ["264", "256"]),
    ("kv-lengths-differ", fwd(v=f32(1, 2, 24, 16)), ["24", "16"]),
    ("batch-differs", fwd(k=f32(2, 2, 16, 16), v=f32(2, 2, 16, 16)), ["batch"]),
    ("head-dim-strided", fwd(q=f32(1, 2, 16, 32)[..., ::2]), ["stride"]),
    ("causal-unknown", fwd(causal="diagonal"), ["causal must be None, 'top-left'", "'diagonal'"]),
    ("layout-unknown", fwd(layout="bsdh"), ["layout must be 'bhsd'", "'bsdh'"]),
    ("scale-zero", fwd(scale=0), ["scale must be nonzero"]),
    ("scale-not-a-number", fwd(scale="x"), ["scale must be a number"]),
    ("scale-nan", fwd(scale=float("nan")), ["nan"]),
    ("scale-too-large", fwd(scale=1e300), ["f32"]),
]


@pytest.mark.parametrize("call,substrings", [c[1:] for c in FORWARD_ERRORS], ids=[c[0] for c in FORWARD_ERRORS])
def test_forward_argument_error(call, substrings):
    raises(call, *substrings)


def test_kiln_errors_carry_status_and_call_site():
    e = raises(fwd(q=f32(2, 16, 16)), "attention::forward")
    assert e.status == ERROR and e.status_name == "KILN_ERROR"
    assert "(at " in str(e)  # kiln::Error's location suffix, passed through whole


def bwd_args():
    q, k, v = f32(1, 2, 16, 16), f32(1, 2, 16, 16), f32(1, 2, 16, 16)
    return dict(dout=f32(1, 2, 16, 16), q=q, k=k, v=v, o=f32(1, 2, 16, 16), lse=f32(1, 2, 16))


def bwd(**changes):
    a = bwd_args()
    a.update(changes)
    return lambda: kiln.attention_backward(a["dout"], a["q"], a["k"], a["v"], a["o"], a["lse"])


BACKWARD_ERRORS = [
    ("dout-shape", bwd(dout=f32(1, 2, 8, 16)), ["attention::backward", "dout"]),
    ("lse-dtype", bwd(lse=np.zeros((1, 2, 16), np.float64)), ["lse", "f32"]),
    ("lse-shape", bwd(lse=f32(1, 2, 8)), ["lse", "[1, 2, 16]"]),
    ("o-shape", bwd(o=f32(1, 2, 8, 16)), ["o"]),
]


@pytest.mark.parametrize("call,substrings", [c[1:] for c in BACKWARD_ERRORS], ids=[c[0] for c in BACKWARD_ERRORS])
def test_backward_argument_error(call, substrings):
    raises(call, *substrings)


def vec(n, dtype=np.float32):
    return np.zeros(n, dtype)


RUN_ERRORS = [
    ("unknown-kernel", lambda: kiln.run("nope", vec(4), n=4), ["nope", "vector_add"]),
    ("tensor-count", lambda: kiln.run("vector_add", vec(4), vec(4), n=4), ["takes 3 tensor(s)", "got 2"]),
    ("tensor-dtype", lambda: kiln.run("vector_add", vec(4), vec(4), vec(4, np.float16), n=4),
     ["'out' points to f32", "f16"]),
    ("missing-scalar", lambda: kiln.run("vector_add", vec(4), vec(4), vec(4)), ["needs the scalar 'n'"]),
    ("unknown-scalar", lambda: kiln.run("vector_add", vec(4), vec(4), vec(4), n=4, m=3), ["no scalar", "'m'"]),
    ("float-for-int", lambda: kiln.run("vector_add", vec(4), vec(4), vec(4), n=4.5), ["'n'", "integer"]),
    ("unknown-param", lambda: kiln.run("vector_add", vec(4), vec(4), vec(4), n=4, config={"TILE": 4}),
     ["no parameter 'TILE'", "BLOCK"]),
    ("bad-param-value", lambda: kiln.run("vector_add", vec(4), vec(4), vec(4), n=4, config={"BLOCK": 3}),
     ["BLOCK", "power of two"]),
    ("out-of-bounds", lambda: kiln.run("vector_add", vec(4), vec(4), vec(2), n=4), ["'out'"]),
    ("bad-grid", lambda: kiln.run("vector_add", vec(4), vec(4), vec(4), n=4, grid=(0,)), ["grid"]),
    ("no-tensors", lambda: kiln.run("vector_add", n=4), ["no tensors"]),
    ("emit-stage", lambda: kiln.emit("vector_add", "sass2"), ["stage must be one of", "sass2"]),
    ("emit-arch", lambda: kiln.emit("vector_add", "cuda", arch="sm_12"), ["sm_12"]),
    ("emit-kernel", lambda: kiln.emit("no_such_kernel"), ["no_such_kernel"]),
]


@pytest.mark.parametrize("call,substrings", [c[1:] for c in RUN_ERRORS], ids=[c[0] for c in RUN_ERRORS])
def test_kernel_argument_error(call, substrings):
    raises(call, *substrings)
