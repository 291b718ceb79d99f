"""Machine-readable outputs: the ``--format json`` document, CSV text and result files.

The JSON document is a public contract (see ``docs/reports.md``): one result
per (kernel, device) with the launch, per-kind totals, the unresolved
instructions and every shared-memory instruction of the kernel.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Iterable

import pyarrow as pa

from traceconf.errors import InputError
from traceconf.names import qualified_name
from traceconf.outputs import atomic_output, check_not_input, check_writable
from traceconf.pipeline import KernelAnalysis
from traceconf.analyses.results import COUNTS, RESULT_ROWS, kernel_table, unresolved_summary
from traceconf.schemas import KINDS

#: Per-instruction keys of the JSON document, in order (RESULT_ROWS column → JSON key).
JSON_INSTRUCTION_KEYS = ("instruction", "ptx", "kind", "width_bits", "pc", "ptx_line", "source", *COUNTS, "max_ways",
                         "resolved", "unresolved_reason", "model_note")


def _json_instruction(row: dict) -> dict:
    return {key: row["text" if key == "ptx" else key] for key in JSON_INSTRUCTION_KEYS}


def kind_totals(table: pa.Table) -> dict:
    """All six kinds, always present, so consumers can index without checking."""
    totals = {kind: {name: 0 for name in COUNTS} for kind in KINDS}
    for row in table.select(["kind", *COUNTS]).to_pylist():
        bucket = totals.setdefault(row["kind"], {name: 0 for name in COUNTS})
        for name in COUNTS:
            bucket[name] += row[name]
    return totals


def json_document(analyses: list[KernelAnalysis], devices: list[str]) -> dict:
    """The ``--format json`` document (``{"results": [...]}``)."""
    results = []
    for analysis in analyses:
        text = {int(r["instruction"]): r["text"] for r in analysis.instructions.to_pylist()}
        unresolved = [{"instruction": int(u["instruction"]), "ptx": text.get(int(u["instruction"]), ""),
                       "reason": str(u.get("reason") or "addresses unknown"),
                       "executions": int(u.get("executions") or 0),
                       "counted": not u.get("uncounted", True)} for u in analysis.unresolved]
        unresolved_executions, uncounted = unresolved_summary(analysis)
        for device in analysis.devices_among(devices):
            table = kernel_table(analysis, device)
            results.append({
                "kernel": analysis.kernel,
                "kernel_name": qualified_name(analysis.kernel),
                "device": device,
                "launch": analysis.launch,
                "totals": kind_totals(table),
                "partial": bool(unresolved_executions or uncounted),
                "unresolved_executions": unresolved_executions,
                "uncounted_instructions": uncounted,
                "unresolved": unresolved,
                "notes": list(analysis.notes),
                "instructions": [_json_instruction(row) for row in table.to_pylist()],
            })
    return {"results": results}


def json_text(analyses: list[KernelAnalysis], devices: list[str]) -> str:
    return json.dumps(json_document(analyses, devices), indent=2)


def csv_text(table: pa.Table) -> str:
    """The results table as CSV text (header + one row per kernel × device × instruction)."""
    import pyarrow.csv as pacsv        # here: only CSV output needs it (analyze's tables and JSON skip its import)

    sink = io.BytesIO()
    pacsv.write_csv(table, sink)
    return sink.getvalue().decode()


def _json_rows(table: pa.Table) -> str:
    return json.dumps(table.to_pylist(), indent=2)


def _write_parquet(table: pa.Table, path: str) -> None:
    import pyarrow.parquet as pq       # here: it loads pyarrow's file systems and ssl, which the other formats skip

    pq.write_table(table, path)


#: File writers by extension for ``-o`` (each writes one path: :func:`write_results` makes it atomic).
WRITERS = {
    ".parquet": _write_parquet,
    ".csv": lambda table, path: Path(path).write_text(csv_text(table), encoding="utf-8"),
    ".json": lambda table, path: Path(path).write_text(_json_rows(table), encoding="utf-8"),
}


#: Outputs that are a report page rather than the results table (written by the command that renders them).
PAGES = (".html",)


def check_output(path: str | Path, inputs: Iterable[str | Path] = (), pages: bool = True) -> None:
    """Refuse, before any work is done, an output path whose format we cannot write, that is one of the
    inputs, or whose folder cannot be written."""
    suffix = Path(path).suffix.lower()
    known = list(WRITERS) + list(PAGES if pages else ())
    if suffix not in known:
        raise InputError(f"cannot write {suffix or 'files without an extension'}: "
                         f"use one of {', '.join(known)}", file=str(path))
    check_not_input(path, inputs)
    check_writable(path)


def write_results(table: pa.Table, path: str | Path, inputs: Iterable[str | Path] = ()) -> None:
    """Write the results table; the format follows the extension (.parquet, .csv, .json); atomic."""
    check_output(path, inputs, pages=False)
    writer = WRITERS[Path(path).suffix.lower()]
    with atomic_output(path, inputs) as temporary:
        writer(table.cast(RESULT_ROWS), str(temporary))
