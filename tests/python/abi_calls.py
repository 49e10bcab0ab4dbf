"""What the tests that call libkiln's C ABI through ctypes share: the library, whether it sees a GPU, the
per-thread last error, and an options struct initialised the size-aware way with some fields set."""

import ctypes

import kiln
from kiln import _lib

LIB = _lib.lib()
HAS_GPU = kiln.device_count() > 0


def last_error():
    return LIB.kiln_last_error().decode()


def options(**fields):
    o = _lib.AttentionOptions()
    LIB.kiln_attention_options_init_sized(ctypes.byref(o), ctypes.sizeof(o))
    for name, value in fields.items():
        setattr(o, name, value)
    return o
