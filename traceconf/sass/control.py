"""SASS control flow on the emulator's per-thread program counters: guards, branches, calls, barriers.

Threads that take a branch get the target's slot index as their pc, the others the next one; the
scheduler (:mod:`traceconf.emulate.simt`) runs the lowest pc first, which reconverges them.  A branch
condition that depends on unknown data is explored as at the PTX level (:mod:`traceconf.emulate.regions`, with
the SASS control-flow facts of :mod:`traceconf.sass.emulate`): the unknown lanes skip to the reconvergence
point with what the region writes made unknown; where no such region exists the warps stop (reported, never
guessed).
"""

from __future__ import annotations

import numpy as np

from traceconf.emulate import taint
from traceconf.emulate.simt import EXIT, WAIT, _condition
from traceconf.sass.opcodes import RECONVERGE_JUMPS
from traceconf.sass.operands import M32, Operand, SassContext, parse_operand, predicate_is, reader, writer

U64 = np.uint64
GROUP = 32
_LANE_BITS = U64(1) << np.arange(GROUP, dtype=np.uint64)


def guard_of(row: dict, ctx: SassContext):
    name = row.get("guard")
    if not name:
        return None
    read = reader(Operand("pred", name, name=name), ctx)
    want = not row.get("guard_negated")

    def holds(value):
        return predicate_is(value, want)

    def condition(m):
        value, bits = read(m)
        if type(value) is np.ndarray and value.shape == (m.size,):
            # one mask per predicate array: the instructions it guards share it (and what is made from it)
            return m.derived(value, ("holds", want), holds), m.spread(bits)
        return holds(m.spread(value)), m.spread(bits)
    return condition




def target_of(ops: list[Operand], slot, ctx: SassContext, labels: dict[str, int]) -> int | None:
    for op in reversed(ops):
        if op.kind == "label" and op.name in labels:
            return labels[op.name]
        if op.kind == "imm" and op.value in ctx.pc_index:
            return ctx.pc_index[op.value]
    return None


def reconvergence_targets(rows: list[dict], pc_index: dict[int, int]) -> dict[int, int]:
    """pc of each SYNC/BRK/CONT → slot index of the target of its innermost enclosing SSY/PBK/PCNT.

    ptxas nests these regions properly, so the innermost region (push pc < jump pc < target) is the
    one the hardware stack has on top when the jump executes.
    """
    pushes = {push: [] for push in RECONVERGE_JUMPS.values()}
    for row in rows:
        if row["opcode"] in pushes:
            target = next((parse_operand(o).value for o in row["operands"] or [] if parse_operand(o).kind == "imm"),
                          None)
            if target is not None and target in pc_index:
                pushes[row["opcode"]].append((int(row["pc"]), target))
    found = {}
    for row in rows:
        push = RECONVERGE_JUMPS.get(row["opcode"])
        if push is None:
            continue
        pc = int(row["pc"])
        enclosing = [(start, target) for start, target in pushes[push] if start < pc < target]
        if enclosing:
            found[pc] = pc_index[max(enclosing)[1]]
    return found


def both(first, second):
    """A guard that holds where both hold (taints OR-ed); either may be None (always true)."""
    if first is None or second is None:
        return first or second

    def condition(m):
        (a, ab), (b, bb) = first(m), second(m)
        return a & b, ab | bb
    return condition


def jump(slot, guard, destination: int):
    def run(m, active, mask):
        taken, stopped = _condition(m, slot, guard, active)
        if mask is None and stopped is None:        # every thread here: the others go on, with no selection
            m.pc += 1
            m.pc[taken] = destination
            return
        stay = active & ~taken if stopped is None else active & ~taken & ~stopped
        m.pc[taken] = destination
        m.pc[stay] += 1
    return run


def indirect_target(ops: list[Operand]) -> tuple[Operand, int] | None:
    """(register, offset) of a transfer to an address held in a register: ``BRXU UR4 -0x100``,
    ``CALL.REL.NOINC R8 `(kernel)``, ``RET.REL.NODEC R20 0x0`` (the listing prints them without commas);
    None for a transfer to a label or pc."""
    tokens = [parse_operand(token) for op in ops for token in op.text.split()]
    register = next((o for o in tokens if o.kind == "reg"), None)
    return (register, next((o.value for o in tokens if o.kind == "imm"), 0)) if register is not None else None


