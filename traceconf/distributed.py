"""Many inputs, many cores, many machines: the per-kernel analysis as tasks, run by an existing engine.

A suite of traces (folders, several ``kernelslist.g``, globs, partitioned canonical Parquet datasets) is
cut into :class:`Unit` tasks — one kernel trace file of a kernelslist (a large ``.tracez`` into ranges of
its CTAs, which its index makes cheap to reach), one whole input that cannot be cut (an NVBit log, a PTX
file), or a range of row groups of a canonical Parquet table.
Every task runs :func:`analyze_unit`, which calls the single-process pipeline (``run_file`` /
``run_trace``) on its share and returns per-instruction sums: there is one code path and several
executors — in this process, a local process pool, or Dask (a ``LocalCluster`` of processes, or any
existing cluster by scheduler address).  Nothing here schedules work: the executor does.

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

import glob
import hashlib
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from traceconf.cluster import check_scheduler_address, connect, fitted
from traceconf.errors import InputError
from traceconf.inputs import distinct_units
from traceconf.names import matches
from traceconf.outputs import (atomic_output, check_results_folder, check_writable, file_digest, partition_intact,
                               read_manifest, write_text)
from traceconf.pipeline import KernelAnalysis, KernelFailure, LaunchRequest, run_file, run_trace

MANIFEST = "_manifest.json"
#: Rows of a canonical Parquet table per task (a row is one lane of one access): about 1 GiB of columns.
ROWS_PER_UNIT = 1 << 25
#: Compressed bytes of a .tracez per task (about 1 GB of trace text, some seconds of one core).
TRACEZ_BYTES_PER_UNIT = 1 << 28
_GLOB = re.compile(r"[*?\[]")
_SLUG = re.compile(r"[^A-Za-z0-9_.+-]+")

#: progress(unit, seconds, kernels, failures) after each unit
UnitProgress = Callable[["Unit", float, int, int], None]


# ---------------------------------------------------------------------------
# Units: what one task reads
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Unit:
    """One task.  ``kind``: ``kernel_file`` (one launch, named ``kernel`` in advance; ``part``: a range of
    CTA records of a .tracez), ``file`` (a whole input), ``table_part`` (row groups ``part`` of a canonical
    Parquet file)."""

    source: str                    # the input as the user named it: the ``input`` column of the results
    path: str                      # the file this task reads
    kind: str
    group: str                     # units of one group are combined and written together
    kernel: str | None = None      # kernel_file: the launch's name, '#N' included
    part: tuple[int, int] | None = None
    size: int = 0                  # bytes this task reads (compressed), for progress and throughput
    stamp: str = ""                # size and modification time of the file when planned

    @property
    def key(self) -> str:
        share = f"@{self.part[0]}-{self.part[1]}" if self.part else ""
        return f"{self.path}{share}#{self.kernel or ''}"

    def describe(self) -> str:
        if self.kind == "kernel_file":
            ctas = f", CTAs {self.part[0]}..{self.part[1] - 1}" if self.part else ""
            return f"{self.path} (kernel {self.kernel}{ctas})"
        if self.part:
            return f"{self.path} (row groups {self.part[0]}..{self.part[1] - 1})"
        return self.path


def _stamp(path: Path) -> str:
    stat = path.stat()
    return f"{stat.st_size}:{stat.st_mtime_ns}"


def expand_inputs(inputs: Iterable[str | Path]) -> tuple[list[Path], list[KernelFailure]]:
    """Inputs as given; a pattern that names no existing path is expanded as a (recursive) glob."""
    paths, failures = [], []
    for item in inputs:
        text = str(item)
        if Path(text).exists() or not _GLOB.search(text):
            paths.append(Path(text))
            continue
        found = sorted(glob.glob(text, recursive=True))
        if not found:
            failures.append(KernelFailure("", InputError("no file matches this pattern", text)))
        paths += [Path(f) for f in found]
    return paths, failures


def plan(inputs: Iterable[str | Path], kernels: list[str] | None = None, rows_per_unit: int = ROWS_PER_UNIT,
         tracez_bytes_per_unit: int = TRACEZ_BYTES_PER_UNIT) -> tuple[list[Unit], list[KernelFailure]]:
    """The units of every input, in input order; inputs or kernel files that cannot be read are failures.

    A folder is an Accel-Sim trace folder (``kernelslist.g``), a canonical Parquet dataset (``*.parquet``
    below it, ``_``/``.`` names ignored), or a suite of trace folders (every ``kernelslist.g`` below it).
    """
    from traceconf.traces import detect_format

    paths, failures = expand_inputs(inputs)
    units: list[Unit] = []
    for path in paths:
        try:
            if path.is_dir():
                if (path / "kernelslist.g").is_file():
                    units += _kernelslist_units(path / "kernelslist.g", str(path), kernels, failures,
                                                tracez_bytes_per_unit)
                    continue
                tables = sorted(p for p in path.rglob("*.parquet") if not _hidden(p.relative_to(path)))
                if tables:
                    for table in tables:
                        units += _parquet_units(table, str(path), rows_per_unit)
                    continue
                lists = sorted(p for p in path.rglob("kernelslist.g") if not _hidden(p.relative_to(path)))
                if not lists:
                    raise InputError("folder holds no kernelslist.g and no .parquet access table", str(path))
                for listing in lists:
                    units += _kernelslist_units(listing, str(listing.parent), kernels, failures,
                                                tracez_bytes_per_unit)
                continue
            fmt = detect_format(path)
            if fmt == "accelsim" and not _is_kernel_file(path):
                units += _kernelslist_units(path, str(path), kernels, failures, tracez_bytes_per_unit)
            elif fmt == "accelsim":
                name = _kernel_name(path)
                if matches(name, kernels):
                    units += _kernel_file_units(path, str(path), name, tracez_bytes_per_unit)
            elif fmt == "canonical_parquet":
                units += _parquet_units(path, str(path), rows_per_unit)
            else:
                units.append(Unit(str(path), str(path), "file", str(path), size=path.stat().st_size,
                                  stamp=_stamp(path)))
        except InputError as error:
            failures.append(KernelFailure("", error))
    return units, failures


def _hidden(relative: Path) -> bool:
    return any(part.startswith(("_", ".")) for part in relative.parts)


def _is_kernel_file(path: Path) -> bool:
    from traceconf.traces.source import head
    return head(path, 4096).lstrip().startswith(b"-kernel name")


def _kernel_name(path: Path) -> str:
    """The ``-kernel name`` of a kernel trace file's header (.traceg, .xz, .gz, .tracez)."""
    from traceconf.traces.source import head
    from traceconf.traces.tracez import is_tracez

    text = head(path, 65536)
    if is_tracez(path):
        text = text[:text.find(b"\0")]
    for line in text.decode("utf-8", "replace").splitlines():
        match = re.fullmatch(r"\s*-\s*kernel name\s*=\s*(.*?)\s*", line)
        if match:
            return match[1]
    raise InputError("not an Accel-Sim kernel trace: no '-kernel name = ...' header", str(path), 1)


