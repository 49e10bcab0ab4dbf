"""Arrays as the C ABI's kiln_tensor: NumPy arrays (host memory, the interpreter's path) and torch tensors
(host or CUDA memory), described by address, dtype, shape and strides in elements, never copied."""

from . import _lib
from .errors import KilnError

_NUMPY_DTYPES = {"bool": _lib.I1, "uint8": _lib.U8, "int32": _lib.I32, "int64": _lib.I64, "float16": _lib.F16,
                 "float32": _lib.F32, "float64": _lib.F64}
# The same by NumPy's dtype character ("f" for float32; both "l" and "q" are int64 on Linux), which is read in
# nanoseconds where dtype.name takes microseconds.
_NUMPY_CHARS = {"?": _lib.I1, "B": _lib.U8, "i": _lib.I32, "l": _lib.I64, "q": _lib.I64, "e": _lib.F16, "f": _lib.F32,
                "d": _lib.F64}
_TORCH_DTYPES = {"torch.bool": _lib.I1, "torch.uint8": _lib.U8, "torch.int32": _lib.I32, "torch.int64": _lib.I64,
                 "torch.float16": _lib.F16, "torch.bfloat16": _lib.BF16, "torch.float32": _lib.F32,
                 "torch.float64": _lib.F64}


def is_numpy(x):
    return type(x).__module__ == "numpy" and hasattr(x, "__array_interface__")


def is_torch(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


_DIMS = _lib.ctypes.c_int64 * _lib.MAX_DIMS


def _tensor(data, dtype, shape, strides, what):
    if len(shape) > _lib.MAX_DIMS:
        raise KilnError(f"{what}: at most {_lib.MAX_DIMS} dimensions; got {len(shape)}")
    return _lib.Tensor(data, dtype, len(shape), _DIMS(*shape), _DIMS(*strides))


def describe(x, what):
    """The kiln_tensor of `x` (a NumPy array or a torch tensor); `what` names it in errors."""
    if is_torch(x):
        dtype = _TORCH_DTYPES.get(str(x.dtype))
        if dtype is None:
            raise KilnError(f"{what}: kiln takes torch tensors of {', '.join(_TORCH_DTYPES)}; got {x.dtype}")
        return _tensor(x.data_ptr() or None, dtype, x.shape, x.stride(), what)
    if is_numpy(x):
        dtype = _NUMPY_CHARS.get(x.dtype.char)
        if dtype is None:
            raise KilnError(f"{what}: kiln takes NumPy arrays of {', '.join(_NUMPY_DTYPES)}; got {x.dtype.name}")
        item = x.dtype.itemsize
        if any(s % item for s in x.strides):
            raise KilnError(f"{what}: strides {x.strides} (bytes) are not multiples of the element size {item}")
        return _tensor(x.ctypes.data or None, dtype, x.shape, [s // item for s in x.strides], what)
    raise KilnError(f"{what}: expected a NumPy array or a torch tensor; got {type(x).__name__}")


def on_cuda(x):
    return is_torch(x) and x.device.type == "cuda"
