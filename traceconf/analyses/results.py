"""The per-instruction results table every report reads.

One row per kernel × device × shared-memory instruction: the engine's counts
(INSTRUCTION_RESULTS) joined with what the reader needs to find the
instruction again (INSTRUCTION_INFO: its text, PTX line, SASS pc, CUDA source
line).  Instructions that never executed keep a row with zero counts and
instructions the emulator could not resolve keep a row with ``resolved=false``
and the reason, so that a clean report is distinguishable from a silent one.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from traceconf.grouping import group_aggregate
from traceconf.names import qualified_name
from traceconf.pipeline import KernelAnalysis
from traceconf.schemas import INSTRUCTION_INFO, RESULT_ROWS


COUNTS = ("executions", "wavefronts", "ideal_wavefronts", "excess_wavefronts")
#: How the reports mark a count whose instruction carries a ``model_note`` (Nsight may count it otherwise).
MODEL_MARK = "≈"
#: How compare-ncu marks a pc with executions left out of the prediction (unresolved; the notes say why).
UNRESOLVED_MARK = "(unresolved)"


def _missing_info(analysis: KernelAnalysis) -> pa.Table:
    """INSTRUCTION_INFO rows for instructions that have results but no info row (never for PTX)."""
    known = analysis.instructions.column("instruction")
    extra = analysis.results.filter(pc.invert(pc.is_in(analysis.results.column("instruction"), known)))
    if extra.num_rows == 0:
        return INSTRUCTION_INFO.empty_table()
    ids, first = np.unique(extra.column("instruction").to_numpy(), return_index=True)
    rows = extra.take(pa.array(first))
    n = len(ids)
    return pa.table({
        "kernel": pa.array([analysis.kernel] * n, pa.string()),
        "kernel_name": pa.array([qualified_name(analysis.kernel)] * n, pa.string()),
        "instruction": pa.array(ids, pa.int32()),
        "text": pa.array([""] * n, pa.string()),
        "kind": rows.column("kind"),
        "bytes": rows.column("bytes"),
        "ptx_line": pa.nulls(n, pa.int32()),
        "pc": pa.nulls(n, pa.int64()),
        "source_file": pa.nulls(n, pa.string()),
        "source_line": pa.nulls(n, pa.int32()),
    }, schema=INSTRUCTION_INFO)


def _unresolved_reasons(analysis: KernelAnalysis) -> dict[int, str]:
    """Per unresolved instruction, its distinct reasons (executions may be left out for several), joined."""
    reasons: dict[int, dict[str, None]] = {}
    for u in analysis.unresolved:
        reasons.setdefault(int(u["instruction"]), {})[str(u.get("reason") or "addresses unknown")] = None
    return {instruction: "; ".join(texts) for instruction, texts in reasons.items()}


def kernel_table(analysis: KernelAnalysis, device: str) -> pa.Table:
    """RESULT_ROWS of one kernel on one device, ordered by instruction id."""
    info = pa.concat_tables([analysis.instructions.cast(INSTRUCTION_INFO), _missing_info(analysis)])
    results = analysis.results.filter(pc.equal(analysis.results.column("device"), device))
    # One row per instruction (a trace instruction may show several widths: their counts add up).
    counts = group_aggregate(results, ["instruction"], [(name, "sum") for name in COUNTS] + [("max_ways", "max")])
    info = info.sort_by("instruction")
    ids = info.column("instruction").to_numpy()
    counts_row = pc.index_in(info.column("instruction"), value_set=counts.column("instruction"))  # null: not run

    def counted(name: str, aggregate: str, type_: pa.DataType) -> pa.Array:
        return pc.fill_null(counts.column(f"{name}_{aggregate}").take(counts_row), 0).cast(type_).combine_chunks()

    reasons = _unresolved_reasons(analysis)
    noted = analysis.model_notes.get(device, {})
    gap = analysis.device_gaps.get(device)
    reason = [f"not counted on {device}: {gap}" if gap else reasons.get(int(i)) for i in ids]
    files = info.column("source_file").to_pylist()
    lines = info.column("source_line").to_pylist()
    n = len(ids)
    return pa.table({
        "input": pa.array([analysis.input_path] * n, pa.string()),
        "kernel": pa.array([analysis.kernel] * n, pa.string()),
        "kernel_name": pa.array([qualified_name(analysis.kernel)] * n, pa.string()),
        "device": pa.array([device] * n, pa.string()),
        "instruction": info.column("instruction"),
        "kind": info.column("kind"),
        "width_bits": pc.multiply(info.column("bytes").cast(pa.int32()), 8),
        "text": info.column("text"),
        "ptx_line": info.column("ptx_line"),
        "pc": info.column("pc"),
        "source_file": info.column("source_file"),
        "source_line": info.column("source_line"),
        "source": pa.array([f"{f}:{l}" if f and l is not None else None for f, l in zip(files, lines)],
                           pa.string()),
        **{name: counted(name, "sum", pa.int64()) for name in COUNTS},
        "max_ways": counted("max_ways", "max", pa.int32()),
        "resolved": pa.array([r is None for r in reason], pa.bool_()),
        "unresolved_reason": pa.array(reason, pa.string()),
        "model_note": pa.array([noted.get(int(i)) for i in ids], pa.string()),
    }, schema=RESULT_ROWS)


def results_table(analyses: list[KernelAnalysis], devices: list[str]) -> pa.Table:
    """All kernels × devices, in analysis order then device order then instruction id."""
    parts = [kernel_table(analysis, device) for analysis in analyses for device in analysis.devices_among(devices)]
    return pa.concat_tables(parts) if parts else RESULT_ROWS.empty_table()


def excess_by_kernel(table: pa.Table) -> list[tuple[str, str, int]]:
    """(kernel, device, excess wavefronts) for every kernel × device, largest first."""
    sums = group_aggregate(table, ["kernel", "device"], [("excess_wavefronts", "sum")])
    return sorted(zip(sums.column("kernel").to_pylist(), sums.column("device").to_pylist(),
                      sums.column("excess_wavefronts_sum").to_pylist()), key=lambda r: -r[2])


__all__ = ["RESULT_ROWS", "COUNTS", "kernel_table", "results_table", "excess_by_kernel"]


def unresolved_summary(analysis: KernelAnalysis) -> tuple[int, int]:
    """(warp-level executions left out as unresolved, for the whole launch like the counts; number of
    unresolved instructions whose executions could not be counted, e.g. under an unknown branch).
    Work that is never counted by design (TMA copies, wgmma operands: ``kinds.UNCOUNTED``) is not unresolved."""
    from traceconf.kinds import UNCOUNTED
    entries = [e for e in analysis.unresolved if e.get("reason") not in UNCOUNTED.values()]
    counted = sum(int(entry.get("executions") or 0) for entry in entries)
    uncounted = len({int(e["instruction"]) for e in entries if e.get("uncounted", True)})
    return counted, uncounted


def partial_note(analysis: KernelAnalysis) -> str | None:
    """One line saying the totals are partial (None when nothing is unresolved)."""
    counted, uncounted = unresolved_summary(analysis)
    if not counted and not uncounted:
        return None
    parts = [f"{counted:,} warp-level execution(s) unresolved"] if counted else []
    if uncounted:
        parts.append(f"{uncounted} instruction(s) with an unknown number of executions")
    return "partial: " + " and ".join(parts or ["unresolved instructions"]) + " (not in the totals)"
