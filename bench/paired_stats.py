"""The statistics of a paired comparison (bench/paired.py): two systems timed in alternating rounds on the same
inputs, each round's times taken seconds apart, so that both see the same clocks and temperature. A round's ratio
is the peer's time over kiln's (above 1: kiln is faster); a point reports the median of its rounds' ratios and
their range, which is how far one unpaired pair of figures could have strayed. No torch here: CI tests it.
"""

import statistics


def alternating_orders(rounds):
    """Which system goes first in each round: kiln, peer; then peer, kiln; and so on (ABBA…), so that a drift
    across the rounds, such as a GPU warming up, does not favour the one that always runs second."""
    if not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
    return [("kiln", "peer") if r % 2 == 0 else ("peer", "kiln") for r in range(rounds)]


def _times(name, ms):
    if not ms:
        raise ValueError(f"{name}: no round was timed")
    for t in ms:
        if not isinstance(t, (int, float)) or not t > 0 or t == float("inf"):
            raise ValueError(f"{name}: a round's time must be a positive finite number of ms, got {t!r}")
    return list(ms)


def summarize(kiln_ms, peer_ms):
    """kiln's and the peer's per-round times (ms, in round order) -> the point's summary: each system's median
    time, the per-round ratios peer / kiln, their median, lowest and highest."""
    kiln_ms, peer_ms = _times("kiln", kiln_ms), _times("peer", peer_ms)
    if len(kiln_ms) != len(peer_ms):
        raise ValueError(f"kiln has {len(kiln_ms)} rounds and the peer {len(peer_ms)}: a paired comparison needs "
                         "both timed in every round")
    ratios = [p / k for k, p in zip(kiln_ms, peer_ms)]
    return {
        "rounds": len(ratios),
        "kiln_ms": statistics.median(kiln_ms),
        "peer_ms": statistics.median(peer_ms),
        "ratio": statistics.median(ratios),
        "ratio_lo": min(ratios),
        "ratio_hi": max(ratios),
        "ratios": ratios,
    }


def point_label(point):
    """'f16 D64 causal N4096 (B4 H32)' for a point's dtype, D, causal, N, B, H."""
    return "{dtype} D{D}{c} N{N} (B{B} H{H})".format(c=" causal" if point["causal"] else "", **point)


def matches(point, words):
    """Whether every whitespace-separated word of `words` is a word of the point's label ("f16 D64" picks f16's
    D = 64 points, not bf16's; "causal N4096"; "" picks all)."""
    have = point_label(point).replace("(", "").replace(")", "").split()
    return all(w in have for w in words.split())


def markdown(points, peer_name):
    """One table row per point: each system's median ms, the paired ratio with its range, and the checks."""
    rows = [f"| point | kiln ms | {peer_name} ms | {peer_name} / kiln (median of rounds) | lowest | highest "
            "| rounds | checks |", "|---|---|---|---|---|---|---|---|"]
    for p in points:
        s = p.get("summary")
        if s is None:
            rows.append(f"| {point_label(p)} | — | — | — | — | — | 0 | {p.get('error', 'not timed')} |")
            continue
        rows.append(f"| {point_label(p)} | {s['kiln_ms']:.3f} | {s['peer_ms']:.3f} | {s['ratio']:.3f} | "
                    f"{s['ratio_lo']:.3f} | {s['ratio_hi']:.3f} | {s['rounds']} | {p['checks']} |")
    timed = [p["summary"]["ratio"] for p in points if p.get("summary")]
    if timed:
        at_least_one = sum(1 for r in timed if r >= 1.0)
        rows.append("")
        rows.append(f"{len(timed)} points: {peer_name} / kiln {min(timed):.3f}–{max(timed):.3f}, geomean "
                    f"{statistics.geometric_mean(timed):.3f}; kiln at least as fast at {at_least_one}.")
    return "\n".join(rows) + "\n"
