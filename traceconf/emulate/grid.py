"""Which CTAs of a launch run, in which batches, and what their counts stand for.

One scheduler for every level: the PTX and the SASS emulators each set up
their machine (:class:`Emulator`) and hand it to :func:`run_grid`.

Which CTAs run
--------------
CTA 0 runs first (the *probe*) while the emulator watches for dependence on
the CTA index (:data:`taint.CTA_ANY`) in a shared address, in the guard of a
shared access, or in a branch condition.  Without any, every CTA executes
the same shared accesses at the same addresses, so CTA 0's counts times the
number of CTAs are exact (``scale`` = number of CTAs).  Otherwise:

* ``Launch.ctas`` < CTAs: that many CTAs spread evenly over the grid, a
  stated sample (``sampled`` = (analysed, total)).
* else, where the level can prove them (:mod:`.classes`), CTA classes: the
  grid is split into boxes whose CTAs provably count alike; one corner of
  each runs and stands for the box.  Boxes the budget could not prove run CTA
  by CTA.  CTA 0 is a corner of the grid, run watched in the first batch of
  the search: when the launch will take this way, the probe stops at its
  first use of the CTA index, its findings put back, and CTA 0 runs once.
* else every CTA runs (``scale`` = 1).  CTAs that may share written global
  memory (``--data``, a kernel that stores to it) run as in launch order: one
  of the hardware's schedules, and a lock one CTA takes is released before
  the next runs.  They still run in wide batches: a batch whose CTAs touch
  no global bytes another CTA of it wrote is launch order already; one that
  does is detected at run time, undone and run in halves (``_Runner.batch``).

Machines run the plan ``Emulator.speculation`` gives (:mod:`.speculation`: memory contents kept per region,
assumed from the first machine that ran); one whose accesses break what it assumed stops, its findings, buffers
and steps put back, and its CTAs run again without the assumption.  Where the plan writes no global memory at
all, a batch's CTAs cannot communicate and need no per-byte marks (``_Runner.batch``).

Memory and time
---------------
Batches of CTAs (at most ``CHUNK_THREADS`` threads and ``BATCH_EXECUTIONS``
logged warp executions) run one at a time; each batch's accesses go to
``consume(accesses, weight)`` (``weight``: CTAs each execution stands for) and
are dropped, so memory does not grow with the grid.  Without ``consume`` the
accesses are kept in the outcome (tests, small launches).  The limits
(:class:`~traceconf.emulate.launch.Limits`) are checked inside the machine and
between batches: the work budget (warp steps the machines count; the
default, so that a result never depends on the machine's load), and the
memory and opt-in wall-clock limits; reaching one ends the run cleanly with
what was counted so far and ``partial`` saying why.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

from traceconf.accesses import AddressPatterns, WarpAccesses
from traceconf.emulate.classes import Box, CtaRun, Watch, linear, partition, whole_grid
from traceconf.emulate.contents import CrossCtaTraffic, GlobalContents
from traceconf.emulate.launch import Launch, LimitReached, Limits
from traceconf.emulate.speculation import Speculation, SpeculationFailed

#: Threads emulated together when several CTAs must run (bounds memory, keeps numpy arrays large: an
#: instruction's fixed cost, ~0.1 ms for a guarded shared load, is spread over its lanes).
CHUNK_THREADS = 1 << 15
#: Warp executions one batch may log (the probe CTA's count sets the CTAs per batch): 128 MiB of addresses.
BATCH_EXECUTIONS = 1 << 19
#: Shared bytes whose contents one batch keeps (they and their taints stay in a core's L2 cache: histogram256,
#: 7 KiB a CTA, took 5-7 % more CPU at 170 CTAs a batch than at 85).
BATCH_SHARED_BYTES = 640 << 10
#: CTAs the class search may emulate before the rest of the grid runs CTA by CTA: a quarter of the grid,
#: at least this many.
CLASS_BUDGET_MIN = 64
#: Grids up to this many CTAs run CTA by CTA (the class search would not save anything).
CLASS_MIN_CTAS = 8
#: Emulated CTA ids listed in the outcome (the count is always exact).
LISTED_CTAS = 100_000
#: Proved classes listed in the outcome (their CTAs are always counted).
LISTED_CLASSES = 10_000

Consume = Callable[[WarpAccesses, int], None]
Progress = Callable[..., None]     # (done, total[, note]): CTAs covered so far, of the grid


@dataclass
class Emulator:
    """What one level's set-up hands the scheduler."""

    kernel: str
    warp_size: int
    block: tuple[int, int, int]
    grid: tuple[int, int, int]
    #: a machine over these CTA ids (watch: the class bookkeeping, or None), not yet run
    machine: Callable[[np.ndarray, Watch | None], object]
    findings: object                 # simt.Findings shared by every machine of the launch
    #: per slot, what the class watch checks (None: this level or launch cannot prove classes)
    checks: list | None = None
    #: the --data buffers of a kernel that writes global memory: CTAs may communicate through them, so they run
    #: as in launch order (batches checked at run time, see :meth:`_Runner.batch`) and without classes
    communicating: GlobalContents | None = None
    #: which plan the machines run (:class:`~traceconf.emulate.speculation.Speculation`: it learns from the first
    #: machine that ran, and a machine whose assumptions broke runs again without them); None: the one made
    speculation: Speculation | None = None

    @property
    def serial(self) -> bool:
        return self.communicating is not None


