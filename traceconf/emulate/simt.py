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

import copy
from typing import Callable

import numpy as np

from traceconf.emulate import allocation, taint
from traceconf.emulate.allocation import assumed_note
from traceconf.emulate.alu import compile_alu, unknown_result
from traceconf.emulate.contents import SharedContents
from traceconf.emulate.memory import compile_memory
from traceconf.emulate.regions import PTX_FACTS, branch_region, immediate_post_dominators
from traceconf.emulate.operands import Context, reader, register_key, split_destinations
from traceconf.emulate.program import Program, Slot
from traceconf.emulate.speculation import check_inside
from traceconf.emulate.state import ThreadState, is_uniform, select
from traceconf.emulate.warp import compile_warp
from traceconf.emulate.launch import missing_params_message
from traceconf.errors import InputError
from traceconf.ptx.opcodes import MEMORY_WRITE_OPCODES, may_access_shared

U64 = np.uint64
#: Steps between two looks at the clock and the memory in use (a step costs microseconds); the work budget is
#: checked at every step.
LIMIT_POLL_STEPS = 512
EXIT = np.iinfo(np.int64).max
WAIT = EXIT - 1
NO_OP_OPCODES = frozenset({"membar", "fence", "nanosleep", "pmevent", "prefetch", "prefetchu", "brkpt",
                           "griddepcontrol", "setmaxnreg", "applypriority", "discard"})


def ptx_where(row: dict) -> str:
    """An instruction's place, as messages name it."""
    return f"PTX line {row['ptx_line']}"


class Compiled:
    """One slot, compiled: ``run(machine, active, mask)`` and what the scheduler needs to know."""

    __slots__ = ("run", "control", "slot")

    def __init__(self, run, control: bool, slot: Slot):
        self.run, self.control, self.slot = run, control, slot


# --------------------------------------------------------------------------- compilation


def guard_reader(slot: Slot, ctx: Context):
    """``m -> (holds, bits)`` of the instruction's guard predicate (negation applied), or None without one."""
    row = slot.row
    if not row.get("guard"):
        return None
    read = reader({"kind": "reg", "name": row["guard"].lstrip("!")}, slot, ctx)
    negated = bool(row.get("guard_negated")) or row["guard"].startswith("!")
    want = np.uint64(0 if negated else 1)

    def condition(m):
        value, bits = read(m)
        return (m.spread(value) & np.uint64(1)) == want, m.spread(bits)
    return condition


def with_guard(body, guard, shared: Slot | None = None, destinations: tuple[str, ...] = (),
               writes_memory: bool = False):
    """Run ``body(m, mask)`` on the threads whose guard holds; the guard's taint follows the writes, and goes
    to the ``destinations`` (register keys) of the threads where the guard fails too: whether they were
    overwritten depends on the guard (a guard false on the CTA index's account in CTA 0 may hold in another).
    ``shared``: the slot, when it may access shared memory: a guard that depends on the CTA index ties the
    counts to it even where it holds in no thread here.  A thread whose guard is unknown may run the
    instruction or not: it runs, so what it writes carries the guard's taint and its shared access is
    unresolved (:meth:`Machine.record_access`); memory it may have written (``writes_memory``) becomes
    unknown, as under a branch of unknown direction (:meth:`Machine.forget_memory`)."""
    if guard is None:
        return lambda m, active, mask: body(m, mask)

    def run(m, active, mask):
        holds, bits = guard(m)
        one = is_uniform(bits)
        if not (bits[0] if one else bits.any()):
            body(m, active & holds)
            return
        if mask is None:
            low, high = (int(bits[0]),) * 2 if one else (int(bits.min()), int(bits.max()))
            if low == high and not low & int(taint.UNKNOWN):
                # every thread runs here and the guard's taint is one known value: a scalar does (nothing is
                # unknown; the accesses' masks need no look at it, see Machine.record_access)
                uniform(m, holds, U64(low))
                return
        m.guard_taint = select(active, bits, taint.ZERO)
        if shared is not None and (m.guard_taint & taint.CTA_ANY).any():
            m.findings.cta_dependent(shared, "shared-memory predicate (active mask)")
        unknown = active & ((bits & taint.UNKNOWN) != 0)
        body(m, active & (holds | unknown))
        if writes_memory and unknown.any():
            m.forget_memory(unknown)
        skipped = active & ~holds
        for key in destinations:
            if key in m.taints:
                m.taints[key] = select(skipped, m.taints[key] | m.guard_taint, m.taints[key])
        m.guard_taint = taint.ZERO

    def uniform(m, holds, bits):
        if shared is not None and bits & taint.CTA_ANY:
            m.findings.cta_dependent(shared, "shared-memory predicate (active mask)")
        m.guard_taint, m.guard_keys, m.guard_holds, m.guard_given = bits, destinations, holds, set()
        body(m, holds)
        given = m.guard_given
        m.guard_keys, m.guard_holds, m.guard_given = (), None, set()
        skipped = None
        for key in destinations:
            written = m.taints.get(key)
            if key in given or written is None or (np.ndim(written) == 0 and written | bits == written):
                continue                # written with the guard's taint everywhere (ThreadState.write)
            skipped = taint_where_skipped(m, holds, bits) if skipped is None else skipped
            m.taints[key] = written | skipped
        m.guard_taint = taint.ZERO
    return run


