"""The hotspot table: where a kernel loses shared-memory time, worst first.

One block per kernel: a header (kernel, input, launch, analysed scale), the
instructions ranked by excess wavefronts with their CUDA ``file:line``, source
text and PTX/SASS text, per-kind totals, then the unresolved instructions with
reasons.  Several devices give one column group per device so that the same
kernel can be read side by side (e.g. sm_1x vs sm_90 vs cdna3).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from traceconf.emulate.launch import param_spelling
from traceconf.grouping import group_aggregate
from traceconf.names import short_name
from traceconf.pipeline import KernelAnalysis
from traceconf.analyses.results import COUNTS, MODEL_MARK, kernel_table, partial_note
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


def ranked(tables: list[pa.Table]) -> np.ndarray:
    """Row order: largest excess on any device first, then most wavefronts, then instruction id."""
    excess = np.max([t.column("excess_wavefronts").to_numpy() for t in tables], axis=0)
    wavefronts = np.max([t.column("wavefronts").to_numpy() for t in tables], axis=0)
    ids = tables[0].column("instruction").to_numpy()
    return np.lexsort((ids, -wavefronts, -excess))


class Column(NamedTuple):
    """One column of a terminal table: its header, alignment and cells (``text`` columns may wrap)."""

    header: str
    cells: list
    text: bool = False

    def width(self) -> int:
        """Columns the widest cell or header line takes, padding and border included."""
        cells = [Text.from_markup(c) if isinstance(c, str) else c for c in self.cells]
        widest = max([len(line) for line in self.header.split("\n")] +
                     [max((len(line) for line in c.plain.split("\n")), default=0) for c in cells])
        return widest + 3


#: Widest and narrowest useful source and instruction columns (cells past the width end in …); narrower
#: than that they move to a key table of their own, where they wrap.
TEXT_WIDTHS = {"source": (44, 14), "instruction": (56, 20)}


def _table(columns: list[Column], title: str | None = None, wrap: bool = False) -> Table:
    table = Table(title=title, title_justify="left", show_header=True, header_style="bold", expand=False,
                  pad_edge=False)
    for column in columns:
        widths = TEXT_WIDTHS.get(column.header) if column.text and not wrap else None
        table.add_column(column.header, justify="left" if column.text else "right", no_wrap=not wrap,
                         overflow="fold" if wrap else "ellipsis", max_width=widths[0] if widths else None)
    for row in zip(*(column.cells for column in columns)):
        table.add_row(*row)
    return table


def _chunks(lead: list[Column], groups: list[list[Column]], width: int) -> list[list[int]]:
    """Device groups split into runs that fit ``width`` beside the leading columns (each run one table)."""
    room = width - sum(c.width() for c in lead) - 1
    chunks: list[list[int]] = [[]]
    used = 0
    for index, group in enumerate(groups):
        need = sum(c.width() for c in group)
        if chunks[-1] and used + need > room:
            chunks.append([])
            used = 0
        chunks[-1].append(index)
        used += need
    return chunks


def fitted_tables(lead: list[Column], texts: list[Column], groups: list[list[Column]], width: int | None,
                  title: str | None = None) -> list:
    """One table when everything fits ``width`` (source and instruction cut to fit); otherwise the numbers
    alone, device groups split over as many tables as needed, then the text columns in a key table where
    they wrap, with a line saying so.  Numbers are never cut."""
    numbers = sum(c.width() for c in lead) + sum(c.width() for g in groups for c in g) + 1
    flexible = [c for c in texts if c.header in TEXT_WIDTHS]
    fixed = sum(c.width() for c in texts if c not in flexible)
    narrowest = sum(min(c.width(), TEXT_WIDTHS[c.header][1] + 3) for c in flexible)
    if width is None or numbers + fixed + narrowest <= width:
        table = _table(lead[:1] + texts + lead[1:] + [c for g in groups for c in g], title)
        if width is not None and flexible:
            room = width - numbers - fixed
            first = [c for c in table.columns if c.header == flexible[0].header][0]
            first.max_width = max(TEXT_WIDTHS[first.header][1], min(first.max_width, room * 9 // 20 - 3))
            for column in table.columns:
                if column.header in TEXT_WIDTHS and column is not first:
                    column.max_width = max(TEXT_WIDTHS[column.header][1],
                                           min(column.max_width, room - first.max_width - 6))
        return [table]
    parts: list = [_table(lead + [c for i in chunk for c in groups[i]], title if n == 0 else None)
                   for n, chunk in enumerate(_chunks(lead, groups, width))]
    if texts:
        parts.append(Text(f"{', '.join(c.header for c in texts)} of each # below, to fit {width} columns "
                          "(a wider terminal shows them in one row; --format csv or -o report.html shows all)",
                          style="dim"))
        parts.append(_table(lead[:1] + texts, wrap=True))
    return parts


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

    # Devices with other warp sizes (cdna: 64 lanes) count other executions: then one column per device.
    same_executions = all(t.column("executions").equals(tables[0].column("executions")) for t in tables)
    totals = [int(pc.sum(t.column("excess_wavefronts")).as_py() or 0) for t in tables]
    order = ranked(tables) if tables[0].num_rows else np.zeros(0, dtype=np.int64)
    shown = order if top is None else order[:top]
    rows = [t.to_pylist() for t in tables]
    lead = [Column("#", [str(rank) for rank in range(1, len(shown) + 1)])]
    texts = [Column("source", [], True), Column("instruction", [], True), Column("kind", [], True)]
    if same_executions:
        lead.append(Column("execs", [f"{rows[0][at]['executions']:,}" for at in shown.tolist()]))
    names = (["execs"] if not same_executions else []) + (["wavefronts", "ideal", "excess", "share", "max"] if single
                                                          else ["wavefronts", "excess", "max"])
    groups = [[Column(name if single else f"{device}\n{name}", []) for name in names] for device in devices]
    for at in shown.tolist():
        first = rows[0][at]
        code = source_text(first["source_file"], first["source_line"], analysis.input_path)
        location = Text(f"{Path(first['source_file']).name}:{first['source_line']}" if first["source"] else "–")
        if code:
            location.append(f"\n{code}", style="dim")
        instruction = Text(_where_in_input(first), style="dim")
        instruction.append(" ".join((first["text"] or "").split()))
        for column, cell in zip(texts, (location, instruction, f"{first['kind']}.{first['width_bits']}")):
            column.cells.append(cell)
        for device_rows, total, group in zip(rows, totals, groups):
            row = device_rows[at]
            cells = [] if same_executions else [f"{row['executions']:,}"]
            if not row["resolved"]:
                cells += ["unresolved"] + [""] * (len(names) - len(cells) - 1)
            else:
                excess = Text(f"{row['excess_wavefronts']:,}", style="red" if row["excess_wavefronts"] else "")
                # "≈": Nsight may count this instruction otherwise (its model_note, listed under the totals)
                counted = Text(f"{MODEL_MARK if row['model_note'] else ''}{row['wavefronts']:,}")
                if single:
                    cells += [counted, f"{row['ideal_wavefronts']:,}", excess,
                              _share(row["excess_wavefronts"], total), _ways(row["max_ways"])]
                else:
                    excess.append(f" ({_share(row['excess_wavefronts'], total)})", style="dim")
                    cells += [counted, excess, _ways(row["max_ways"])]
            for column, cell in zip(group, cells):
                column.cells.append(cell)

    parts = [header, *fitted_tables(lead, texts, groups, width)]
    if len(shown) < len(order):
        parts.append(Text(f"… {len(order) - len(shown)} more instruction(s); use --top to see more", style="dim"))
    parts += _totals_tables(tables, devices, analysis.device_gaps, width)
    note = partial_note(analysis)
    if note:
        parts.append(Text(note, style="bold yellow"))
    parts += model_note_lines([row for device_rows in rows for row in device_rows], devices)
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


def model_note_lines(rows: list[dict], devices: list[str]) -> list[Text]:
    """One block per distinct model note of the rows (RESULT_ROWS dicts), naming its instructions: why their
    "≈" counts may differ from Nsight's Source page."""
    by_note: dict[str, list[str]] = {}
    for row in rows:
        if row["model_note"]:
            opcode = next((word for word in (row["text"] or "").split() if not word.startswith("@")), "")
            where = _where_in_input(row) + opcode
            device = f" ({row['device']})" if len(devices) > 1 else ""
            by_note.setdefault(row["model_note"], [])
            if where + device not in by_note[row["model_note"]]:
                by_note[row["model_note"]].append(where + device)
    return [Text(f"{MODEL_MARK} {', '.join(where)}: {note}", style="yellow") for note, where in by_note.items()]


