"""The report's section for kiln_bench's "user" suite (bench/user_kernels_bench.cpp): the tutorials' kernels,
written as a user writes theirs, beside what a PyTorch user runs for the same result (peers.py), the device
copy of the same bytes where the kernel is memory-bound, and kiln's own matmul at the fused matmul's shape:
the user suite's own timing of it (L2 flushed, right after the fused kernel, as that one is timed), else the
matmul suite's (L2 warm, timed apart). The issue's targets are ratios, so the table shows them."""

from report_format import cell, err, ratio, table

PEERS = {"layernorm_fwd": "torch_layer_norm", "matmul_bias_gelu": "torch_matmul_bias_gelu",
         "online_logsumexp": "torch_logsumexp"}


def user_kernels(report):
    """Markdown for the user suite of `report` (a report.Report), "" where the suite did not run."""
    rows = []
    for rec in report.records(source="kiln", suite="user"):
        if rec["system"] == "kiln_plain_matmul":  # shown in the fused matmul's row
            continue
        peer = report.get(rec["key"], PEERS.get(rec["op"], ""))
        copy = report.get(rec["key"], "torch_copy")
        plain = None
        if rec["op"] == "matmul_bias_gelu":
            plain_key = rec["key"].replace("matmul_bias_gelu:", "matmul:", 1)
            plain = report.get(plain_key, "kiln_plain_matmul") or report.get(plain_key, "kiln_matmul")
        unit = "TFLOP/s" if rec.get("flops") else "GB/s"
        rows.append([rec["key"], f"{cell(rec)} {unit}", f"{cell(peer)}", ratio(rec, peer),
                     ratio(rec, copy, percent=True), cell(plain), ratio(rec, plain), err(rec)])
    if not rows:
        return ""
    head = ["case", "kiln", "torch", "kiln / torch", "kiln % of copy", "kiln matmul TFLOP/s",
            "kiln / kiln matmul", "check"]
    return ("The tutorials' kernels (examples/kernels/) as tuned by kiln; torch runs what a PyTorch user would "
            "(`layer_norm`, `gelu(matmul + bias)` unfused, `logsumexp`); copy is `Tensor.copy_` of the same "
            "bytes.\n\n" + table(head, rows))
