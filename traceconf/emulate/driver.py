"""Emulate one kernel launch: choose the CTAs to run, run them in batches, hand the accesses on.

Which CTAs run
--------------
CTA 0 runs first (the *probe*) while the emulator watches for dependence on
the CTA index (:data:`taint.CTA_ANY`) in a shared address, in the guard of a
shared access, or in a branch condition.  Without any, every CTA executes
the same shared accesses at the same addresses, so CTA 0's counts times the
number of CTAs are exact (``scale`` = number of CTAs).  Otherwise:

* ``Launch.ctas`` < CTAs: that many CTAs spread evenly over the grid, a
  stated sample (``sampled`` = (analysed, total)).
* else CTA classes (:mod:`.classes`): the grid is bisected into boxes whose
  CTAs provably count alike; one corner of each runs and stands for the box
  (``classes``).  Boxes the budget could not prove run CTA by CTA.
* without classes (``Launch.classes`` False): every CTA runs (``scale`` = 1).

Memory and time
---------------
Batches of CTAs (``CHUNK_THREADS`` threads) run one at a time and each
batch's accesses go to ``consume(accesses, weight)`` (``weight``: CTAs each
execution stands for) and are dropped, so memory does not grow with the grid.
Without ``consume`` the accesses are kept in the result (tests, small launches).
The time and memory limits (:class:`Limits`) are polled inside the machine
and between batches; reaching one ends the emulation cleanly with what was
counted so far and ``partial`` saying why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np

from traceconf.accesses import WarpAccesses
from traceconf.emulate.classes import Box, CtaRun, Watch, compile_checks, linear, partition
from traceconf.emulate.launch import Launch, LimitReached, Limits, resolve_block, resolve_grid, resolve_params
from traceconf.emulate.layout import lay_out
from traceconf.emulate.memory import space_of
from traceconf.emulate.operands import Context
from traceconf.emulate.program import link
from traceconf.emulate.simt import Findings, Machine, compile_slot
from traceconf.errors import InputError
from traceconf.ptx.opcodes import may_access_shared, shared_access_kind

#: Threads emulated together when several CTAs must run (bounds memory, keeps numpy arrays large).
CHUNK_THREADS = 1 << 13
#: Warp executions one batch may log (the probe CTA's count sets the CTAs per batch): 64 MiB of addresses.
BATCH_EXECUTIONS = 1 << 18
#: CTAs the class search may emulate before the rest of the grid runs CTA by CTA: a quarter of the grid,
#: at least this many.
CLASS_BUDGET_MIN = 64
#: Grids up to this many CTAs run CTA by CTA (the class search would not save anything).
CLASS_MIN_CTAS = 8
#: Emulated CTA ids listed in the result (the count is always exact).
LISTED_CTAS = 100_000

Consume = Callable[[WarpAccesses, int], None]
Progress = Callable[..., None]     # (done, total[, note]): CTAs covered so far, of the grid


@dataclass
class EmulationResult:
    accesses: WarpAccesses            # every access when no ``consume`` was given, else empty
    scale: int | None                 # every execution stands for this many CTAs (None: see weights)
    analysed_ctas: list[int]          # CTAs emulated (the first LISTED_CTAS)
    unresolved: list[dict]
    shared_layout: list[dict]
    sampled: tuple[int, int] | None = None
    notes: list[str] = field(default_factory=list)
    cta_dependence: list[str] = field(default_factory=list)
    steps: int = 0
    weights: np.ndarray | None = None   # per execution of ``accesses``: the CTAs it stands for
    classes: list[dict] = field(default_factory=list)  # {"ctas", "count", "emulated"} per proved class
    emulated_ctas: int = 0
    covered_ctas: int = 0             # CTAs the counts stand for (== total unless sampled or partial)
    total_ctas: int = 0
    partial: str | None = None        # why the emulation stopped early (None: it did not)


class _Sink:
    """Where batches go: the consumer, or a list kept for the result; counts what was covered."""

    def __init__(self, consume: Consume | None, kernel: str, warp_size: int):
        self.consume, self.kernel, self.warp_size = consume, kernel, warp_size
        self.parts: list[tuple[WarpAccesses, int]] = []
        self.covered = 0

    def emit(self, accesses: WarpAccesses, weight: int, ctas: int) -> None:
        self.covered += ctas
        if not len(accesses):
            return
        if self.consume is not None:
            self.consume(accesses, weight)
        else:
            self.parts.append((accesses, weight))

    def kept(self) -> tuple[WarpAccesses, np.ndarray | None]:
        if not self.parts:
            return WarpAccesses.empty(self.kernel, self.warp_size), None
        accesses = WarpAccesses.concat([a for a, _ in self.parts])
        accesses.execution = np.arange(len(accesses), dtype=np.int64)
        weights = np.concatenate([np.full(len(a), w, dtype=np.int64) for a, w in self.parts])
        return accesses, weights


def emulate(module, kernel: str, launch: Launch, progress: Progress | None = None,
            consume: Consume | None = None) -> EmulationResult:
    path = str(getattr(module, "path", "") or "") or None
    kernel_row = module.kernel(kernel)
    if not kernel_row.get("entry", True):
        raise InputError(f"{kernel} is a .func, not a kernel (.entry): it cannot be launched", file=path,
                         line=kernel_row.get("ptx_line"))
    if launch.warp_size < 32 or launch.warp_size % 32:
        raise InputError(f"warp size {launch.warp_size} is not supported (32 or 64)")
    block, grid = resolve_block(launch, kernel_row), resolve_grid(launch, kernel_row)
    params = resolve_params(launch, kernel_row)
    program = link(module, kernel, path)
    declarations = [variable for name in program.functions for variable in module.kernel(name).get("shared") or []]
    layout = lay_out(declarations, int(launch.dynamic_smem))
    param_rows = kernel_row.get("params") or []
    ctx = Context(kernel=kernel, path=path, layout=layout, param_names=[p["name"] for p in param_rows],
                  param_values=params, param_bytes={p["name"]: p.get("bytes") for p in param_rows},
                  address_bits=int(kernel_row.get("address_size") or 64))
    total = grid[0] * grid[1] * grid[2]
    if not _touches_shared(program):
        # nothing can touch shared memory: no launch fact is needed and nothing needs to run
        return EmulationResult(accesses=WarpAccesses.empty(kernel, launch.warp_size), scale=total,
                               analysed_ctas=[], unresolved=[], shared_layout=layout.variables,
                               notes=[f"{kernel} has no shared-memory instruction"], covered_ctas=total,
                               total_ctas=total)
    compiled = [compile_slot(slot, ctx) for slot in program.slots]
    checks = compile_checks(program, ctx) if launch.classes else None
    findings = Findings(program, layout.total_bytes)
    limits = Limits(launch.time_limit, launch.memory_limit)
    sink = _Sink(consume, kernel, launch.warp_size)
    emulated: list[int] = []
    state = {"steps": 0, "emulated": 0}

    def machine(ctas: np.ndarray, watched: bool) -> Machine:
        watch = Watch(checks, len(ctas), _padded(block, launch.warp_size)) if watched and checks else None
        return Machine(program, compiled, ctx, ctas, block, grid, launch.warp_size,
                       (layout.static_bytes, layout.dynamic_bytes), launch.max_steps, findings, watch, limits)

    def run(ctas: np.ndarray, watched: bool = False) -> Machine:
        limits.check()
        current = machine(np.asarray(ctas, dtype=np.int64), watched)
        state["emulated"] += len(ctas)
        if len(emulated) < LISTED_CTAS:
            emulated.extend(np.asarray(ctas)[:LISTED_CTAS - len(emulated)].tolist())
        try:
            current.run()
        except LimitReached:
            # what ran so far is counted (for the CTAs of this batch), then the stop goes on up
            sink.emit(_assemble(kernel, [current], launch.warp_size), 1, 0)
            state["steps"] += current.steps
            raise
        state["steps"] += current.steps
        return current

    def report(done: int, of: int, note: str | None = None) -> None:
        if progress:
            progress(done, of) if note is None else progress(done, of, note)

    per_chunk = max(1, CHUNK_THREADS // _padded(block, launch.warp_size))
    scale, sampled, classes, partial = None, None, [], None
    try:
        probe = run(np.array([0]), watched=True)
        logged = sum(len(entry[0]) for entry in probe.log)
        per_chunk = max(1, min(per_chunk, BATCH_EXECUTIONS // max(1, logged)))
        if not findings.cta_reasons or total == 1:
            scale = total
            sink.emit(_assemble(kernel, [probe], launch.warp_size), total, total)
            report(1, 1)
        elif launch.ctas is not None and launch.ctas < total:
            chosen = np.unique(np.linspace(0, total - 1, max(1, int(launch.ctas))).round().astype(np.int64))
            sampled = (len(chosen), total)
            state["emulated"] -= 1
            _stream(chunks_of(chosen, per_chunk), run, sink, kernel, launch.warp_size, report, len(chosen))
        elif checks is not None and total > CLASS_MIN_CTAS:
            del probe
            classes = _classes(grid, run, sink, kernel, launch, report, per_chunk, total)
        else:
            scale = 1
            del probe
            _stream(chunks_of_range(0, total, per_chunk), run, sink, kernel, launch.warp_size, report, total)
    except LimitReached as stop:
        partial = stop.reason
    accesses, weights = sink.kept()
    if scale is not None and weights is not None and not np.all(weights == scale):
        scale = None
    if scale is None and sampled is None and weights is not None and np.all(weights == 1):
        scale = 1
    notes = list(findings.cta_reasons and ["shared accesses depend on the CTA index ("
                                           + "; ".join(findings.cta_reasons[:3]) + ")"])
    notes += _class_notes(classes, total, state["emulated"], sink.covered)
    if partial:
        notes.append(f"partial: {partial}; counts cover {sink.covered:,} of {total:,} CTAs"
                     + ("" if sink.covered else " (the first CTA did not finish: its accesses so far)")
                     + "; --ctas N analyses a stated sample of N CTAs instead")
    for highest, row in findings.extent.values():
        extern_hint = " (pass --dynamic-smem for the extern shared array)" if layout.has_extern() else ""
        notes.append(f"PTX line {row['ptx_line']} reaches shared byte {highest} but the kernel's shared memory "
                     f"is {layout.total_bytes} bytes{extern_hint}")
    return EmulationResult(accesses=accesses, scale=scale, analysed_ctas=sorted(set(emulated)),
                           unresolved=sorted(findings.unresolved_rows.values(),
                                             key=lambda u: (u["ptx_line"], u["reason"])),
                           shared_layout=layout.variables, sampled=sampled, notes=notes,
                           cta_dependence=list(findings.cta_reasons), steps=state["steps"], weights=weights,
                           classes=classes, emulated_ctas=state["emulated"], covered_ctas=sink.covered,
                           total_ctas=total, partial=partial)


def _padded(block, warp_size: int) -> int:
    threads = block[0] * block[1] * block[2]
    return -(-threads // warp_size) * warp_size


def chunks_of(ctas: np.ndarray, size: int) -> Iterator[np.ndarray]:
    for start in range(0, len(ctas), size):
        yield ctas[start:start + size]


def chunks_of_range(first: int, end: int, size: int) -> Iterator[np.ndarray]:
    """CTA ids first..end-1 in chunks, never materialised at once (a grid may hold 2**38 CTAs)."""
    for start in range(first, end, size):
        yield np.arange(start, min(end, start + size), dtype=np.int64)


def _stream(chunks: Iterator[np.ndarray], run, sink: _Sink, kernel: str, warp_size: int, report,
            of: int) -> None:
    done = 0
    for ctas in chunks:
        current = run(ctas)
        sink.emit(_assemble(kernel, [current], warp_size), 1, len(ctas))
        del current                      # before the next batch is built: one batch in memory at a time
        done += len(ctas)
        report(done, of)


def _classes(grid, run, sink: _Sink, kernel: str, launch: Launch, report, per_chunk: int, total: int
             ) -> list[dict]:
    """Bisect the grid into proved classes (emitting each corner's accesses times its box size), then run
    the CTAs of boxes left unproved one by one."""
    proved: list[dict] = []

    def run_corners(corners: list[tuple[int, int, int]]) -> dict[tuple, CtaRun]:
        ids = np.array([linear(c, grid) for c in corners], dtype=np.int64)
        current = run(ids, watched=True)
        accesses = _assemble(kernel, [current], launch.warp_size)
        runs = {}
        for index, corner in enumerate(corners):
            mine = np.flatnonzero(accesses.cta == ids[index])
            runs[corner] = CtaRun(current.watch.signature(index), accesses.take(mine))
        return runs

    def accept(box: Box, corner: CtaRun) -> None:
        sink.emit(corner.accesses, box.size, box.size)
        if len(proved) < 10_000:
            proved.append({"ctas": box.describe(), "count": box.size, "emulated": linear(box.low, grid)})
        report(sink.covered, total, f"{len(proved):,} CTA classes")

    budget = min(max(CLASS_BUDGET_MIN, total // 4), total)
    result = partition(grid, run_corners, launch.row_bytes, budget, accept, max(8, per_chunk))
    for box in result.left:
        done_before = sink.covered

        def report_left(done: int, of: int, base=done_before) -> None:
            report(base + done, total)
        _stream(box_chunks(box, grid, per_chunk), run, sink, kernel, launch.warp_size, report_left, box.size)
    return proved


def box_chunks(box: Box, grid, size: int) -> Iterator[np.ndarray]:
    """The CTA ids of ``box`` in chunks of at most ``size``, row by row (never all at once)."""
    (x0, y0, z0), (x1, y1, z1) = box.low, box.high
    pending: list[np.ndarray] = []
    count = 0
    for z in range(z0, z1 + 1):
        for y in range(y0, y1 + 1):
            base = grid[0] * (y + grid[1] * z)
            for start in range(x0, x1 + 1, size):
                row = np.arange(base + start, base + min(x1 + 1, start + size), dtype=np.int64)
                while len(row):
                    take = row[:size - count]
                    pending.append(take)
                    count += len(take)
                    row = row[len(take):]
                    if count == size:
                        yield np.concatenate(pending)
                        pending, count = [], 0
    if pending:
        yield np.concatenate(pending)


def _class_notes(classes: list[dict], total: int, emulated: int, covered: int) -> list[str]:
    if not classes:
        return []
    multi = [c for c in classes if c["count"] > 1]
    notes = [f"CTA classes: {len(classes):,} class(es) cover {sum(c['count'] for c in classes):,} of {total:,} "
             f"CTAs; {emulated:,} CTAs emulated in all"]
    for c in sorted(multi, key=lambda c: -c["count"])[:6]:
        notes.append(f"  CTAs {c['ctas']} (x × y × z): {c['count']:,} CTAs counted as CTA {c['emulated']}")
    if multi:
        notes.append("  exact: the CTA index reaches shared addresses and branches only affinely; the corners of "
                     "each class take the same decisions and their shared addresses differ by whole bank rows, "
                     "so every CTA inside does too (README: CTA classes)")
    return notes


def _touches_shared(program) -> bool:
    """Whether any instruction can reach shared memory: one names the shared space, or a generic
    access exists and some ``cvta.shared`` can produce a shared window address for it."""
    rows = [slot.row for slot in program.slots]
    direct = any(shared_access_kind(row["opcode"], row["state_space"]) for row in rows)
    window = any(row["opcode"] == "cvta" and space_of(row) == "shared" and "to" not in (row["modifiers"] or [])
                 for row in rows)
    return direct or (window and any(may_access_shared(row["opcode"], row["state_space"]) for row in rows))


def _assemble(kernel: str, machines: list[Machine], warp_size: int) -> WarpAccesses:
    """One WarpAccesses from every chunk's log, execution ids in emulation order."""
    parts = [(machine, entry) for machine in machines for entry in machine.log]
    if not parts:
        return WarpAccesses.empty(kernel, warp_size)
    counts = np.array([len(entry[0]) for _, entry in parts])
    cta = np.concatenate([machine.cta_of_warp[entry[0]] for machine, entry in parts]).astype(np.int64)
    warp = np.concatenate([machine.warp_of_warp[entry[0]] for machine, entry in parts]).astype(np.int32)

    def per_execution(position: int, dtype) -> np.ndarray:
        return np.repeat(np.array([entry[position] for _, entry in parts], dtype=dtype), counts)

    address = np.concatenate([entry[5] for _, entry in parts]).astype(np.int64)
    return WarpAccesses(kernel, cta, warp, np.arange(len(cta), dtype=np.int64), per_execution(1, np.int32),
                        per_execution(2, np.int8), per_execution(3, np.int16), per_execution(4, np.int8), address)