def jump_to_register(slot, guard, ops: list[Operand], ctx: SassContext, base: int, what: str, exit_elsewhere: bool):
    """A jump to ``base`` + the register + the offset of :func:`indirect_target`, per thread (pcs are offsets from
    the function's start, as the binary's jump and function-pointer tables hold them).  Threads whose target is
    not known stop with the reason; a target that is no instruction of the listing leaves the kernel when
    ``exit_elsewhere`` (a return past the kernel's own code), else stops the thread with the reason."""
    found_target = indirect_target(ops)
    if found_target is None:
        return None
    register, offset = found_target
    read = reader(register, ctx, False)
    pcs = np.array(sorted(ctx.pc_index), dtype=np.int64)

    def run(m, active, mask):
        taken, stopped = _condition(m, slot, guard, active)
        stay = active & ~taken if stopped is None else active & ~taken & ~stopped
        value, bits = read(m)
        value = np.broadcast_to(np.asarray(value, dtype=np.uint64).astype(np.int64) + (base + offset), (m.size,))
        bits = np.broadcast_to(bits, (m.size,))
        unknown = taken & ((bits & taint.UNKNOWN) != 0)
        if unknown.any():
            why = int(np.bitwise_or.reduce(bits[unknown]))
            m.stop(slot, unknown, why, f"{what}: the address in {register.name} is not known: it depends on "
                                       f"{m.findings.why(why)}")
            taken = taken & ~unknown
        where = np.minimum(np.searchsorted(pcs, value), len(pcs) - 1)
        found = pcs[where] == value
        elsewhere = taken & ~found
        if elsewhere.any() and not exit_elsewhere:
            m.stop(slot, elsewhere, 0, f"{what}: its target {int(value[elsewhere][0]):#x} is no instruction of the "
                                       "listing")
            taken = taken & ~elsewhere
        m.pc[taken] = np.where(found[taken], where[taken], EXIT)
        m.pc[stay] += 1
    return run


def return_to_register(slot, guard, ops: list[Operand], ctx: SassContext):
    """RET.REL Rx offset: jump to the address the caller left in Rx (per thread)."""
    return jump_to_register(slot, guard, ops, ctx, 0, "return", True)


def next_pc(slot, ctx: SassContext) -> int:
    """The pc of the instruction after ``slot`` (relative branches count from it)."""
    pcs = sorted(ctx.pc_index)
    index = ctx.pc_index[int(slot.row["pc"])]
    return pcs[index + 1] if index + 1 < len(pcs) else int(slot.row["pc"]) + 16


def barrier(slot, guard, ops, mods, ctx):
    result = None
    if "RED" in mods and ops and ops[0].kind == "reg":
        write = writer(ops[0])
        result = lambda m, mask: write(m, U64(0), taint.UNMODELLED, mask)

    def run(m, active, mask):
        taken, stopped = _condition(m, slot, guard, active)
        if result is not None:
            result(m, taken)
        if mask is None and taken is active:        # every thread here waits: no selection
            np.add(m.pc, 1, out=m.resume)
            m.pc.fill(WAIT)
            return
        stay = active & ~taken if stopped is None else active & ~taken & ~stopped
        m.resume[taken] = m.pc[taken] + 1
        m.pc[taken] = WAIT
        m.pc[stay] += 1
    return run


def branch_if_divergent(slot, guard, ops, ctx, destination: int):
    """BRA.DIV URx, target: taken by warps whose active lanes are not all the lanes of the mask URx."""
    mask_reader = reader(ops[0], ctx, False) if ops and ops[0].kind == "reg" else None

    def run(m, active, mask):
        taken, stopped = _condition(m, slot, guard, active)
        groups = taken.reshape(-1, GROUP)
        have = (groups * _LANE_BITS).sum(axis=1, dtype=np.uint64)
        if mask_reader is not None:
            want, _ = mask_reader(m)
            want = np.broadcast_to(np.asarray(want, dtype=np.uint64), (m.size,)).reshape(-1, GROUP)[:, 0]
        else:
            want = (m.valid.reshape(-1, GROUP) * _LANE_BITS).sum(axis=1, dtype=np.uint64)
        divergent = np.repeat(have != (want & M32), GROUP) & taken
        stay = active & ~divergent if stopped is None else active & ~divergent & ~stopped
        m.pc[divergent] = destination
        m.pc[stay] += 1
    return run
