"""SIMT execution of a linked program over a chunk of CTAs.

Scheduling
----------
Every thread has its own program counter.  Each step executes the lowest PC
among all runnable threads, for every thread sitting at that PC.  Inside one
warp this is the classic "minimum PC" reconvergence scheme: after a divergent
branch the side with the lower PC runs first, the other waits; both meet
again at the first instruction they share, which for compiler-structured code
(forward branches around ``if``/``else`` bodies, backward branches closing
loops, calls inlined in place by :mod:`program`) is the immediate
post-dominator, where the hardware reconverges too.  Threads still in a loop
sit at lower PCs than those that left it, so the loop finishes before the
code after it runs, once, with the whole warp.  Taking the minimum over all
warps as well (not per warp) keeps warps that diverged in step and lets one
numpy operation serve every warp at that PC; warps are independent between
barriers, so their interleaving does not change any address.  Each step
records one warp-level execution per warp that has an active lane.

Barriers
--------
``bar.sync``/``barrier.sync`` park the executing threads.  When nothing else
can run, every parked thread is released past its barrier; CTAs of a chunk
run the same code, so all of them reach their barriers before the release.

Unknown control flow
--------------------
A branch (or guarded ``ret``/``exit``/``call``/barrier) whose condition
depends on loaded data, floating point or an unmodelled value stops the
warps that reach it: guessing a direction could invent accesses.  Every
shared-memory instruction still reachable from that branch is reported as
unresolved with the reason; what was recorded before, and every other warp,
stays analysed.  A condition that needs a kernel parameter without a value is
an :class:`InputError` naming the parameter.
"""

from __future__ import annotations

import numpy as np

from traceconf.emulate import taint
from traceconf.emulate.alu import compile_alu, unknown_result
from traceconf.emulate.memory import compile_memory
from traceconf.emulate.operands import Context, reader
from traceconf.emulate.program import Program, Slot
from traceconf.emulate.state import ThreadState
from traceconf.emulate.warp import compile_warp
from traceconf.errors import InputError
from traceconf.ptx.opcodes import may_access_shared

#: Steps between two looks at the clock and the memory in use (a step costs microseconds).
LIMIT_POLL_STEPS = 512
EXIT = np.iinfo(np.int64).max
WAIT = EXIT - 1
NO_OP_OPCODES = frozenset({"membar", "fence", "nanosleep", "pmevent", "prefetch", "prefetchu", "brkpt",
                           "griddepcontrol", "setmaxnreg", "applypriority", "discard"})


class Compiled:
    """One slot, compiled: ``run(machine, active, mask)`` and what the scheduler needs to know."""

    __slots__ = ("run", "control", "slot")

    def __init__(self, run, control: bool, slot: Slot):
        self.run, self.control, self.slot = run, control, slot


# --------------------------------------------------------------------------- compilation


def _guard_reader(slot: Slot, ctx: Context):
    row = slot.row
    if not row.get("guard"):
        return None
    read = reader({"kind": "reg", "name": row["guard"].lstrip("!")}, slot, ctx)
    negated = bool(row.get("guard_negated")) or row["guard"].startswith("!")
    want = np.uint64(0 if negated else 1)

    def condition(m):
        value, bits = read(m)
        return (np.broadcast_to(value, (m.size,)) & np.uint64(1)) == want, np.broadcast_to(bits, (m.size,))
    return condition


def _with_guard(body, guard):
    """Run ``body(m, mask)`` on the threads whose guard holds; the guard's taint follows the writes."""
    if guard is None:
        return lambda m, active, mask: body(m, mask)

    def run(m, active, mask):
        holds, bits = guard(m)
        m.guard_taint = np.where(active, bits, taint.ZERO) if bits.any() else taint.ZERO
        body(m, active & holds)
        m.guard_taint = taint.ZERO
    return run