@dataclass
class GridOutcome:
    accesses: WarpAccesses               # every access when no ``consume`` was given, else empty
    weights: np.ndarray | None           # per execution of ``accesses``: the CTAs it stands for
    scale: int | None                    # every execution stands for this many CTAs (None: see weights)
    sampled: tuple[int, int] | None
    classes: list[dict]                  # {"ctas", "count", "emulated"} per proved class (first LISTED_CLASSES)
    class_count: int                     # proved classes in all
    analysed_ctas: list[int]             # CTAs emulated (the first LISTED_CTAS)
    emulated_ctas: int
    covered_ctas: int                    # CTAs the counts stand for (== total unless sampled or partial)
    total_ctas: int
    partial: str | None                  # why the run stopped early (None: it did not)
    steps: int
    work: int                            # warp steps spent, as the work limit counts them
    unresolved: Counter                  # (instruction, reason) → executions left out, weighted like the counts


class _Sink:
    """Where batches go: the consumer, or a list kept for the outcome; counts the CTAs covered."""

    def __init__(self, consume: Consume | None, kernel: str, warp_size: int):
        self.consume, self.kernel, self.warp_size = consume, kernel, warp_size
        self.parts: list[tuple[WarpAccesses, int]] = []
        self.covered = 0
        self.unresolved: Counter = Counter()

    def emit(self, accesses: WarpAccesses, weight: int, ctas: int, unresolved: Counter) -> None:
        self.covered += ctas
        for key, count in unresolved.items():
            self.unresolved[key] += count * weight
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


