"""Emulate only what the counts depend on: a dependence slice of the flat program, for both levels.

What a launch reports (per-instruction wavefronts, unresolved reasons, notes, CTA classes, errors) comes from
a few kinds of instruction: shared-memory (and generic) accesses, control transfers and barriers, the
comparisons whose signs prove CTA classes, and, with ``--data``, every global access (they serve the buffers,
raise the out-of-bounds errors and write the unserved notes).  Everything those read, transitively, must run
as well: the instructions whose write of a register they read may reach them (reaching definitions over the
control-flow graph: SASS reuses physical registers, so "every writer of the register" would keep most of a
kernel), and, when a loaded register is needed, every store to the memory it comes from (flow-insensitively),
with the values stored.  The rest writes only registers nobody needs and memory nobody reads: it is not
executed.

Control dependence needs no analysis of its own because every control transfer is kept (with the registers
its condition reads), and that is what identical output needs: a branch whose condition depends on the CTA
index is reported ("shared accesses depend on the CTA index") and its comparison's sign decides the CTA
classes, and one whose condition is unknown stops or explores, even where nothing after it depends on it.
So a loop whose body has nothing kept still counts its trips, but only with the instructions its exit test
reads (a grid-stride loop's counter, compare and branch).  Conservative everywhere it is unsure: an instruction an instruction set's facts mark ``seed`` (an
opcode it does not know, a memory effect it cannot place) always runs, and a store with a guard runs whenever
any memory contents are needed (an unknown guard makes every modelled memory unknown).

One fact is not a register or memory: the pointer parameters a global load without ``--data`` reads through,
which the reasons of a value loaded from memory name (``Findings.why``).  They matter only when a needed
register can hold loaded data; then every such load is kept too.

Each instruction set describes its instructions as :class:`Effect` (PTX: ``traceconf.emulate.regions``,
SASS: ``traceconf.sass.dataflow``); :func:`plan` does the rest, and :meth:`traceconf.emulate.simt.Machine.run`
jumps over what is not kept.  ``TRACECONF_FULL_EMULATION=1`` runs every instruction (the differential tests
compare both).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: Environment switch: set to 1, every instruction is emulated (the reference the sliced run must equal).
FULL_EMULATION = "TRACECONF_FULL_EMULATION"


@dataclass(frozen=True)
class Effect:
    """What one instruction reads and writes, as the slice needs it."""

    defs: frozenset = frozenset()       # registers it may write
    kills: frozenset | None = None      # registers it surely overwrites when it runs unguarded (None: ``defs``)
    values: frozenset = frozenset()     # registers read as data: needed only when what it writes is needed
    places: frozenset = frozenset()     # registers read whenever it runs (address, guard, condition)
    reads: frozenset = frozenset()      # memory spaces whose contents flow into ``defs``
    writes: frozenset = frozenset()     # memory spaces it may change (``values`` flow there)
    seed: bool = False                  # runs whatever it writes (accesses, control, decisions, the unknown)
    loaded: bool = False                # ``defs`` may hold data loaded from memory
    names_pointers: bool = False        # a global load without --data: notes the pointers it reads through
    guarded: bool = False


@dataclass(frozen=True)
class Plan:
    """Which instructions run: ``follow[pc]`` is the first kept pc at or after ``pc`` (``len``: the end); and,
    under :mod:`.speculation`'s assumptions, what each memory instruction does with memory's contents
    (``contents[pc]``: a :class:`~traceconf.emulate.speculation.Contents`, None: all it does; ``contents``
    None: every instruction all it does)."""

    kept: tuple
    follow: tuple
    contents: tuple | None = None

    @classmethod
    def of(cls, kept: list[bool], contents: tuple | None = None) -> "Plan":
        follow = [len(kept)] * (len(kept) + 1)
        for index in range(len(kept) - 1, -1, -1):
            follow[index] = index if kept[index] else follow[index + 1]
        return cls(kept=tuple(kept), follow=tuple(follow[:-1]), contents=contents)

    @property
    def skipped(self) -> int:
        return self.kept.count(False)


@dataclass(frozen=True)
class Dependence:
    """What a launch's counts depend on: per instruction whether it runs (``kept``) and whether what it writes is
    needed (``needed``), and the memory spaces whose contents are needed (``contents``)."""

    kept: tuple
    needed: tuple
    contents: frozenset

    @property
    def plan(self) -> Plan | None:
        """The instructions a launch runs (None: all of them, by :data:`FULL_EMULATION` or because every one is
        kept)."""
        return None if not enabled() or all(self.kept) else Plan.of(list(self.kept))

    def needed_registers(self, effects: list[Effect]) -> frozenset:
        """Registers some instruction whose writes are needed writes: a result outside them reaches no address,
        condition, decision or needed memory, so computing it (or reading memory for it) is wasted."""
        return frozenset(register for effect, needed in zip(effects, self.needed) if needed
                         for register in effect.defs)


def enabled() -> bool:
    return os.environ.get(FULL_EMULATION, "") in ("", "0")


class ReachingDefinitions:
    """Which instructions' writes of a register may reach an instruction (bit sets over (instruction,
    register) write sites, iterated to a fixed point).  A guarded write leaves the old value where its guard
    fails, so it kills nothing.  ``successors[i]``: what may run after ``i`` (``>= len``: the thread leaves),
    with an edge from every branch to where its sides meet again (``rejoin``): lanes whose direction is
    unknown go there with the values they had at the branch (:mod:`traceconf.emulate.regions`)."""

    def __init__(self, effects: list[Effect], successors: list[list[int]]):
        count = len(effects)
        self.site_instruction: list[int] = []
        self.sites_of: dict[str, int] = {}
        gen = []
        for index, effect in enumerate(effects):
            bits = 0
            for register in sorted(effect.defs):
                site = 1 << len(self.site_instruction)
                self.site_instruction.append(index)
                self.sites_of[register] = self.sites_of.get(register, 0) | site
                bits |= site
            gen.append(bits)
        kill = [0 if effect.guarded else sum_bits(self.sites_of[r] for r in _kills(effect)) & ~gen[index]
                for index, effect in enumerate(effects)]
        predecessors: list[list[int]] = [[] for _ in range(count)]
        for index, following in enumerate(successors):
            for target in set(following):
                if target < count:
                    predecessors[target].append(index)
        self.reaching = [0] * count
        out = [0] * count
        changed = True
        while changed:
            changed = False
            for index in range(count):
                incoming = 0
                for source in predecessors[index]:
                    incoming |= out[source]
                self.reaching[index] = incoming
                new = gen[index] | (incoming & ~kill[index])
                if new != out[index]:
                    out[index] = new
                    changed = True

    def writers(self, index: int, register: str) -> list[int]:
        """The instructions whose write of ``register`` may be what ``index`` reads."""
        bits = self.reaching[index] & self.sites_of.get(register, 0)
        found = []
        while bits:
            low = bits & -bits
            found.append(self.site_instruction[low.bit_length() - 1])
            bits ^= low
        return found


def _kills(effect: Effect) -> frozenset:
    return effect.defs if effect.kills is None else effect.kills & effect.defs


def sum_bits(masks) -> int:
    total = 0
    for mask in masks:
        total |= mask
    return total


def kept_instructions(effects: list[Effect], flow: ReachingDefinitions, modelled: frozenset,
                      extra_seeds: frozenset = frozenset()) -> Dependence:
    """Per instruction whether it runs and whether what it writes is needed, and the memory spaces whose contents
    are needed, for ``modelled`` memory spaces (those whose contents the emulator keeps: a store elsewhere never
    changes what a load returns)."""
    stores: dict[str, list[int]] = {}
    for index, effect in enumerate(effects):
        for space in effect.writes:
            stores.setdefault(space, []).append(index)
    kept = [False] * len(effects)
    with_values = [False] * len(effects)
    contents: set = set()
    todo: list[tuple[int, bool]] = [(i, False) for i, e in enumerate(effects) if e.seed or i in extra_seeds]
    while todo:
        index, values = todo.pop()
        effect = effects[index]
        if kept[index] and (with_values[index] or not values):
            continue
        fresh = set() if kept[index] else set(effect.places)
        kept[index] = True
        if values:
            with_values[index] = True
            fresh |= effect.values
            spaces = effect.reads & modelled - contents
            if spaces:
                if not contents:
                    # the first contents needed: a store with a guard may make every modelled memory unknown
                    todo.extend((i, False) for i, e in enumerate(effects) if e.writes and e.guarded)
                contents.update(spaces)
                for space in spaces:
                    todo.extend((store, True) for store in stores.get(space, ()))
        for register in fresh:
            todo.extend((writer, True) for writer in flow.writers(index, register))
    return Dependence(kept=tuple(kept), needed=tuple(with_values), contents=frozenset(contents))


def dependence(effects: list[Effect], successors: list[list[int]], modelled: frozenset) -> Dependence:
    """What a launch's counts depend on (its :attr:`~Dependence.plan`: the instructions it must run);
    ``successors`` as :class:`ReachingDefinitions` takes them."""
    flow = ReachingDefinitions(effects, successors)
    found = kept_instructions(effects, flow, modelled)
    if any(needed and e.loaded for needed, e in zip(found.needed, effects)):
        pointers = frozenset(i for i, e in enumerate(effects) if e.names_pointers)
        if pointers:
            found = kept_instructions(effects, flow, modelled, pointers)
    return found
