"""What libkiln says about this machine and its caches: version, GPUs, the compile/autotune cache."""

import ctypes
import json

from . import _lib


def version():
    """kiln's version ("0.1.0"), from the loaded libkiln."""
    return _lib.text(_lib.lib().kiln_version())


def device_count():
    """The number of CUDA devices: 0 where there is no driver or no device (never raises for that)."""
    n, why = ctypes.c_int32(), ctypes.c_char_p()
    _lib.check(_lib.lib().kiln_device_count(ctypes.byref(n), ctypes.byref(why)))
    return n.value


def gpu_available():
    """(True, "") when kernels can run on a GPU here, else (False, the reason)."""
    why = ctypes.c_char_p()
    ok = _lib.lib().kiln_gpu_available(ctypes.byref(why))
    return bool(ok), _lib.text(why)


def device_info(ordinal=0):
    """Device `ordinal`'s properties (name, arch, sm_count, shared memory, ...); KilnUnavailableError without a
    driver."""
    out = ctypes.c_char_p()
    _lib.check(_lib.lib().kiln_device_info(ordinal, ctypes.byref(out)))
    return json.loads(_lib.text(out))


def cache_path():
    """{"root", "compile", "tune"}: where compiled kernels and autotune results are kept (KILN_CACHE_DIR)."""
    out = ctypes.c_char_p()
    _lib.check(_lib.lib().kiln_cache_path(ctypes.byref(out)))
    return json.loads(_lib.text(out))


def cache_clear():
    """Removes every compiled kernel and autotune result from the cache; returns how many files."""
    n = ctypes.c_int64()
    _lib.check(_lib.lib().kiln_cache_clear(ctypes.byref(n)))
    return n.value