def compile_slot(slot: Slot, ctx: Context) -> Compiled:
    row = slot.row
    opcode = row["opcode"]
    guard = _guard_reader(slot, ctx)
    control = _CONTROL.get(opcode)
    if control is not None and not (opcode == "bar" and _barrier_is_noop(row)) \
            and not (opcode == "barrier" and _barrier_is_noop(row)):
        return Compiled(control(slot, ctx, guard), True, slot)
    if opcode in NO_OP_OPCODES or opcode in ("bar", "barrier"):
        body = lambda m, mask: None
    else:
        body = (compile_alu(slot, ctx) or compile_memory(slot, ctx) or compile_warp(slot, ctx)
                or unknown_result(row, slot, ctx, taint.UNMODELLED))
    return Compiled(_with_guard(body, guard), False, slot)


def _barrier_is_noop(row: dict) -> bool:
    modifiers = row["modifiers"] or []
    return "warp" in modifiers or "arrive" in modifiers


# --------------------------------------------------------------------------- control flow


def _condition(m, slot: Slot, guard, active: np.ndarray):
    """(taken, stopped) for a guarded control instruction: stopped threads have an unknown condition."""
    if guard is None:
        return active, None
    holds, bits = guard(m)
    active_bits = np.bitwise_or.reduce(bits[active]) if active.any() else 0
    if not active_bits:
        return active & holds, None
    m.check_known(slot, int(active_bits), "branch condition")
    unknown = active & ((bits & taint.UNKNOWN) != 0)
    if not unknown.any():
        return active & holds, None
    warps_hit = np.repeat(unknown.reshape(-1, m.warp_size).any(axis=1), m.warp_size)
    stopped = active & warps_hit
    m.stop(slot, stopped, int(np.bitwise_or.reduce(bits[unknown])))
    return active & holds & ~stopped, stopped


def _jump_to(slot: Slot, guard, destination: int):
    """Guarded threads go to ``destination``; the others fall through to the next instruction."""
    def run(m, active, mask):
        taken, stopped = _condition(m, slot, guard, active)
        stay = active & ~taken if stopped is None else active & ~taken & ~stopped
        m.pc[taken] = destination
        m.pc[stay] += 1
    return run


def _branch(slot: Slot, ctx: Context, guard):
    return _jump_to(slot, guard, slot.target)


def _return(slot: Slot, ctx: Context, guard):
    """ret (to the instruction after the inlined call, or exit for the kernel) and exit/trap."""
    target = slot.target if slot.row["opcode"] == "ret" else None
    return _jump_to(slot, guard, EXIT if target is None else target)


def _call(slot: Slot, ctx: Context, guard):
    after = slot.target               # None for an external function: nothing to inline

    def run(m, active, mask):
        taken, stopped = _condition(m, slot, guard, active)
        skip = active & ~taken if stopped is None else active & ~taken & ~stopped
        if slot.stop_reason:
            m.stop(slot, taken, 0, slot.stop_reason)
        else:
            m.pc[taken] += 1          # into the inlined body (or past an external call)
        if after is None:
            m.pc[skip] += 1
        else:
            m.pc[skip] = after
    return run


def _barrier(slot: Slot, ctx: Context, guard):
    result = unknown_result(slot.row, slot, ctx, taint.UNMODELLED) if slot.row["opcode"] == "bar" and \
        "red" in (slot.row["modifiers"] or []) else None

    def run(m, active, mask):
        taken, stopped = _condition(m, slot, guard, active)
        if result is not None:
            result(m, taken)
        stay = active & ~taken if stopped is None else active & ~taken & ~stopped
        m.resume[taken] = m.pc[taken] + 1
        m.pc[taken] = WAIT
        m.pc[stay] += 1
    return run


_CONTROL = {"bra": _branch, "brx": _branch, "ret": _return, "exit": _return, "trap": _return, "call": _call,
            "bar": _barrier, "barrier": _barrier}


# --------------------------------------------------------------------------- the machine