def _kernelslist_units(listing: Path, source: str, kernels: list[str] | None,
                       failures: list[KernelFailure], tracez_bytes_per_unit: int) -> list[Unit]:
    """One unit per launch, named as the single-process reader names it (``name#2`` for a repeat)."""
    from traceconf.traces.accelsim import read_kernelslist

    units, seen = [], {}
    for number, line, file in read_kernelslist(listing):
        if not file.is_file():
            failures.append(KernelFailure("", InputError(f"kernel trace {file.name} not found", str(listing),
                                                         number, 1, line)))
            continue
        try:
            name = _kernel_name(file)
        except InputError as error:
            failures.append(KernelFailure("", error))
            continue
        seen[name] = seen.get(name, 0) + 1
        name = name if seen[name] == 1 else f"{name}#{seen[name]}"
        if matches(name, kernels):
            try:
                units += _kernel_file_units(file, source, name, tracez_bytes_per_unit)
            except InputError as error:
                failures.append(KernelFailure(name, error))
    return units


def _kernel_file_units(file: Path, source: str, name: str, tracez_bytes_per_unit: int) -> list[Unit]:
    """One unit per kernel file; a .tracez larger than ``tracez_bytes_per_unit`` one per range of its CTAs."""
    from traceconf.traces.tracez import TracezFile, is_tracez

    size, stamp = file.stat().st_size, _stamp(file)
    whole = [Unit(source, str(file), "kernel_file", str(file), kernel=name, size=size, stamp=stamp)]
    if size <= tracez_bytes_per_unit or not is_tracez(file):
        return whole
    with TracezFile(file) as tracez:
        sizes = tracez.cta_sizes()
    ranges, begin, share = [], 0, 0
    for index, cta_bytes in enumerate(sizes):
        share += cta_bytes
        if share >= tracez_bytes_per_unit or index + 1 == len(sizes):
            ranges.append((begin, index + 1, share))
            begin, share = index + 1, 0
    if len(ranges) < 2:
        return whole
    return [Unit(source, str(file), "kernel_file", str(file), kernel=name, part=(a, b), size=n, stamp=stamp)
            for a, b, n in ranges]


