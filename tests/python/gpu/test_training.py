"""A short training run of a small decoder-only transformer (bench/python_training.py's model) with kiln
attention, against the same model trained with SDPA's FlashAttention-2 backend from the same weights on the
same batches: the two loss curves agree step by step, and the loss falls. Skipped where torch, CUDA or a GPU
kiln can use is missing. The step times are the bench's business (python3 bench/python_training.py)."""

import importlib.util
import pathlib

from gpu_torch import require_torch_on_gpu

torch = require_torch_on_gpu()


def load_training_module():
    path = pathlib.Path(__file__).resolve().parents[3] / "bench" / "python_training.py"
    spec = importlib.util.spec_from_file_location("python_training", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_loss_curve_matches_sdpa_flash():
    t = load_training_module()
    steps, batch, seq = 40, 4, 256
    curves = {}
    for name, attend in [("sdpa", t.sdpa_flash_attention), ("kiln", t.kiln_attention)]:
        model = t.build_model(attend, seq=seq)
        curves[name], _ = t.train(model, steps=steps, batch=batch, seq=seq)
    ref, got = curves["sdpa"], curves["kiln"]
    # bf16 attention in both, rounded differently: the curves may drift apart, slowly. Random tokens: the loss
    # starts above log(512) = 6.24 (the initial logits' spread) and falls towards it.
    for step, (x, y) in enumerate(zip(got, ref)):
        assert abs(x - y) <= 1e-2 * abs(y), f"step {step}: kiln loss {x}, SDPA flash loss {y}"
    assert got[-1] < got[0], f"the loss did not fall: {got[0]} -> {got[-1]}"
