"""What one task reads: the units of a suite of inputs (see :mod:`traceconf.distributed`)."""

from __future__ import annotations

import glob
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from traceconf.errors import InputError
from traceconf.names import matches
from traceconf.pipeline import KernelFailure

#: Rows of a canonical Parquet table per task (a row is one lane of one access): about 1 GiB of columns.
ROWS_PER_UNIT = 1 << 25
#: Compressed bytes of a .tracez per task (about 1 GB of trace text, some seconds of one core).
TRACEZ_BYTES_PER_UNIT = 1 << 28
_GLOB = re.compile(r"[*?\[]")


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


def digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogateescape")).hexdigest()[:10]


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
    from traceconf.traces.accelsim import is_kernel_file

    paths, failures = expand_inputs(inputs)
    units: list[Unit] = []
    for path in paths:
        try:
            if path.is_dir():
                if (path / "kernelslist.g").is_file():
                    units += _kernelslist_units(path / "kernelslist.g", str(path), kernels, failures,
                                                tracez_bytes_per_unit)
                    continue
                tables = sorted(p for p in path.rglob("*.parquet") if not hidden(p.relative_to(path)))
                if tables:
                    for table in tables:
                        units += _parquet_units(table, str(path), rows_per_unit)
                    continue
                lists = sorted(p for p in path.rglob("kernelslist.g") if not hidden(p.relative_to(path)))
                if not lists:
                    raise InputError("folder holds no kernelslist.g and no .parquet access table", str(path))
                for listing in lists:
                    units += _kernelslist_units(listing, str(listing.parent), kernels, failures,
                                                tracez_bytes_per_unit)
                continue
            fmt = detect_format(path)
            if fmt == "accelsim" and not is_kernel_file(path):
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


def hidden(relative: Path) -> bool:
    return any(part.startswith(("_", ".")) for part in relative.parts)


def _kernel_name(path: Path) -> str:
    """The ``-kernel name`` of a kernel trace file's header (.traceg, .xz, .gz, .tracez)."""
    from traceconf.traces.accelsim import kernel_header
    return kernel_header(path)["kernel name"]


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
