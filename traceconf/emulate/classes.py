"""CTA classes: which CTAs of a launch provably access shared memory alike.

When the CTA index reaches a shared address, the guard of a shared access or a
branch, CTAs may differ; but usually only through bounds checks (``i < n``) or
tile offsets that move whole bank rows.  This module proves, for a box of CTAs
(a range per grid axis), that every CTA in it executes the same path and counts
the same wavefronts as the box's first corner, so that corner is emulated once
and its counts multiplied by the box's size, exactly.

The argument
------------
While a :class:`Watch` is attached to a machine, a value tainted ``CTA`` is
known to be an *affine* function of the CTA coordinates (over the exact
integers) on the path taken: the watch lets ``CTA`` pass only through
``mov``, integer ``cvt``, ``add``/``sub``, ``mul``/``mad`` with one CTA
factor, ``shl`` by a CTA-free amount and ``selp`` with a CTA-free selector,
and only when the exact result lies in ``[0, 2**(bits-1))`` (no wrap-around,
same value signed and unsigned).  Any other use marks the value
``CTA_OPAQUE``.  A comparison (``setp``/``set``) of affine values records
the sign of ``a - b`` per thread (the *decision*) and its result becomes
``CTA_DECIDED``: constant wherever the recorded signs are.

For an affine ``f`` over a box, ``f < 0`` (``= 0``, ``> 0``) at every corner
implies the same everywhere inside (a box is the convex hull of its corners;
an affine function zero at the corners is zero on their hull); the range
checks hold inside for the same reason.  So if all corners of a box record the
same decisions, in the same order, and none met an opaque value in a decision,
every CTA of the box takes the same path with the same decisions, by induction
over the steps (everything else a step reads does not depend on the CTA).
Its shared addresses are then affine too: the corners give the per-axis
coefficient of every lane of every execution, and when each coefficient is
the same for all lanes of the execution and a multiple of the bank row
(``row_bytes``), every CTA's execution is the corner's shifted by whole rows,
which costs the same wavefronts under every rule set (docs/rules.md, "Shift
invariance").

Memory is the other way the CTA index could reach a decision: a value read
back from memory is never taken as affine (:func:`taint.read_back` marks it
``CTA_OPAQUE`` when the address or the bytes depend on the CTA index), and
when loaded shared values may reach an address or a condition
(``Context.shared_values``), a shared access at a CTA-dependent address makes
its CTA unclassable (which bytes a later load finds written could change
inside the box).  Carries written by an instruction whose inputs depend on
the CTA index are opaque too.

This module holds the argument and the per-instruction checks for PTX; the
SASS rules (:mod:`traceconf.sass.classes`) build their checks from the same
pieces (:func:`arithmetic`, :func:`comparison`, :func:`decision_inputs`).

:func:`partition` splits the grid until every box passes (a single CTA
always does) or a budget of emulated CTAs runs out: where two corners first
decide differently, at the CTAs where that decision's sign changes
(:func:`boundaries`: it is affine between them), else in the middle.  Where
it cuts decides only which corners run next, never whether a box is proved.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from itertools import product
from typing import Callable

import numpy as np

from traceconf.accesses import INACTIVE, WarpAccesses
from traceconf.emulate import taint
from traceconf.emulate.intops import FLOAT_TYPES, SIGNED_TYPES, TYPE_BITS
from traceconf.emulate.memory import address_operand
from traceconf.emulate.operands import Context, address_reader, reader, register_key, split_destinations
from traceconf.emulate.program import Program, Slot
from traceconf.emulate.simt import guard_reader
from traceconf.emulate.state import is_uniform
from traceconf.ptx.opcodes import may_access_shared

CTA, OPAQUE, DECIDED = taint.CTA, taint.CTA_OPAQUE, taint.CTA_DECIDED
#: Largest exact value an affine 64-bit result may take (float64 holds every integer below 2**53).
LIMIT_64 = float(1 << 52)
CONTROL_OPCODES = frozenset({"bra", "brx", "ret", "exit", "trap", "call", "bar", "barrier"})


def limit_of(bits: int) -> float:
    return float(1 << (bits - 1)) if bits < 64 else LIMIT_64


def exact_value(value: np.ndarray, type_name: str) -> np.ndarray:
    """The integer a register of ``type_name`` holds, as float64 (signed types read as signed)."""
    bits = TYPE_BITS.get(type_name, 32)
    value = np.asarray(value, dtype=np.uint64)
    if bits < 64:
        value = value & np.uint64((1 << bits) - 1)
    if type_name in SIGNED_TYPES:
        shifted = value << np.uint64(64 - bits) if bits < 64 else value
        return (shifted.view(np.int64) >> np.int64(64 - bits) if bits < 64 else shifted.view(np.int64)).astype(
            np.float64)
    return value.astype(np.float64)


def _full(array, size: int) -> np.ndarray:
    """``array`` with one element per thread, read-only (a per-thread array is taken as it is)."""
    if type(array) is np.ndarray and array.shape == (size,):
        return array
    return np.broadcast_to(np.asarray(array), (size,))


@dataclass(frozen=True)
class Rule:
    """How an instruction keeps CTA-dependent values affine.

    ``exact(values)``: the exact integer result (float64) from the sources' register values; a lane whose
    result falls outside ``[0, 2**(bits-1))`` (a wrap, or ``exact`` saying -1: not an identity there) makes
    it opaque.  ``not_both``: two 1-based source positions that must not both depend on the CTA index (a
    product); ``cta_free``: positions that must not depend on it at all (a shift amount, a selector, a mask);
    ``read_bits``: per source, the width it is read at: a CTA-dependent source must fit below its
    ``2**(width-1)``, or reading it would truncate an affine value into a wrapped one."""

    exact: Callable
    bits: int
    not_both: tuple = ()
    cta_free: tuple = ()
    read_bits: tuple = ()


class Check:
    """What the watch does around one slot: ``before(m, active)`` returns what ``after`` needs, or None."""

    __slots__ = ("before", "after")

    def __init__(self, before, after):
        self.before, self.after = before, after


# --------------------------------------------------------------------------- per-instruction checks any level builds on


def _has(bits, flags) -> bool:
    """Whether any lane's taint ``bits`` (an array, or one value for all lanes) has one of ``flags``."""
    if type(bits) is np.ndarray and bits.ndim:
        return bool((bits & flags).any())
    return bool(int(bits) & int(flags))          # Python ints: numpy scalar arithmetic costs more per call


