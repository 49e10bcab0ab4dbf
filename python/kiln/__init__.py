"""kiln from Python: FlashAttention-2 and kiln's registered kernels through libkiln's C ABI (ctypes; no
compiled extension, so one package serves every CPython 3). NumPy arrays run in kiln's interpreter; CUDA
torch tensors run on the GPU through torch custom ops (kiln.torch_ops, imported on first use: torch is
optional)."""

from .attention import attention, attention_backward
from .device import cache_clear, cache_path, device_count, device_info, gpu_available, version
from .errors import KilnError, KilnUnavailableError
from .kernels import emit, list_kernels, run

__all__ = ["attention", "attention_backward", "cache_clear", "cache_path", "device_count", "device_info",
           "emit", "gpu_available", "KilnError", "KilnUnavailableError", "list_kernels", "run", "version"]
