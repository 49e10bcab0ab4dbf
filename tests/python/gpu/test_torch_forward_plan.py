"""kiln.attention's cached CUDA calls through libkiln's forward plan (torch_ops keeps one per signature): new
tensors of a seen signature give what the uncached C call gives them, bitwise; a misaligned view of a seen
signature is refused by the plan's run (the recheck of what the key cannot hold); a tuning between calls moves
the plan to the new pick; a cache that drops its plans (past _CACHE_LIMIT) goes on working; and the plan's run
through ctypes on its own. Skipped where torch, CUDA or a GPU kiln can use is missing."""

import os

import pytest

from gpu_torch import require_torch_on_gpu

torch = require_torch_on_gpu()

import kiln  # noqa: E402
from kiln import _lib, torch_ops  # noqa: E402
from kiln._tensor import describe  # noqa: E402
from kiln.errors import ERROR  # noqa: E402

DEV = torch.device("cuda", int(os.environ.get("KILN_DEVICE", "0") or 0))
SHAPE_Q, SHAPE_KV = (1, 8, 192, 64), (1, 2, 192, 64)


def inputs(seed, dtype=torch.float16):
    g = torch.Generator(device=DEV).manual_seed(seed)
    return [torch.randn(s, generator=g, device=DEV, dtype=dtype) for s in (SHAPE_Q, SHAPE_KV, SHAPE_KV)]


def one_shot(q, k, v, causal=_lib.CAUSAL_TOP_LEFT):
    """O and LSE from kiln_attention_forward_cuda (validated and selected per call, no plan) on the current
    stream."""
    o, lse = torch.empty_like(q), q.new_empty(q.shape[:3], dtype=torch.float32)
    structs = [describe(t, n) for t, n in zip((q, k, v, o, lse), ("q", "k", "v", "o", "lse"))]
    opts = _lib.attention_options(causal, _lib.LAYOUT_BHSD, 0.0, stream=torch.cuda.current_stream(DEV).cuda_stream)
    _lib.check(_lib.lib().kiln_attention_forward_cuda(*structs, opts))
    return o, lse


def test_repeated_calls_on_new_tensors_match_the_one_shot_call():
    first = inputs(0)
    kiln.attention(*first, causal="top-left")  # the signature's first call: makes its plan
    for seed in (1, 2, 3):
        q, k, v = inputs(seed)
        o, lse = kiln.attention(q, k, v, causal="top-left", return_lse=True)
        ref_o, ref_lse = one_shot(q, k, v)
        torch.testing.assert_close(o, ref_o, rtol=0, atol=0)
        torch.testing.assert_close(lse, ref_lse, rtol=0, atol=0)
    plans = [hit[2][3] for hit in torch_ops._local.calls.values() if isinstance(hit[2], tuple) and len(hit[2]) == 4]
    assert any(isinstance(p, _lib.AttentionPlan) and p.handle for p in plans), "no plan was kept"


def test_a_misaligned_view_of_a_seen_signature_is_refused():
    q, k, v = inputs(4)
    kiln.attention(q, k, v)
    # The same dtype, shape and strides 8 bytes into a buffer: the key matches, the address does not.
    flat = torch.empty(q.numel() + 8, device=DEV, dtype=q.dtype)
    shifted = flat[4:4 + q.numel()].view(SHAPE_Q)
    shifted.copy_(q)
    assert shifted.stride() == q.stride() and shifted.data_ptr() % 16 == 8
    with pytest.raises(kiln.KilnError, match=r"attention::ForwardPlan::run: q's address 0x[0-9a-f]+ is not "
                                             r"16-byte aligned"):
        kiln.attention(shifted, k, v)


def test_a_tuning_between_calls_moves_the_plan_to_the_new_pick(monkeypatch):
    q, k, v = inputs(5, torch.bfloat16)
    before = kiln.attention(q, k, v, causal="bottom-right")
    picked = kiln.tune("attention", q, k, v, causal="bottom-right")  # forced: stores a pick, the picks move
    assert picked["source"] == "tuned"
    monkeypatch.setenv("KILN_AUTOTUNE", "cached")  # remembered picks, read by libkiln per call
    after = kiln.attention(q, k, v, causal="bottom-right")  # the plan selects again: the tuned pick
    ref, _ = one_shot(q, k, v, _lib.CAUSAL_BOTTOM_RIGHT)  # a cached-mode call without a plan: the same pick
    torch.testing.assert_close(after, ref, rtol=0, atol=0)
    torch.testing.assert_close(after.float(), before.float(), rtol=2e-2, atol=2e-2)  # configs differ in rounding


def test_calls_go_on_after_the_cache_drops_its_plans(monkeypatch):
    monkeypatch.setattr(torch_ops, "_CACHE_LIMIT", 2)
    outs = []
    for n in (64, 80, 96, 64, 80):  # past the limit twice: the cache is emptied and its plans destroyed
        q, k, v = (torch.randn(1, 2, n, 64, device=DEV, dtype=torch.float16) for _ in range(3))
        outs.append((kiln.attention(q, k, v), one_shot(q, k, v, _lib.CAUSAL_NONE)[0]))
    for o, ref in outs:
        torch.testing.assert_close(o, ref, rtol=0, atol=0)


def test_the_plan_run_through_ctypes():
    q, k, v = inputs(6)
    o, lse = torch.empty_like(q), q.new_empty(q.shape[:3], dtype=torch.float32)
    structs = [describe(t, n) for t, n in zip((q, k, v, o, lse), ("q", "k", "v", "o", "lse"))]
    plan = _lib.AttentionPlan(structs, _lib.attention_options(_lib.CAUSAL_NONE, _lib.LAYOUT_BHSD, 0.0), DEV.index)
    q2, k2, v2 = inputs(7)
    o2, lse2 = torch.empty_like(q2), torch.empty_like(lse)
    stream = torch.cuda.current_stream(DEV).cuda_stream
    _lib.check(plan.run(plan.handle, q2.data_ptr(), k2.data_ptr(), v2.data_ptr(), o2.data_ptr(), lse2.data_ptr(),
                        stream, _lib.AUTOTUNE_ENV))
    ref_o, ref_lse = one_shot(q2, k2, v2, _lib.CAUSAL_NONE)
    torch.testing.assert_close(o2, ref_o, rtol=0, atol=0)
    torch.testing.assert_close(lse2, ref_lse, rtol=0, atol=0)
    # O over q: refused before anything runs.
    assert plan.run(plan.handle, q2.data_ptr(), k2.data_ptr(), v2.data_ptr(), q2.data_ptr(), lse2.data_ptr(), stream,
                    _lib.AUTOTUNE_ENV) == ERROR
    assert "o (bytes" in _lib.lib().kiln_last_error().decode() and "overlaps q" in _lib.lib().kiln_last_error().decode()
