"""Nsight Compute Source-page CSV, lined up with the prediction.

Reads what ``ncu -i report.ncu-rep --page source --csv --print-source sass``
(or ``sass,cuda`` / ``cuda``) prints: one table per kernel with a header row
holding ``Source`` and the shared-memory wavefront columns ("L1 Wavefronts
Shared", "L1 Wavefronts Shared Ideal", "L1 Wavefronts Shared Excessive"; the
older "Memory L1 Transactions Shared" names are accepted too), optionally
``#``, ``Address`` and a source-location column.  A line before a table that
is not a header names its kernel (``Kernel Name,foo`` or just ``foo``).

SASS rows are classed by opcode (LDS → ld, STS → st, LDSM → ldmatrix, ...),
CUDA rows (``--print-source cuda``: no address, ``#`` is the line number) are
kept per source line.  The comparison is per kernel, per opcode class, and per
CUDA line when the report has lines.

Optionally also the kernel-level l1tex counters of the same launch, read from
``ncu -i report.ncu-rep --page raw --csv`` (metric names as columns) or
``--page details --csv`` (``Metric Name``/``Metric Value`` rows): ncu gives two
figures for a kernel, the Source page's sum over instructions (what traceconf
predicts) and these counters, which can be higher (docs/hardware.md, "Kernel-level
counter vs Source page").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from traceconf.errors import InputError
from traceconf.analyses.ncu_launches import csv_rows, launch_dims, read_launch_table
from traceconf.names import same_kernel
from traceconf.numbers import INT64_MAX, read_count, read_int
from traceconf.sass.opcodes import opcode_text, shared_op

#: Measured column → accepted header names (first found wins).
COLUMNS = {
    "wavefronts": ("L1 Wavefronts Shared", "Memory L1 Wavefronts Shared", "Memory L1 Transactions Shared"),
    "ideal_wavefronts": ("L1 Wavefronts Shared Ideal", "Memory L1 Wavefronts Shared Ideal",
                         "Memory Ideal L1 Transactions Shared"),
    "excess_wavefronts": ("L1 Wavefronts Shared Excessive", "Memory L1 Wavefronts Shared Excessive"),
}
LOCATION_COLUMNS = ("Source Location", "Location", "Line", "Source Line")
KERNEL_LABELS = ("kernel name", "kernel", "function name", "function")


@dataclass
class MeasuredRow:
    kernel: str | None
    source: str               # SASS text or CUDA source text
    address: int | None       # SASS pc (None for CUDA rows)
    line: int | None          # CUDA source line (CUDA rows, or SASS rows of a report with locations)
    kind: str | None          # access kind of a SASS row (None for CUDA rows / non-shared opcodes)
    wavefronts: int
    ideal_wavefronts: int
    excess_wavefronts: int


@dataclass
class MeasuredKernel:
    name: str | None
    sass: list[MeasuredRow] = field(default_factory=list)
    cuda: list[MeasuredRow] = field(default_factory=list)
    # warps the launch ran: "Instructions Executed" of the kernel's first SASS instruction, which every warp
    # executes once (None: no such column); it tells which of several launches of a kernel the table is
    warps: int | None = None


def opcode_kind(sass: str) -> str | None:
    """``@!P0 LDS.U.128 R4, [R2]`` → ``ld``; non-shared opcodes → None."""
    opcode = opcode_text(sass)
    op = shared_op(opcode) if opcode else None
    return op.kind if op is not None else None


def _header_index(row: list[str]) -> dict[str, int] | None:
    names = [c.strip() for c in row]
    if "Source" not in names:
        return None
    index = {"source": names.index("Source")}
    for key, options in COLUMNS.items():
        for option in options:
            if option in names:
                index[key] = names.index(option)
                break
    if "wavefronts" not in index:
        return None
    for key, option in (("number", "#"), ("address", "Address"), ("executed", "Instructions Executed")):
        if option in names:
            index[key] = names.index(option)
    for option in LOCATION_COLUMNS:
        if option in names:
            index["location"] = names.index(option)
            break
    return index


def _line_of(location: str) -> int | None:
    match = re.search(r":(\d+)\s*$", location or "") or re.fullmatch(r"\s*(\d+)\s*", location or "")
    return int(match.group(1)) if match else None


def _kernel_label(row: list[str]) -> str | None:
    cells = [c.strip() for c in row if c.strip()]
    if len(cells) == 2 and cells[0].rstrip(":").lower() in KERNEL_LABELS:
        return cells[1]
    if len(cells) == 1:
        match = re.fullmatch(r"(?:kernel(?: name)?\s*[:=]\s*)?(.+)", cells[0], flags=re.IGNORECASE)
        return match.group(1).strip() if match else None
    return None


def read_source_csv(path: str | Path) -> list[MeasuredKernel]:
    """Every kernel table of an ncu Source-page CSV."""
    kernels: list[MeasuredKernel] = []
    pending: str | None = None
    index = None
    for number, row in csv_rows(path):
        if not row or not any(c.strip() for c in row):
            continue
        header = _header_index(row)
        if header is not None:
            index = header
            kernels.append(MeasuredKernel(pending))
            pending = None
            continue
        if index is None or len(row) <= max(index.values()):
            label = _kernel_label(row)
            if label is not None:
                pending = label
                index = None
                continue
            if index is None:
                raise InputError("no Source-page header (a row with Source and L1 Wavefronts Shared columns) "
                                 "before this line: export with ncu --page source --csv", file=str(path),
                                 line=number, source_line=",".join(row))
            raise InputError(f"expected {max(index.values()) + 1} columns, found {len(row)}", file=str(path),
                             line=number, source_line=",".join(row))
        counts = {key: read_count(row[index[key]], str(path), what=f"{COLUMNS[key][0]} value", line=number,
                                  column=index[key] + 1) if key in index else 0 for key in COLUMNS}
        if "excess_wavefronts" not in index:
            counts["excess_wavefronts"] = counts["wavefronts"] - counts["ideal_wavefronts"]
        source = row[index["source"]].strip()
        address_text = row[index["address"]].strip() if "address" in index else ""
        kernel = kernels[-1]
        if address_text:
            address = read_int(address_text, str(path), what="address", base=16, low=0, high=INT64_MAX,
                               line=number, column=index["address"] + 1)
            if not kernel.sass and "executed" in index:
                kernel.warps = read_count(row[index["executed"]], str(path), what="Instructions Executed value",
                                          line=number, column=index["executed"] + 1, empty=None)
            kernel.sass.append(MeasuredRow(kernel.name, source, address,
                                           _line_of(row[index["location"]]) if "location" in index else None,
                                           opcode_kind(source), **counts))
        else:
            line = read_count(row[index["number"]], str(path), what="line number", line=number,
                              column=index["number"] + 1) if "number" in index else None
            kernel.cuda.append(MeasuredRow(kernel.name, source, None, line, None, **counts))
    if not kernels:
        raise InputError("no Source-page table found (export with ncu --page source --csv --print-source sass)",
                         file=str(path))
    # a whole-report export of a kernel built with line info prints each launch's table again right after
    # itself (Nsight Compute 2025.3: tests/data/hw/ncu_reports); a table equal to the one before is that repeat
    return [kernel for n, kernel in enumerate(kernels) if n == 0 or kernel != kernels[n - 1]]


@dataclass
class Comparison:
    """Measured vs predicted, per kernel: totals, per kind, per CUDA line."""

    kernel: str
    measured_name: str | None
    totals: dict                      # {"measured": {...}, "predicted": {...}}
    by_kind: list[dict]               # {"kind", "measured": {...}, "predicted": {...}}
    by_line: list[dict]               # {"line", "source", "measured": {...}, "predicted": {...}}
    notes: list[str] = field(default_factory=list)
    # SASS-level predictions: {"pc", "sass", "measured": {...}, "predicted": {...}, "model_note", "unresolved" (why
    # executions of it are not counted, or None)} per shared instruction
    by_pc: list[dict] = field(default_factory=list)
    # With kernel-level counters (--raw): one entry per matching launch of the counters CSV,
    # {"id", "grid", "block", "by_op": [{"op", "metric", "counter": {...}, "source": {...} | None, "predicted": {...}}]}
    counters: list[dict] = field(default_factory=list)
    # the predicted launch: {"id" (the report's ID of the profiled launch, None when no launch page names it),
    # "grid", "block", "dynamic_smem"}
    launch: dict = field(default_factory=dict)


def _sum(rows, keys=("wavefronts", "ideal_wavefronts", "excess_wavefronts")) -> dict:
    return {k: sum(getattr(r, k) if not isinstance(r, dict) else r[k] for r in rows) for k in keys}


def compare(measured: MeasuredKernel, kernel: str, predicted: pa.Table,
            counters: list[KernelCounters] | None = None, launch: dict | None = None,
            launch_ids: tuple[str, ...] = ()) -> Comparison:
    """``predicted``: RESULT_ROWS of one kernel on one device; ``counters``: the kernel-level counters CSV's
    launches (every kernel's), ``launch``: the predicted launch's facts (grid and block pick the CSV's rows);
    ``launch_ids``: the report's IDs of the launch (several: launches the table may equally be), which pick
    among the CSV's rows of that grid and block."""
    rows = predicted.to_pylist()
    shared_sass = [r for r in measured.sass if r.kind is not None or r.wavefronts]
    totals = {"measured": _sum(shared_sass or measured.cuda), "predicted": _sum(rows)}
    kinds = sorted({r.kind for r in shared_sass if r.kind} | {r["kind"] for r in rows if r["wavefronts"]})
    # Without SASS rows the report says nothing per kind: None (not measured), never a measured 0.
    by_kind = [{"kind": kind, "measured": _sum([r for r in shared_sass if r.kind == kind]) if shared_sass else None,
                "predicted": _sum([r for r in rows if r["kind"] == kind])} for kind in kinds]
    notes = [] if shared_sass else ["the report has no SASS rows: per-kind figures need "
                                    "--print-source sass (or sass,cuda) in the ncu export"]
    line_rows = measured.cuda or [r for r in shared_sass if r.line is not None]
    by_line = []
    if line_rows:
        lines = sorted({r.line for r in line_rows if r.line is not None}
                       | {r["source_line"] for r in rows if r["source_line"] is not None and r["wavefronts"]})
        text = {r.line: r.source for r in measured.cuda}
        for line in lines:
            m = _sum([r for r in line_rows if r.line == line])
            p = _sum([r for r in rows if r["source_line"] == line])
            if m["wavefronts"] or p["wavefronts"]:
                by_line.append({"line": line, "source": text.get(line, ""), "measured": m, "predicted": p})
        only_measured = [r["line"] for r in by_line if r["measured"]["wavefronts"] and not r["predicted"]["wavefronts"]]
        only_predicted = [r["line"] for r in by_line if r["predicted"]["wavefronts"] and not r["measured"]["wavefronts"]]
        if only_measured and only_predicted:
            notes.append(f"CUDA lines with shared wavefronts differ: only the report has {_lines(only_measured)}, "
                         f"only the prediction has {_lines(only_predicted)}; was the report made from another build "
                         "of the source (other line numbers) than this PTX's .loc lines?")
    facts = {"id": ", ".join(launch_ids) or None,
             **{key: (launch or {}).get(key) for key in ("grid", "block", "dynamic_smem")}}
    by_pc = _by_pc(measured, rows)
    notes += model_note_differences(by_pc) + unresolved_pcs(by_pc)
    result = Comparison(kernel, measured.name, totals, by_kind, by_line, notes, by_pc, launch=facts)
    if counters is not None:
        result.counters, counter_notes = kernel_level(counters, kernel, launch or {}, shared_sass, totals, rows,
                                                      launch_ids)
        result.notes += counter_notes
    return result


def _by_pc(measured: MeasuredKernel, rows: list[dict]) -> list[dict]:
    """Per SASS instruction, when the prediction was made at SASS level: pcs relative to the kernel's first
    address on the Source page (which prints absolute addresses)."""
    addressed = [r for r in measured.sass if r.address is not None]
    if not addressed or not any(r["pc"] is not None for r in rows):
        return []
    base = min(r.address for r in addressed)
    measured_at = {r.address - base: r for r in addressed}
    predicted_at: dict[int, list[dict]] = {}
    for row in rows:
        if row["pc"] is not None:
            predicted_at.setdefault(int(row["pc"]), []).append(row)
    out = []
    for pc_value in sorted(set(predicted_at) | {a for a, r in measured_at.items() if r.wavefronts}):
        m = measured_at.get(pc_value)
        p = predicted_at.get(pc_value, [])
        measured_counts = _sum([m]) if m else _sum([])
        predicted_counts = _sum(p)
        unresolved = next((row["unresolved_reason"] for row in p if not row["resolved"]), None)
        if measured_counts["wavefronts"] or predicted_counts["wavefronts"] or unresolved:
            sass = " ".join((m.source if m else p[0]["text"]).split())
            note = next((row["model_note"] for row in p if row.get("model_note")), None)
            out.append({"pc": pc_value, "sass": sass, "measured": measured_counts, "predicted": predicted_counts,
                        "model_note": note, "unresolved": unresolved})
    return out


def model_note_differences(by_pc: list[dict]) -> list[str]:
    """One note per distinct model note of the pcs where Nsight's wavefronts differ from the prediction: the
    rule set says why it cannot reproduce them there (RESULT_ROWS ``model_note``)."""
    pcs_of: dict[str, list[str]] = {}
    for row in by_pc:
        if row["model_note"] and row["measured"]["wavefronts"] != row["predicted"]["wavefronts"]:
            pcs_of.setdefault(row["model_note"], []).append(f"{row['pc']:#06x}")
    return [f"pc {_lines(pcs)} differ(s) as the rule set expects: {note}" for note, pcs in pcs_of.items()]


def unresolved_pcs(by_pc: list[dict]) -> list[str]:
    """One note per distinct reason of the pcs with executions left out of the prediction (unresolved)."""
    pcs_of: dict[str, list[str]] = {}
    for row in by_pc:
        if row["unresolved"]:
            pcs_of.setdefault(row["unresolved"], []).append(f"{row['pc']:#06x}")
    return [f"pc {_lines(pcs)} not (fully) counted, unresolved: {reason}" for reason, pcs in pcs_of.items()]


def _lines(lines: list[int]) -> str:
    return ", ".join(map(str, lines[:6])) + (f" (+{len(lines) - 6})" if len(lines) > 6 else "")


# -- kernel-level counters (ncu --page raw / details) -------------------------------------------------------

#: The per-op l1tex shared-memory counters, the Source-page access kinds each one counts (``_op_ld`` counts LDS
#: and LDSM, ``_op_st`` STS and STSM; measured, docs/hardware.md), then the all-ops total (kinds None: every
#: shared row; it also holds per-CTA wavefronts that no instruction owns). LDGSTS has no per-op wavefront
#: counter on sm_90 (only bank conflicts), so it has no row.
KERNEL_COUNTERS = (
    ("ld", ("ld", "ldmatrix"), "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
     "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"),
    ("st", ("st", "stmatrix"), "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
     "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
    ("atom", ("atom",), "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom.sum",
     "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_atom.sum"),
    ("all ops", None, "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
     "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"),
)
COUNTER_METRICS = {metric for _, _, *metrics in KERNEL_COUNTERS for metric in metrics}


@dataclass
class KernelCounters:
    """One profiled launch of a counters CSV: its kernel-level l1tex shared counters."""

    id: str | None
    kernel: str
    grid: tuple[int, ...] | None      # ncu's "Grid Size" / "Block Size" columns, when the CSV has them
    block: tuple[int, ...] | None
    values: dict[str, int]            # metric name -> value, for the COUNTER_METRICS the CSV holds
    line: int


def _counter(text: str, path: str, line: int, column: int) -> int | None:
    """A counter cell: thousands separators allowed; empty or n/a: not collected (None)."""
    return read_count(text, path, what="counter value", line=line, column=column, empty=None)


def read_counters_csv(path: str | Path) -> list[KernelCounters]:
    """Every launch of ``ncu -i REP --page raw --csv`` (one row per launch, metric names as columns, a units row
    allowed) or ``--page details --csv`` (one row per launch and metric: ``Metric Name``, ``Metric Value``)."""
    table = read_launch_table(path, "the counters CSV")
    if table is None:
        raise InputError("no kernel-level counters table (a header row with Kernel Name): export with "
                         "ncu -i REPORT --page raw --csv (or --page details --csv)", file=str(path), line=1)
    header_line, col, cell = table.header_line, table.columns, table.cell
    launches: dict[tuple, KernelCounters] = {}

    long = "Metric Name" in col and "Metric Value" in col
    wide = [m for m in COUNTER_METRICS if m in col]
    if not long and not wide:
        raise InputError("none of the l1tex shared-memory counters (" + ", ".join(sorted(COUNTER_METRICS)) + ") "
                         "is a column, and there are no Metric Name/Metric Value columns: collect them with ncu "
                         "--metrics (or --section MemoryWorkloadAnalysis_Tables) and export --page raw --csv",
                         file=str(path), line=header_line)
    for line, row in table.rows:
        kernel = (cell(row, "Kernel Name") or "").strip()
        if not kernel:          # the units row of --print-units, blank lines
            continue
        key = (cell(row, "ID"), kernel)
        entry = launches.setdefault(key, KernelCounters(cell(row, "ID"), kernel, launch_dims(cell(row, "Grid Size")),
                                                        launch_dims(cell(row, "Block Size")), {}, line))
        if long:
            metric = (cell(row, "Metric Name") or "").strip()
            if metric in COUNTER_METRICS:
                value = _counter(cell(row, "Metric Value"), str(path), line, col["Metric Value"] + 1)
                if value is not None:
                    entry.values[metric] = value
            continue
        for metric in wide:
            value = _counter(cell(row, metric), str(path), line, col[metric] + 1)
            if value is not None:
                entry.values[metric] = value
    found = [entry for entry in launches.values() if entry.values]
    if not found:
        raise InputError("no launch in the file has an l1tex shared-memory counter value", file=str(path),
                         line=header_line)
    return found


def kernel_level(counters: list[KernelCounters], kernel: str, launch: dict, shared_sass: list[MeasuredRow],
                 totals: dict, predicted_rows: list[dict], launch_ids: tuple[str, ...] = ()
                 ) -> tuple[list[dict], list[str]]:
    """The counters CSV's launches of `kernel` (those of the predicted grid and block when the CSV names
    them, of those the ones with the report's launch IDs where it has them), each op's counter beside the
    Source page's and the prediction's figures for the same op."""
    named = [c for c in counters if same_kernel(c.kernel, kernel)]
    if not named:
        return [], [f"the kernel-level counters CSV has no launch of {kernel}"]
    dims = lambda value: tuple(value) if isinstance(value, (list, tuple)) else ()   # traces may not say
    grid, block = dims(launch.get("grid")), dims(launch.get("block"))
    same_launch = [c for c in named if c.grid == grid and c.block == block]
    same_launch = [c for c in same_launch if c.id in launch_ids] or same_launch
    notes = []
    if grid and block and not same_launch and any(c.grid for c in named):
        notes.append(f"no launch in the kernel-level counters CSV has grid {grid} and block {block}; "
                     f"showing every launch of the kernel")
    out = []
    for entry in same_launch or named:
        by_op = []
        for op, kinds, wavefronts, conflicts in KERNEL_COUNTERS:
            if wavefronts not in entry.values:
                continue
            counter = {"wavefronts": entry.values[wavefronts], "bank_conflicts": entry.values.get(conflicts)}
            rows = [r for r in predicted_rows if kinds is None or r["kind"] in kinds]
            if kinds is None:
                source = totals["measured"]
            else:
                source = _sum([r for r in shared_sass if r.kind in kinds]) if shared_sass else None
            by_op.append({"op": op, "metric": wavefronts, "counter": counter, "source": source,
                          "predicted": _sum(rows)})
            notes += _counter_notes(op, wavefronts, counter, source, kinds is None)
        out.append({"id": entry.id, "grid": list(entry.grid or ()), "block": list(entry.block or ()),
                    "by_op": by_op})
    return out, notes


def _counter_notes(op: str, metric: str, counter: dict, source: dict | None, all_ops: bool) -> list[str]:
    """Say what a kernel-level counter above the Source-page sum means (measured on an H100: docs/hardware.md)."""
    if source is None or counter["wavefronts"] <= source["wavefronts"]:
        return []
    extra = counter["wavefronts"] - source["wavefronts"]
    share = f"{100 * extra / source['wavefronts']:.3g}%" if source["wavefronts"] else "all"
    if all_ops:
        return [f"{metric} is {extra:,} ({share}) above the Source page's total: the all-ops counter also counts "
                "shared-memory work of each CTA that no instruction owns"]
    conflicts = counter["bank_conflicts"]
    if conflicts is not None and counter["wavefronts"] - conflicts == source["ideal_wavefronts"]:
        return [f"{metric} is {extra:,} ({share}) above the Source page's {op} rows, all of it counted as bank "
                f"conflicts (wavefronts - bank conflicts = {source['ideal_wavefronts']:,} = the Source page's ideal): "
                "the addresses cause none of it; on an H100 such wavefronts appear when several CTAs share an SM "
                "and vary by run (docs/hardware.md). traceconf predicts the Source-page figure (docs/reports.md)"]
    return [f"{metric} is {extra:,} ({share}) above the Source page's {op} rows and wavefronts - bank conflicts is "
            "not the Source page's ideal: are the CSVs of the same launch?"]
