"""Memory contents needed per region, not per space: assumed from the first CTA, checked at every access.

The slice (:mod:`.slice`) follows memory flow-insensitively per space: once a needed register comes from a
shared load, every shared store runs with its value, and with ``--data`` every global store does once a global
load is needed.  Kernels keep several arrays in one space, and often only one of them decides anything:
cuda-samples' bitonic sort compares and swaps keys (the comparison guards the swaps) and moves the values along,
and the values only ever go back to an output buffer that nothing reads.  Moving the values is most of the
shared-memory work; none of it reaches a count.

What is assumed, once the first machine (the probe, run with the per-space slice) has run:

* shared memory: the shared accesses that touched overlapping bytes (per-CTA offsets, the probe's log) are one
  *region*; a region's contents are needed only when a needed load reads it.  Every shared instruction must
  have been seen, as a plain load, store or atomic of one space, or nothing is assumed for shared memory;
* global memory (``--data``): a plain store writes no byte of a ``--data`` buffer (the outputs of the
  samples' kernels go through pointers without data), so global loads need no store's value; every store
  must have asked for its :class:`Contents` in the probe.  Where nothing else writes global memory, CTAs then
  cannot communicate through it: a batch runs without the scheduler's checks (``writes_global``).

Under those assumptions the slice is computed again with one memory space per region (and the plain global
stores writing a space nobody reads); what it no longer needs is not done: a load of a region nobody needs
writes nothing, a store to one stores nothing (:class:`Contents`, read by each level's memory instructions).

What is checked, at every access of a machine run so (:func:`check_inside`, :func:`check_nothing_stored`): a
store or atomic whose value may not have been computed (of a region not needed) stays in its region's bytes,
and so does a needed load where such a store exists; a global store left undone would have written no
``--data`` byte, nor made them all unknown through an unknown pointer.  The first access that breaks one
raises :class:`SpeculationFailed`: the scheduler puts back memory and findings, drops that assumption for the
rest of the launch and runs the batch again (``traceconf.emulate.grid``).  So every machine's output is the
per-space slice's, which is the full emulation's.

Why assumed and checked rather than proved before the run: SASS has no arrays, and the two arrays of the sort
are one base plus 0x1000 (``UR5 = UR4 + 0x1000``) indexed by values a loop derives from the thread index;
telling them apart statically takes a range analysis of every address through loops, at both levels, and
anything it could not bound would keep everything.  The check costs two reductions per checked access (and a
gather where the threads not running hold stray addresses); the regions come from what ran.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from traceconf.emulate import taint
from traceconf.emulate.slice import Dependence, Effect, Plan, enabled
from traceconf.emulate.state import extent

SHARED, GLOBAL = "shared", "global"
#: The space plain global stores write under the assumption: no load reads it.
UNREAD_GLOBAL = "global (no --data byte)"


class SpeculationFailed(Exception):
    """An access broke an assumption (``part``: "shared" or "global"); the machine's work is void."""

    def __init__(self, part: str):
        super().__init__(part)
        self.part = part


@dataclass(frozen=True)
class Contents:
    """What one memory instruction does with memory's contents under the assumptions."""

    skip: bool                                  # its load or store of contents is not done: nothing needs it
    bounds: tuple[int, int] | None = None       # shared: [low, high) per-CTA bytes its lanes must stay in
    nothing_stored: bool = False                # a global store left undone: it must write no --data byte


@dataclass(frozen=True)
class Region:
    """Shared bytes [low, high) of a CTA the probe's accesses ``pcs`` touched (overlapping ranges joined)."""

    low: int
    high: int
    pcs: frozenset


def regions_of(hulls: dict[int, tuple[int, int]]) -> list[Region]:
    """The per-instruction ranges ``hulls`` (pc -> [low, high)) joined where they overlap."""
    regions: list[Region] = []
    for pc, (low, high) in sorted(hulls.items(), key=lambda item: item[1]):
        if regions and low < regions[-1].high:
            last = regions[-1]
            regions[-1] = Region(last.low, max(last.high, high), last.pcs | {pc})
        else:
            regions.append(Region(low, high, frozenset({pc})))
    return regions


