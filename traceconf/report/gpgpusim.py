"""The GPGPU-Sim comparison of :mod:`traceconf.analyses.gpgpusim`, printed as a table, JSON or CSV."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from traceconf.analyses.gpgpusim import COUNTS_NOTE, PREDICTED_KEYS, STATS_KEYS, Comparison, closest_rule_set


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------

def json_document(c: Comparison) -> dict:
    closest, why = closest_rule_set(c.model)
    return {"stats": c.stats_path, "ptx": c.ptx_path, "ptx_name": c.ptx_name, "gpgpusim_options": c.model.options(),
            "devices": c.devices, "closest_device": {"device": closest, "why": why}, "counts": COUNTS_NOTE,
            "lines": c.lines, "totals": c.totals, "notes": c.notes}


def csv_text(c: Comparison) -> str:
    """One row per PTX line, nested counts flattened (``gpgpusim_smem_bk_conflicts``, ``sm_90_wavefronts``...)."""
    header = ["ptx_line", "kernel", "kind", "width_bits", "ptx",
              *(f"gpgpusim_{k}" for k in (*STATS_KEYS, "extra_cycles")), "model_warps", "model_cycles",
              "model_delta", *(f"{d}_{k}" for d in c.devices for k in (*PREDICTED_KEYS, "delta"))]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for r in c.lines:
        model = r["model"] or {}
        per_device = []
        for d in c.devices:
            counts = r["predicted"][d] if r["predicted"] else {}
            per_device += [counts.get(k) for k in PREDICTED_KEYS] + [r["delta"][d] if r["delta"] else None]
        writer.writerow([r["ptx_line"], r["kernel"], r["kind"], r["width_bits"], r["ptx"],
                         *(r["gpgpusim"][k] for k in (*STATS_KEYS, "extra_cycles")),
                         model.get("warps"), model.get("cycles"), r["model_delta"], *per_device])
    return out.getvalue()


def _n(value) -> str:
    return "–" if value is None else f"{value:,}"


def _signed(value) -> Text:
    if value is None:
        return Text("–")
    return Text("=" if value == 0 else f"{value:+,}", style="green" if value == 0 else "red")


def render(c: Comparison, console: Console) -> None:
    closest, why = closest_rule_set(c.model)
    options = ", ".join(f"-{k} {v}" for k, v in c.model.options().items())
    console.print(Text(f"GPGPU-Sim {Path(c.stats_path).name} ({c.ptx_name}) vs traceconf for {Path(c.ptx_path).name}",
                       style="bold"))
    table = Table(header_style="bold", pad_edge=False, show_footer=True)
    table.add_column("line", justify="right", footer="total")
    table.add_column("PTX", overflow="ellipsis", max_width=44, no_wrap=True)
    t = c.totals
    for key, label in (("smem_warp", "gpgpusim\nwarps"), ("smem_bk_conflicts", "gpgpusim\ncycles"),
                       ("extra_cycles", "gpgpusim\nextra")):
        table.add_column(label, justify="right", footer=_n(t["gpgpusim"][key]))
    table.add_column("model\ncycles", justify="right", footer=_n(t["model"]["cycles"] if t["model"] else None))
    table.add_column("model\nΔ", justify="right", footer=_signed(t["model_delta"]))
    for d in c.devices:
        for key, label in (("executions", "exec"), ("wavefronts", "wavefronts"), ("excess_wavefronts", "excess")):
            table.add_column(f"{d}\n{label}", justify="right", footer=_n(t["predicted"][d][key]))
        table.add_column(f"{d}\nΔ", justify="right", footer=_signed(t["delta"][d]))
    for r in c.lines:
        g = r["gpgpusim"]
        cells = [str(r["ptx_line"]), Text(r["ptx"] or "(not a shared instruction here)",
                                          style=None if r["ptx"] else "yellow"),
                 _n(g["smem_warp"]), _n(g["smem_bk_conflicts"]), _n(g["extra_cycles"]),
                 _n(r["model"]["cycles"] if r["model"] else None), _signed(r["model_delta"])]
        for d in c.devices:
            counts = r["predicted"][d] if r["predicted"] else {}
            cells += [_n(counts.get(k)) for k in PREDICTED_KEYS] + [_signed(r["delta"][d] if r["delta"] else None)]
        table.add_row(*cells)
    console.print(table)
    console.print(Text(f"GPGPU-Sim rule replayed with {options}.  Closest rule set: --device {closest} ({why}).",
                       style="dim"))
    for name, text in COUNTS_NOTE.items():
        console.print(Text(f"{name}: {text}", style="dim"))
    for note in c.notes:
        console.print(Text(f"note: {note}", style="yellow"))


__all__ = ["csv_text", "json_document", "render"]
