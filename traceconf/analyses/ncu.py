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
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from traceconf.errors import InputError
from traceconf.names import same_kernel
from traceconf.sass.opcodes import shared_op

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


def _number(text: str) -> int:
    text = (text or "").strip().replace(",", "")
    if not text or text in ("-", "n/a", "N/A"):
        return 0
    return int(float(text))


def opcode_kind(sass: str) -> str | None:
    """``@!P0 LDS.U.128 R4, [R2]`` → ``ld``; non-shared opcodes → None."""
    tokens = sass.split()
    if tokens and tokens[0].startswith("@"):
        tokens = tokens[1:]
    op = shared_op(tokens[0]) if tokens else None
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
    for key, option in (("number", "#"), ("address", "Address")):
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
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    kernels: list[MeasuredKernel] = []
    pending: str | None = None
    index = None
    for number, row in enumerate(csv.reader(text.splitlines()), 1):
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
        try:
            counts = {key: _number(row[index[key]]) if key in index else 0 for key in COLUMNS}
        except ValueError:
            raise InputError("a wavefront column is not a number", file=str(path), line=number,
                             source_line=",".join(row)) from None
        if "excess_wavefronts" not in index:
            counts["excess_wavefronts"] = counts["wavefronts"] - counts["ideal_wavefronts"]
        source = row[index["source"]].strip()
        address_text = row[index["address"]].strip() if "address" in index else ""
        kernel = kernels[-1]
        if address_text:
            kernel.sass.append(MeasuredRow(kernel.name, source, int(address_text, 16),
                                           _line_of(row[index["location"]]) if "location" in index else None,
                                           opcode_kind(source), **counts))
        else:
            line = _number(row[index["number"]]) if "number" in index else None
            kernel.cuda.append(MeasuredRow(kernel.name, source, None, line, None, **counts))
    if not kernels:
        raise InputError("no Source-page table found (export with ncu --page source --csv --print-source sass)",
                         file=str(path))
    return kernels


def kernel_matches(measured: str | None, predicted: str) -> bool:
    """ncu names kernels demangled with parameters (``foo(float *, int)``) or mangled; PTX by its entry name."""
    return measured is None or same_kernel(measured, predicted)


@dataclass
class Comparison:
    """Measured vs predicted, per kernel: totals, per kind, per CUDA line."""

    kernel: str
    measured_name: str | None
    totals: dict                      # {"measured": {...}, "predicted": {...}}
    by_kind: list[dict]               # {"kind", "measured": {...}, "predicted": {...}}
    by_line: list[dict]               # {"line", "source", "measured": {...}, "predicted": {...}}
    notes: list[str] = field(default_factory=list)


def _sum(rows, keys=("wavefronts", "ideal_wavefronts", "excess_wavefronts")) -> dict:
    return {k: sum(getattr(r, k) if not isinstance(r, dict) else r[k] for r in rows) for k in keys}


def compare(measured: MeasuredKernel, kernel: str, predicted: pa.Table) -> Comparison:
    """``predicted``: RESULT_ROWS of one kernel on one device."""
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
    return Comparison(kernel, measured.name, totals, by_kind, by_line, notes)


def _lines(lines: list[int]) -> str:
    return ", ".join(map(str, lines[:6])) + (f" (+{len(lines) - 6})" if len(lines) > 6 else "")


def pair_kernels(measured: list[MeasuredKernel], predicted: list[str], path: str) -> list[tuple[MeasuredKernel, str]]:
    """Match every predicted kernel to a measured table (unnamed tables only when unambiguous)."""
    pairs = []
    unnamed = [m for m in measured if m.name is None]
    for kernel in predicted:
        named = [m for m in measured if m.name is not None and kernel_matches(m.name, kernel)]
        if named:
            pairs.append((named[0], kernel))
        elif len(unnamed) == 1 and len(predicted) == 1:
            pairs.append((unnamed[0], kernel))
    if not pairs:
        names = ", ".join(m.name or "(unnamed)" for m in measured)
        raise InputError(f"no kernel of the report matches {', '.join(predicted)} (report has: {names}); "
                         f"pick one with --kernel", file=path)
    return pairs
