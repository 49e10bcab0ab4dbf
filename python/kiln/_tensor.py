"""Arrays as the C ABI's kiln_tensor: NumPy arrays (host memory, the interpreter's path) and torch tensors
(host or CUDA memory), described by address, dtype, shape and strides in elements, never copied."""

from . import _lib
from .errors import KilnError

_NUMPY_DTYPES = {"bool": _lib.I1, "uint8": _lib.U8, "int32": _lib.I32, "int64": _lib.I64, "float16": _lib.F16,
                 "float32": _lib.F32, "float64": _lib.F64}
_TORCH_DTYPES = {"torch.bool": _lib.I1, "torch.uint8": _lib.U8, "torch.int32": _lib.I32, "torch.int64": _lib.I64,
                 "torch.float16": _lib.F16, "torch.bfloat16": _lib.BF16, "torch.float32": _lib.F32,
                 "torch.float64": _lib.F64}


def is_numpy(x):
    return type(x).__module__ == "numpy" and hasattr(x, "__array_interface__")


def is_torch(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def _fill(t, shape, strides, what):
    if len(shape) > _lib.MAX_DIMS:
        raise KilnError(f"{what}: at most {_lib.MAX_DIMS} dimensions; got {len(shape)}")
    t.ndim = len(shape)
    for i, (n, s) in enumerate(zip(shape, strides)):
        t.shape[i], t.strides[i] = n, s
    return t


def describe(x, what):
    """The kiln_tensor of `x` (a NumPy array or a torch tensor); `what` names it in errors."""
    t = _lib.Tensor()
    if is_numpy(x):
        dtype = _NUMPY_DTYPES.get(x.dtype.name)
        if dtype is None:
            raise KilnError(f"{what}: kiln takes NumPy arrays of {', '.join(_NUMPY_DTYPES)}; got {x.dtype.name}")
        item = x.dtype.itemsize
        if any(s % item for s in x.strides):
            raise KilnError(f"{what}: strides {x.strides} (bytes) are not multiples of the element size {item}")
        t.data = x.__array_interface__["data"][0] or None
        t.dtype = dtype
        return _fill(t, x.shape, [s // item for s in x.strides], what)
    if is_torch(x):
        dtype = _TORCH_DTYPES.get(str(x.dtype))
        if dtype is None:
            raise KilnError(f"{what}: kiln takes torch tensors of {', '.join(_TORCH_DTYPES)}; got {x.dtype}")
        t.data = x.data_ptr() or None
        t.dtype = dtype
        return _fill(t, tuple(x.shape), tuple(x.stride()), what)
    raise KilnError(f"{what}: expected a NumPy array or a torch tensor; got {type(x).__name__}")


def on_cuda(x):
    return is_torch(x) and x.device.type == "cuda"
