"""What every GPU test module of the Python suite starts with: torch with CUDA and a device kiln can use, else
the whole module is skipped saying which is missing; and the default configs (KILN_AUTOTUNE=off unless the
caller set it), so that the suite checks results, not speed, and stays bounded."""

import os

import pytest


def require_torch_on_gpu():
    """torch, or a module-level skip naming what is missing (call it at import, before `import kiln`'s GPU use)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device", allow_module_level=True)
    import kiln

    if kiln.device_count() == 0:
        pytest.skip("kiln sees no CUDA device", allow_module_level=True)
    os.environ.setdefault("KILN_AUTOTUNE", "off")
    return torch
