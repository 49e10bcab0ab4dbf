"""The report's section for kiln_bench's "mods" suite (bench/mods_bench.cpp): kiln's FA2 forward generated from
attention mods, beside the built-in kernel where the mod restates a built-in path (issue 19: within 3 %), and
beside flex_attention (torch.compile) and the best SDPA backend that runs the case (peers_mods.py). Rates
count only the scores a row sees (FlexAttention's convention), the same FLOPs for every system of a case."""

from report_format import DASH, cell, err, ratio, rate, table

SDPA = ("sdpa_flash", "sdpa_cudnn", "sdpa_efficient")


def _best(report, key, systems):
    """The fastest record among `systems` for `key` that ran and passed its check, with its system's name."""
    best = None
    for system in systems:
        rec = report.get(key, system)
        if rec is not None and rec.get("ok") and rate(rec) and (best is None or rate(rec) > rate(best[0])):
            best = (rec, system)
    return best


def mods_section(report):
    """Markdown for the mods suite of `report` (a report.Report), "" where the suite did not run."""
    rows = []
    for rec in report.records(source="kiln", suite="mods", system="kiln"):
        key = rec["key"]
        builtin = report.get(key, "kiln_builtin")
        flex = report.get(key, "flex")
        sdpa = _best(report, key, SDPA)
        masked = report.get(key, "kiln_block_mask")
        best = max((r for r in (rec, masked) if r is not None and r.get("ok") and rate(r)), key=rate, default=rec)
        rows.append([key, rec.get("note", ""), cell(rec), cell(masked), cell(builtin), ratio(best, builtin),
                     cell(flex), ratio(best, flex), f"{cell(sdpa[0])} ({sdpa[1]})" if sdpa else "n/a",
                     ratio(best, sdpa[0]) if sdpa else DASH, err(rec)])
    if not rows:
        return ""
    configs = []
    for rec in report.records(source="kiln", suite="mods"):
        extra = rec.get("extra") or {}
        if extra.get("config"):
            runs = extra.get("block_mask_runs")
            configs.append([rec["key"], rec["system"], f"`{extra['config']}`", runs if runs else DASH])
    head = ["case", "mods", "kiln TFLOP/s", "with a block mask", "kiln built-in", "best kiln / built-in",
            "flex_attention", "best kiln / flex", "best SDPA", "best kiln / SDPA", "check"]
    return ("kiln's forward generated from the mods (tuned per mods, through `attention::forward`), the same "
            "over a block mask made once (mask cases; tuned at the block mask's tiles), the built-in "
            "kernel on the same problem where a mod restates it, `torch.compile(flex_attention)` with the same "
            "functions and a block mask, and the fastest SDPA backend that takes the case (a boolean `attn_mask` "
            "for the window and document masks; none takes a softcap). TFLOP/s over the visible scores only.\n\n"
            + table(head, rows)
            + ("\n\nThe configs that ran (the tuner's picks), and whether a block mask's lists were all runs of "
               "key tiles (the kernel that may be warp-specialised):\n\n"
               + table(["case", "system", "config", "block mask all runs"], configs) if configs else ""))
