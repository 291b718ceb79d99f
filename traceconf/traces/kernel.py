"""The common streaming interface of every trace reader: one :class:`KernelTrace` per launch.

A format reader is a generator of *events* in file order::

    KernelStart(kernel, launch)      a launch begins; everything up to the next KernelStart is its
    InstructionsSeen(rows)           descriptions of instructions seen for the first time
    WarpAccesses                     a chunk of shared accesses (bounded size)
    BadLines(count)                  malformed lines skipped (only with skip_bad)
    InputError                       a failure between launches (e.g. a kernelslist naming a missing
                                     file): ends the current launch cleanly, raised by the next launch

:func:`kernel_traces` turns that single pass into :class:`KernelTrace` objects
whose ``chunks()`` read lazily from the shared stream, so a multi-kernel file is
read once, block by block, whatever the consumer does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import pyarrow as pa

from traceconf.accesses import WarpAccesses
from traceconf.errors import InputError
from traceconf.schemas import TRACE_INSTRUCTIONS




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
    """An event generator with one event of look-ahead."""

    def __init__(self, events: Iterator):
        self._events = events
        self._next = None

    def peek(self):
        if self._next is None:
            self._next = next(self._events, None)
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


def kernel_traces(events: Iterator, source: str) -> Iterator[KernelTrace]:
    """KernelTrace objects over a reader's event stream; repeated names get ``#2``, ``#3``..."""
    stream = _Events(events)
    seen: dict[str, int] = {}
    while True:
        event = stream.pop()
        if event is None:
            return
        if isinstance(event, InputError):
            raise event
        if not isinstance(event, KernelStart):  # readers always announce a launch first
            raise AssertionError(f"{source}: trace reader emitted {type(event).__name__} before a kernel")
        seen[event.kernel] = seen.get(event.kernel, 0) + 1
        name = event.kernel if seen[event.kernel] == 1 else f"{event.kernel}#{seen[event.kernel]}"
        trace = KernelTrace(name, event.launch, stream)
        yield trace
        trace.drain()  # the consumer may have moved on without reading the whole launch


def chunked(accesses: WarpAccesses, limit: int) -> Iterator[WarpAccesses]:
    """Split a WarpAccesses into pieces of at most ``limit`` executions."""
    if len(accesses) <= limit:
        yield accesses
        return
    for begin in range(0, len(accesses), limit):
        yield accesses.take(slice(begin, begin + limit))