def probe_hulls(log: list[tuple], pcs_of: dict[int, list[int]]) -> dict[int, tuple[int, int]] | None:
    """Per pc, the bytes [low, high) its logged accesses touched (``Machine.log`` entries: instruction id,
    bytes per lane, matrices, address rows with -1 where a lane did not access); None where an access gave
    row addresses (matrices), whose bytes the log does not bound."""
    hulls: dict[int, tuple[int, int]] = {}
    for entry in log:
        instruction, size, matrices, patterns = entry[1], entry[3], entry[4], entry[5]
        if matrices:
            return None
        accessed = patterns[patterns >= 0]
        if not len(accessed):
            continue
        low, high = int(accessed.min()), int(accessed.max()) + int(size)
        for pc in pcs_of.get(instruction, ()):
            old = hulls.get(pc)
            hulls[pc] = (low, high) if old is None else (min(old[0], low), max(old[1], high))
    return hulls


def _only(effect: Effect, space: str) -> bool:
    """Whether the instruction's memory effect is in ``space`` alone."""
    spaces = effect.reads | effect.writes
    return space in spaces and spaces == {space}


class Speculation:
    """Which plan each machine of a launch runs: the per-space slice until a probe has run, then the finer one
    while its assumptions hold (:meth:`learn`, :meth:`failed`).

    ``slice_of(effects, modelled)``: the level's slice of the flat program (``traceconf.emulate.slice.dependence``
    over its control flow); ``coarse``: its answer per space; ``instructions``: each pc's instruction id (what
    the machines' logs name)."""

    def __init__(self, effects: list[Effect], slice_of: Callable[[list[Effect], frozenset], Dependence],
                 modelled: frozenset, coarse: Dependence, instructions: list[int]):
        self.effects, self.slice_of, self.modelled, self.coarse = effects, slice_of, modelled, coarse
        self.pcs_of: dict[int, list[int]] = {}
        for pc, instruction in enumerate(instructions):
            self.pcs_of.setdefault(instruction, []).append(pc)
        # only contents the per-space slice needs can be spared; under full emulation nothing is
        self.parts = set(coarse.contents & {SHARED, GLOBAL}) if enabled() else set()
        self.current: Plan | None = coarse.plan
        self.regions: list[Region] | None = None
        self.stores: list[int] = []         # the plain global stores (checked to write no --data byte)
        self.only_stores = False            # and nothing else writes global memory
        self.learned = False

    def plan(self) -> Plan | None:
        """The plan the next machine runs."""
        return self.current

    def learn(self, machine) -> None:
        """After the first machine that ran (with the per-space slice): the regions its log shows, and the finer
        plan from then on."""
        if self.learned:
            return
        self.learned = True
        if SHARED in self.parts:
            self.regions = self._shared_regions(machine.log, machine.consulted)
            if self.regions is None:
                self.parts.discard(SHARED)
        if GLOBAL in self.parts:
            writers = [pc for pc, e in enumerate(self.effects) if GLOBAL in e.writes]
            self.stores = [pc for pc in writers if self.effects[pc].writes == {GLOBAL} and not self.effects[pc].reads]
            self.only_stores = len(self.stores) == len(writers)
            if not set(self.stores) <= machine.consulted:
                self.parts.discard(GLOBAL)      # a store the probe did not run, or a reduction (its own path)
        self.current = self._plan()

    def writes_global(self) -> bool:
        """Whether a machine of the current plan may write global memory (False: every instruction that could is a
        plain store left undone, which raises before it would write: CTAs cannot communicate)."""
        return not (self.learned and GLOBAL in self.parts and self.only_stores)

    def failed(self, part: str) -> None:
        """An access broke the ``part`` assumption: it is dropped for the rest of the launch."""
        self.parts.discard(part)
        self.current = self._plan()

    def _shared_regions(self, log: list[tuple], consulted: set[int]) -> list[Region] | None:
        """The regions of the probe's shared accesses (``log``), when every shared instruction is a plain access
        of shared memory that the probe ran and that asks for its :class:`Contents` (``consulted``: those that
        asked); else None."""
        shared = {pc for pc, e in enumerate(self.effects) if SHARED in e.reads | e.writes}
        if any(not _only(self.effects[pc], SHARED) for pc in shared) or not shared <= consulted:
            return None             # a generic access, a copy between spaces, one whose contents are not checked
        hulls = probe_hulls(log, self.pcs_of)
        if hulls is None or set(hulls) != shared:
            return None             # an instruction the probe did not run (or whose bytes it cannot bound)
        return regions_of(hulls)

    def _plan(self) -> Plan | None:
        if not self.parts:
            return self.coarse.plan
        effects, modelled = list(self.effects), set(self.modelled)
        region_of: dict[int, Region] = {}
        if SHARED in self.parts:
            for number, region in enumerate(self.regions):
                key = f"{SHARED} {number}"
                modelled.add(key)
                for pc in region.pcs:
                    region_of[pc] = region
                    effect = effects[pc]
                    effects[pc] = replace(effect, reads=_renamed(effect.reads, SHARED, key),
                                          writes=_renamed(effect.writes, SHARED, key))
        stores = self.stores if GLOBAL in self.parts else []
        for pc in stores:
            effects[pc] = replace(effects[pc], writes=frozenset({UNREAD_GLOBAL}))
        fine = self.slice_of(effects, frozenset(modelled))
        if fine.kept == self.coarse.kept and fine.needed == self.coarse.needed:
            self.parts.clear()      # nothing more to spare: no checks
            return self.coarse.plan
        contents: list[Contents | None] = [None] * len(effects)
        # a shared store left undone, or an atomic whose operands nothing needs, leaves wrong bytes in its region
        wrong = any(effects[pc].writes and not fine.needed[pc] for pc in region_of)
        for pc, region in region_of.items():
            contents[pc] = _shared_contents(effects[pc], fine.needed[pc], (region.low, region.high) if wrong else None)
        for pc in stores:
            contents[pc] = Contents(skip=True, nothing_stored=True)
        return Plan.of(list(fine.kept), tuple(contents))


