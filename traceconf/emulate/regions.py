"""Control-flow facts of the flat program: successors, post-dominators, branch regions.

A branch whose condition is unknown for some lanes (it depends on data the
emulator does not have) is explored soundly instead of guessed: those lanes
skip straight to the branch's *reconvergence point* (its immediate
post-dominator, where both sides meet again), and everything the region in
between could have done to them is made unknown — every register any
instruction of the region writes, the carry flag, and shared (or global)
memory contents when the region stores to it.  The region's shared accesses
are reported as unresolved for those lanes' warps.  What the unknown cannot
touch keeps being counted exactly after the reconvergence point.

The lowest-PC scheduler of :mod:`.simt` makes this sound only when the whole
region lies below its reconvergence point (then every lane of a warp that
follows a real path through the region gets there before the skipping lanes
go on); :func:`branch_region` returns None otherwise, and the lanes stop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from traceconf.emulate.operands import register_key, split_destinations
from traceconf.emulate.program import Program, Slot
from traceconf.emulate.slice import Effect
from traceconf.emulate.spaces import space_of
from traceconf.ptx.opcodes import LOAD_OPCODES, MEMORY_WRITE_OPCODES, STORE_OPCODES, may_access_shared, \
    uncounted_shared_op

#: Opcodes whose first operand is a source (or that write no register at all).
NO_DESTINATION = frozenset({"st", "red", "bar", "barrier", "bra", "brx", "call", "ret", "exit", "trap", "stmatrix",
                            "cp", "membar", "fence", "prefetch", "prefetchu", "sured", "sust", "pmevent",
                            "nanosleep", "griddepcontrol", "discard", "applypriority", "brkpt", "setmaxnreg",
                            "cp.async", "tensormap", "multimem", "st.async", "red.async"})


@dataclass(frozen=True)
class ControlFacts:
    """What region finding needs to know about one instruction set's instructions (PTX: :data:`PTX_FACTS`; SASS:
    ``traceconf.sass.emulate.SASS_FACTS``)."""

    successors: Callable[[list[Slot], int], list[int]]     # flat pcs that may follow (len(slots): leaves)
    written: Callable[[Slot], list[str]]                  # register keys the instruction may write
    is_shared: Callable[[Slot], bool]                     # may access shared memory
    writes_memory: Callable[[Slot], bool]                 # may store to memory (shared or global)
    writes_carry: Callable[[Slot], bool]                  # writes the carry flag (PTX .cc)


def successors(slots: list[Slot], index: int) -> list[int]:
    """Flat pcs that may follow ``index`` (``len(slots)`` or more: the thread leaves the kernel)."""
    slot = slots[index]
    opcode = slot.row["opcode"]
    guarded = bool(slot.row.get("guard"))
    following = [index + 1] if guarded else []
    end = len(slots)
    if opcode in ("bra", "brx"):
        return ([slot.target] if slot.target is not None else [end]) + following
    if opcode == "ret":
        return ([slot.target] if slot.target is not None else [end]) + following
    if opcode in ("exit", "trap"):
        return [end] + following
    if opcode == "call" and slot.target is not None:
        return [index + 1, slot.target]
    return [index + 1]


def immediate_post_dominators(slots: list[Slot], successors=successors) -> list[int | None]:
    """ipdom[pc] (``len(slots)`` = the kernel's exit; None where no path leads out: an endless loop).

    Cooper, Harvey & Kennedy's iterative dominator algorithm on the reversed control-flow graph.
    """
    end = len(slots)
    preds_rev: list[list[int]] = [[] for _ in range(end + 1)]   # successors in the CFG = predecessors reversed
    succ = []
    for index in range(end):
        targets = sorted({min(t, end) for t in successors(slots, index)})
        succ.append(targets)
    for index, targets in enumerate(succ):
        for target in targets:
            preds_rev[target].append(index)
    # reverse post-order of the reversed graph, from the exit
    order, seen, stack = [], {end}, [(end, iter(preds_rev[end]))]
    while stack:
        node, children = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            order.append(node)
        elif child not in seen:
            seen.add(child)
            stack.append((child, iter(preds_rev[child])))
    order.reverse()
    rank = {node: position for position, node in enumerate(order)}
    idom: dict[int, int] = {end: end}

    def intersect(a: int, b: int) -> int:
        while a != b:
            while rank[a] > rank[b]:
                a = idom[a]
            while rank[b] > rank[a]:
                b = idom[b]
        return a

    changed = True
    while changed:
        changed = False
        for node in order[1:]:
            done = [s for s in succ[node] if s in idom]
            if not done:
                continue
            new = done[0]
            for other in done[1:]:
                new = intersect(other, new)
            if idom.get(node) != new:
                idom[node] = new
                changed = True
    return [idom.get(index) for index in range(end)]


def flow_edges(slots: list[Slot], successors=successors) -> list[list[int]]:
    """Per instruction, what may run after it, for dataflow: its successors, and where the sides of a
    branch meet again (lanes whose direction is unknown jump there: :meth:`Machine.explore`)."""
    edges = [list(successors(slots, index)) for index in range(len(slots))]
    if any(len(set(following)) > 1 for following in edges):
        ipdom = immediate_post_dominators(slots, successors)
        for following, rejoin in zip(edges, ipdom):
            if len(set(following)) > 1 and rejoin is not None:
                following.append(rejoin)
    return edges


@dataclass
class Region:
    """What the lanes with an unknown direction at ``branch`` may have done before ``rejoin``."""

    branch: int
    rejoin: int                     # flat pc where both sides meet again (< len(slots))
    pcs: list[int]                  # the instructions in between, sorted
    registers: list[str]            # register keys any of them writes
    shared_slots: list[Slot]        # shared-capable instructions among them
    writes_memory: bool             # a store or atomic among them (memory contents become unknown)
    writes_carry: bool
    beyond: bool = False            # some lie past the rejoin point (a subroutine called in between): only whole
                                    # warps may skip it, or the lanes that run it would rejoin after the others


def branch_region(program: Program, ipdom: list[int | None], branch: int, facts: "ControlFacts | None" = None
                  ) -> Region | None:
    facts = facts or PTX_FACTS
    slots = program.slots
    end = len(slots)
    rejoin = ipdom[branch]
    if rejoin is None or rejoin >= end:
        return None
    seen, todo = set(), [t for t in facts.successors(slots, branch)]
    while todo:
        index = todo.pop()
        if index in seen or index == rejoin:
            continue
        if index >= end:
            return None            # leaves the kernel: not sound to skip
        seen.add(index)
        todo.extend(facts.successors(slots, index))
    pcs = sorted(seen)
    registers: list[str] = []
    for index in pcs:
        for key in facts.written(slots[index]):
            if key not in registers:
                registers.append(key)
    return Region(branch=branch, rejoin=rejoin, pcs=pcs, registers=registers,
                  shared_slots=[slots[i] for i in pcs if facts.is_shared(slots[i])],
                  writes_memory=any(facts.writes_memory(slots[i]) for i in pcs),
                  writes_carry=any(facts.writes_carry(slots[i]) for i in pcs), beyond=pcs[-1] > rejoin)


def _ptx_written(slot: Slot) -> list[str]:
    row = slot.row
    operands = row["operands"] or []
    if row["opcode"] in NO_DESTINATION or not operands or operands[0]["kind"] not in ("reg", "vector"):
        return []
    return [register_key(name.lstrip("!"), slot) for name in split_destinations(operands[0]) if name and name != "_"]


PTX_FACTS = ControlFacts(
    successors=successors, written=_ptx_written,
    is_shared=lambda slot: may_access_shared(slot.row["opcode"], slot.row["state_space"]),
    writes_memory=lambda slot: slot.row["opcode"] in MEMORY_WRITE_OPCODES,
    writes_carry=lambda slot: "cc" in (slot.row["modifiers"] or []))


#: Operand kinds whose name (if any) is no register or symbol: constants and text.
UNNAMED_OPERANDS = frozenset({"imm", "float", "string"})


def read_registers(program: Program) -> frozenset[str]:
    """Register keys some instruction reads (a result nobody reads is dead: ptxas drops or rewrites it)."""
    found = set()
    for slot in program.slots:
        values, places = _read_keys(slot.row, slot)
        found.update(values, places)
    return frozenset(found)


def register_names(program: Program) -> frozenset[str]:
    """Register keys the program's ``reg`` operands name (the parser gives a bare name its kind from the
    function's declarations): what an address's base, whose operand kind does not say, is when among them (a
    register an address reads is written somewhere as a ``reg`` operand; a vector's elements may be a call's
    parameter symbols)."""
    return frozenset(register_key(operand["name"], slot) for slot in program.slots
                     for operand in slot.row["operands"] or []
                     if operand["kind"] == "reg" and operand.get("name") and operand["name"] != "_")


def _read_keys(row: dict, slot: Slot) -> tuple[list[str], list[str]]:
    """(keys read as values, keys read as addresses or guards): every name a source operand gives, a negated one
    (``!%p3``, ``-%r2``) too.  Only an operand's kind rules a name out, never a missing ``%`` (PTX registers need
    none: ``.reg .b32 q<4>``); a name that is a symbol or a label has no writer, which costs nothing."""
    operands = row["operands"] or []
    first = 0 if row["opcode"] in NO_DESTINATION or not operands or operands[0]["kind"] not in ("reg", "vector") \
        else 1
    values, places = [], []
    if row.get("guard"):
        places.append(register_key(row["guard"].lstrip("!"), slot))
    for operand in operands[first:]:
        if operand["kind"] in UNNAMED_OPERANDS:
            continue
        names = list(operand.get("elements") or []) if operand["kind"] == "vector" else [operand.get("name")]
        keys = [register_key(name.lstrip("!"), slot) for name in names if name]
        (places if operand["kind"] == "address" else values).extend(keys)
    return values, places


#: PTX opcodes that transfer control, wait at a barrier, or decide (a comparison: CTA classes record its sign).
_ALWAYS_RUN = frozenset({"bra", "brx", "call", "ret", "exit", "trap", "bar", "barrier", "setp", "set",
                         "mbarrier"})
#: Where a PTX state space's bytes may lie, as the slice tracks memory contents.
_PLACES = {"generic": frozenset({"shared", "global", "local"}), "tex": frozenset({"texture"}),
           "surf": frozenset({"texture"})}
CARRY = "%carry"                # the .cc flag: one per thread, written by .cc, read by addc/subc/madc


def ptx_effect(slot: Slot, global_data: bool) -> Effect:
    """What a PTX instruction reads and writes (:mod:`traceconf.emulate.slice`); ``global_data``: --data
    buffers are modelled (then every global access runs: it serves them and notes what it could not)."""
    row = slot.row
    opcode = row["opcode"]
    values, places = _read_keys(row, slot)
    defs = set(_ptx_written(slot))
    if "cc" in (row["modifiers"] or []):
        defs.add(CARRY)
    if opcode in ("addc", "subc", "madc"):
        values.append(CARRY)
    space = space_of(row)
    spaces = _PLACES.get(space, frozenset({space}))
    # the slice follows what loads read into registers and what stores store; any other write to memory runs
    reads = spaces if opcode in LOAD_OPCODES else frozenset()
    writes = spaces if opcode in STORE_OPCODES else frozenset()
    seed = opcode in _ALWAYS_RUN or may_access_shared(opcode, row["state_space"]) \
        or bool(uncounted_shared_op(opcode, row["modifiers"])) or (opcode in MEMORY_WRITE_OPCODES - STORE_OPCODES) \
        or (global_data and "global" in reads | writes)
    if seed and not writes:
        places, values = places + values, []
    return Effect(defs=frozenset(defs), values=frozenset(values), places=frozenset(places), reads=reads,
                  writes=writes, seed=seed, loaded=bool(reads) and space != "param",
                  names_pointers=opcode in ("ld", "ldu") and space == "global", guarded=bool(row.get("guard")))