def _parquet_units(path: Path, source: str, rows_per_unit: int) -> list[Unit]:
    """Row-group ranges of about ``rows_per_unit`` rows, cut only where no execution can straddle the cut.

    A cut between two row groups is safe when the Parquet statistics show a different kernel on each side,
    or the same kernel with every execution id of the first below every one of the second.  Without
    statistics the file is one unit.  The shares of one kernel are combined exactly afterwards.
    """
    try:
        meta = pq.ParquetFile(path).metadata
    except (pa.ArrowInvalid, OSError) as error:
        raise InputError(f"unreadable Parquet file: {error}", str(path)) from None
    names = meta.schema.to_arrow_schema().names
    stamp = _stamp(path)
    size = path.stat().st_size

    def stats(group: int, column: str):
        if column not in names:
            return None
        chunk = meta.row_group(group).column(names.index(column))
        s = chunk.statistics
        return (s.min, s.max) if s is not None and s.has_min_max else None

    ranges, begin, rows = [], 0, 0
    for group in range(meta.num_row_groups):
        rows += meta.row_group(group).num_rows
        last = group + 1 == meta.num_row_groups
        if last:
            ranges.append((begin, group + 1))
            break
        if rows < rows_per_unit:
            continue
        kernel_a, kernel_b = stats(group, "kernel"), stats(group + 1, "kernel")
        exec_a, exec_b = stats(group, "execution"), stats(group + 1, "execution")
        one_kernel = "kernel" not in names or (kernel_a is not None and kernel_b is not None
                                               and kernel_a[0] == kernel_a[1] and kernel_b[0] == kernel_b[1])
        if not one_kernel:
            continue
        other_kernel = "kernel" in names and kernel_a[0] != kernel_b[0]
        if other_kernel or (exec_a is not None and exec_b is not None and exec_a[1] < exec_b[0]):
            ranges.append((begin, group + 1))
            begin, rows = group + 1, 0
    if not ranges:  # a table without row groups: one unit reads it (and finds it empty)
        return [Unit(source, str(path), "file", source, size=size, stamp=stamp)]
    total = meta.num_rows or 1
    return [Unit(source, str(path), "table_part", source, part=r,
                 size=size * sum(meta.row_group(g).num_rows for g in range(*r)) // total, stamp=stamp)
            for r in ranges]


# ---------------------------------------------------------------------------
# The task
# ---------------------------------------------------------------------------

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
                 skip_bad: bool = False, keep_accesses: bool = False) -> UnitResult:
    """Run the single-process pipeline on one unit; never raises for a bad or broken input."""
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
            analyses, failures = run_file(unit.path, kernels, launch, rule_sets, skip_bad)
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


# ---------------------------------------------------------------------------
# Executors: each yields (unit, UnitResult or the reason the unit was lost)
# ---------------------------------------------------------------------------

@dataclass
class Executor:
    """Where tasks run: ``local`` (this process), ``processes`` (a local pool of ``workers``), or
    ``dask`` (a new LocalCluster of ``workers`` processes, or the cluster at ``scheduler``)."""

    kind: str = "local"
    workers: int = 1
    scheduler: str | None = None
    notes: list[str] = field(default_factory=list)


def choose_executor(workers: int | None, scheduler: str | None) -> Executor:
    """Dask when asked for and installed; ``--workers`` without Dask falls back to a process pool."""
    if scheduler is not None:
        if not dask_available():
            raise InputError("--scheduler needs Dask: pip install 'traceconf[distributed]'")
        return Executor("dask", workers or 0, check_scheduler_address(scheduler))
    if workers is None:
        return Executor("local")
    if workers < 1:
        raise InputError(f"--workers: expected at least 1, got {workers}")
    if dask_available():
        return Executor("dask", workers)
    return Executor("processes", workers, notes=[
        "dask[distributed] is not installed: --workers runs a local process pool "
        "(pip install 'traceconf[distributed]' for Dask)"])