def _renamed(spaces: frozenset, old: str, new: str) -> frozenset:
    return spaces - {old} | {new} if old in spaces else spaces


def _shared_contents(effect: Effect, needed: bool, bounds: tuple[int, int] | None) -> Contents:
    """A load nobody needs is not done; a needed one stays in its region (the only bytes kept right); a store
    is done where its value is needed, else not, and stays in its region (it would have changed no other);
    an atomic is always done (its old value, perhaps needed, is its own) and stays in its region.  ``bounds``
    None: nothing leaves wrong bytes anywhere, so nothing needs to stay in its region."""
    reads, writes = bool(effect.reads), bool(effect.writes)
    if reads and writes:
        return Contents(skip=False, bounds=bounds)
    if reads:
        return Contents(skip=not needed, bounds=bounds if needed else None)
    return Contents(skip=not needed, bounds=None if needed else bounds)


def check_inside(bounds: tuple[int, int], offsets: np.ndarray, size: int,
                 running: Callable[[], np.ndarray | None],
                 extent_of: Callable[[np.ndarray], tuple[int, int]] = extent) -> None:
    """Raise :class:`SpeculationFailed` unless the ``size``-byte accesses at ``offsets`` of the running threads
    (``running()``: their indices, None: every thread) lie in ``bounds`` ([low, high) per-CTA bytes).
    ``extent_of(offsets)``: their smallest and largest (:func:`~traceconf.emulate.state.extent`; a machine's
    remembers it per array)."""
    low, high = bounds
    first, last = extent_of(offsets)
    if first >= low and last + size <= high:
        return
    threads = running()
    if threads is not None:
        offsets = offsets[threads]      # the threads not running may hold any address
        if not len(offsets):
            return
        first, last = extent(offsets)
        if first >= low and last + size <= high:
            return
    raise SpeculationFailed(SHARED)


def check_nothing_stored(memory, lanes: np.ndarray, address: np.ndarray, bits: np.ndarray, size: int) -> None:
    """Raise :class:`SpeculationFailed` if a global store left undone would have changed a ``--data`` buffer
    (``memory``: the launch's GlobalContents) in one of ``lanes``: written a byte of one, or, through an address
    unknown for another reason than a pointer without data, made them all unknown."""
    bits = np.asarray(bits)
    if (lanes & ((bits & taint.WILD) != 0)).any():
        raise SpeculationFailed(GLOBAL)
    known = lanes & ((bits & taint.UNKNOWN) == 0)
    if not known.any():
        return
    which, offset = memory.owner(address)
    for index, buffer in enumerate(memory.buffers):
        if (known & (which == index) & (offset + size > 0) & (offset < len(buffer.data))).any():
            raise SpeculationFailed(GLOBAL)
