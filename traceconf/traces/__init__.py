"""Recorded traces → the access table, streamed.

Every supported trace format is read the same way::

    from traceconf.traces import detect_format, open_trace

    for kt in open_trace("traces/kernelslist.g"):   # one KernelTrace per kernel launch
        for chunk in kt.chunks():                   # WarpAccesses of bounded size, shared accesses only
            ...
        kt.instructions                             # TRACE_INSTRUCTIONS: PC, SASS text, executions...

Formats: Accel-Sim (``kernelslist.g``, ``.traceg``, ``.xz``), NVBit
``mem_trace`` logs, and the canonical ACCESSES table as Parquet or CSV.
GPGPU-Sim's ``gpgpu_inst_stats.txt`` is a per-PTX-line summary, not a trace:
:func:`read_gpgpusim_stats` reads it into a table.  See docs/traces.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from traceconf.errors import InputError
from traceconf.traces.detect import FORMATS, detect_format

if TYPE_CHECKING:
    from traceconf.traces.kernel import KernelTrace
    from traceconf.traces.source import Progress

__all__ = ["FORMATS", "GPGPUSIM_STATS", "TRACE_INSTRUCTIONS", "KernelTrace", "detect_format", "open_trace",
           "read_gpgpusim_stats"]


def open_trace(path: str | Path, skip_bad: bool = False, progress: Progress | None = None,
               chunk_executions: int = 65536, part: tuple[int, int] | None = None,
               on_error: Callable[[InputError], None] | None = None,
               memory_limit: int | None = None) -> Iterator[KernelTrace]:
    """Kernel launches of a trace, in file order, read lazily.

    ``skip_bad`` counts malformed lines in ``KernelTrace.bad_lines`` instead of
    raising :class:`InputError`; ``progress(bytes_done, bytes_total)`` is
    called as the file is read; each chunk holds at most ``chunk_executions``
    warp-level executions.  ``part=(first, end)`` reads one share of a large
    input (one task of a distributed run): those row groups of a canonical
    Parquet table, or those CTAs (index records) of an Accel-Sim 2.0 ``.tracez``.
    warp-level executions.  A failure between launches (a kernelslist naming a
    missing file) is raised, or handed to ``on_error`` and the reading goes on.  With ``memory_limit``,
    reading stops when the process holds more (the launch is then reported incomplete).
    """
    from traceconf.traces import accelsim, canonical, nvbit, tracez
    from traceconf.traces.kernel import kernel_traces
    from traceconf.traces.options import ReadOptions

    path = Path(path)
    fmt = detect_format(path)
    options = ReadOptions(skip_bad, progress, chunk_executions, memory_limit)
    if part is not None:
        if fmt == "canonical_parquet":
            return kernel_traces(canonical.events(path, options, fmt, part), str(path),
                                 memory_limit=options.memory_limit)
        if fmt == "accelsim" and tracez.is_tracez(path):
            return kernel_traces(accelsim.kernel_file_events(path, options, ctas=part), str(path),
                                 memory_limit=options.memory_limit)
        raise InputError("only a canonical Parquet table (row groups) or a .tracez kernel file (CTAs) can be "
                         "read in parts", str(path))
    if fmt == "accelsim":
        events = accelsim.events(path, options)
    elif fmt == "nvbit":
        events = nvbit.events(path, options)
    elif fmt in ("canonical_parquet", "canonical_csv"):
        events = canonical.events(path, options, fmt)
    elif fmt == "gpgpusim_stats":
        raise InputError("a GPGPU-Sim gpgpu_inst_stats.txt holds per-PTX-line totals, not accesses: "
                         "read it with read_gpgpusim_stats and compare it with the prediction for the PTX",
                         str(path))
    else:
        raise InputError("this is PTX, not a recorded trace: analyze it as PTX", str(path))
    return kernel_traces(events, str(path), on_error, options.memory_limit)


#: Names of the readers' modules, imported on first use: detecting a file's format (every ``analyze`` does)
#: must not pay for pandas and the trace readers.
_LAZY = {"GPGPUSIM_STATS": "gpgpusim", "read_gpgpusim_stats": "gpgpusim", "TRACE_INSTRUCTIONS": "kernel",
         "KernelTrace": "kernel"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(f"traceconf.traces.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'traceconf.traces' has no attribute {name!r}")