class Machine(ThreadState):
    """Thread state plus the scheduler and the logs of one chunk."""

    def __init__(self, program: Program, compiled: list[Compiled], ctx: Context, ctas, block, grid,
                 warp_size: int, layout_sizes, max_steps: int, findings: "Findings", watch=None, limits=None):
        super().__init__(ctas, block, grid, warp_size, layout_sizes)
        self.program, self.compiled, self.ctx = program, compiled, ctx
        self.max_steps = max_steps
        self.watch = watch              # classes.Watch: CTA-class bookkeeping around each step (or None)
        self.limits = limits            # launch.Limits: time and memory, polled every LIMIT_POLL_STEPS
        self.findings = findings
        self.pc = np.where(self.valid, 0, EXIT).astype(np.int64)
        self.resume = np.zeros(self.size, dtype=np.int64)
        self.log: list[tuple] = []
        self.steps = 0
        self.all_valid = bool(self.valid.all())
        self.all_warps = np.arange(self.size // warp_size)
        self.cta_of_warp = self.cta_of_thread[::warp_size]
        self.warp_of_warp = self.warp_in_cta[::warp_size]

    # -- scheduler -------------------------------------------------------------------------------
    def run(self) -> None:
        pc, compiled = self.pc, self.compiled
        end = len(compiled)
        size = self.size
        while True:
            p = int(pc.min())
            if p >= end:
                if p == WAIT:
                    waiting = pc == WAIT
                    pc[waiting] = self.resume[waiting]
                    continue
                if p == EXIT:
                    return
                pc[pc == p] = EXIT         # fell off the end of the kernel
                continue
            active = pc == p
            self.steps += 1
            if self.steps > self.max_steps:
                self._runaway(p)
            if self.limits is not None and not self.steps % LIMIT_POLL_STEPS:
                self.limits.check(self._where(p))
            op = compiled[p]
            mask = None if np.count_nonzero(active) == size else active
            check = self.watch.checks[p] if self.watch is not None else None
            token = check.before(self, active) if check is not None else None
            if op.control:
                op.run(self, active, mask)
            else:
                op.run(self, active, mask)
                pc[active] = p + 1
            if token is not None and check.after is not None:
                check.after(self, active, token)

    def _where(self, p: int) -> str:
        return f"PTX line {self.compiled[p].slot.row['ptx_line']}"

    def _runaway(self, p: int) -> None:
        row = self.compiled[p].slot.row
        raise InputError(f"kernel {self.ctx.kernel}: emulation exceeded max_steps={self.max_steps} warp-level "
                         f"steps; it was looping at PTX line {row['ptx_line']} (a loop bound may need "
                         f"--param, or raise the step limit)", file=self.ctx.path, line=row["ptx_line"],
                         source_line=row["text"])

    # -- findings ---------------------------------------------------------------------------------
    def check_known(self, slot: Slot, bits: int, what: str) -> None:
        """Raise for missing parameters; note CTA dependence."""
        if bits & int(taint.PARAMS):
            names = taint.missing_params(bits, self.ctx.param_names)
            row = slot.row
            raise InputError(f"kernel {self.ctx.kernel}: the {what} at PTX line {row['ptx_line']} needs parameter"
                             f"{'s' if len(names) > 1 else ''} {', '.join(names)}; pass "
                             + " ".join(f"--param {n}=VALUE" for n in names),
                             file=self.ctx.path, line=row["ptx_line"], source_line=row["text"])
        if bits & int(taint.CTA_ANY):
            self.findings.cta_dependent(slot, what)

    def address_unknown(self, slot: Slot, bits: int, what: str) -> bool:
        """True (and reported) when a shared access cannot be evaluated."""
        self.check_known(slot, bits, f"shared-memory {what}")
        if bits & int(taint.UNKNOWN):
            self.report_unresolved(slot, f"{what} depends on {taint.describe(bits)}")
            return True
        return False

    def report_unresolved(self, slot: Slot, reason: str) -> None:
        self.findings.unresolved(slot, reason)

    def stop(self, slot: Slot, threads: np.ndarray, bits: int, reason: str | None = None) -> None:
        """Stop ``threads`` at an instruction whose outcome is unknown; report what they can no longer reach."""
        if not threads.any():
            return
        self.pc[threads] = EXIT
        why = reason or f"branch condition depends on {taint.describe(bits)}"
        self.findings.stopped(slot, f"not analysed past PTX line {slot.row['ptx_line']}: {why}",
                              self.findings.reachable_shared(self.program, self.pc_of(slot)))

    def pc_of(self, slot: Slot) -> int:
        return self.findings.pc_index[id(slot)]

    def record_access(self, slot: Slot, kind: int, size: int, matrices: int, offsets: np.ndarray,
                      lanes: np.ndarray) -> None:
        """Log one execution per warp with an active lane (``lanes``); inactive lanes become -1."""
        guard_bits = self.guard_taint
        if isinstance(guard_bits, np.ndarray):
            # a guard false in every thread here may hold in another CTA: CTA dependence counts over all
            # threads that reached the access, taken or not
            reached = int(np.bitwise_or.reduce(guard_bits))
            if reached & int(taint.CTA_ANY):
                self.findings.cta_dependent(slot, "shared-memory predicate (active mask)")
            bits = int(np.bitwise_or.reduce(guard_bits[lanes]))
            if bits and self.address_unknown(slot, bits, "predicate (active mask)"):
                return
        if lanes is self.valid and self.all_valid:
            rows = self.all_warps
            addresses = offsets.reshape(-1, self.warp_size)
            highest = int(offsets.max())
        else:
            rows = np.flatnonzero(lanes.reshape(-1, self.warp_size).any(axis=1))
            if not len(rows):
                return
            addresses = np.where(lanes, offsets, -1).reshape(-1, self.warp_size)[rows]
            highest = int(addresses.max())
        self.findings.note_extent(slot, highest + size)
        self.log.append((rows, int(slot.row["instruction"]), kind, size, matrices, addresses))


class Findings:
    """Unresolved instructions, CTA dependence and extents, shared by every chunk of one emulation."""

    def __init__(self, program: Program, layout_bytes: int):
        self.pc_index = {id(slot): index for index, slot in enumerate(program.slots)}
        self.layout_bytes = layout_bytes
        self.unresolved_rows: dict[tuple, dict] = {}
        self.cta_reasons: list[str] = []
        self.extent: dict[int, tuple[int, dict]] = {}
        self._reach_cache: dict[int, list[Slot]] = {}

    def unresolved(self, slot: Slot, reason: str) -> None:
        row = slot.row
        key = (row["instruction"], reason)
        if key not in self.unresolved_rows:
            self.unresolved_rows[key] = {"instruction": int(row["instruction"]), "ptx": row["text"],
                                         "ptx_line": int(row["ptx_line"]), "reason": reason}

    def stopped(self, slot: Slot, reason: str, reachable: list[Slot]) -> None:
        for target in reachable:
            self.unresolved(target, reason)

    def cta_dependent(self, slot: Slot, what: str) -> None:
        if len(self.cta_reasons) < 8:
            reason = f"{what} at PTX line {slot.row['ptx_line']} depends on the CTA index"
            if reason not in self.cta_reasons:
                self.cta_reasons.append(reason)

    def note_extent(self, slot: Slot, highest: int) -> None:
        if highest > self.layout_bytes:
            known = self.extent.get(slot.row["instruction"])
            if known is None or highest > known[0]:
                self.extent[slot.row["instruction"]] = (highest, slot.row)

    def reachable_shared(self, program: Program, start: int) -> list[Slot]:
        """Shared-capable slots reachable from ``start`` (itself excluded unless on a loop)."""
        if start in self._reach_cache:
            return self._reach_cache[start]
        slots = program.slots
        seen, todo = set(), list(_successors(slots, start))
        while todo:
            index = todo.pop()
            if index in seen or index >= len(slots):
                continue
            seen.add(index)
            todo.extend(_successors(slots, index))
        found = [slots[i] for i in sorted(seen) if may_access_shared(slots[i].row["opcode"], slots[i].row["state_space"])]
        self._reach_cache[start] = found
        return found


def _successors(slots: list[Slot], index: int) -> list[int]:
    slot = slots[index]
    opcode = slot.row["opcode"]
    guarded = bool(slot.row.get("guard"))
    following = [index + 1] if guarded else []
    if opcode in ("bra", "brx"):
        return ([slot.target] if slot.target is not None else []) + following
    if opcode == "ret":
        return ([slot.target] if slot.target is not None else []) + following
    if opcode in ("exit", "trap"):
        return following
    if opcode == "call" and slot.target is not None:
        return [index + 1, slot.target]
    return [index + 1]