class _Runner:
    """Runs batches of CTAs under the limits and keeps the bookkeeping of one launch."""

    def __init__(self, emulator: Emulator, limits: Limits, sink: _Sink, progress: Progress | None):
        self.emulator, self.limits, self.sink, self.progress = emulator, limits, sink, progress
        self.listed: list[int] = []
        self.emulated = 0
        self.steps = 0
        self.padded = padded_threads(emulator.block, emulator.warp_size)

    def run(self, ctas: np.ndarray, watched: bool = False):
        """One batch, run to its end; a limit reached inside it counts what ran so far and goes on up.  A machine
        that broke an assumption of the speculation leaves nothing behind and the batch runs again without it."""
        while True:
            try:
                return self.attempt(ctas, watched)
            except SpeculationFailed as failure:
                self.emulator.speculation.failed(failure.part)

    def attempt(self, ctas: np.ndarray, watched: bool = False):
        """:meth:`run` once: raises :class:`SpeculationFailed` with the findings, the written --data buffers and
        the bookkeeping as they were (the work limit counts the steps of the runs that stand)."""
        self.limits.check()
        ctas = np.asarray(ctas, dtype=np.int64)
        checks = self.emulator.checks
        machine = self.emulator.machine(ctas, Watch(checks, len(ctas), self.padded) if watched and checks else None)
        machine.limits = self.limits
        undo = self._undo() if getattr(machine, "contents_plan", None) is not None else None
        self.emulated += len(ctas)
        if len(self.listed) < LISTED_CTAS:
            self.listed.extend(ctas[:LISTED_CTAS - len(self.listed)].tolist())
        void = False
        try:
            machine.run()
        except LimitReached:
            # the CTAs of this batch did not finish: their accesses so far are counted, the CTAs are not
            self.sink.emit(assemble(self.emulator.kernel, [machine], self.emulator.warp_size), 1, 0,
                           unresolved_of(machine))
            raise
        except SpeculationFailed:
            void = True
            undo()
            raise
        finally:
            if not void:
                self.steps += machine.steps
                self.limits.spend(machine.steps, machine.size // self.emulator.warp_size)
        if self.emulator.speculation is not None:
            self.emulator.speculation.learn(machine)
        return machine

    def _undo(self) -> Callable[[], None]:
        """What puts the findings, the --data buffers a machine may write, and the runner's bookkeeping back as
        they are now."""
        memory, findings = self.emulator.communicating, self.emulator.findings
        if memory is not None and not self.emulator.speculation.writes_global():
            memory = None                   # no machine of the plan writes them
        saved, found = memory.saved() if memory is not None else None, findings.saved()
        emulated, listed = self.emulated, len(self.listed)

        def undo():
            if memory is not None:
                memory.restore(saved)
            findings.restore(found)
            self.emulated = emulated
            del self.listed[listed:]
        return undo

    def probe(self, stop_at_cta: bool):
        """CTA 0, run first (the probe).  ``stop_at_cta``: CTA classes will be searched if it meets the CTA index,
        and their search runs CTA 0 again, watched, as a corner: the probe then stops at the first use of the CTA
        index, the findings are put back as they were, and None is returned."""
        if not stop_at_cta:
            return self.run(np.array([0]))
        findings = self.emulator.findings
        saved = findings.saved()
        findings.on_cta_dependence = _stop_probe
        try:
            return self.run(np.array([0]))
        except _CtaDependence:
            findings.restore(saved)
            self.emulated, self.listed = 0, []
            return None
        finally:
            findings.on_cta_dependence = None

    def per_chunk(self, logged: int, shared_bytes: int = 0) -> int:
        """CTAs per batch: at most ``CHUNK_THREADS`` threads, ``BATCH_EXECUTIONS`` logged warp executions if
        each CTA logs as many as CTA 0 did (``logged``), and ``BATCH_SHARED_BYTES`` of shared contents
        (``shared_bytes`` a CTA)."""
        return max(1, min(CHUNK_THREADS // self.padded, BATCH_EXECUTIONS // max(1, logged),
                          BATCH_SHARED_BYTES // max(1, shared_bytes)))

    def report(self, done: int, of: int, note: str | None = None) -> None:
        if self.progress:
            self.progress(done, of) if note is None else self.progress(done, of, note)

    def batch(self, ctas: np.ndarray) -> list:
        """The machines that ran ``ctas`` as in launch order.  Where CTAs may communicate through global
        memory, the batch runs together while none of its CTAs touches global bytes another one wrote
        (:class:`~traceconf.emulate.contents.GlobalContents` checks every access); at the first that does,
        memory and findings are put back and the two halves run one after the other, each checked alike."""
        memory, speculation = self.emulator.communicating, self.emulator.speculation
        if memory is None or len(ctas) == 1:
            return [self.run(ctas)]
        # no machine of the plan writes global memory (speculation): no copy to put back, no reads to mark
        inert = speculation is not None and not speculation.writes_global()
        saved, found = None if inert else memory.saved(), self.emulator.findings.saved()
        try:
            memory.watch(np.repeat(np.arange(len(ctas)), self.padded), reads=not inert)  # each lane's CTA
            try:
                return [self.attempt(ctas) if inert else self.run(ctas)]
            finally:
                memory.watch(None)
        except SpeculationFailed as failure:        # (an inert attempt's: it put back what it did)
            speculation.failed(failure.part)
            return self.batch(ctas)
        except CrossCtaTraffic:
            if saved is not None:
                memory.restore(saved)
            self.emulator.findings.restore(found)
            self.emulated -= len(ctas)
            half = len(ctas) // 2
            return self.batch(ctas[:half]) + self.batch(ctas[half:])

    def stream(self, chunks: Iterator[np.ndarray], of: int, done: int = 0) -> None:
        """Run ``chunks`` one after the other, each counted and dropped before the next is built."""
        for ctas in chunks:
            machines = self.batch(ctas)
            self.sink.emit(assemble(self.emulator.kernel, machines, self.emulator.warp_size), 1, len(ctas),
                           sum((unresolved_of(machine) for machine in machines), Counter()))
            del machines
            done += len(ctas)
            self.report(done, of)


def run_grid(emulator: Emulator, launch: Launch, progress: Progress | None = None,
             consume: Consume | None = None) -> GridOutcome:
    """Run the launch (see the module's docstring); ``emulator.findings`` holds what the machines found."""
    grid, warp_size = emulator.grid, emulator.warp_size
    total = grid[0] * grid[1] * grid[2]
    sink = _Sink(consume, emulator.kernel, warp_size)
    runner = _Runner(emulator, Limits(launch.time_limit, launch.memory_limit, launch.work_limit), sink, progress)
    scale, sampled, classes, class_count, partial = None, None, [], 0, None
    findings = emulator.findings
    sampling = launch.ctas is not None and launch.ctas < total
    by_classes = not sampling and emulator.checks is not None and not emulator.serial and launch.classes \
        and total > CLASS_MIN_CTAS
    try:
        probe = runner.probe(stop_at_cta=by_classes)
        if probe is None:            # CTA 0 met the CTA index: the class search runs it, watched, as a corner
            classes, class_count = _classes(grid, runner, launch, total)
        elif not findings.cta_reasons or total == 1:
            scale = total
            sink.emit(assemble(emulator.kernel, [probe], warp_size), total, total, unresolved_of(probe))
            runner.report(1, 1)
        elif sampling:
            per_chunk = runner.per_chunk(sum(len(entry[0]) for entry in probe.log), probe.contents_bytes())
            chosen = np.unique(np.linspace(0, total - 1, max(1, int(launch.ctas))).round().astype(np.int64))
            sampled = (len(chosen), total)
            if chosen[0] == 0:       # the probe is CTA 0 of the sample
                sink.emit(assemble(emulator.kernel, [probe], warp_size), 1, 1, unresolved_of(probe))
                chosen = chosen[1:]
            del probe
            runner.stream(chunks_of(chosen, per_chunk), sampled[0], sampled[0] - len(chosen))
        else:
            per_chunk = runner.per_chunk(sum(len(entry[0]) for entry in probe.log), probe.contents_bytes())
            sink.emit(assemble(emulator.kernel, [probe], warp_size), 1, 1, unresolved_of(probe))
            del probe
            runner.stream(chunks_of_range(1, total, per_chunk), total, 1)
    except LimitReached as stop:
        partial = stop.reason
    accesses, weights = sink.kept()
    if scale is None and sampled is None and not class_count:
        scale = 1                    # every CTA ran (or the run stopped part-way: ``partial`` says so)
    return GridOutcome(accesses=accesses, weights=weights, scale=scale, sampled=sampled, classes=classes,
                       class_count=class_count, analysed_ctas=sorted(set(runner.listed)),
                       emulated_ctas=runner.emulated, covered_ctas=sink.covered, total_ctas=total,
                       partial=partial, steps=runner.steps, work=runner.limits.work,
                       unresolved=sink.unresolved)


class _CtaDependence(Exception):
    """The probe met the CTA index where the class search will run CTA 0 again (:meth:`_Runner.probe`)."""


def _stop_probe() -> None:
    raise _CtaDependence


def padded_threads(block, warp_size: int) -> int:
    threads = block[0] * block[1] * block[2]
    return -(-threads // warp_size) * warp_size


def chunks_of(ctas: np.ndarray, size: int) -> Iterator[np.ndarray]:
    for start in range(0, len(ctas), size):
        yield ctas[start:start + size]


def chunks_of_range(first: int, end: int, size: int) -> Iterator[np.ndarray]:
    """CTA ids first..end-1 in chunks, never materialised at once (a grid may hold 2**38 CTAs)."""
    for start in range(first, end, size):
        yield np.arange(start, min(end, start + size), dtype=np.int64)


def _classes(grid, runner: _Runner, launch: Launch, total: int) -> tuple[list[dict], int]:
    """Bisect the grid into proved classes (emitting each corner's accesses times its box size), then run
    the CTAs of boxes left unproved one batch at a time.  The grid's corners run first, CTA 0 among them: its
    executions size the batches, as the probe's do elsewhere."""
    emulator, sink = runner.emulator, runner.sink
    proved: list[dict] = []
    count = [0]

    def run_corners(corners: list[tuple[int, int, int]]) -> dict[tuple, CtaRun]:
        ids = np.array([linear(c, grid) for c in corners], dtype=np.int64)
        machine = runner.run(ids, watched=True)
        accesses = assemble(emulator.kernel, [machine], emulator.warp_size)
        runs = {}
        for index, corner in enumerate(corners):
            mine = np.flatnonzero(accesses.cta == ids[index])
            runs[corner] = CtaRun(machine.watch.signature(index), accesses.take(mine),
                                  unresolved_of(machine, ids[index]), machine.watch.decisions(index))
        return runs

    def accept(box: Box, corner: CtaRun) -> None:
        sink.emit(corner.accesses, box.size, box.size, corner.unresolved)
        count[0] += 1
        if len(proved) < LISTED_CLASSES:
            proved.append({"ctas": box.describe(), "count": box.size, "emulated": linear(box.low, grid)})
        runner.report(sink.covered, total, f"{count[0]:,} CTA classes")

    first = run_corners(whole_grid(grid).corners())
    per_chunk = runner.per_chunk(len(first[(0, 0, 0)].accesses))
    budget = min(max(CLASS_BUDGET_MIN, total // 4), total)
    result = partition(grid, run_corners, launch.row_bytes, budget, accept, max(8, per_chunk), first)
    for box in result.left:
        runner.stream(box_chunks(box, grid, per_chunk), total, sink.covered)
    return proved, count[0]


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


def outcome_notes(outcome: GridOutcome, cta_reasons: list[str]) -> list[str]:
    """What the counts stand for, in words: CTA dependence, classes, a stop at a limit."""
    notes = list(cta_reasons and ["shared accesses depend on the CTA index (" + "; ".join(cta_reasons[:3]) + ")"])
    if outcome.class_count:
        multi = [c for c in outcome.classes if c["count"] > 1]
        notes.append(f"CTA classes: {outcome.class_count:,} class(es) cover "
                     f"{sum(c['count'] for c in outcome.classes):,} of {outcome.total_ctas:,} CTAs; "
                     f"{outcome.emulated_ctas:,} CTAs emulated in all")
        for c in sorted(multi, key=lambda c: -c["count"])[:6]:
            notes.append(f"  CTAs {c['ctas']} (x × y × z): {c['count']:,} CTAs counted as CTA {c['emulated']}")
        if multi:
            notes.append("  exact: the CTA index reaches shared addresses and branches only affinely; the corners "
                         "of each class take the same decisions and their shared addresses differ by whole bank "
                         "rows, so every CTA inside does too (README: CTA classes)")
    if outcome.partial:
        notes.append(f"partial: {outcome.partial}; counts cover {outcome.covered_ctas:,} of {outcome.total_ctas:,} "
                     "CTAs" + ("" if outcome.covered_ctas else " (the first CTA did not finish: its accesses so far)")
                     + ("; --ctas N analyses a stated sample of N CTAs instead" if outcome.total_ctas > 1 else ""))
    return notes


def unresolved_of(machine, cta: int | None = None) -> Counter:
    """The executions ``machine`` left out as unresolved, per (instruction, reason): of one CTA, or of all."""
    counts: Counter = Counter()
    for key, ctas in machine.unresolved_log:
        counts[key] += len(ctas) if cta is None else int(np.count_nonzero(ctas == cta))
    return counts


def assemble(kernel: str, machines: list, warp_size: int) -> WarpAccesses:
    """One WarpAccesses from every machine's log, execution ids in emulation order; addresses as the log holds
    them, :class:`~traceconf.accesses.AddressPatterns` (built when read)."""
    parts = [(machine, entry) for machine in machines for entry in machine.log]
    if not parts:
        return WarpAccesses.empty(kernel, warp_size)
    counts = np.array([len(entry[0]) for _, entry in parts])
    # each machine's warps of its executions, looked up at once (not entry by entry: hundreds per machine)
    logged = [machine for machine in machines if machine.log]
    warps = [np.concatenate([entry[0] for entry in machine.log]) for machine in logged]
    cta = np.concatenate([machine.cta_of_warp[w] for machine, w in zip(logged, warps)]).astype(np.int64)
    warp = np.concatenate([machine.warp_of_warp[w] for machine, w in zip(logged, warps)]).astype(np.int32)

    def per_execution(position: int, dtype) -> np.ndarray:
        return np.repeat(np.array([entry[position] for _, entry in parts], dtype=dtype), counts)

    rows = [entry[5] for _, entry in parts]
    starts = np.cumsum([0] + [len(r) for r in rows[:-1]])
    index = [entry[6] for _, entry in parts]
    patterns = AddressPatterns(np.concatenate(rows).astype(np.int64, copy=False),
                               np.concatenate(index) + np.repeat(starts, [len(i) for i in index]),
                               np.concatenate([entry[7] for _, entry in parts]))

    def per_lane(position: int, dtype) -> np.ndarray | None:
        """Copies' global sources (9) or src-sizes (10), where an instruction logged them; -1 elsewhere."""
        if all(entry[position] is None for _, entry in parts):
            return None
        return np.concatenate([np.full((len(entry[0]), warp_size), -1, dtype) if entry[position] is None
                               else entry[position] for _, entry in parts]).astype(dtype, copy=False)
    return WarpAccesses(kernel, cta, warp, np.arange(len(cta), dtype=np.int64), per_execution(1, np.int32),
                        per_execution(2, np.int8), per_execution(3, np.int16), per_execution(4, np.int8), None,
                        per_execution(8, np.int8), per_lane(9, np.int64), per_lane(10, np.int16), patterns)
