"""How report.py prints a record: the figure a table shows for it (rate) and its cell, the ratio of two records,
its check, times and a markdown table, and the SDPA backends shown beside kiln's attention. The report's sections
(report.py, report_user.py) and its plots (report_plots.py) share them."""

import math

ATTN_PEERS = [("sdpa_flash", "SDPA flash"), ("sdpa_cudnn", "SDPA cuDNN"), ("sdpa_efficient", "SDPA mem-eff")]
DASH = "—"


def rate(rec):
    """The figure a table shows for one record: TFLOP/s (or GB/s) if it ran and passed its check."""
    if rec is None:
        return None
    if rec.get("flops"):
        return rec.get("tflops")
    return rec.get("gbps")


def cell(rec, digits=1):
    if rec is None:
        return DASH
    if rec.get("available") is False:
        return "n/a"
    value = rate(rec)
    if value is None:
        return "✗"
    mark = "" if rec.get("ok", True) else "!"
    return f"{value:.{digits}f}{mark}"


def ratio(a, b, percent=False):
    ra, rb = rate(a), rate(b)
    if not ra or not rb:
        return DASH
    return f"{100 * ra / rb:.0f}%" if percent else f"{ra / rb:.2f}"


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def geomean(values):
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def err(rec):
    if rec is None:
        return DASH
    c = rec.get("check") or {}
    if c.get("error") is None:
        return (rec.get("error") or DASH)[:40]
    return f"{c['error']:.1e} {c.get('method', '')}" + ("" if c.get("ok") else " FAIL")


def fmt_ms(rec, digits=4):
    return f"{rec['time_ms']:.{digits}f}" if rec and rec.get("time_ms") is not None else DASH


def ms(value, digits=1):
    return DASH if value is None else f"{value:.{digits}f}"


def verdict(rec, meets):
    if not rec.get("ok"):
        return "✗"
    return DASH if meets is None else ("yes" if meets else "**no**")
