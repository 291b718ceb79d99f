"""The Nsight Compute comparison of :mod:`traceconf.analyses.ncu`, printed as tables or CSV."""

from __future__ import annotations

import csv
import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from traceconf.analyses.ncu import Comparison
from traceconf.names import short_name

COUNT_KEYS = ("wavefronts", "ideal_wavefronts", "excess_wavefronts")


def _ratio(measured: dict | None, predicted: dict) -> str:
    if measured is None:
        return ""
    if measured["wavefronts"] == predicted["wavefronts"]:
        return "="
    return f"×{predicted['wavefronts'] / measured['wavefronts']:.2f}" if measured["wavefronts"] else "–"


def _table(title: str, label: str, rows: list[tuple[str, dict | None, dict]]) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold", pad_edge=False)
    table.add_column(label, overflow="ellipsis", max_width=60, no_wrap=True)
    for key in COUNT_KEYS:
        name = key.replace("_wavefronts", "")
        table.add_column(f"{name} ncu", justify="right")
        table.add_column(f"{name} predicted", justify="right")
    table.add_column("wavefronts predicted/ncu", justify="right")
    for name, measured, predicted in rows:
        cells = [Text(name)]                          # plain text: source like tile[threadIdx.y + j] is no markup
        for key in COUNT_KEYS:
            if measured is None:                      # not in the report (no SASS rows): not a measured zero
                cells += [Text("–", style="dim"), f"{predicted[key]:,}"]
                continue
            same = measured[key] == predicted[key]
            cells += [f"{measured[key]:,}", Text(f"{predicted[key]:,}", style="green" if same else "red")]
        cells.append(_ratio(measured, predicted))
        table.add_row(*cells)
    return table


def _counter_table(entry: dict) -> Table:
    """One launch's kernel-level counters beside the Source page's sum and the prediction, per op."""
    where = f"ncu ID {entry['id']}" if entry["id"] else "ncu"
    if entry["grid"]:
        where += f", grid {tuple(entry['grid'])}, block {tuple(entry['block'])}"
    table = Table(title=f"per kernel, both figures ncu gives ({where})", title_justify="left", header_style="bold",
                  pad_edge=False)
    for name in ("op", "l1tex counter wavefronts", "l1tex counter bank conflicts", "Source page wavefronts",
                 "Source page ideal", "predicted wavefronts", "counter − Source page"):
        table.add_column(name, justify="left" if name == "op" else "right")
    for row in entry["by_op"]:
        counter, source, predicted = row["counter"], row["source"], row["predicted"]
        if not (counter["wavefronts"] or (source or {}).get("wavefronts") or predicted["wavefronts"]):
            continue                                  # an op the kernel does not use (atomics, mostly)
        conflicts = counter["bank_conflicts"]
        if source is None:
            difference = Text("–", style="dim")
        else:
            extra = counter["wavefronts"] - source["wavefronts"]
            difference = Text(f"{extra:+,}", style="yellow" if extra else "green")
        table.add_row(row["op"], f"{counter['wavefronts']:,}", "–" if conflicts is None else f"{conflicts:,}",
                      "–" if source is None else f"{source['wavefronts']:,}",
                      "–" if source is None else f"{source['ideal_wavefronts']:,}",
                      f"{predicted['wavefronts']:,}", difference)
    return table


def render(comparisons: list[Comparison], device: str, console: Console, counters_given: bool = False) -> None:
    for c in comparisons:
        console.print(Text(short_name(c.kernel), style="bold") + Text(f"  (ncu: {c.measured_name or 'unnamed'}, "
                                                                      f"predicted for {device})"))
        console.print(_table("per kernel (ncu: Source page, sum over instructions)", "kernel",
                             [(short_name(c.kernel), c.totals["measured"], c.totals["predicted"])]))
        for entry in c.counters:
            console.print(_counter_table(entry))
        if not counters_given:
            console.print("the kernel-level l1tex counters (Details page) can exceed this sum when CTAs share an SM; "
                          "--raw (ncu --page raw --csv) shows them here", style="dim")
        console.print(_table("per access kind (SASS opcode class)", "kind",
                             [(k["kind"], k["measured"], k["predicted"]) for k in c.by_kind]))
        if c.by_pc:
            console.print(_table("per SASS instruction", "pc", [(f"{row['pc']:#06x}  {row['sass']}", row["measured"],
                                                                 row["predicted"]) for row in c.by_pc]))
        if c.by_line:
            console.print(_table("per CUDA source line", "line",
                                 [(f"{row['line']}  {row['source']}".strip(), row["measured"], row["predicted"])
                                  for row in c.by_line]))
        else:
            console.print("no CUDA source lines in the report (export with --print-source sass,cuda to "
                          "compare per line)", style="dim")
        for note in c.notes:
            console.print(Text(f"note: {note}", style="yellow"))


def csv_text(comparisons: list[Comparison], device: str) -> str:
    """One row per kernel total (the Source page's sum), kernel-level counter (level ``counter``, with --raw: the
    l1tex counter, its bank conflicts as excess), access kind and CUDA line: measured (empty when not in the
    report) and predicted wavefronts, ideal and excess."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["kernel", "device", "level", "key", "source"]
                    + [f"{side}_{key}" for key in COUNT_KEYS for side in ("measured", "predicted")])

    def row(c, level, key, source, measured, predicted):
        writer.writerow([c.kernel, device, level, key, source]
                        + [v for k in COUNT_KEYS for v in ("" if measured is None else measured[k], predicted[k])])

    for c in comparisons:
        row(c, "kernel", c.kernel, "", c.totals["measured"], c.totals["predicted"])
        for entry in c.counters:        # the kernel-level counter: ideal = wavefronts - bank conflicts
            for op in entry["by_op"]:
                counter = op["counter"]
                conflicts = counter["bank_conflicts"]
                measured = {"wavefronts": counter["wavefronts"],
                            "ideal_wavefronts": "" if conflicts is None else counter["wavefronts"] - conflicts,
                            "excess_wavefronts": "" if conflicts is None else conflicts}
                row(c, "counter", op["op"], f"{op['metric']} (ncu ID {entry['id']})", measured, op["predicted"])
        for k in c.by_kind:
            row(c, "kind", k["kind"], "", k["measured"], k["predicted"])
        for pc in c.by_pc:
            row(c, "pc", f"{pc['pc']:#06x}", pc["sass"], pc["measured"], pc["predicted"])
        for line in c.by_line:
            row(c, "line", line["line"], line["source"], line["measured"], line["predicted"])
    return out.getvalue()
