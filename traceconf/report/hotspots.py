"""The hotspot table: where a kernel loses shared-memory time, worst first.

One block per kernel: a header (kernel, input, launch, analysed scale), the
instructions ranked by excess wavefronts with their CUDA ``file:line``, source
text and PTX/SASS text, per-kind totals, then the unresolved instructions with
reasons.  Several devices give one column group per device so that the same
kernel can be read side by side (e.g. sm_1x vs sm_90 vs cdna3).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from traceconf.emulate.launch import param_spelling
from traceconf.names import short_name
from traceconf.pipeline import KernelAnalysis
from traceconf.analyses.results import COUNTS, kernel_table, partial_note
from traceconf.report.source import source_text
from traceconf.schemas import KINDS


def _dims(values) -> str:
    return "×".join(str(v) for v in values)


def scale_note(launch: dict) -> str:
    """How much of the launch the counts stand for, e.g. "1 CTA analysed, ×1024 exact"."""
    if "partial" in launch:
        return (f"PARTIAL ({launch['partial']}): counts cover {launch.get('covered_ctas', 0):,} of "
                f"{launch.get('total_ctas', 0):,} CTAs")
    if "sampled_ctas" in launch:
        analysed, total = launch["sampled_ctas"]
        return f"{analysed} of {total} CTAs sampled: counts cover the sampled CTAs only"
    if "classes" in launch:
        classes, total = launch["classes"], launch.get("total_ctas", 0)
        return (f"{launch['analysed_ctas']:,} CTAs emulated; {len(classes):,} CTA classes stand for all "
                f"{total:,} CTAs, exact (see notes)")
    if "analysed_ctas" in launch:
        ctas = launch["analysed_ctas"]
        if ctas == 0:
            return "nothing to emulate (no shared-memory access)"
        scale = launch.get("scale", 1)
        plural = "CTA" if ctas == 1 else "CTAs"
        return f"{ctas} {plural} analysed, ×{scale:g} exact" if scale != 1 else f"{ctas} {plural} analysed, exact"
    return "recorded trace: counts as recorded"


def launch_line(launch: dict, kernel: str) -> str:
    parts = []
    if "grid" in launch:
        parts.append(f"grid {_dims(launch['grid'])}")
    if "block" in launch:
        parts.append(f"block {_dims(launch['block'])}")
    if launch.get("dynamic_smem"):
        parts.append(f"dynamic smem {launch['dynamic_smem']} B")
    params = launch.get("params") or {}
    if params:
        parts.append("params " + ", ".join(f"{param_spelling(kernel, k)}={v}" for k, v in params.items()))
    return ", ".join(parts) or "launch facts unknown"


def _ranked(tables: list[pa.Table]) -> np.ndarray:
    """Row order: largest excess on any device first, then most wavefronts, then instruction id."""
    excess = np.max([t.column("excess_wavefronts").to_numpy() for t in tables], axis=0)
    wavefronts = np.max([t.column("wavefronts").to_numpy() for t in tables], axis=0)
    ids = tables[0].column("instruction").to_numpy()
    return np.lexsort((ids, -wavefronts, -excess))


def _fit(table: Table, width: int | None) -> None:
    """On a narrow terminal the source and instruction columns give way, never the counts."""
    if width is None:
        return
    text_columns = [c for c in table.columns if c.header in ("source", "instruction")]
    fixed = 0
    for column in table.columns:
        if column not in text_columns:
            cells = [Text.from_markup(c) if isinstance(c, str) else c for c in column.cells]
            header = max(len(line) for line in str(column.header).split("\n"))
            fixed += max([header] + [c.cell_len for c in cells]) + 3  # padding and border
    room = max(24, width - fixed - 7)
    source, instruction = text_columns
    source.max_width = max(12, min(source.max_width or room, room * 9 // 20))
    instruction.max_width = max(12, min(instruction.max_width or room, room - source.max_width))


def _share(excess: int, total: int) -> str:
    return f"{100.0 * excess / total:.0f}%" if total else "–"


def _ways(ways: int) -> str:
    return f"{ways}-way" if ways else "–"


def _where_in_input(row: dict) -> str:
    """``L123 `` for PTX, ``pc 0x1a0 `` for SASS and traces: what ``explain --instruction`` accepts."""
    if row["pc"] is not None:
        return f"pc {row['pc']:#x} "
    if row["ptx_line"] is not None:
        return f"L{row['ptx_line']} "
    return f"#{row['instruction']} "


def kernel_report(analysis: KernelAnalysis, devices: list[str], top: int | None = 20,
                  width: int | None = None) -> Group:
    """The rich renderable for one kernel, fitted to ``width`` columns when given."""
    devices = analysis.devices_among(devices)
    tables = [kernel_table(analysis, device) for device in devices]
    single = len(devices) == 1
    readable = short_name(analysis.kernel)
    header = Text.assemble((readable, "bold"), (f"  {analysis.kernel}" if readable != analysis.kernel else "", "dim"),
                           f"  ({analysis.input_path})\n",
                           f"launch: {launch_line(analysis.launch, analysis.kernel)}\n",
                           f"scale: {scale_note(analysis.launch)}\n",
                           f"device{'s' if not single else ''}: {', '.join(devices)}")
    for note in analysis.notes:
        header.append(f"\nnote: {note}", style="yellow")

    table = Table(show_header=True, header_style="bold", expand=False, pad_edge=False)
    table.add_column("#", justify="right")
    table.add_column("source", overflow="ellipsis", max_width=44, no_wrap=True)
    table.add_column("instruction", overflow="ellipsis", max_width=56, no_wrap=True)
    table.add_column("kind")
    # Devices with other warp sizes (cdna: 64 lanes) count other executions: then one column per device.
    same_executions = all(t.column("executions").equals(tables[0].column("executions")) for t in tables)
    if same_executions:
        table.add_column("execs", justify="right", no_wrap=True)
    for device in devices:
        prefix = "" if single else f"{device}\n"
        if not same_executions:
            table.add_column(f"{prefix}execs", justify="right", no_wrap=True)
        table.add_column(f"{prefix}wavefronts", justify="right", no_wrap=True)
        if single:
            table.add_column("ideal", justify="right", no_wrap=True)
        table.add_column(f"{prefix}excess", justify="right", no_wrap=True)
        if single:
            table.add_column("share", justify="right", no_wrap=True)
        table.add_column(f"{prefix}max", justify="right", no_wrap=True)

    totals = [int(pc.sum(t.column("excess_wavefronts")).as_py() or 0) for t in tables]
    order = _ranked(tables) if tables[0].num_rows else np.zeros(0, dtype=np.int64)
    shown = order if top is None else order[:top]
    rows = [t.to_pylist() for t in tables]
    for rank, at in enumerate(shown.tolist(), 1):
        first = rows[0][at]
        code = source_text(first["source_file"], first["source_line"], analysis.input_path)
        location = Text(f"{Path(first['source_file']).name}:{first['source_line']}" if first["source"] else "–")
        if code:
            location.append(f"\n{code}", style="dim")
        instruction = Text(_where_in_input(first), style="dim")
        instruction.append(" ".join((first["text"] or "").split()))
        cells = [str(rank), location, instruction, f"{first['kind']}.{first['width_bits']}"]
        if same_executions:
            cells.append(f"{first['executions']:,}")
        for device_rows, total in zip(rows, totals):
            row = device_rows[at]
            if not same_executions:
                cells.append(f"{row['executions']:,}")
            if not row["resolved"]:
                cells += ["unresolved"] + [""] * (4 if single else 2)
                continue
            style = "red" if row["excess_wavefronts"] else ""
            excess = Text(f"{row['excess_wavefronts']:,}", style=style)
            if single:
                cells += [f"{row['wavefronts']:,}", f"{row['ideal_wavefronts']:,}", excess,
                          _share(row["excess_wavefronts"], total), _ways(row["max_ways"])]
            else:
                excess.append(f" ({_share(row['excess_wavefronts'], total)})", style="dim")
                cells += [f"{row['wavefronts']:,}", excess, _ways(row["max_ways"])]
        table.add_row(*cells)
    _fit(table, width)

    parts = [header, table]
    if len(shown) < len(order):
        parts.append(Text(f"… {len(order) - len(shown)} more instruction(s); use --top to see more", style="dim"))
    parts.append(_totals_table(tables, devices, analysis.device_gaps))
    note = partial_note(analysis)
    if note:
        parts.append(Text(note, style="bold yellow"))
    if analysis.unresolved:
        text = {int(r["instruction"]): r["text"] for r in analysis.instructions.to_pylist()}
        lines = Text("not counted (addresses unknown, or no LSU access):", style="bold yellow")
        for entry in analysis.unresolved:
            ident = int(entry["instruction"])
            shown = " ".join(text.get(ident, "").split())
            shown = shown if len(shown) <= 72 else shown[:71] + "…"
            lines.append(f"\n  [{ident}] {shown}: {entry.get('reason') or 'addresses unknown'}")
        parts.append(lines)
    return Group(*parts)


def _totals_table(tables: list[pa.Table], devices: list[str], gaps: dict[str, str]) -> Table:
    """Per-kind totals (only kinds the kernel uses), one column group per device ("not counted" for a device
    whose rules cannot count this kernel: the reason is in the notes)."""
    table = Table(title="totals", title_justify="left", show_header=True, header_style="bold", pad_edge=False)
    table.add_column("kind")
    for device in devices:
        prefix = "" if len(devices) == 1 else f"{device}\n"
        for name in COUNTS:
            table.add_column(prefix + name.replace("_wavefronts", ""), justify="right", no_wrap=True)
    sums = []
    for t in tables:
        grouped = t.group_by("kind", use_threads=False).aggregate([(name, "sum") for name in COUNTS]).to_pylist()
        sums.append({row["kind"]: row for row in grouped})
    kinds = [k for k in KINDS if any(k in per_kind for per_kind in sums)]   # counted kinds only (not tma/wgmma)
    for kind in kinds + ["all"]:
        cells = [kind]
        for device, per_kind in zip(devices, sums):
            if device in gaps:
                cells += ["not counted"] + [""] * (len(COUNTS) - 1)
                continue
            for name in COUNTS:
                value = (sum(r[f"{name}_sum"] for r in per_kind.values()) if kind == "all"
                         else per_kind[kind][f"{name}_sum"])
                cells.append(f"{value:,}")
        table.add_row(*cells, style="bold" if kind == "all" else None)
    return table


def render(analyses: list[KernelAnalysis], devices: list[str], top: int | None, console: Console) -> None:
    """Print every kernel's report, one after the other."""
    for number, analysis in enumerate(analyses):
        if number:
            console.print()
        console.print(kernel_report(analysis, devices, top, console.width))