UNKNOWN_BITS, OPAQUE_BITS = int(taint.UNKNOWN), int(OPAQUE)


@functools.lru_cache(maxsize=16)
def _no_lanes(size: int) -> np.ndarray:
    """A read-only mask of no lanes."""
    lanes = np.zeros(size, dtype=bool)
    lanes.flags.writeable = False
    return lanes


def _one(bits) -> int | None:
    """The taint of every lane when ``bits`` is one value for all of them (a scalar), else None."""
    return None if not is_uniform(bits) else int(
        bits[0] if type(bits) is np.ndarray and bits.ndim else bits)


def _cta_lanes(bits, size: int, active: np.ndarray) -> np.ndarray:
    return active & ((_full(bits, size) & CTA) != 0)


def _unknown(bits, size: int) -> np.ndarray:
    """Lanes whose value is unknown to the emulator (and not opaque: that one may be known in another CTA)."""
    bits = _full(bits, size)
    return ((bits & taint.UNKNOWN) != 0) & ((bits & OPAQUE) == 0)


def _varies(bits, size: int, active: np.ndarray) -> np.ndarray:
    """Active lanes where a condition may differ between the CTAs of a box: it depends on the CTA index other
    than through recorded decisions, and is not unknown anyway (an unknown condition is explored or stops,
    alike in every CTA)."""
    return active & ((_full(bits, size) & (CTA | OPAQUE)) != 0) & ~_unknown(bits, size)


def quiet_test(groups: list[tuple[list[str] | None, int]], sources: list[str] | None = (),
               whole: list[str] = ()) -> Callable | None:
    """``m -> True`` when a check has nothing to do, read off the machine's register taints without computing a
    value (most steps touch no CTA-dependent value: reading every operand's value to find that out cost most of
    a watched run).  ``groups`` are (register keys whose taints make up some inputs' taints, the taint flags the
    check looks for in those inputs): no register of a group may carry one of its flags.  ``sources``: the keys
    of an instruction's sources (:func:`arithmetic`): none may carry ``CTA``, unless a source whose taint is one
    register's (``whole``: those registers) holds a value unknown in every thread (and not opaque): the result is
    unknown anyway, and needs no affinity.  None (no such test) when some input's taint is not its registers'
    alone (keys None: a special register, ...); :data:`INERT` when there is nothing to test (constants): the
    check never acts."""
    if sources is None or any(keys is None for keys, _ in groups):
        return None
    tests = [(tuple(dict.fromkeys(keys)), int(flags)) for keys, flags in groups if keys]
    if not tests and not sources:
        return INERT
    inputs, absorbing, cta = tuple(dict.fromkeys(sources)), frozenset(whole), int(CTA)

    def quiet(m) -> bool:
        taints = m.taints
        for keys, flags in tests:
            for key in keys:
                bits = taints.get(key)
                if bits is not None and _has(bits, flags):
                    return False
        tainted = False
        for key in inputs:
            bits = taints.get(key)
            if bits is None:
                continue
            if type(bits) is not np.ndarray:         # one taint for every thread
                one = int(bits)
                if key in absorbing and one & UNKNOWN_BITS and not one & OPAQUE_BITS:
                    return True
                tainted = tainted or bool(one & cta)
            elif not tainted:
                tainted = bool((bits & CTA).any())
        return not tainted
    return quiet


