"""The Nsight Compute comparison of :mod:`traceconf.analyses.ncu`, printed as tables or CSV."""

from __future__ import annotations

import csv
import io

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from traceconf.analyses.ncu import Comparison
from traceconf.analyses.results import MODEL_MARK, UNRESOLVED_MARK
from traceconf.names import short_name
from traceconf.report.hotspots import Column, fitted_tables

COUNT_KEYS = ("wavefronts", "ideal_wavefronts", "excess_wavefronts")


def _ratio(measured: dict | None, predicted: dict) -> str:
    if measured is None:
        return ""
    if measured["wavefronts"] == predicted["wavefronts"]:
        return "="
    return f"×{predicted['wavefronts'] / measured['wavefronts']:.2f}" if measured["wavefronts"] else "–"


def _table(title: str, label: str, rows: list[tuple[str, dict | None, dict]], width: int | None) -> Group:
    """Measured beside predicted, one column pair per count; on a narrow terminal the pairs wrap into further
    tables (numbers are never cut; a long label is)."""
    limit = max(20, min(60, (width or 200) // 3))
    names = [name if len(name) <= limit else name[:limit - 1] + "…" for name, _, _ in rows]
    lead = [Column(label, [Text(name) for name in names], True)]   # plain text: source like a[i] is no markup
    groups = []
    for key in COUNT_KEYS:
        name = key.replace("_wavefronts", "")
        measured_cells, predicted_cells = [], []
        for _, measured, predicted in rows:
            if measured is None:                      # not in the report (no SASS rows): not a measured zero
                measured_cells.append(Text("–", style="dim"))
                predicted_cells.append(f"{predicted[key]:,}")
                continue
            measured_cells.append(f"{measured[key]:,}")
            predicted_cells.append(Text(f"{predicted[key]:,}", style="green" if measured[key] == predicted[key]
                                        else "red"))
        groups.append([Column(f"{name}\nncu", measured_cells), Column(f"{name}\npredicted", predicted_cells)])
    groups.append([Column("wavefronts\npredicted/ncu", [_ratio(measured, predicted)
                                                       for _, measured, predicted in rows])])
    return Group(*fitted_tables(lead, [], groups, width, title))


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


def pc_label(row: dict, gap: str = "  ") -> str:
    """``0x0b30  LDGSTS…`` (a by_pc row), marked when the rule set says Nsight may count that instruction otherwise,
    and when executions of it are not counted (unresolved)."""
    return f"{MODEL_MARK if row['model_note'] else ''}{row['pc']:#06x}{gap}{row['sass']}" + \
        (f"{gap}{UNRESOLVED_MARK}" if row["unresolved"] else "")


def render(comparisons: list[Comparison], device: str, console: Console, counters_given: bool = False,
           notes: list[str] = ()) -> None:
    """The comparisons, each with its notes, then the ``notes`` about the whole run (report kernels not compared)."""
    width = console.width
    for c in comparisons:
        launch = f", launch ID {c.launch['id']}" if c.launch.get("id") is not None else ""
        console.print(Text(short_name(c.kernel), style="bold") + Text(f"  (ncu: {c.measured_name or 'unnamed'}"
                                                                      f"{launch}, predicted for {device})"))
        if c.launch.get("grid"):
            dims = lambda d: "×".join(map(str, d))    # noqa: E731
            console.print(f"launch: grid {dims(c.launch['grid'])}, block {dims(c.launch['block'])}, dynamic shared "
                          f"{c.launch.get('dynamic_smem') or 0:,} bytes"
                          + (" (the report's)" if c.launch.get("id") is not None else ""))
        console.print(_table("per kernel (ncu: Source page, sum over instructions)", "kernel",
                             [(short_name(c.kernel), c.totals["measured"], c.totals["predicted"])], width))
        for entry in c.counters:
            console.print(_counter_table(entry))
        if not counters_given:
            console.print("the kernel-level l1tex counters (Details page) can exceed this sum when CTAs share an SM; "
                          "--raw (ncu --page raw --csv) shows them here", style="dim")
        console.print(_table("per access kind (SASS opcode class)", "kind",
                             [(k["kind"], k["measured"], k["predicted"]) for k in c.by_kind], width))
        if c.by_pc:
            console.print(_table(f"per SASS instruction ({MODEL_MARK}: Nsight may count it otherwise; "
                                 f"{UNRESOLVED_MARK}: not fully counted; see the notes)", "pc",
                                 [(pc_label(row), row["measured"], row["predicted"]) for row in c.by_pc], width))
        if c.by_line:
            console.print(_table("per CUDA source line", "line",
                                 [(f"{row['line']}  {row['source']}".strip(), row["measured"], row["predicted"])
                                  for row in c.by_line], width))
        else:
            console.print("no CUDA source lines in the report (export with --print-source sass,cuda to "
                          "compare per line)", style="dim")
        for note in c.notes:
            console.print(Text(f"note: {note}", style="yellow"))
    for note in notes:
        console.print(Text(f"note: {note}", style="yellow"))


def csv_text(comparisons: list[Comparison], device: str) -> str:
    """One row per kernel total (the Source page's sum), kernel-level counter (level ``counter``, with --raw: the
    l1tex counter, its bank conflicts as excess), access kind and CUDA line: measured (empty when not in the
    report) and predicted wavefronts, ideal and excess."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["kernel", "launch_id", "device", "level", "key", "source"]
                    + [f"{side}_{key}" for key in COUNT_KEYS for side in ("measured", "predicted")]
                    + ["model_note", "unresolved_reason"])

    def row(c, level, key, source, measured, predicted, note=None, unresolved=None):
        writer.writerow([c.kernel, c.launch.get("id") or "", device, level, key, source]
                        + [v for k in COUNT_KEYS for v in ("" if measured is None else measured[k], predicted[k])]
                        + [note or "", unresolved or ""])

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
            row(c, "pc", f"{pc['pc']:#06x}", pc["sass"], pc["measured"], pc["predicted"], pc["model_note"],
                pc["unresolved"])
        for line in c.by_line:
            row(c, "line", line["line"], line["source"], line["measured"], line["predicted"])
    return out.getvalue()