def taint_where_skipped(m, holds, bits) -> np.ndarray:
    """The taint ``bits`` (one uint64) in the threads where ``holds`` is false, 0 where it is true: OR-ed into a
    destination, ``select(~holds, written | bits, written)`` in one pass (the mask's all-ones lanes, made once
    for its writes, inverted)."""
    if type(holds) is np.ndarray and holds.dtype == np.bool_:
        skipped = np.invert(m.lane_ones(holds))
        skipped &= bits
        return skipped
    return select(~holds, bits, taint.ZERO)


def compile_slot(slot: Slot, ctx: Context) -> Compiled:
    """The compiled instruction; an instruction whose operands the handler cannot take (the parser accepts
    any operand list, e.g. ``add.s32 %r4, %r3, %r, 2``) is an InputError at its line, not a crash."""
    try:
        return _compile_slot(slot, ctx)
    except (ValueError, IndexError, KeyError, TypeError) as error:
        row = slot.row
        count = len(row["operands"] or [])
        raise InputError(f"cannot emulate {row['opcode']} with these {count} operand(s) "
                         f"({type(error).__name__}: {str(error)[:120]})", file=ctx.path, line=row["ptx_line"],
                         source_line=row["text"]) from None


def _compile_slot(slot: Slot, ctx: Context) -> Compiled:
    row = slot.row
    opcode = row["opcode"]
    guard = guard_reader(slot, ctx)
    control = _CONTROL.get(opcode)
    if control is not None and not (opcode == "bar" and _barrier_is_noop(row)) \
            and not (opcode == "barrier" and _barrier_is_noop(row)):
        return Compiled(control(slot, ctx, guard), True, slot)
    if opcode in NO_OP_OPCODES or opcode in ("bar", "barrier"):
        body = lambda m, mask: None
    else:
        body = compile_alu(slot, ctx) or compile_memory(slot, ctx)
        if body is None:
            body = compile_warp(slot, ctx)
            if body is not None:
                body = collective(body, PTX_FACTS.written(slot))
        body = body or unknown_result(row, slot, ctx, taint.UNMODELLED)
    shared = slot if may_access_shared(opcode, row["state_space"]) else None
    operands = row["operands"] or []
    destinations = tuple(register_key(name, slot) for name in split_destinations(operands[0])) \
        if guard is not None and operands and operands[0]["kind"] in ("reg", "vector") else ()
    return Compiled(with_guard(body, guard, shared, destinations, opcode in MEMORY_WRITE_OPCODES), False, slot)


def collective(body, keys):
    """A warp-collective result (in registers ``keys``) is unknown in warps with lanes on an unknown side of a
    branch: they may take part."""
    def run(m, mask):
        body(m, mask)
        if m.any_doubt:
            lanes = m.doubtful_warps() & (m.valid if mask is None else mask)
            for key in keys:
                value, bits = m.read(key)
                m.taints[key] = np.where(lanes, bits | taint.BRANCH, bits)
    return run


def _barrier_is_noop(row: dict) -> bool:
    modifiers = row["modifiers"] or []
    return "warp" in modifiers or "arrive" in modifiers


# --------------------------------------------------------------------------- control flow