def INERT(m) -> bool:
    """The :func:`quiet_test` of a check with nothing to test: always quiet (the check is left out)."""
    return True


def arithmetic(keys: list, sources: list, guard, rule, carry: bool = False, quiet=None) -> Check | None:
    """An instruction writing ``keys`` from ``sources`` (readers ``m -> (value, bits)``; ``guard``: ``m ->
    (holds, bits)``).  ``rule`` is None (the result is not affine: CTA-dependent results become opaque) or a
    :class:`Rule`.  ``carry``: the instruction writes the carry flag, which becomes opaque wherever a source
    depends on the CTA index.  ``quiet``: :func:`quiet_test` of the guard (flags ``CTA | OPAQUE``) and the
    sources, or None (None returned for :data:`INERT`: nothing to check)."""
    if quiet is INERT:
        return None

    def before(m, active):
        if quiet is not None and quiet(m):
            return None
        pairs = [s(m) for s in sources]
        guard_bits = guard(m)[1] if guard is not None else None
        # most instructions touch no CTA-dependent value: nothing below can then mark a lane (the per-lane
        # masks are all false), and this test costs a fraction of building them
        if not any(_has(bits, CTA) for _, bits in pairs) and (guard_bits is None or not _has(guard_bits, CTA | OPAQUE)):
            return None
        size = m.size
        # a result that is unknown anyway (loaded data, ...) needs no affinity: every use of it is explored or
        # unresolved, alike in every CTA, whatever its value.  A taint that is one value for every thread (most
        # are) gives all lanes or none: no per-lane mask to build
        known = active
        for _, b in pairs:
            one = _one(b)
            if one is None:
                if _has(b, taint.UNKNOWN):
                    known = known & ~_unknown(b, size)
            elif one & UNKNOWN_BITS and not one & OPAQUE_BITS:
                known = _no_lanes(size)
                break
        none = _no_lanes(size)
        cta = [none if not _has(b, CTA) else known if _one(b) is not None else _cta_lanes(b, size, known)
               for _, b in pairs]
        touched = np.logical_or.reduce(cta) if len(cta) > 1 else cta[0] if cta else none
        # a guard that depends on the CTA index other than through decisions decides whether the write happens:
        # the destination is opaque in every lane it guards, written here or not
        guarded = _varies(guard_bits, size, active) if guard is not None else None
        if guarded is not None:
            touched = touched | guarded
        if not touched.any():
            return None
        if rule is None or (guarded is not None and guarded.any()):
            return touched, touched
        bad = np.zeros(size, dtype=bool)
        if rule.not_both:
            bad |= cta[rule.not_both[0] - 1] & cta[rule.not_both[1] - 1]
        for position in rule.cta_free:
            bad |= cta[position - 1]
        for (value, _), lanes, width in zip(pairs, cta, rule.read_bits):
            if width and width < 64:
                bad |= lanes & (_full(np.asarray(value, dtype=np.uint64), size) >= np.uint64(1 << (width - 1)))
        result = rule.exact([v for v, _ in pairs])
        bad |= touched & ~((result >= 0) & (result < limit_of(rule.bits)))
        return (bad if bad.any() else None), touched

    def after(m, active, token):
        bad, touched = token
        if bad is not None:
            for key in keys:
                if key in m.taints:
                    m.taints[key] = np.where(bad, m.taints[key] | OPAQUE, m.taints[key])
        if carry:
            m.carry_taint = np.where(touched, m.carry_taint | OPAQUE, m.carry_taint)
    return Check(before, after)


