"""NVBit ``mem_trace`` logs (the tool's stdout), old and 1.5+ formats.

1.5+ (``MEMTRACE:`` prefix; launch ids per context)::

    MEMTRACE: CTX 0x... - LAUNCH - Kernel pc 0x... - Kernel name NAME - grid launch id N - grid size X,Y,Z
              - block size X,Y,Z - nregs R - shmem S - cuda stream id I
    MEMTRACE: CTX 0x... - grid_launch_id N - CTA x,y,z - warp W - OPCODE - 0x<16 hex> x 32

old (NVBit <= 1.4)::

    Kernel NAME - grid size X,Y,Z - block size X,Y,Z - nregs R - shmem S - cuda stream id I
    CTA x,y,z - warp W - OPCODE - 0x<16 hex> x 32

Accesses belong to the last launch line before them (1.5.x prints the launch
id one higher on the LAUNCH line than on its accesses, so ids are not used to
match).  The log records no PC and no active mask: instructions are
identified by their opcode text (first appearance order), and ``warp`` is the
hardware warp slot (``%warpid``), not the warp inside the CTA.  A lane that did
not take part prints address ``0x0`` (NVBit issue #130: mem_trace fills the
inactive lanes of its record with zeros).  A shared address in the log is a
generic address inside the 16 MiB-aligned shared window, whose base is never 0,
so ``0x0`` cannot be a shared access: such lanes are inactive, and a line whose
32 addresses are all ``0x0`` is no access at all.  The other addresses are
reduced to offsets in the window.  Other lines (the application's own output,
NVBit's banner) are ignored.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

import numpy as np

from traceconf.accesses import INACTIVE, WarpAccesses
from traceconf.traces.accelsim import SHARED_WINDOW, WARP_SIZE
from traceconf.errors import InputError
from traceconf.traces.kernel import (GRID_LIMITS, BLOCK_LIMITS, BadLines, InstructionsSeen, KernelStart, chunked,
                                     dims_problem, launch_number_problem)
from traceconf.traces.options import Problem, ReadOptions
from traceconf.sass.opcodes import ALWAYS, shared_op
from traceconf.traces.source import LineBlocks
from traceconf.traces.tokens import parse_hex, tokenize

#: The warp field is the hardware warp slot (%warpid), stored in 32 bits.
MAX_WARP_SLOT = (1 << 31) - 1

_DIMS = rb"(\d+),(\d+),(\d+)"
_LAUNCH_TAIL = (rb" - grid size " + _DIMS + rb" - block size " + _DIMS +
                rb" - nregs (?P<nregs>\d+) - shmem (?P<shmem>\d+) - cuda stream id (?P<stream>\d+)\s*")
_LAUNCH = re.compile(rb"MEMTRACE: CTX (?P<ctx>0x[0-9a-fA-F]+) - LAUNCH - Kernel pc (?P<pc>0x[0-9a-fA-F]+)"
                     rb" - Kernel name (?P<name>.*) - grid launch id (?P<launch>\d+)" + _LAUNCH_TAIL)
_OLD_LAUNCH = re.compile(rb"Kernel (?P<name>.*)" + _LAUNCH_TAIL)
_ACCESS = re.compile(rb"(?:MEMTRACE: CTX 0x[0-9a-fA-F]+ - grid_launch_id \d+ - )?CTA (\d+),(\d+),(\d+)"
                     rb" - warp (\d+) - (\S+) - ([^\n]*)")


def events(path: Path, options: ReadOptions) -> Iterator:
    reader = _Reader(str(path), options)
    with LineBlocks(path, options.progress) as blocks:
        for text, first_line in blocks.blocks():
            yield from reader.block(text, first_line)
    yield from reader.flush()


class _Reader:
    def __init__(self, path: str, options: ReadOptions):
        self.path = path
        self.options = options
        self.launch: dict | None = None
        self.instructions: dict[str, int] = {}
        self.next_execution = 0
        self._pending: list[tuple[int, tuple, bytes, bytes]] = []  # (line, cta/warp, opcode, addresses)

    def block(self, text: bytes, first_line: int) -> Iterator:
        problems: list[Problem] = []
        for number, line in enumerate(text.split(b"\n")[:-1], first_line):
            if line.startswith(b"MEMTRACE:") and b" - LAUNCH - " in line or line.startswith(b"Kernel "):
                match = (_LAUNCH if line.startswith(b"MEMTRACE:") else _OLD_LAUNCH).fullmatch(line)
                if match is None:
                    if line.startswith(b"MEMTRACE:"):
                        problems.append(Problem(number, "malformed LAUNCH line", 1, line.decode("utf-8", "replace")))
                    continue  # an application line that merely starts with "Kernel "
                yield from self.flush(problems)
                problems = []
                yield from self._start(match, number)
            elif line.startswith(b"MEMTRACE:") or line.startswith(b"CTA "):
                match = _ACCESS.fullmatch(line)
                if match is None or self.launch is None:
                    problems.append(Problem(number, "malformed access line" if match is None else
                                            "access line before any kernel launch line", 1,
                                            line.decode("utf-8", "replace")))
                    continue
                x, y, z, warp, opcode, addresses = match.groups()
                op = shared_op(opcode.decode("ascii", "replace"))
                if op is not None and op.space == ALWAYS:
                    place = (int(x), int(y), int(z), int(warp))
                    problem = dims_problem("CTA index", tuple(v + 1 for v in place[:3]), GRID_LIMITS) or \
                        launch_number_problem("warp", place[3], 0, MAX_WARP_SLOT)
                    if problem:
                        problems.append(Problem(number, problem, 1))
                        continue
                    self._pending.append((number, place, opcode, addresses))
        yield from self.flush(problems)

    def _start(self, match: re.Match, number: int) -> Iterator:
        groups = [int(v) for v in match.groups()[-9:]]
        fields = match.groupdict()
        problem = dims_problem("grid", tuple(groups[0:3]), GRID_LIMITS) or \
            dims_problem("block", tuple(groups[3:6]), BLOCK_LIMITS) or \
            next(filter(None, (launch_number_problem(name, value) for name, value in
                               zip(("nregs", "shmem", "cuda stream id"), groups[6:9]))), None)
        if fields.get("launch") and not problem:
            problem = launch_number_problem("grid launch id", int(fields["launch"]))
        if problem:
            raise InputError(f"LAUNCH line: {problem}", self.path, number, 1)
        self.launch = {
            "format": "nvbit",
            "file": self.path,
            "kernel_name": fields["name"].decode("utf-8", "replace"),
            "grid": tuple(groups[0:3]),
            "block": tuple(groups[3:6]),
            "nregs": groups[6],
            "shmem_bytes": groups[7],
            "cuda_stream_id": groups[8],
            "context": fields.get("ctx", b"").decode() or None,
            "kernel_pc": int(fields["pc"], 16) if fields.get("pc") else None,
            "grid_launch_id": int(fields["launch"]) if fields.get("launch") else None,
            "active_mask": "not recorded: lanes printed as 0x0 are taken as inactive",
            "warp_id": "hardware warp slot (%warpid), not the warp inside the CTA",
        }
        self.instructions = {}
        self.next_execution = 0
        yield KernelStart(self.launch["kernel_name"], self.launch)

    def flush(self, problems: list[Problem] | None = None) -> Iterator:
        """Decode the pending shared lines of the current launch; report problems."""
        problems = problems or []
        pending, self._pending = self._pending, []
        if pending:
            t = tokenize(b"\n".join(entry[3] for entry in pending) + b"\n")
            value, bad = parse_hex(t, np.arange(len(t.start)))
            line_of_token = np.repeat(np.arange(len(pending)), t.count)
            bad_line = (t.count != WARP_SIZE) | (np.bincount(line_of_token[bad], minlength=len(pending)) > 0)
            for i in np.flatnonzero(bad_line).tolist():
                number = pending[i][0]
                problems.append(Problem(number, f"expected {WARP_SIZE} hexadecimal addresses", 1))
            cut = min(problems).line if problems and not self.options.skip_bad else None
            good = np.flatnonzero(~bad_line)
            if cut is not None:
                good = good[[pending[i][0] < cut for i in good.tolist()]]
            if len(good):
                yield from self._accesses(pending, good, value, t)
        if problems:
            if not self.options.skip_bad:
                raise min(problems).error(self.path)
            yield BadLines(len(problems))

    def _accesses(self, pending, good: np.ndarray, value: np.ndarray, t) -> Iterator:
        new = []
        ids = []
        ops = []
        for i in good.tolist():
            opcode = pending[i][2].decode("ascii", "replace")
            op = shared_op(opcode)
            if opcode not in self.instructions:
                self.instructions[opcode] = len(self.instructions)
                new.append({"instruction": self.instructions[opcode], "pc": None, "sass": opcode, "opcode": opcode,
                            "kind": op.kind, "bytes": op.bytes, "matrices": op.matrices, "source_line": None})
            ids.append(self.instructions[opcode])
            ops.append(op)
        if new:
            yield InstructionsSeen(new)
        position = t.first[good][:, None] + np.arange(WARP_SIZE)
        printed = value[position]
        # the window is 16 MiB aligned: offset = address mod 16 MiB; 0x0 is a lane that did not take part
        address = np.where(printed == 0, INACTIVE, printed % SHARED_WINDOW)
        executed = np.flatnonzero((printed != 0).any(axis=1))
        if len(executed) < len(good):  # every lane 0x0: the whole warp was predicated off
            good, address = good[executed], address[executed]
            ids, ops = [ids[i] for i in executed.tolist()], [ops[i] for i in executed.tolist()]
        if len(good) == 0:
            return
        coords = np.array([pending[i][1] for i in good.tolist()], dtype=np.int64)
        gx, gy, _ = self.launch["grid"]
        n = len(good)
        execution = np.arange(self.next_execution, self.next_execution + n, dtype=np.int64)
        self.next_execution += n
        accesses = WarpAccesses(
            "", coords[:, 0] + coords[:, 1] * gx + coords[:, 2] * gx * gy, coords[:, 3].astype(np.int32),
            execution, np.array(ids, dtype=np.int32), np.array([op.kind_code for op in ops], dtype=np.int8),
            np.array([op.bytes for op in ops], dtype=np.int16), np.array([op.matrices for op in ops], dtype=np.int8),
            address, np.array([op.op_code for op in ops], dtype=np.int8))
        yield from chunked(accesses, self.options.chunk_executions)
