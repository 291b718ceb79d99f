"""Finding one instruction and its executions: ``--instruction`` specs (an id, ``L123``, ``file.cu:42``, a
``0x`` pc) against a kernel's instructions, and the executions of one instruction re-read from a trace."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from traceconf.errors import InputError
from traceconf.names import matches, no_match_message

if TYPE_CHECKING:
    import pyarrow as pa

    from traceconf.accesses import WarpAccesses


def resolve_instruction(info: pa.Table, spec: str, path: str) -> tuple[int, list[int]]:
    """(instruction id, other matches) for an id, ``L123`` (PTX line), ``file.cu:42`` or ``0x1a0`` (pc)."""
    rows = info.to_pylist()
    spec = spec.strip()
    line = re.fullmatch(r"[Ll](\d+)", spec)
    source = re.fullmatch(r"(.*):(\d+)", spec)
    if line:
        matches = [r for r in rows if r["ptx_line"] == int(line.group(1))]
    elif source:
        name = Path(source.group(1)).name
        matches = [r for r in rows if r["source_line"] == int(source.group(2))
                   and (not name or (r["source_file"] and Path(r["source_file"]).name == name))]
    elif re.fullmatch(r"0[xX][0-9a-fA-F]+", spec):
        matches = [r for r in rows if r["pc"] == int(spec, 16)]
    elif spec.isdigit():
        matches = [r for r in rows if r["instruction"] == int(spec)]
    else:
        raise InputError(f"--instruction {spec!r}: expected an instruction id, L<ptx line>, FILE:LINE or a 0x pc",
                         file=path)
    if not matches:
        raise InputError(f"--instruction {spec}: no shared-memory instruction of the kernel matches; it has "
                         + _listing(rows), file=path)
    ids = [int(r["instruction"]) for r in matches]
    return ids[0], ids[1:]


def _listing(rows: list[dict], shown: int = 8) -> str:
    """The kernel's shared-memory instructions as --instruction takes them (id, then line or pc)."""
    def one(row: dict) -> str:
        where = [f"L{row['ptx_line']}" if row.get("ptx_line") is not None else None,
                 f"{row['pc']:#x}" if row.get("pc") is not None else None,
                 f"{Path(row['source_file']).name}:{row['source_line']}" if row.get("source_file") else None]
        return f"{row['instruction']} ({', '.join(w for w in where if w)})" if any(where) else str(row["instruction"])
    more = f" and {len(rows) - shown} more" if len(rows) > shown else ""
    return (", ".join(one(r) for r in rows[:shown]) + more) if rows else "none"


def trace_executions(file: Path, kernel: str, spec: str, rules) -> tuple[pa.Table, int, WarpAccesses]:
    """(the kernel's INSTRUCTION_INFO, the instruction ``spec`` names, its executions): the instruction is
    resolved on a first pass over the trace, then only its executions are re-read (memory stays flat)."""
    import numpy as np

    from traceconf.accesses import WarpAccesses
    from traceconf.pipeline import trace_instruction_info
    from traceconf.traces import open_trace

    names, info = [], None
    for trace in open_trace(file):
        names.append(trace.kernel)
        if matches(trace.kernel, [kernel]):
            trace.drain()
            info = trace_instruction_info(trace)
            break
    if info is None:
        raise InputError(no_match_message(kernel, names), file=str(file))
    ident, _ = resolve_instruction(info, spec, str(file))
    parts = []
    for trace in open_trace(file):
        if matches(trace.kernel, [kernel]):
            parts = [chunk.take(np.nonzero(chunk.instruction == ident)[0]) for chunk in trace.chunks()]
            break
    parts = [p for p in parts if len(p)]
    return info, ident, (WarpAccesses.concat(parts) if parts else WarpAccesses.empty(kernel, rules.warp_size))
