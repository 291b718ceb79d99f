"""The common streaming interface of every trace reader: one :class:`KernelTrace` per launch.

A format reader is a generator of *events* in file order::

    KernelStart(kernel, launch)      a launch begins; everything up to the next KernelStart is its
    InstructionsSeen(rows)           descriptions of instructions seen for the first time
    WarpAccesses                     a chunk of shared accesses (bounded size)
    BadLines(count)                  malformed lines skipped (only with skip_bad)
    InputError                       a failure between launches (e.g. a kernelslist naming a missing
                                     file): ends the current launch cleanly; raised where the next launch
                                     would start, or handed to ``on_error`` and the launches after it read

:func:`kernel_traces` turns that single pass into :class:`KernelTrace` objects
whose ``chunks()`` read lazily from the shared stream, so a multi-kernel file is
read once, block by block, whatever the consumer does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa

from traceconf.accesses import WarpAccesses
from traceconf.errors import InputError
from traceconf.machine import resident_bytes
from traceconf.schemas import TRACE_INSTRUCTIONS




#: Ranges of the launch numbers a trace header or launch line states.  Grid and block dimensions are CUDA's
#: (a grid is at most 2^31-1 x 65535 x 65535 CTAs, a block 1024 x 1024 x 64 threads); counts, sizes, ids and
#: addresses are only bounded by their 64-bit columns.  A value outside is a corrupt trace, not a launch.
INT64_MAX = (1 << 63) - 1
GRID_LIMITS = ((1 << 31) - 1, 65535, 65535)
BLOCK_LIMITS = (1024, 1024, 64)


def launch_number_problem(field_name: str, value: int, low: int = 0, high: int = INT64_MAX) -> str | None:
    """None, or the message for a launch number outside ``low..high`` (names the field and the range)."""
    if low <= value <= high:
        return None
    return f"{field_name} {value} is out of range {low}..{high:,}"


def dims_problem(field_name: str, dims: tuple[int, ...], limits: tuple[int, int, int]) -> str | None:
    """None, or the message for grid/block dimensions outside 1..limit per axis."""
    for axis, value, limit in zip("xyz", dims, limits):
        problem = launch_number_problem(f"{field_name} {axis}", value, 1, limit)
        if problem:
            return problem + f" (CUDA's {field_name} limit {' x '.join(f'{v:,}' for v in limits)})"
    return None


@dataclass
class KernelStart:
    kernel: str
    launch: dict


@dataclass
class InstructionsSeen:
    rows: list[dict]  # keys: instruction, pc, sass, opcode, kind, bytes, matrices, source_line


@dataclass
class BadLines:
    count: int


class _Events:
    """An event generator with one event of look-ahead; with ``memory_limit``, the process's resident memory
    is checked after each block of accesses (reading stops there, what was counted is kept, the launch is
    reported incomplete)."""

    def __init__(self, events: Iterator, source: str = "", memory_limit: int | None = None):
        self._events = events
        self._next = None
        self._source = source
        self._memory_limit = memory_limit

    def peek(self):
        if self._next is None:
            self._next = next(self._events, None)
            if self._memory_limit is not None and isinstance(self._next, WarpAccesses):
                used = resident_bytes()
                if used > self._memory_limit:
                    self._next = None
                    raise InputError(f"stopped at the memory limit of {self._memory_limit / 2**30:.2f} GiB "
                                     f"({used / 2**30:.2f} GiB in use); raise it with --memory-limit", self._source)
        return self._next

    def pop(self):
        event = self.peek()
        self._next = None
        return event


@dataclass
class KernelTrace:
    """One kernel launch of a trace.

    ``chunks()`` streams its shared accesses as bounded :class:`WarpAccesses`;
    ``instructions`` and ``bad_lines`` are complete once the chunks are
    exhausted (reading them earlier reads the rest of this launch first).
    """

    kernel: str
    launch: dict
    _events: _Events = field(repr=False)
    bad_lines: int = 0
    _rows: dict = field(default_factory=dict, repr=False)
    _executions: dict = field(default_factory=dict, repr=False)
    _started: bool = field(default=False, repr=False)
    _done: bool = field(default=False, repr=False)

    def chunks(self) -> Iterator[WarpAccesses]:
        """Shared accesses of this launch, chunk by chunk.  Can be iterated once."""
        if self._started:
            raise RuntimeError(f"chunks() of kernel {self.kernel!r} were already read")
        self._started = True
        return self._stream()

    def _stream(self) -> Iterator[WarpAccesses]:
        while not self._done:  # an abandoned iterator must not read the next launch's events
            event = self._events.peek()
            if event is None or isinstance(event, (KernelStart, InputError)):
                self._done = True
                return
            self._events.pop()
            if isinstance(event, WarpAccesses):
                event.kernel = self.kernel
                ids, counts = np.unique(event.instruction, return_counts=True)
                for instruction, count in zip(ids.tolist(), counts.tolist()):
                    self._executions[instruction] = self._executions.get(instruction, 0) + count
                yield event
            elif isinstance(event, InstructionsSeen):
                for row in event.rows:
                    self._rows.setdefault(row["instruction"], row)
            else:
                self.bad_lines += event.count

    def seen(self, instruction: int) -> dict | None:
        """The description of an instruction read so far (None: not yet described), while streaming."""
        return self._rows.get(instruction)

    def drain(self) -> None:
        """Read whatever is left of this launch; accesses not yet taken from chunks() are discarded."""
        self._started = True
        for _ in self._stream():
            pass

    @property
    def instructions(self) -> pa.Table:
        if not self._done:
            self.drain()
        rows = [dict(self._rows[i], kernel=self.kernel, executions=self._executions.get(i, 0))
                for i in sorted(self._rows)]
        return pa.Table.from_pylist(rows, schema=TRACE_INSTRUCTIONS)


def kernel_traces(events: Iterator, source: str, on_error: Callable[[InputError], None] | None = None,
                  memory_limit: int | None = None) -> Iterator[KernelTrace]:
    """KernelTrace objects over a reader's event stream; repeated names get ``#2``, ``#3``...

    A failure between launches is raised, or with ``on_error`` handed to it and the stream read on (the
    valid launches after a missing kernel file are still analysed)."""
    stream = _Events(events, source, memory_limit)
    seen: dict[str, int] = {}
    skipped = 0        # lines skipped (--skip-bad) before the first launch: counted with the launch after them
    while True:
        event = stream.pop()
        if event is None and skipped:
            event = InputError(f"no kernel launch line; {skipped} malformed line(s) skipped (--skip-bad)", source)
        if event is None:
            return
        if isinstance(event, InputError):
            skipped = 0
            if on_error is None:
                raise event
            on_error(event)
            continue
        if isinstance(event, BadLines):
            skipped += event.count
            continue
        if not isinstance(event, KernelStart):  # readers always announce a launch first
            raise AssertionError(f"{source}: trace reader emitted {type(event).__name__} before a kernel")
        seen[event.kernel] = seen.get(event.kernel, 0) + 1
        name = event.kernel if seen[event.kernel] == 1 else f"{event.kernel}#{seen[event.kernel]}"
        trace = KernelTrace(name, event.launch, stream)
        trace.bad_lines, skipped = trace.bad_lines + skipped, 0
        yield trace
        trace.drain()  # the consumer may have moved on without reading the whole launch


def chunked(accesses: WarpAccesses, limit: int) -> Iterator[WarpAccesses]:
    """Split a WarpAccesses into pieces of at most ``limit`` executions."""
    if len(accesses) <= limit:
        yield accesses
        return
    for begin in range(0, len(accesses), limit):
        yield accesses.take(slice(begin, begin + limit))

