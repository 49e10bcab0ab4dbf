"""kiln's registered kernels from Python: list them, emit one at a stage of lowering, run one by name on
arrays and scalars (NumPy arrays in the interpreter, CUDA tensors on the GPU)."""

import ctypes
import json

from . import _lib
from ._tensor import describe, on_cuda
from .errors import KilnError


def list_kernels():
    """Each registered kernel as a dict: name, summary, params (name, default, takes, help), size_args,
    num_warps, num_stages."""
    out = ctypes.c_char_p()
    _lib.check(_lib.lib().kiln_list_kernels(ctypes.byref(out)))
    return json.loads(_lib.text(out))


def _params(config):
    config = dict(config or {})
    arr = (_lib.Param * max(1, len(config)))()
    for i, (name, value) in enumerate(config.items()):
        if not isinstance(value, int) or isinstance(value, bool):
            raise KilnError(f"config parameter {name!r} must be an integer; got {value!r}")
        arr[i].name, arr[i].value = str(name).encode(), value
    return arr, len(config)


def emit(kernel, stage="cuda", *, arch=None, config=None):
    """`kernel` (its default config with `config`'s NAME=VALUE overrides) at `stage`: "ir", "lowered",
    "cuda" or "ptx" (NVRTC, no GPU needed), for `arch` (default: this GPU's, else sm_90a)."""
    params, n = _params(config)
    out = ctypes.c_char_p()
    _lib.check(_lib.lib().kiln_emit(str(kernel).encode(), str(stage).encode(),
                                    None if arch is None else str(arch).encode(), params, n, ctypes.byref(out)))
    return _lib.text(out)


def _scalars(values):
    arr = (_lib.Scalar * max(1, len(values)))()
    for i, (name, value) in enumerate(values.items()):
        s = arr[i]
        s.name = name.encode()
        if isinstance(value, bool) or isinstance(value, int):
            s.is_float, s.i = 0, int(value)
        elif isinstance(value, float):
            s.is_float, s.f = 1, value
        elif hasattr(value, "item"):  # a NumPy or torch scalar
            v = value.item()
            s.is_float, s.i, s.f = (1, 0, v) if isinstance(v, float) else (0, int(v), 0.0)
        else:
            raise KilnError(f"scalar {name!r} must be an int or a float; got {type(value).__name__}")
    return arr, len(values)


def run(kernel, *tensors, grid=None, config=None, stream=None, **scalars):
    """Runs registered kernel `kernel` on `tensors` (its pointer parameters, in order) and `scalars` (its scalar
    parameters, and the size arguments its grid rule reads, by name). The grid is the kernel's rule unless
    `grid` (up to 3 ints) is given; `config` overrides parameters of its default config. NumPy arrays run in the
    interpreter and are written in place; CUDA tensors launch on `stream` (default: torch's current stream)."""
    if not tensors:
        raise KilnError(f"kiln.run('{kernel}'): no tensors given")
    cuda = [on_cuda(t) for t in tensors]
    if any(cuda) and not all(cuda):
        raise KilnError(f"kiln.run('{kernel}'): tensors must all be on the GPU or all in host memory")
    descs = (_lib.Tensor * len(tensors))(*[describe(t, f"tensor {i}") for i, t in enumerate(tensors)])
    sc, ns = _scalars(scalars)
    params, np_ = _params(config)
    g = None
    if grid is not None:
        dims = list(grid) + [1] * (3 - len(grid))
        if len(dims) != 3 or not all(isinstance(d, int) for d in dims):
            raise KilnError(f"grid must be up to 3 ints; got {grid!r}")
        g = (ctypes.c_int64 * 3)(*dims)
    lib = _lib.lib()
    if all(cuda):
        if stream is None:
            import torch
            stream = torch.cuda.current_stream(tensors[0].device).cuda_stream
        _lib.check(lib.kiln_run_cuda(str(kernel).encode(), descs, len(tensors), sc, ns, params, np_, g,
                                     ctypes.c_void_p(stream)))
    else:
        _lib.check(lib.kiln_run_host(str(kernel).encode(), descs, len(tensors), sc, ns, params, np_, g))