def dask_available() -> bool:
    try:
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True


def _run_local(units, args) -> Iterator[tuple[Unit, UnitResult | str]]:
    for unit in units:
        yield unit, analyze_unit(unit, *args, keep_accesses=True)


def _run_processes(units, args, workers: int) -> Iterator[tuple[Unit, UnitResult | str]]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    context = multiprocessing.get_context("spawn")  # no fork of a process that may hold threads
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(analyze_unit, unit, *args): unit for unit in units}
        for future in as_completed(futures):
            unit = futures[future]
            try:
                yield unit, future.result()
            except BrokenProcessPool:
                yield unit, "a worker process died (killed, or out of memory) before this unit finished"
            except Exception as error:  # pickling or transport of the result
                yield unit, f"the worker could not return this unit: {type(error).__name__}: {error}"


#: Dask's default worker environment sets MALLOC_TRIM_THRESHOLD_=65536, which also switches off glibc's
#: adaptive mmap threshold: every large array of a trace block is then mmapped and unmapped afresh, and a
#: worker reads traces 1.5x slower than a plain process (measured).  ``None`` leaves it unset.
WORKER_ENVIRON = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}


def local_cluster(workers: int):
    """A Dask LocalCluster of ``workers`` single-threaded processes (the reader holds the GIL), quiet."""
    import logging

    import dask
    from distributed import LocalCluster

    with dask.config.set(WORKER_ENVIRON):
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                            silence_logs=logging.ERROR)


def _run_dask(units, args, executor: Executor) -> Iterator[tuple[Unit, UnitResult | str]]:
    from distributed import Client, as_completed

    cluster = None
    if executor.scheduler is not None:
        client = connect(executor.scheduler)
    else:
        cluster = local_cluster(executor.workers)
        client = Client(cluster)
    try:
        futures = client.map(analyze_unit, units, *[[a] * len(units) for a in args], pure=False,
                             key=[f"traceconf-unit-{i}-{_digest(u.key)}" for i, u in enumerate(units)])
        unit_of = {f.key: u for f, u in zip(futures, units)}
        for future in as_completed(futures):
            unit = unit_of[future.key]
            try:
                yield unit, future.result()
            except Exception as error:  # KilledWorker after the allowed retries, or a transport error
                yield unit, f"the Dask task failed ({type(error).__name__}: {error})"
            future.release()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def execute(units: list[Unit], args: tuple, executor: Executor) -> Iterator[tuple[Unit, UnitResult | str]]:
    if not units:
        return iter(())
    if executor.kind == "dask":
        return _run_dask(units, args, executor)
    if executor.kind == "processes":
        return _run_processes(units, args, executor.workers)
    return _run_local(units, args)


# ---------------------------------------------------------------------------
# Combining and writing
# ---------------------------------------------------------------------------

def combine_analyses(parts: list[KernelAnalysis]) -> KernelAnalysis:
    """One kernel's analysis from the analyses of its shares: exact sums, instructions united."""
    from traceconf.engine import combine

    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    instructions = pa.concat_tables([p.instructions for p in parts])
    seen, keep = set(), []
    for i, ident in enumerate(instructions.column("instruction").to_pylist()):
        if ident not in seen:
            seen.add(ident)
            keep.append(i)
    instructions = instructions.take(pa.array(keep, pa.int64())).sort_by("instruction")
    notes = list(dict.fromkeys(note for p in parts for note in p.notes))
    return KernelAnalysis(kernel=first.kernel, input_path=first.input_path, input_format=first.input_format,
                          launch=first.launch, results=combine([p.results for p in parts]),
                          instructions=instructions, unresolved=[u for p in parts for u in p.unresolved],
                          notes=notes)


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogateescape")).hexdigest()[:10]


def _slug(text: str, limit: int = 80) -> str:
    readable = _SLUG.sub("_", text).strip("_.")[-limit:] or "x"
    return f"{readable}-{_digest(text)}"