def _totals_tables(tables: list[pa.Table], devices: list[str], gaps: dict[str, str], width: int | None) -> list:
    """Per-kind totals (only kinds the kernel uses), one column group per device ("not counted" for a device
    whose rules cannot count this kernel: the reason is in the notes)."""
    sums = []
    for t in tables:
        grouped = group_aggregate(t, ["kind"], [(name, "sum") for name in COUNTS]).to_pylist()
        sums.append({row["kind"]: row for row in grouped})
    kinds = [k for k in KINDS if any(k in per_kind for per_kind in sums)]   # counted kinds only (not tma/wgmma)
    lead = [Column("kind", kinds + ["all"], True)]
    groups = []
    for device, per_kind in zip(devices, sums):
        prefix = "" if len(devices) == 1 else f"{device}\n"
        group = [Column(prefix + name.replace("_wavefronts", ""), []) for name in COUNTS]
        for kind in kinds + ["all"]:
            for column, name in zip(group, COUNTS):
                value = (sum(r[f"{name}_sum"] for r in per_kind.values()) if kind == "all"
                         else per_kind[kind][f"{name}_sum"])
                style = "bold" if kind == "all" else ""
                column.cells.append(Text("not counted" if device in gaps and name == COUNTS[0] else
                                         "" if device in gaps else f"{value:,}", style=style))
        groups.append(group)
    return fitted_tables(lead, [], groups, width, title="totals")


def render(analyses: list[KernelAnalysis], devices: list[str], top: int | None, console: Console) -> None:
    """Print every kernel's report, one after the other."""
    for number, analysis in enumerate(analyses):
        if number:
            console.print()
        console.print(kernel_report(analysis, devices, top, console.width))