def comparison(keys: list, a, b, exact, limit: float, instruction: int, guard=None, inputs=(),
               quiet=None) -> Check | None:
    """A comparison of ``a`` and ``b`` (readers) writing predicates ``keys``: records the sign of ``a - b``
    (``exact(value)``: the integer a register holds, as float64) as the CTA's decision, and makes the results
    DECIDED where the operands were affine.  ``inputs`` (readers) are other inputs of the result, like a
    chained predicate: opaque ones make the CTA unclassable.  ``quiet``: :func:`quiet_test` of every input
    (flags ``CTA | OPAQUE``), or None (None returned for :data:`INERT`)."""
    if quiet is INERT:
        return None

    def before(m, active):
        if quiet is not None and quiet(m):
            return None
        (x, tx), (y, ty) = a(m), b(m)
        size = m.size
        taints = [tx, ty] + [extra(m)[1] for extra in ([guard] if guard is not None else []) + list(inputs)]
        if not any(_has(bits, CTA | OPAQUE) for bits in taints):
            return None              # neither opaque nor affine anywhere: no decision to record
        both = _full(tx, size) | _full(ty, size)
        for bits in taints[2:]:
            both = both | _full(bits, size)
        opaque = active & ((both & OPAQUE) != 0)
        if opaque.any():
            m.watch.unclassable(opaque)
        # an unknown operand makes the result unknown: its branch is explored (or its access unresolved) alike in
        # every CTA, so no decision is recorded for it
        affine = active & ((both & CTA) != 0) & ~opaque & ~_unknown(both, size)
        if not affine.any():
            return None
        vx, vy = exact(_full(x, size)), exact(_full(y, size))
        outside = affine & ((((_full(tx, size) & CTA) != 0) & ~((vx >= 0) & (vx < limit)))
                            | (((_full(ty, size) & CTA) != 0) & ~((vy >= 0) & (vy < limit))))
        if outside.any():
            m.watch.unclassable(outside)
        m.watch.decide(instruction, affine, vx - vy)
        return affine

    def after(m, active, affine):
        for key in keys:
            if key in m.taints:
                bits = m.taints[key]
                m.taints[key] = np.where(affine, (bits & ~CTA) | DECIDED, bits)
    return Check(before, after)


def decision_inputs(guard, addresses=(), constant=(), cta_free_addresses: bool = False,
                    quiet=None) -> Check | None:
    """A branch or shared access: its guard (and ``constant`` operands) must be class-constant, its addresses
    affine at worst (``cta_free_addresses``: must not depend on the CTA index at all).  ``quiet``:
    :func:`quiet_test` of the guard and constant operands (flags ``CTA | OPAQUE``) and the addresses
    (:func:`forbidden_in_addresses`), or None (None returned for :data:`INERT`)."""
    if quiet is INERT:
        return None
    forbidden = forbidden_in_addresses(cta_free_addresses)

    def before(m, active):
        if quiet is not None and quiet(m):
            return None
        size = m.size
        holds, guard_bits = guard(m) if guard is not None else (None, None)
        constant_bits = [operand(m)[1] for operand in constant]
        address_bits = [address(m)[1] for address in addresses]
        # a guard, operand or address without any dependence on the CTA index (most) cannot vary in a box
        varying = [bits for bits in [guard_bits, *constant_bits] if bits is not None and _has(bits, CTA | OPAQUE)]
        address_bits = [bits for bits in address_bits if _has(bits, forbidden)]
        if not varying and not address_bits:
            return None
        bad = np.zeros(size, dtype=bool)
        for bits in varying:
            bad |= _varies(bits, size, active)
        # a class-constant guard: the same lanes in every CTA
        executing = active if holds is None else active & _full(holds, size)
        for bits in address_bits:
            bad |= executing & ((_full(bits, size) & forbidden) != 0)
        if bad.any():
            m.watch.unclassable(bad)
        return None
    return Check(before, None)


def forbidden_in_addresses(cta_free_addresses: bool) -> np.uint64:
    """The taints a shared access's address must not carry (:func:`decision_inputs`)."""
    return CTA | OPAQUE if cta_free_addresses else OPAQUE


# --------------------------------------------------------------------------- PTX