def partition_path(output: Path, source: str, kernel: str) -> Path:
    """Where the results of one (input, kernel) go: ``OUT/<input slug>/<kernel slug>.parquet``."""
    return output / _slug(source) / f"{_slug(kernel)}.parquet"


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(f"cannot write results: {error.strerror or error}", str(folder)) from None


class Dataset:
    """The partitioned results folder and its manifest."""

    def __init__(self, output: Path, devices: list[str], resume: bool):
        self.output = output
        self.devices = devices
        self.units: dict[str, dict] = {}
        self.rows: dict[str, int] = {}      # partition -> rows written and SHA-256, checked on --resume
        self.digests: dict[str, str] = {}
        if (output / MANIFEST).exists():          # a folder or FIFO there would stop the run only at its end
            check_writable(output / MANIFEST)
        old = read_manifest(output / MANIFEST, {"devices": list, "units": list}, "units",
                            {"key": str, "status": str, "partitions": list}) if resume else None
        if old is not None and old["devices"] == devices:  # other devices: other columns, nothing to reuse
            self.units = {u["key"]: u for u in old["units"] if u["status"] == "done"}

    def written(self, unit: Unit) -> bool:
        """Whether a previous run wrote this unit's results and they are still there, from the same input."""
        entry = self.units.get(unit.key)
        if entry is None or entry.get("stamp") != unit.stamp:
            return False
        rows, digests = (entry.get(key) if isinstance(entry.get(key), dict) else {} for key in ("rows", "digests"))
        return all(isinstance(p, str) and partition_intact(self.output / p, rows.get(p), digests.get(p))
                   for p in entry["partitions"])

    def write(self, analyses: list[KernelAnalysis]) -> list[str]:
        from traceconf.analyses.results import results_table

        paths = []
        for analysis in analyses:
            path = partition_path(self.output, analysis.input_path, analysis.kernel)
            table = results_table([analysis], self.devices)
            _make_folder(path.parent)
            with atomic_output(path) as temporary:
                pq.write_table(table, temporary)
            paths.append(str(path.relative_to(self.output)))
            self.rows[paths[-1]] = table.num_rows
            self.digests[paths[-1]] = file_digest(path)
        return paths

    def record(self, unit: Unit, status: str, partitions: list[str] | None = None, reason: str | None = None,
               kernels: list[str] | None = None) -> None:
        self.units[unit.key] = {"key": unit.key, "source": unit.source, "path": unit.path, "kind": unit.kind,
                                "kernel": unit.kernel, "part": list(unit.part) if unit.part else None,
                                "stamp": unit.stamp, "status": status, "partitions": partitions or [],
                                "kernels": kernels or [], "reason": reason}

    def save(self, failures: list[KernelFailure]) -> None:
        units = list(self.units.values())
        missing = [{"source": u["source"], "path": u["path"], "kernel": u["kernel"], "reason": u["reason"]}
                   for u in units if u["status"] != "done"]
        missing += [{"source": f.error.file, "path": f.error.file, "kernel": f.kernel or None, "reason": f.line()}
                    for f in failures if not any(f.line() == m["reason"] for m in missing)]
        body = {"format": "traceconf results dataset 1", "devices": self.devices,
                "partitions": "<input slug>/<kernel slug>.parquet: RESULT_ROWS of one kernel of one input",
                "units": units, "missing": missing}
        _make_folder(self.output)
        write_text(self.output / MANIFEST, json.dumps(body, indent=1))


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
             tracez_bytes_per_unit: int = TRACEZ_BYTES_PER_UNIT
             ) -> tuple[list[KernelAnalysis], list[KernelFailure], RunSummary]:
    """Plan the units of ``inputs``, run them on ``executor``, combine, and write ``output`` (a folder).

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
    args = (kernels, launch, rule_sets, skip_bad)
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


def read_dataset(output: str | Path) -> pa.Table:
    """Every partition of a results folder as one RESULT_ROWS table (hidden and ``_`` files skipped)."""
    import pyarrow.dataset as ds

    from traceconf.schemas import RESULT_ROWS

    files = sorted(str(p) for p in Path(output).rglob("*.parquet") if not _hidden(p.relative_to(output)))
    if not files:
        return RESULT_ROWS.empty_table()
    return ds.dataset(files, format="parquet", schema=RESULT_ROWS).to_table()
