"""Many inputs, many cores, many machines: the per-kernel analysis as tasks, run by an existing engine.

A suite of traces (folders, several ``kernelslist.g``, globs, partitioned canonical Parquet datasets) is
cut into :class:`~.units.Unit` tasks (:mod:`.units`) — one kernel trace file of a kernelslist (a large ``.tracez`` into ranges of
its CTAs, which its index makes cheap to reach), one whole input that cannot be cut (an NVBit log, a PTX
file), or a range of row groups of a canonical Parquet table.
Every task runs :func:`~.task.analyze_unit`, which calls the single-process pipeline (``run_file`` with the
run's level and ptxas options, or ``run_trace``) on its share and returns per-instruction sums: there is one
code path and several executors (:mod:`.executors`) — in this process, a local process pool, or Dask (a
``LocalCluster`` of processes, or any existing cluster by scheduler address).  Nothing here schedules work:
the executor does.  :func:`run_many` (here) plans, runs, combines and writes (:mod:`.dataset`).

Shares of one kernel (row-group ranges of a large table, CTA ranges of a .tracez) are combined exactly with
:func:`traceconf.engine.combine` (sums of executions and wavefronts, maximum of ``max_ways``).

The results are written as a dataset: one Parquet file per (input, kernel),
``OUT/<input>/<kernel>.parquet``, each holding that kernel's RESULT_ROWS (the exact input and kernel are
columns; folder and file names are readable slugs with a hash).  Files whose names start with ``_`` or
``.`` are ignored by pandas, polars, DuckDB and ``dask.dataframe``: ``OUT/_manifest.json`` records every
unit (done, failed or missing, with the one-line reason), and partitions are written to a hidden
temporary file and renamed, so a file that exists is complete.  ``resume=True`` skips the units whose
partitions the manifest lists as written (and which still exist, from an unchanged input).

Faults: a task that fails (bad input, a corrupt trace, an unexpected error, a worker that died) becomes
a failure of its unit, reported in one line with its file; the other units go on.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from traceconf.cluster import fitted
from traceconf.distributed.dataset import Dataset, combine_analyses
from traceconf.distributed.executors import Executor, execute
from traceconf.distributed.task import _restore
from traceconf.distributed.units import ROWS_PER_UNIT, TRACEZ_BYTES_PER_UNIT, Unit, expand_inputs, plan
from traceconf.emulate.launch import LaunchRequest
from traceconf.errors import InputError
from traceconf.inputs import distinct_units
from traceconf.outputs import check_results_folder
from traceconf.pipeline import KernelAnalysis, KernelFailure
from traceconf.programs import DEFAULT_LEVEL

#: progress(unit, seconds, kernels, failures) after each unit
UnitProgress = Callable[[Unit, float, int, int], None]


@dataclass
class RunSummary:
    """What a distributed run did, beside its analyses and failures."""

    units: int = 0
    skipped: int = 0               # units already written (resume)
    lost: int = 0                  # units that failed as a whole
    seconds: float = 0.0
    bytes: int = 0
    peak_rss: int = 0              # largest peak RSS of a worker process (bytes)
    cpu_seconds: float = 0.0       # CPU time of all tasks together
    notes: list[str] = field(default_factory=list)
    workers: int = 0               # local workers started (--workers, fitted to the units and memory)


def run_many(inputs: Iterable[str | Path], kernels: list[str] | None, launch: LaunchRequest, rule_sets: list,
             skip_bad: bool = False, executor: Executor | None = None, output: Path | None = None,
             resume: bool = False, progress: UnitProgress | None = None, rows_per_unit: int = ROWS_PER_UNIT,
             tracez_bytes_per_unit: int = TRACEZ_BYTES_PER_UNIT, level: str = DEFAULT_LEVEL,
             ptxas_options: list[str] | None = None
             ) -> tuple[list[KernelAnalysis], list[KernelFailure], RunSummary]:
    """Plan the units of ``inputs``, run them on ``executor``, combine, and write ``output`` (a folder).
    Programs are read at ``level`` with ``ptxas_options``, as a single-input run reads them.

    Returns the analyses of this run in input order (resumed units are not re-read, so their kernels are
    not among them), every failure, and a summary.
    """
    executor = executor or Executor()
    start = time.perf_counter()
    inputs = list(inputs)
    if output is not None:
        check_results_folder(output, [*inputs, *expand_inputs(inputs)[0]])
    units, failures = plan(inputs, kernels, rows_per_unit, tracez_bytes_per_unit)
    units, overlaps = distinct_units(units)
    summary = RunSummary(units=len(units), notes=list(executor.notes) + overlaps)
    executor = fitted(executor, len(units), summary.notes)
    summary.workers = executor.workers
    devices = [rules.name for rules in rule_sets]
    dataset = Dataset(output, devices, resume) if output is not None else None
    if dataset is not None:
        todo = [u for u in units if not dataset.written(u)]
        summary.skipped = len(units) - len(todo)
        # a group is combined and written as a whole: one unit to do means all of its units run again
        groups = {u.group for u in todo}
        todo = [u for u in units if u.group in groups]
        summary.skipped = len(units) - len(todo)
    else:
        todo = units
    remaining = {}
    for unit in todo:
        remaining[unit.group] = remaining.get(unit.group, 0) + 1
    parts: dict[str, list[KernelAnalysis]] = {}
    lost_groups: set[str] = set()
    finished: dict[str, list[KernelAnalysis]] = {}
    args = (kernels, launch, rule_sets, skip_bad, level, list(ptxas_options or []))
    for unit, result in execute(todo, args, executor):
        if isinstance(result, str):
            failure = KernelFailure(unit.kernel or "", InputError(result, unit.path))
            failures.append(failure)
            summary.lost += 1
            lost_groups.add(unit.group)
            if dataset is not None:
                dataset.record(unit, "failed", reason=failure.line())
            unit_kernels, unit_failures, seconds = 0, 1, 0.0
        else:
            unit_failures_list = [_restore(f) for f in result.failures]
            failures += unit_failures_list
            parts.setdefault(unit.group, []).extend(result.analyses)
            summary.bytes += unit.size
            summary.peak_rss = max(summary.peak_rss, result.peak_rss)
            summary.cpu_seconds += result.cpu_seconds
            if dataset is not None:  # a unit with a failure runs again on --resume, even if it wrote something
                status = "failed" if unit_failures_list else "done"
                reason = "; ".join(f.line() for f in unit_failures_list) or None
                dataset.record(unit, status, reason=reason, kernels=[a.kernel for a in result.analyses])
            unit_kernels, unit_failures, seconds = len(result.analyses), len(unit_failures_list), result.seconds
        remaining[unit.group] -= 1
        if remaining[unit.group] == 0:
            finished[unit.group] = _finish_group(parts.pop(unit.group, []))
            if dataset is not None:
                written = dataset.write(finished[unit.group]) if unit.group not in lost_groups else []
                for member in (u for u in todo if u.group == unit.group):
                    entry = dataset.units.get(member.key)
                    if entry is not None and entry["status"] == "done":
                        entry["partitions"] = written
                        entry["rows"] = {p: dataset.rows[p] for p in written}
                        entry["digests"] = {p: dataset.digests[p] for p in written}
                dataset.save(failures)
        if progress is not None:
            progress(unit, seconds, unit_kernels, unit_failures)
    if dataset is not None:
        dataset.save(failures)
    order = {}
    for unit in units:
        order.setdefault(unit.group, len(order))
    analyses = [a for group in sorted(finished, key=order.get) for a in finished[group]]
    summary.seconds = time.perf_counter() - start
    return analyses, failures, summary


def _finish_group(parts: list[KernelAnalysis]) -> list[KernelAnalysis]:
    """Combine the shares of each kernel of one group; kernels keep the order they first appeared in."""
    by_kernel: dict[str, list[KernelAnalysis]] = {}
    for part in parts:
        by_kernel.setdefault(part.kernel, []).append(part)
    return [combine_analyses(shares) for shares in by_kernel.values()]