def _affine_rule(row: dict) -> Rule | None:
    """The :class:`Rule` of an affine-capable PTX instruction, or None when the instruction is not one."""
    opcode, modifiers = row["opcode"], row["modifiers"] or []
    kind = row.get("type") or "b32"
    if kind in FLOAT_TYPES or "cc" in modifiers or "sat" in modifiers or "hi" in modifiers:
        return None
    operands = row["operands"] or []
    if any(op["kind"] not in ("reg", "imm") for op in operands):
        return None
    bits = TYPE_BITS.get(kind, 32)
    wide = "wide" in modifiers
    read = (bits,) * 3

    def typed(values):
        return [exact_value(v, kind) for v in values]

    if opcode == "mov" and len(operands) == 2:
        return Rule(lambda v: typed(v)[0], bits, read_bits=read)
    if opcode == "cvt":
        types = [m for m in modifiers if m in TYPE_BITS]
        if len(types) != 2 or any(t in FLOAT_TYPES for t in types) or any(m.startswith("r") for m in modifiers
                                                                          if m not in TYPE_BITS):
            return None
        destination, source = types
        return Rule(lambda v: exact_value(v[0], source), TYPE_BITS[destination], read_bits=(TYPE_BITS[source],))
    if opcode in ("add", "sub") and len(operands) == 3:
        sign = -1.0 if opcode == "sub" else 1.0
        return Rule(lambda v: (lambda a, b: a + sign * b)(*typed(v)), bits, read_bits=read)
    if opcode == "mul" and len(operands) == 3:
        return Rule(lambda v: (lambda a, b: a * b)(*typed(v)), 2 * bits if wide else bits, (1, 2), read_bits=read)
    if opcode == "mad" and len(operands) == 4:
        out = 2 * bits if wide else bits

        def mad(v):
            a, b = typed(v[:2])
            c = exact_value(v[2], _signed_or_unsigned(kind, out)) if wide else typed(v[2:])[0]
            return a * b + c
        return Rule(mad, out, (1, 2), read_bits=(bits, bits, out))
    if opcode == "shl" and len(operands) == 3:
        def shl(v):
            amount = np.asarray(v[1], dtype=np.uint64).astype(np.float64)
            return exact_value(v[0], kind) * np.exp2(np.minimum(amount, 64.0))
        return Rule(shl, bits, cta_free=(2,), read_bits=read)
    if opcode == "selp" and len(operands) == 4:
        return Rule(lambda v: np.where((np.asarray(v[2], dtype=np.uint64) & np.uint64(1)) == 1, *typed(v[:2])),
                    bits, cta_free=(3,), read_bits=read)
    if opcode == "and" and len(operands) == 3:
        mask = next((int(op["value"]) for op in operands[1:] if op["kind"] == "imm"), None)
        if mask is not None and mask > 0 and not (mask + 1) & mask:
            # x & (2**k - 1) is x itself while x < 2**k (old nvcc's 16-bit %ctaid, ptxas's 0xffff masks)
            mask_source = 1 if operands[1]["kind"] == "imm" else 2      # 1-based, as Rule positions are
            return Rule(lambda v: low_mask(exact_value(v[2 - mask_source], kind), mask), bits,
                        cta_free=(mask_source,), read_bits=read)
    return None


def low_mask(value: np.ndarray, mask: int) -> np.ndarray:
    """``value & mask`` for a low-bit ``mask`` (2**k - 1) where that is ``value`` itself, else -1 (not affine)."""
    return np.where((value >= 0) & (value <= mask), value, -1.0)


def _signed_or_unsigned(kind: str, bits: int) -> str:
    return ("s" if kind in SIGNED_TYPES else "u") + str(bits)


_COMPARISON_MODIFIERS = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"})


def compile_check(slot: Slot, ctx: Context) -> Check | None:
    row = slot.row
    opcode = row["opcode"]
    operands = row["operands"] or []
    guard = guard_reader(slot, ctx)
    if opcode in ("setp", "set"):
        return _comparison(slot, ctx, guard)
    if opcode in CONTROL_OPCODES:
        # an indexed branch (brx.idx) chooses its target by a register: that register must not depend on the
        # CTA index at all (no comparison records where it leads); indirect calls are not followed anyway
        chosen_by = [reader(op, slot, ctx) for op in operands if op["kind"] == "reg"] if opcode == "brx" else []
        return decision_inputs(guard, constant=chosen_by) if guard is not None or chosen_by else None
    address = address_operand(row)
    if address is not None and may_access_shared(opcode, row["state_space"]):
        # the loaded register gets its value through taint.read_back: no rule needed for it
        return decision_inputs(guard, [address_reader(operands[address], slot, ctx)],
                               cta_free_addresses=bool(ctx.shared_values))
    if not operands or operands[0]["kind"] not in ("reg", "vector"):
        return None
    keys = [register_key(name, slot) for name in split_destinations(operands[0])]
    sources = [reader(op, slot, ctx) if op["kind"] != "address" else address_reader(op, slot, ctx)
               for op in operands[1:]]
    return arithmetic(keys, sources, guard, _affine_rule(row), carry="cc" in (row["modifiers"] or []))


