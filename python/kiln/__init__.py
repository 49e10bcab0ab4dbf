"""kiln from Python: FlashAttention-2 (dense, variable-length), split-KV decoding and kiln's registered kernels
through libkiln's C ABI (ctypes; no compiled extension, so one package serves every CPython 3). NumPy arrays run
in kiln's interpreter; torch tensors run through torch custom ops (kiln.torch_ops, kiln.torch_varlen,
kiln.torch_decode: CUDA tensors on the GPU, CPU tensors in the interpreter), imported with kiln when torch is
loaded already, else on first use: torch is optional."""

import sys as _sys

from ._attention import attention, attention_backward
from ._block_mask import BlockMask, block_mask
from ._decode import decode
from ._varlen import attention_varlen, attention_varlen_backward
from .device import cache_clear, cache_path, device_count, device_info, gpu_available, version
from .errors import KilnError, KilnUnavailableError
from .kernels import emit, list_kernels, run
from ._tune import tune

__all__ = ["attention", "attention_backward", "attention_varlen", "attention_varlen_backward", "BlockMask",
           "block_mask", "cache_clear", "cache_path", "decode", "device_count", "device_info", "emit", "gpu_available",
           "KilnError", "KilnUnavailableError", "list_kernels", "run", "tune", "version"]

if "torch" in _sys.modules:  # torch is loaded already: register kiln's ops now, before any torch.compile traces
    from . import torch_decode, torch_ops, torch_varlen  # noqa: F401