def _condition(m, slot: Slot, guard, active: np.ndarray):
    """(taken, stopped) for a guarded control instruction: stopped threads have an unknown condition."""
    if guard is None:
        return active, None
    holds, bits = guard(m)
    if is_uniform(bits):        # one taint for every thread (a spread scalar): no pass over the lanes
        active_bits = int(np.asarray(bits).flat[0]) if active.any() else 0
    else:
        active_bits = np.bitwise_or.reduce(bits[active]) if active.any() else 0
    if not active_bits:
        return active & holds, None
    m.check_known(slot, int(active_bits), "branch condition")
    if not int(active_bits) & int(taint.UNKNOWN):
        return active & holds, None
    unknown = active & ((bits & taint.UNKNOWN) != 0)
    if not unknown.any():
        return active & holds, None
    if m.explore(slot, unknown, bits):
        return active & holds & ~unknown, unknown
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
    if slot.stop_reason:            # a branch not followed: the threads taking it stop, their counts partial
        def run(m, active, mask):
            taken, stopped = _condition(m, slot, guard, active)
            m.stop(slot, taken, 0, slot.stop_reason)
            m.pc[active & ~taken if stopped is None else active & ~taken & ~stopped] += 1
        return run
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
                 warp_size: int, layout_sizes, max_steps: int, findings: "Findings", watch=None, sliced=None):
        super().__init__(ctas, block, grid, warp_size, layout_sizes)
        self.program, self.compiled, self.ctx = program, compiled, ctx
        self.max_steps = max_steps
        self.watch = watch              # classes.Watch: CTA-class bookkeeping around each step (or None)
        self.follow = sliced.follow if sliced is not None else None   # slice.Plan: where lanes jump over what
                                                                        # the counts do not depend on
        self.contents_plan = sliced.contents if sliced is not None else None    # and what memory work they skip
        self.consulted: set[int] = set()        # the pcs that asked (contents_of) while there was no such plan
        self.limits = None              # launch.Limits, set by the scheduler: work checked every step, clock and
                                        # memory polled every LIMIT_POLL_STEPS
        self.findings = findings
        self.pc = np.where(self.valid, 0, EXIT).astype(np.int64)
        self._pc_behind: int | None = None     # run(): the pc every thread is at while pc lags behind
        self.resume = np.zeros(self.size, dtype=np.int64)
        self.log: list[tuple] = []
        self.unresolved_log: list[tuple] = []     # ((instruction, reason), CTA id per execution left out)
        self.steps = 0
        self.all_valid = bool(self.valid.all())
        self.all_warps = np.arange(self.size // warp_size)
        self.whole_warps = np.full(len(self.all_warps), (1 << warp_size) - 1, dtype=np.uint64)   # every lane's bit
        self.cta_of_warp = self.cta_of_thread[::warp_size]
        self.warp_of_warp = self.warp_in_cta[::warp_size]
        self.cta_index = np.repeat(np.arange(len(self.ctas), dtype=np.int64), self.padded)
        self._shared: SharedContents | None = None
        self._shared_base: np.ndarray | None = None
        self.doubt = np.full(self.size, -1, dtype=np.int64)   # rejoin pc of lanes whose path is unknown
        self.any_doubt = False

    def shared_contents(self) -> SharedContents:
        if self._shared is None:
            self._shared = SharedContents(len(self.ctas), self.ctx.layout.total_bytes)
        return self._shared

    def contents_of(self, slot: Slot):
        """What a memory instruction does with memory's contents under the launch's assumptions (a
        :class:`~traceconf.emulate.speculation.Contents`; None: all it does)."""
        pc = self.findings.pc_index[id(slot)]
        if self.contents_plan is None:
            self.consulted.add(pc)          # (an instruction that never asks gets no region: speculation)
            return None
        return self.contents_plan[pc]

    def contents_checked(self, slot: Slot, offsets: np.ndarray, size: int, running):
        """:meth:`contents_of` an access of ``size`` bytes at shared ``offsets``, whose running threads
        (``running()``: their indices, None: every thread) :func:`~traceconf.emulate.speculation.check_inside` its
        assumed region first: both levels' loads and stores ask so."""
        assumed = self.contents_of(slot)
        if assumed is not None and assumed.bounds is not None:
            check_inside(assumed.bounds, offsets, size, running, self.extent)
        return assumed

    def contents_bytes(self) -> int:
        """Shared bytes per CTA whose contents this machine keeps (0: it keeps none)."""
        return self._shared.bytes_per_cta if self._shared is not None else 0

    def shared_base(self) -> np.ndarray:
        """Per thread: the index of its CTA's first shared byte in :meth:`shared_contents`."""
        if self._shared_base is None:
            self._shared_base = self.cta_index * self.shared_contents().bytes_per_cta
        return self._shared_base

    def doubtful_warps(self) -> np.ndarray:
        """Per thread: whether its warp has lanes waiting past an unknown branch (their mask is unknown)."""
        return np.repeat((self.doubt >= 0).reshape(-1, self.warp_size).any(axis=1), self.warp_size)

    # -- scheduler -------------------------------------------------------------------------------
    def run(self) -> None:
        pc, compiled = self.pc, self.compiled
        end = len(compiled)
        size = self.size
        # the work budget left, in steps of this machine's width (None: no work limit)
        left = self.limits.steps_left(size // self.warp_size) if self.limits is not None else None
        cap = self.max_steps if left is None else min(self.max_steps, left)
        follow = self.follow
        everyone = np.ones(size, dtype=bool)
        try:
            self._steps(pc, compiled, end, size, cap, left, follow, everyone)
        finally:
            if self._pc_behind is not None:     # (an error raised mid-run too: the pcs as the steps left them)
                pc.fill(self._pc_behind)
                self._pc_behind = None

    def _steps(self, pc, compiled, end, size, cap, left, follow, everyone) -> None:
        """:meth:`run`'s loop.  While every thread runs together, ``pc`` is not written per step (a pass over every
        thread): ``self._pc_behind`` holds the pc they are all at, and ``pc`` takes it before anything reads it."""
        together = end              # the pc of every thread when the last step ran them all and fell through
        while True:
            if together < end:
                p, active = together, everyone
            else:
                p = int(pc.min())
                if p >= end:
                    if p == WAIT:
                        if int(pc.max()) == WAIT:       # every thread at the barrier (the common case)
                            pc[:] = self.resume
                        else:
                            waiting = pc == WAIT
                            pc[waiting] = self.resume[waiting]
                        continue
                    if p == EXIT:
                        return
                    pc[pc == p] = EXIT         # fell off the end of the kernel
                    continue
                active = pc == p
            if follow is not None and follow[p] != p:
                self._pc_behind = None          # every pc of ``active`` is written
                self._pass_over(active, p, follow[p])
                together = int(follow[p]) if active is everyone else end
                continue
            self.steps += 1
            if self.steps > cap:
                self.steps -= 1           # this step does not run
                if left is not None and self.steps >= left:
                    raise self.limits.work_reached(self._where(p))
                self._runaway(p)
            if self.limits is not None and not self.steps % LIMIT_POLL_STEPS:
                self.limits.check(self._where(p))
            if self.any_doubt:
                back = active & (self.doubt == p)
                if back.any():
                    self.doubt[back] = -1
                    self.any_doubt = bool((self.doubt >= 0).any())
            op = compiled[p]
            mask = None if active is everyone or np.count_nonzero(active) == size else active
            check = self.watch.checks[p] if self.watch is not None else None
            if self._pc_behind is not None and (op.control or check is not None):
                pc.fill(self._pc_behind)        # control and the watch read or move the pcs
                self._pc_behind = None
            token = check.before(self, active) if check is not None else None
            together = end
            if op.control:
                op.run(self, active, mask)
            elif mask is None:
                op.run(self, active, mask)
                self._pc_behind = together = p + 1
            else:
                op.run(self, active, mask)
                pc[active] = p + 1
            if token is not None and check.after is not None:
                check.after(self, active, token)

    def _pass_over(self, active: np.ndarray, start: int, stop: int) -> None:
        """``active`` lanes go from ``start`` to ``stop`` without a step: nothing kept reads what the instructions
        between write.  A lane waiting to rejoin in between has rejoined (it would have run them)."""
        if self.any_doubt:
            back = active & (self.doubt >= start) & (self.doubt < stop)
            if back.any():
                self.doubt[back] = -1
                self.any_doubt = bool((self.doubt >= 0).any())
        self.pc[active] = stop

    where = staticmethod(ptx_where)

    @staticmethod
    def line_of(row: dict) -> int | None:
        """The input line of an instruction, for FILE:LINE errors."""
        return row["ptx_line"]

    def _where(self, p: int) -> str:
        return self.where(self.compiled[p].slot.row)

    def _error(self, row: dict, message: str) -> InputError:
        return InputError(message, file=self.ctx.path, line=self.line_of(row), source_line=row["text"])

    def _runaway(self, p: int) -> None:
        row = self.compiled[p].slot.row
        raise self._error(row, f"kernel {self.ctx.kernel}: emulation exceeded max_steps={self.max_steps} warp-level "
                               f"steps; it was looping at {self.where(row)} (a loop bound may need --param, or "
                               f"raise the step limit)")

    # -- findings ---------------------------------------------------------------------------------
    def check_known(self, slot: Slot, bits: int, what: str) -> None:
        """Raise for missing parameters; note CTA dependence."""
        if bits & int(taint.PARAMS):
            names = taint.missing_params(bits, self.ctx.param_names)
            row = slot.row
            raise self._error(row, missing_params_message(self.ctx.kernel, what, self.where(row), names))
        if bits & int(taint.CTA_ANY):
            self.findings.cta_dependent(slot, what)

    def address_unknown(self, slot: Slot, bits: int, what: str) -> bool:
        """True (and reported) when a shared access cannot be evaluated."""
        self.check_known(slot, bits, f"shared-memory {what}")
        if bits & int(taint.UNKNOWN):
            self.report_unresolved(slot, f"{what} depends on {self.findings.why(bits)}")
            return True
        return False

    def report_unresolved(self, slot: Slot, reason: str, warps: np.ndarray | None = None) -> None:
        """An unresolved instruction; ``warps`` (a mask over this machine's warps) are the executions left out
        (None: how many is unknown, e.g. under a branch whose direction is unknown).  The executions are
        logged per CTA, so that the scheduler weights them like the accesses (classes, samples)."""
        key = self.findings.unresolved(slot, reason, counted=warps is not None)
        if warps is not None and warps.any():
            self.unresolved_log.append((key, self.cta_of_warp[warps]))

    def known_lanes(self, slot: Slot, lanes: np.ndarray, bits: np.ndarray, what: str) -> np.ndarray | None:
        """``lanes`` without the warps where some lane's ``bits`` are unknown (those executions are reported
        unresolved, counted); None when no lane is left."""
        active_bits = int(np.bitwise_or.reduce(bits if lanes is self.valid and self.all_valid else
                                               bits[np.flatnonzero(lanes)], initial=0))
        self.check_known(slot, active_bits, f"shared-memory {what}")
        if not active_bits & int(taint.UNKNOWN):
            return lanes
        unknown = lanes & ((bits & taint.UNKNOWN) != 0)
        warps = unknown.reshape(-1, self.warp_size).any(axis=1)
        why = int(np.bitwise_or.reduce(bits[unknown]))
        self.report_unresolved(slot, f"{what} depends on {self.findings.why(why)}", warps)
        lanes = lanes & ~np.repeat(warps, self.warp_size)
        return lanes if lanes.any() else None

    def explore(self, slot: Slot, lanes: np.ndarray, bits: np.ndarray) -> bool:
        """Send ``lanes`` (direction unknown at ``slot``) to the branch's rejoin point with everything the
        region between could change made unknown; False when the region does not allow it (see regions)."""
        region = self.findings.region(self.program, self.pc_of(slot))
        if region is None:
            return False
        if region.beyond:
            # lanes of these warps that know their way would run code past the rejoin point and meet the others
            # only after them: skip the region only where every lane of the warp at the branch skips it
            here = self.pc == self.pc_of(slot)
            warps = np.repeat(lanes.reshape(-1, self.warp_size).any(axis=1), self.warp_size)
            if (here & warps & ~lanes).any():
                return False
        why = int(np.bitwise_or.reduce(bits[lanes]))
        if why & int(taint.UNKNOWN & ~taint.BRANCH):
            why &= ~int(taint.BRANCH)        # name the data, not the earlier branches it went through
        line = slot.row["ptx_line"]
        reason = (f"executed under the branch at PTX line {line}, whose direction depends on "
                  f"{self.findings.why(why)}: which lanes take part is unknown")
        for target in region.shared_slots:
            self.report_unresolved(target, reason)
        extra = taint.BRANCH | (bits & taint.WILD)
        for key in region.registers:
            value, old = self.read(key)
            self.regs[key] = value
            self.taints[key] = np.where(lanes, old | extra, old)
        if region.writes_carry:
            self.carry_taint = np.where(lanes, self.carry_taint | extra, self.carry_taint)
        if region.writes_memory:
            self.forget_memory(lanes)
        self.pc[lanes] = region.rejoin
        self.doubt[lanes] = region.rejoin
        self.any_doubt = True
        return True

    def forget_memory(self, lanes: np.ndarray) -> None:
        """``lanes`` may have stored anywhere they could: their CTAs' shared memory and every --data buffer
        become unknown."""
        if self._shared is not None:
            self._shared.forget(self.cta_index[lanes])
        if self.ctx.memory is not None:
            self.ctx.memory.forget()

    def stop(self, slot: Slot, threads: np.ndarray, bits: int, reason: str | None = None) -> None:
        """Stop ``threads`` at an instruction whose outcome is unknown; report what they can no longer reach."""
        if not threads.any():
            return
        self.pc[threads] = EXIT
        why = reason or f"branch condition depends on {self.findings.why(bits)}"
        self.findings.stopped(slot, f"not analysed past {self.where(slot.row)}: {why}",
                              self.findings.reachable_shared(self.program, self.pc_of(slot)))

    def pc_of(self, slot: Slot) -> int:
        return self.findings.pc_index[id(slot)]

    def copy_sources(self, slot: Slot, value, bits, lanes: np.ndarray) -> np.ndarray:
        """Each lane's global source of a copy (ACCESSES ``source``), -1 where unknown: known, or an offset from
        a pointer parameter without a value at cudaMalloc's alignment (:mod:`traceconf.emulate.allocation`)."""
        sources, assumed = allocation.copy_sources(self.full(value), self.full(bits), lanes, self.warp_size)
        if assumed:
            self.findings.sources_at_alignment(slot, taint.missing_params(assumed, self.ctx.param_names))
        return sources

    def record_access(self, slot: Slot, kind: int, size: int, matrices: int, offsets: np.ndarray,
                      lanes: np.ndarray, op: int = 0, copy: tuple | None = None) -> None:
        """Log one execution per warp with an active lane (``lanes``); inactive lanes become -1.  ``copy`` (per
        thread): a copy's global source addresses, -1 where unknown (ACCESSES ``source``), and its bytes copied
        from them, -1 where it has no src-size operand or they are unknown (ACCESSES ``src_size``), or None."""
        sources, sizes = copy or (None, None)
        guard_bits = self.guard_taint
        # a scalar guard taint is known and was noted by with_guard (CTA dependence): the mask needs no look
        if isinstance(guard_bits, np.ndarray):
            lanes = self.known_lanes(slot, lanes, guard_bits, "predicate (active mask)")
            if lanes is None:
                return
        if self.any_doubt:
            doubtful = self.doubtful_warps() & lanes
            if doubtful.any():
                self.report_unresolved(slot, "its warp has lanes on an unknown side of a data-dependent branch: "
                                       "the active mask is unknown", doubtful.reshape(-1, self.warp_size).any(axis=1))
                lanes = lanes & ~doubtful
                if not lanes.any():
                    return
        if copy is not None:
            sources, sizes = (None if values is None else np.where(lanes, values, -1).reshape(-1, self.warp_size)
                              for values in (sources, sizes))
        # no row's address passes the offsets' largest (-1 where none accesses): within the declared bytes, the
        # extent has nothing to note and the rows need no look
        within = max(self.extent(offsets)[1], -1) + size <= self.findings.layout_bytes
        if offsets.shape != (self.size,):
            offsets = np.broadcast_to(offsets, (self.size,))
        if lanes is self.valid and self.all_valid:
            rows, masks = self.all_warps, self.whole_warps     # (the log's arrays are never written)
            patterns, index = self._address_rows(offsets, rows)
        else:
            # (a guard's mask serves several accesses: its rows are made once; the log's arrays are never written)
            rows, masks = self.derived(lanes, "warp rows", self._warp_rows)
            if not len(rows):
                return
            if copy is not None and len(rows) < len(self.cta_of_warp):
                sources, sizes = (None if values is None else values[rows] for values in (sources, sizes))
            patterns, index = self._address_rows(offsets, rows, lanes)
        if not within:
            self.findings.note_extent(slot, int(patterns.max()) + size)
        self.log.append((rows, int(slot.row["instruction"]), kind, size, matrices, patterns, index, masks, op,
                         sources, sizes))

    def _warp_rows(self, lanes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the warps with a lane in ``lanes``, their lane masks)."""
        masks = lane_masks(lanes.reshape(-1, self.warp_size))
        rows = np.flatnonzero(masks)
        return rows, masks[rows] if len(rows) < len(masks) else masks

    def _address_rows(self, offsets: np.ndarray, rows: np.ndarray,
                      lanes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(address rows, the row of each warp of ``rows``): the address patterns
        (:class:`~traceconf.accesses.AddressPatterns`) of an access at ``offsets`` by the threads in ``lanes``
        (None: every thread), -1 in lanes that do not access.  Where every CTA of the batch has the same address in
        each thread that accesses (shared offsets from the thread index: the usual case, a data-dependent guard or
        select changing only which threads access), one row per warp of a CTA serves them all, so the log and the
        counting after it hold a CTA's rows, not the batch's."""
        ctas, per_cta, warp = len(self.ctas), self.padded, self.warp_size
        if ctas > 1 and self.derived(offsets, "alike in every CTA", self._alike_in_every_cta):
            first = offsets[:per_cta]           # (an address register's offsets serve several accesses: one look)
            if lanes is None:
                return first.reshape(-1, warp).copy(), rows % self.warps_per_cta
            accessed = self.derived(lanes, "accessed in a CTA", lambda lanes: lanes.reshape(ctas, per_cta).any(axis=0))
            return np.where(accessed, first, -1).reshape(-1, warp), rows % self.warps_per_cta
        if lanes is None:
            return offsets.reshape(-1, warp)[rows], np.arange(len(rows))
        masked = offsets | self.derived(lanes, "-1 where not running", _minus_one_where_not)
        # the threads that do not access may hold other values: merged rows (offsets not negative, the shared
        # window's always: -1 then marks the threads that do not access alone)
        if ctas > 1 and self.extent(offsets)[0] >= 0:
            merged = _merged_rows(masked.reshape(ctas, per_cta))
            if merged is not None:
                return merged.reshape(-1, warp), rows % self.warps_per_cta
        return masked.reshape(-1, warp)[rows], np.arange(len(rows))

    def _alike_in_every_cta(self, offsets: np.ndarray) -> bool:
        """Whether each CTA's part of ``offsets`` equals the one before it.  The second CTA is looked at first:
        where they differ (junk in the threads a data-dependent guard skips) it usually does already."""
        per_cta = self.padded
        if not (offsets[per_cta:2 * per_cta] == offsets[:per_cta]).all():
            return False
        return bool((offsets[per_cta:] == offsets[:-per_cta]).all())


def _minus_one_where_not(lanes: np.ndarray) -> np.ndarray:
    """int64 -1 where ``lanes`` is false, 0 where true: ``offsets | this`` marks the threads not accessing (no
    branch per lane, which a data-dependent mask makes costly in np.where)."""
    return np.subtract(lanes, 1, dtype=np.int64)


def _merged_rows(by_cta: np.ndarray) -> np.ndarray | None:
    """One thread's offset for every CTA ((CTAs, threads) offsets, -1 where the thread does not access, else not
    negative) where every CTA accessing there has the same (-1 where none does); None where two differ.  The
    largest offset equals the smallest taken as unsigned (which puts -1 last) only then."""
    highest = by_cta.max(axis=0)
    if not np.array_equal(by_cta.view(np.uint64).min(axis=0).view(np.int64), highest):
        return None
    return highest


def lane_masks(lanes: np.ndarray) -> np.ndarray:
    """(warps,) uint64: the lanes set in each row of ``lanes`` ((warps, 32 or 64) bool, contiguous), bit ``lane``
    each (the rows' bits packed as one run: each row fills whole words)."""
    packed = np.packbits(lanes.reshape(-1), bitorder="little")
    return packed.view("<u4").astype(np.uint64) if lanes.shape[1] == 32 else packed.view("<u8")


class Findings:
    """Unresolved instructions, CTA dependence and extents, shared by every chunk of one emulation."""

    where = staticmethod(ptx_where)
    facts = PTX_FACTS            # the instruction set's control-flow facts (branch regions, reachability)

    def __init__(self, program: Program, layout_bytes: int):
        self.pc_index = {id(slot): index for index, slot in enumerate(program.slots)}
        self.layout_bytes = layout_bytes
        self.unresolved_rows: dict[tuple, dict] = {}
        self.cta_reasons: list[str] = []
        self.extent: dict[int, tuple[int, dict]] = {}
        self._reach_cache: dict[int, list[Slot]] = {}
        self._ipdom: list | None = None
        self._regions: dict[int, object] = {}
        self.without_data: list[str] = []       # pointer parameters global loads read through, with no --data
        self.globals_read: list[str] = []       # module globals (__device__ variables) read with no --data
        self.stop_notes: list[str] = []      # calls not followed: the counts miss what they would have done
        # copies whose global sources are offsets from parameters without a value, taken at cudaMalloc's
        # alignment: instruction -> (where, the parameters' names)
        self.aligned: dict[int, tuple[str, list[str]]] = {}
        #: called at each use of the CTA index found (the scheduler stops a probe it will run again anyway)
        self.on_cta_dependence: Callable[[], None] | None = None

    def saved(self) -> tuple:
        """What a run adds to the findings, copied (a batch run again in parts puts them back first)."""
        return copy.deepcopy((self.unresolved_rows, self.cta_reasons, self.extent, self.without_data,
                              self.globals_read, self.stop_notes, self.aligned))

    def restore(self, saved: tuple) -> None:
        (self.unresolved_rows, self.cta_reasons, self.extent, self.without_data, self.globals_read,
         self.stop_notes, self.aligned) = copy.deepcopy(saved)

    def sources_at_alignment(self, slot: Slot, names: list[str]) -> None:
        """A copy's global sources were taken as offsets from parameters ``names`` at cudaMalloc's alignment."""
        _, known = self.aligned.setdefault(int(slot.row["instruction"]), (self.where(slot.row), []))
        known.extend(n for n in names if n not in known)

    def alignment_notes(self) -> list[str]:
        """The analysis note of :meth:`sources_at_alignment` (none where no copy was counted so)."""
        if not self.aligned:
            return []
        names = list(dict.fromkeys(n for _, known in self.aligned.values() for n in known))
        places = [place for place, _ in self.aligned.values()]
        return [assumed_note(names, places[:8] + ["…"] * (len(places) > 8))]

    def loads_through(self, names: list[str], module_globals: list[str] = ()) -> None:
        self.without_data.extend(n for n in names if n not in self.without_data)
        self.globals_read.extend(n for n in module_globals if n not in self.globals_read)

    def why(self, bits: int) -> str:
        """Why a value is unknown, in words, naming the module globals read and the parameters whose buffers
        have no --data."""
        text = taint.describe(bits)
        if not bits & int(taint.LOADED) or not (self.without_data or self.globals_read):
            return text
        sources = []
        if self.globals_read:
            names = ", ".join(self.globals_read)
            sources.append(f"reads __device__ variable{'s' if len(self.globals_read) > 1 else ''} {names}, whose "
                           f"contents (initial values, every CTA's updates) are followed only with --data")
        if self.without_data:
            names = ", ".join(self.without_data)
            sources.append(f"reads global memory through {names}, which ha"
                           f"{'ve' if len(self.without_data) > 1 else 's'} no --data")
        return text + " (the kernel " + "; it ".join(sources) + ")"

    def unresolved(self, slot: Slot, reason: str, counted: bool = False) -> tuple:
        """Note an unresolved instruction; ``counted``: its executions left out are logged by the machine
        (else how many is unknown, e.g. under a branch whose direction is unknown).  Returns the entry's key
        (the scheduler adds the executions the machines logged under it, weighted by the CTAs they stand for)."""
        row = slot.row
        key = (int(row["instruction"]), reason)
        entry = self.unresolved_rows.get(key)
        if entry is None:
            entry = self.unresolved_rows[key] = self.entry(row, reason)
        if not counted:
            entry["uncounted"] = True
        return key

    @staticmethod
    def entry(row: dict, reason: str) -> dict:
        return {"instruction": int(row["instruction"]), "ptx": row["text"], "ptx_line": int(row["ptx_line"]),
                "reason": reason, "executions": 0, "uncounted": False}

    def region(self, program: Program, branch: int):
        if branch not in self._regions:
            if self._ipdom is None:
                self._ipdom = immediate_post_dominators(program.slots, self.facts.successors)
            self._regions[branch] = branch_region(program, self._ipdom, branch, self.facts)
        return self._regions[branch]

    def stopped(self, slot: Slot, reason: str, reachable: list[Slot]) -> None:
        if slot.stop_reason:      # a call not followed: its shared accesses are missing from every count
            note = (f"{reason}: the shared accesses of that call (and of anything after it) are not counted, "
                    "so the counts are a lower bound")
            if note not in self.stop_notes and len(self.stop_notes) < 8:
                self.stop_notes.append(note)
        for target in reachable:
            self.unresolved(target, reason)

    def cta_dependent(self, slot: Slot, what: str) -> None:
        if self.on_cta_dependence is not None:
            self.on_cta_dependence()
        if len(self.cta_reasons) < 8:
            reason = f"{what} at {self.where(slot.row)} depends on the CTA index"
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
        seen, todo = set(), list(self.facts.successors(slots, start))
        while todo:
            index = todo.pop()
            if index in seen or index >= len(slots):
                continue
            seen.add(index)
            todo.extend(self.facts.successors(slots, index))
        found = [slots[i] for i in sorted(seen) if self.facts.is_shared(slots[i])]
        self._reach_cache[start] = found
        return found