def _comparison(slot: Slot, ctx: Context, guard) -> Check | None:
    row = slot.row
    operands = row["operands"] or []
    modifiers = row["modifiers"] or []
    types = [m for m in modifiers if m in TYPE_BITS]
    source_type = types[-1] if types else "b32"
    if source_type in FLOAT_TYPES or len(operands) < 3 or not _COMPARISON_MODIFIERS & set(modifiers):
        return None
    keys = [register_key(name, slot) for name in split_destinations(operands[0])]
    # setp.lt.and.s32 p, a, b, q: the combining predicate (and any further source) is an input of the result
    inputs = [reader(op, slot, ctx) for op in operands[3:] if op["kind"] == "reg"]
    return comparison(keys, reader(operands[1], slot, ctx), reader(operands[2], slot, ctx),
                      lambda value: exact_value(value, source_type), limit_of(TYPE_BITS.get(source_type, 32)),
                      int(row["instruction"]), guard, inputs)


# --------------------------------------------------------------------------- the watch


class Watch:
    """Per machine: every CTA's decisions, and which CTAs met a use no class argument covers.  The differences
    ``a - b`` of each CTA's first decisions (:data:`KEPT_DIFFERENCES` in all) are kept beside their signs: where two
    corners first decide differently, they say at which CTA between them the decision changes
    (:func:`boundaries`)."""

    def __init__(self, checks: list[Check | None], ctas: int, padded: int):
        self.checks = checks
        self.ctas, self.padded = ctas, padded
        self.records: list[list[bytes]] = [[] for _ in range(ctas)]
        self.differences: list[list[np.ndarray]] = [[] for _ in range(ctas)]
        self.kept = np.zeros(ctas, dtype=np.int64)       # differences kept per CTA (lanes)
        self.keep = max(padded, KEPT_DIFFERENCES // ctas)  # at most, per CTA
        self.opaque = np.zeros(ctas, dtype=bool)

    def unclassable(self, threads: np.ndarray) -> None:
        self.opaque |= threads.reshape(self.ctas, self.padded).any(axis=1)

    def decide(self, instruction: int, threads: np.ndarray, difference: np.ndarray) -> None:
        """Record the sign of ``difference`` (the exact ``a - b`` per thread) where ``threads`` decide."""
        codes = np.where(threads, np.sign(difference) + 2, 0).astype(np.int8).reshape(self.ctas, self.padded)
        rows = threads.reshape(self.ctas, self.padded).any(axis=1)
        head = instruction.to_bytes(4, "little")
        differences = np.where(threads, difference, 0.0).reshape(self.ctas, self.padded)
        for cta in np.flatnonzero(rows).tolist():
            self.records[cta].append(head + codes[cta].tobytes())
            if self.kept[cta] < self.keep:
                self.differences[cta].append(differences[cta].copy())
                self.kept[cta] += self.padded

    def signature(self, index: int) -> bytes | None:
        """The CTA's decisions in order; None when it met an opaque use."""
        return None if self.opaque[index] else b"".join(self.records[index])

    def decisions(self, index: int) -> "Decisions":
        return Decisions(self.records[index], self.differences[index])


#: Differences (thread values, float64) the decisions of one machine's CTAs keep for :func:`boundaries`, at most:
#: 8 MiB (a decision past them splits a box in the middle instead).
KEPT_DIFFERENCES = 1 << 20


@dataclass
class Decisions:
    """A CTA's decisions in order (instruction and per-thread sign codes), and the differences of the first."""

    records: list[bytes]
    differences: list[np.ndarray]


def boundaries(low: Decisions, high: Decisions, span: int) -> list[int]:
    """Where two corners ``span`` CTAs apart along one axis first decide differently, the offsets from the low
    corner (1..span, ascending) at which that decision's sign changes: every decision before is the same at
    both corners, so the same in every CTA between (the class argument), and the differing one is an affine
    function of the CTA coordinate there, ``f(t) = f(0) + c·t`` per thread; its sign changes where ``f``
    reaches 0 and, where it lands on 0 exactly, once more right after.  Empty when that cannot be read off (no
    kept difference, or not affine); at most :data:`MAX_CUTS` (the first ones)."""
    position = next((i for i, (a, b) in enumerate(zip(low.records, high.records)) if a != b), None)
    if position is None or position >= min(len(low.differences), len(high.differences)):
        return []
    a, b = low.records[position], high.records[position]
    if a[:4] != b[:4] or len(a) != len(b):
        return []
    deciding = np.frombuffer(a[4:], dtype=np.int8) != 0
    if not np.array_equal(deciding, np.frombuffer(b[4:], dtype=np.int8) != 0):
        return []
    start, end = low.differences[position][deciding], high.differences[position][deciding]
    step = (end - start) / span
    changes = np.sign(start) != np.sign(end)
    if not changes.any() or not np.array_equal(step, np.round(step)):
        return []
    start, step = start[changes], step[changes]
    # the first t where f(t) has left f(0)'s side: ceil(-f(0)/c) (f(0) = 0: at once)
    zero = np.where(start == 0, 0.0, np.ceil(-start / step))
    lands = (start == 0) | (start + step * zero == 0)
    cuts = np.concatenate([np.maximum(zero, 1.0), zero[lands & (zero < span)] + 1.0])
    return [int(t) for t in np.unique(cuts[(cuts >= 1) & (cuts <= span)])[:MAX_CUTS]]


#: Cuts one failed box is split at, at most (each adds a box whose corners must run).
MAX_CUTS = 4


def compile_checks(program: Program, ctx: Context) -> list[Check | None]:
    return [compile_check(slot, ctx) for slot in program.slots]


# --------------------------------------------------------------------------- boxes


@dataclass
class Box:
    low: tuple[int, int, int]
    high: tuple[int, int, int]          # inclusive

    @property
    def size(self) -> int:
        return int(np.prod([h - l + 1 for l, h in zip(self.low, self.high)]))

    def corners(self) -> list[tuple[int, int, int]]:
        return sorted(set(product(*[(l, h) for l, h in zip(self.low, self.high)])))

    def split(self, axis: int, starts: list[int] | None = None) -> list["Box"]:
        """Boxes along ``axis``, each new one beginning at a coordinate of ``starts`` (ascending, inside the box
        and past its low corner; default: two halves)."""
        if not starts:
            starts = [(self.low[axis] + self.high[axis]) // 2 + 1]
        boxes, first = [], self.low[axis]
        for end in [*starts, self.high[axis] + 1]:
            low, high = list(self.low), list(self.high)
            low[axis], high[axis] = first, end - 1
            boxes.append(Box(tuple(low), tuple(high)))
            first = end
        return boxes

    def describe(self) -> str:
        return " × ".join(f"{l}" if l == h else f"{l}–{h}" for l, h in zip(self.low, self.high))


@dataclass
class CtaRun:
    """One emulated CTA: its decisions and its executions (emulation order)."""

    signature: bytes | None
    accesses: WarpAccesses
    unresolved: dict = field(default_factory=dict)   # (instruction, reason) → executions left out
    decisions: Decisions | None = None                # the signature's parts, with differences (boundaries)


@dataclass
class Partition:
    classes: list[Box] = field(default_factory=list)                 # proved boxes (their corner ran)
    left: list[Box] = field(default_factory=list)                    # boxes no class covers (budget)
    emulated: int = 0


def linear(coordinate: tuple[int, int, int], grid: tuple[int, int, int]) -> int:
    return coordinate[0] + grid[0] * (coordinate[1] + grid[1] * coordinate[2])


def same_class(box: Box, runs: dict[tuple, CtaRun], row_bytes: int) -> tuple[bool, int | None, bool, list[int]]:
    """(whether every CTA of ``box`` provably counts like its low corner, an axis worth splitting, whether no
    two CTAs apart along that axis can ever share a class: their addresses move by a whole number of bytes
    per CTA that is not a whole number of bank rows, the coordinates along that axis where new boxes begin:
    where a decision changes, :func:`boundaries`; empty: split in the middle)."""
    corners = box.corners()
    base = runs[box.low]
    if base.signature is None:
        return False, None, False, []
    shifts: dict[int, np.ndarray] = {}
    for corner in corners[1:]:
        run = runs[corner]
        axes = [axis for axis in range(3) if corner[axis] != box.low[axis]]
        if run.signature != base.signature or not _aligned(base.accesses, run.accesses):
            if len(axes) != 1:
                return False, None, False, []
            axis = axes[0]
            cuts = []
            if run.signature is not None and run.signature != base.signature \
                    and base.decisions is not None and run.decisions is not None:
                cuts = boundaries(base.decisions, run.decisions, box.high[axis] - box.low[axis])
            return False, axis, False, [box.low[axis] + t for t in cuts]
        if len(axes) == 1:
            axis = axes[0]
            shift = _uniform_shift(base.accesses, run.accesses)
            span = box.high[axis] - box.low[axis]
            if shift is None or np.any(shift % (span * row_bytes)):
                # the corners agree, so addresses are affine along the axis: a step per CTA that is whole but
                # not whole rows fails in every smaller box too
                hopeless = shift is not None and not np.any(shift % span) and bool(np.any((shift // span) % row_bytes))
                return False, axis, hopeless, []
            shifts[axis] = shift
    for corner in corners[1:]:
        axes = [axis for axis in range(3) if corner[axis] != box.low[axis]]
        if len(axes) > 1:
            shift = _uniform_shift(base.accesses, runs[corner].accesses)
            if shift is None or not np.array_equal(shift, sum(shifts[axis] for axis in axes)):
                return False, None, False, []
    return True, None, False, []


def _aligned(a: WarpAccesses, b: WarpAccesses) -> bool:
    return (len(a) == len(b) and np.array_equal(a.instruction, b.instruction) and np.array_equal(a.warp, b.warp)
            and np.array_equal(a.kind, b.kind) and np.array_equal(a.bytes, b.bytes)
            and np.array_equal(a.matrices, b.matrices)
            and np.array_equal(a.address == INACTIVE, b.address == INACTIVE))


def _uniform_shift(a: WarpAccesses, b: WarpAccesses) -> np.ndarray | None:
    """Per execution, the one distance every active lane moved by (None if the lanes disagree)."""
    if not len(a):
        return np.zeros(0, dtype=np.int64)
    active = a.address != INACTIVE
    difference = np.where(active, b.address - a.address, 0)
    lowest = np.where(active, difference, np.iinfo(np.int64).max).min(axis=1)
    highest = np.where(active, difference, np.iinfo(np.int64).min).max(axis=1)
    lowest = np.where(active.any(axis=1), lowest, 0)
    highest = np.where(active.any(axis=1), highest, 0)
    if not np.array_equal(lowest, highest):
        return None
    return lowest


def whole_grid(grid: tuple[int, int, int]) -> Box:
    return Box((0, 0, 0), tuple(g - 1 for g in grid))


def partition(grid: tuple[int, int, int], run: Callable[[list[tuple[int, int, int]]], dict[tuple, CtaRun]],
              row_bytes: int, budget: int, accept: Callable[[Box, CtaRun], None],
              batch_ctas: int, first: dict[tuple, CtaRun] | None = None) -> Partition:
    """Split the grid into proved boxes: where a decision changes between two corners, at the CTAs where it
    changes (:func:`boundaries`), else in the middle.  ``accept`` gets each box as soon as it
    is proved; a run is kept only while it is a corner of a box still to prove (at most ``batch_ctas`` of them),
    so memory holds about one batch of corners.  Stops splitting once ``budget`` CTAs were emulated; the boxes
    left are returned for the caller to emulate CTA by CTA.  ``first``: runs of the grid's corners the caller
    made already (they count as emulated)."""
    known: dict[tuple, CtaRun] = dict(first or {})   # runs of corners of pending boxes, from earlier batches
    result = Partition(emulated=len(known))
    pending = [whole_grid(grid)]
    while pending:
        if result.emulated >= budget:
            result.left.extend(pending)
            return result
        queued: set = set()
        # run the corners of as many boxes as fit in one batch
        todo, corners = [], []
        while pending and (not todo or len(corners) + len(pending[0].corners()) <= batch_ctas):
            box = pending.pop(0)
            todo.append(box)
            for corner in box.corners():
                if corner not in queued and corner not in known:
                    queued.add(corner)
                    corners.append(corner)
        runs = {corner: known[corner] for box in todo for corner in box.corners() if corner in known}
        if corners:
            runs.update(run(corners))
        result.emulated += len(corners)
        if all(r.signature is None for r in runs.values()):
            # every corner met a use of the CTA index no class argument covers: splitting cannot help
            result.left.extend(todo + pending)
            return result
        for box in todo:
            ok, axis, hopeless, starts = (True, None, False, []) if box.size == 1 else \
                same_class(box, runs, row_bytes)
            if ok:
                result.classes.append(box)
                accept(box, runs[box.low])
                continue
            extents = [h - l for l, h in zip(box.low, box.high)]
            if hopeless and not any(extent for other, extent in enumerate(extents) if other != axis):
                result.left.append(box)          # a row of CTAs no two of which share a class: run them all
                continue
            if all(runs[corner].signature is None for corner in box.corners()):
                result.left.append(box)          # the CTA index reaches a decision no class argument covers
                continue
            if axis is None or extents[axis] == 0:
                axis, starts = int(np.argmax(extents)), []
            pending.extend(box.split(axis, starts))
        wanted = {corner for box in pending for corner in box.corners()}
        known = {corner: r for corner, r in runs.items() if corner in wanted}
        if len(known) > batch_ctas:
            known = dict(list(known.items())[:batch_ctas])
        del runs
    return result
