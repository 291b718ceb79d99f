"""The task: one unit through the single-process pipeline, its result portable between processes."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import pyarrow as pa

from traceconf.distributed.units import Unit
from traceconf.emulate.launch import LaunchRequest
from traceconf.errors import InputError
from traceconf.pipeline import KernelAnalysis, KernelFailure, run_file, run_trace
from traceconf.programs import DEFAULT_LEVEL


@dataclass
class UnitResult:
    """What one task sends back: its kernels' analyses (per-instruction sums) and failures."""

    unit: Unit
    analyses: list[KernelAnalysis]
    failures: list[tuple]        # portable KernelFailures (see _portable)
    seconds: float
    peak_rss: int = 0            # of the process that ran it, bytes (0 where unknown)
    cpu_seconds: float = 0.0     # CPU time of the task (on a shared machine, less than ``seconds``)


def _portable(failure: KernelFailure) -> tuple:
    e = failure.error
    return (failure.kernel, e.message, e.file, e.line, e.column, e.source_line)


def _restore(item: tuple) -> KernelFailure:
    kernel, message, file, line, column, source_line = item
    return KernelFailure(kernel, InputError(message, file, line, column, source_line))


def _renamed(analysis: KernelAnalysis, kernel: str, source: str) -> KernelAnalysis:
    def column(table: pa.Table) -> pa.Table:
        if "kernel" not in table.column_names:
            return table
        index = table.column_names.index("kernel")
        return table.set_column(index, table.schema.field(index), pa.array([kernel] * table.num_rows, pa.string()))

    analysis.kernel = kernel
    analysis.input_path = source
    analysis.results = column(analysis.results)
    analysis.instructions = column(analysis.instructions)
    return analysis


def _peak_rss() -> int:
    try:
        import resource
    except ImportError:  # not on every platform
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)


def analyze_unit(unit: Unit, kernels: list[str] | None, launch: LaunchRequest, rule_sets: list,
                 skip_bad: bool = False, level: str = DEFAULT_LEVEL, ptxas_options: list[str] | None = None,
                 keep_accesses: bool = False) -> UnitResult:
    """Run the single-process pipeline on one unit (a program at ``level``, as a single-input run reads it);
    never raises for a bad or broken input."""
    start, cpu = time.perf_counter(), time.process_time()
    try:
        if unit.kind == "kernel_file":
            analyses, failures = run_trace(unit.path, None, rule_sets, skip_bad, part=unit.part,
                                           memory_limit=launch.memory_limit)
            analyses = [_renamed(a, unit.kernel, unit.source) for a in analyses]
            failures = [KernelFailure(unit.kernel if f.kernel else "", f.error) for f in failures]
        elif unit.kind == "table_part":
            analyses, failures = run_trace(unit.path, kernels, rule_sets, skip_bad, part=unit.part,
                                           memory_limit=launch.memory_limit)
        else:
            analyses, failures = run_file(unit.path, kernels, launch, rule_sets, skip_bad, level=level,
                                          ptxas_options=ptxas_options)
        for analysis in analyses:
            analysis.input_path = unit.source
            if not keep_accesses:
                analysis.accesses = {}
    except InputError as error:
        analyses, failures = [], [KernelFailure(unit.kernel or "", error)]
    except Exception as error:  # a bug or a resource limit must not lose the other units' results
        analyses = []
        failures = [KernelFailure(unit.kernel or "", InputError(
            f"unexpected {type(error).__name__} while reading: {error}", unit.path))]
    return UnitResult(unit, analyses, [_portable(f) for f in failures], time.perf_counter() - start, _peak_rss(),
                      time.process_time() - cpu)
