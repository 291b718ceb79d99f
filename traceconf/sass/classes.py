"""CTA classes at the SASS level: which SASS instructions keep a CTA-dependent value affine.

The argument is :mod:`traceconf.emulate.classes`'s; this module is its table
for SASS.  A value computed from ``SR_CTAID`` stays *affine* in the CTA
coordinates through copies (``MOV``, ``S2R``, ``R2UR``...), integer sums
(``IADD3``, ``IADD``, ``VIADD`` with ``-``/``~`` operands), products with a
CTA-free factor (``IMAD`` and its ``.MOV``/``.SHL``/``.IADD``/``.WIDE``
forms), shifts by a CTA-free amount (``LEA``, ``ISCADD``, ``SHF.L``, ``SHL``)
and ``SEL`` by a CTA-free predicate, as long as the exact result lies in
``[0, 2**31)`` (no wrap-around, one value whether read signed or unsigned; a
64-bit result's high word is then 0).  ``ISETP`` of affine values records the
CTA's decision.  Everything else (bitwise logic, ``.HI`` halves, carries,
64-bit compares, ``IMNMX``...) makes a CTA-dependent result opaque.  Values
loaded from memory are unknown at this level, except shared memory's where a
shared read reaches a decision (``SassContext.shared_values``,
:mod:`traceconf.sass.dataflow`): they come back through :func:`taint.read_back`
and, as at the PTX level, every shared access must then have a CTA-free address.
"""

from __future__ import annotations

import numpy as np

from traceconf.emulate.classes import CTA, OPAQUE, Check, Rule, arithmetic, comparison, decision_inputs, \
    forbidden_in_addresses, limit_of, low_mask, quiet_test
from traceconf.emulate.program import Program, Slot
from traceconf.sass.control import guard_of
from traceconf.sass.memory import address_reader, misread_guard
from traceconf.sass.operands import M32, TRUE_PREDICATES, ZERO_REGS, Operand, SassContext, pair_name, parse_operand, \
    reader, signed32
from traceconf.sass.opcodes import opcode_of, shared_op

U64 = np.uint64
LIMIT = limit_of(32)


def _exact(value) -> np.ndarray:
    """A 32-bit register read as a signed integer, as float64 (low words of sums and products agree with the
    exact result whichever way the operands are read, and affine values lie below 2**31)."""
    return signed32(value).astype(np.float64)


def alu_destinations(ops: list[Operand]) -> tuple[list[str], list[Operand], list[Operand]]:
    """(register/predicate names written, sources, predicate inputs) of an ALU instruction: ``Rd, [Pout...,]
    sources..., [Pin...]``; a 64-bit destination writes its pair."""
    if not ops or ops[0].kind not in ("reg", "pred") or ops[0].negate:
        return [], ops, []
    names = [ops[0].name]
    rest = ops[1:]
    if ops[0].kind == "pred":                        # ISETP Pd, Pq, ...: two predicate destinations; after
        while rest and rest[0].kind == "pred" and not rest[0].negate and len(names) < 2:   # them, PLOP3's and
            names.append(rest[0].name)               # PSETP's predicates are sources
            rest = rest[1:]
    else:
        while rest and rest[0].kind == "pred" and not rest[0].negate:
            names.append(rest[0].name)               # carry outputs (IADD3 Rd, P0, ...)
            rest = rest[1:]
    inputs = []
    while rest and rest[-1].kind == "pred":
        inputs.insert(0, rest[-1])
        rest = rest[:-1]
    return names, rest, inputs


def _unsigned(value) -> np.ndarray:
    return (np.asarray(value, dtype=np.uint64) & M32).astype(np.float64)


def _pair(value) -> np.ndarray:
    """A 64-bit pair read as a signed integer, as float64 (exact below 2**53, and only such values pass)."""
    return np.asarray(value, dtype=np.uint64).view(np.int64).astype(np.float64)


def _shifted(v) -> np.ndarray:
    return _exact(v[0]) * np.exp2(np.minimum(np.asarray(v[1], dtype=np.uint64) & M32, 32).astype(np.float64))


def _rule(affine: str | None, mods: list[str], sources: list[Operand], carries: bool) -> Rule | None:
    """The :class:`Rule` of an affine-capable instruction (``affine``: its rule in the opcode table), else None."""
    if carries or "X" in mods or "HI" in mods or "SAT" in mods:
        return None
    count = len(sources)
    # no read widths (Rule.read_bits) to check: a SASS register that depends on the CTA index affinely holds a
    # value below 2**31 (each rule checks its result), and readers apply -/~ before the rule sees the value
    if affine == "copy" and count == 1:
        return Rule(lambda v: _exact(v[0]), 32)
    if affine == "sum" and count >= 2:
        return Rule(lambda v: sum(_exact(x) for x in v), 32)
    if affine == "product" and count in (2, 3):
        if "WIDE" in mods:
            # the 64-bit result uses the operands' declared signedness, and the addend is the whole pair
            factor = _unsigned if "U32" in mods else _exact
            return Rule(lambda v: factor(v[0]) * factor(v[1]) + (_pair(v[2]) if len(v) > 2 else 0.0), 32, (1, 2))
        return Rule(lambda v: _exact(v[0]) * _exact(v[1]) + (_exact(v[2]) if len(v) > 2 else 0.0), 32, (1, 2))
    if affine == "shifted_sum" and count == 3 and sources[2].kind == "imm":
        shift = float(2 ** (sources[2].value & 0x1F))
        return Rule(lambda v: _exact(v[0]) * shift + _exact(v[1]), 32, cta_free=(3,))
    if (affine == "funnel_shift" and "L" in mods and count >= 2) or (affine == "shift" and count == 2):
        # SHF.L Rd, lo, amount, hi: the low word of (hi:lo) << amount is lo << amount (amount below 32)
        return Rule(_shifted, 32, cta_free=(2,))
    if affine == "mask" and count == 4 and sources[3].kind == "imm" and sources[3].value & 0xFF == 0xC0:
        # a & b with b a low-bit mask (ptxas masks 16-bit CTA indices with 0xffff): a itself while a <= mask
        mask = sources[1].value if sources[1].kind == "imm" else None
        if mask is not None and mask > 0 and not (mask + 1) & mask:
            return Rule(lambda v: low_mask(_exact(v[0]), mask), 32, cta_free=(2, 3))
    return None


def _keys(op: Operand, wide: bool | None = None) -> list[str] | None:
    """The registers whose taints make up the taint :func:`~traceconf.sass.operands.reader` gives for ``op`` read
    ``wide`` (default: its own .64), or of the address :func:`~traceconf.sass.memory.address_reader` reads; None
    where the taint is not theirs alone (a special register)."""
    if op.kind in ("imm", "float"):
        return []
    if op.kind == "pred":
        names = [op.name]
    elif op.kind == "reg":
        names = [op.name, pair_name(op.name)] if (op.wide if wide is None else wide) else [op.name]
    elif op.kind in ("const", "address"):
        names = [key for name, _, pair in op.registers for key in ([name, pair_name(name)] if pair else [name])]
    else:
        return None
    return [name for name in names if name not in CONSTANT_REGISTERS]


def _sources_quiet(guarded, sources: list[Operand], keys: list[list[str] | None]):
    """The :func:`quiet_test` of an instruction's ``sources`` (``keys``: each one's :func:`_keys`) under its guard."""
    if None in keys:
        return None
    whole = [names[0] for op, names in zip(sources, keys) if op.kind in ("reg", "pred") and len(names) == 1
             and names[0] == op.name]
    return quiet_test([guarded], [name for names in keys for name in names], whole)


#: Registers that always read the same (RZ, PT): no taint to test.
CONSTANT_REGISTERS = ZERO_REGS | TRUE_PREDICATES


def _all_keys(ops: list[Operand], wide: bool | None = None) -> list[str] | None:
    keys = [_keys(op, wide) for op in ops]
    return None if None in keys else [key for part in keys for key in part]


def compile_sass_check(slot: Slot, ctx: SassContext) -> Check | None:
    row = slot.row
    family = row["opcode"]
    mods = list(row["modifiers"] or [])
    ops = [parse_operand(o) for o in row["operands"] or []]
    guard = guard_of(row, ctx)
    # the guard's taint is its predicate's: a class-constant guard carries neither CTA nor OPAQUE
    guarded = (_keys(Operand("pred", row["guard"], name=row["guard"])) if guard is not None else [], CTA | OPAQUE)
    entry = opcode_of(family)
    affine = entry.affine if entry is not None else None
    if entry is not None and entry.role == "control":
        tested = [op for op in ops if op.kind in ("pred", "reg")]
        return decision_inputs(guard, constant=[reader(op, ctx, False) for op in tested],
                               quiet=quiet_test([guarded, (_all_keys(tested, False), CTA | OPAQUE)])) \
            if guard is not None or tested else None
    if shared_op(".".join([family, *mods])) is not None:
        address = next((op for op in ops if op.kind == "address"), None)
        if address is None:
            return None
        return decision_inputs(_counted_guard(guard, row, ".".join([family, *mods])),
                               [address_reader(address, ctx, wide_base=False)],
                               cta_free_addresses=ctx.shared_values,
                               quiet=quiet_test([guarded, (_keys(address),
                                                           forbidden_in_addresses(ctx.shared_values))]))
    if affine == "comparison":
        return _comparison(slot, ctx, ops, mods, guard, guarded)
    names, sources, inputs = alu_destinations(ops)
    if not names:
        return None
    wide = "WIDE" in mods
    readers = [reader(op, ctx, wide and index == 2) for index, op in enumerate(sources)]
    if affine == "select" and len(sources) == 2 and len(inputs) == 1 and len(names) == 1:
        # SEL Rd, a, b, P: the selector may decide per class, never per CTA
        rule = Rule(lambda v: np.where((np.asarray(v[2], dtype=np.uint64) & U64(1)) == 1, _exact(v[0]),
                                       _exact(v[1])), 32, cta_free=(3,))
    else:
        # a trailing PT/!PT is a constant operand (LOP3's), any other predicate input a carry
        carries = len(names) > 1 or any(op.name not in ("PT", "UPT") for op in inputs)
        rule = _rule(affine, mods, sources, carries)
    keys = [_keys(op, wide and index == 2) for index, op in enumerate(sources)] + [_keys(op) for op in inputs]
    if wide:
        names = names + [pair_name(names[0])]   # a passing 64-bit result is below 2**31: its high word is 0
    return arithmetic(names, readers + [reader(op, ctx) for op in inputs], guard, rule,
                      quiet=_sources_quiet(guarded, [*sources, *inputs], keys))


def _counted_guard(guard, row: dict, opcode: str):
    """The guard as it decides which lanes' addresses are counted: ``@!P0 LDGSTS`` counts every lane that reaches
    it (:func:`misread_guard`), so all their addresses matter; the guard stays class-constant (it decides what the
    copy writes)."""
    if guard is None or not misread_guard(row, opcode):
        return guard
    return lambda m: (None, guard(m)[1])


def _comparison(slot: Slot, ctx: SassContext, ops: list[Operand], mods: list[str], guard, guarded) -> Check | None:
    """``ISETP.cmp.[U32].combine Pd, Pq, a, b, Pc[, Plow]``: a decision on ``a - b``; ``.EX`` (the high words
    of a 64-bit compare) is not one (the sign of the whole difference is not recorded)."""
    if len(ops) < 5 or "EX" in mods:
        names = [op.name for op in ops[:2] if op.kind == "pred" and not op.negate]
        return arithmetic(names, [reader(op, ctx, False) for op in ops[2:]], guard, None,
                          quiet=_sources_quiet(guarded, ops[2:], [_keys(op, False) for op in ops[2:]]))
    unsigned = "U32" in mods

    def exact(value):
        return (np.asarray(value, dtype=np.uint64) & M32).astype(np.float64) if unsigned else _exact(value)
    names = [op.name for op in ops[:2] if op.kind == "pred" and not op.negate]
    inputs = _all_keys(ops[4:])
    return comparison(names, reader(ops[2], ctx, False), reader(ops[3], ctx, False), exact, LIMIT,
                      int(slot.row["instruction"]), guard, [reader(op, ctx) for op in ops[4:]],
                      quiet=quiet_test([guarded, (_all_keys(ops[2:4], False), CTA | OPAQUE),
                                        (inputs, CTA | OPAQUE)]))


def compile_sass_checks(program: Program, ctx: SassContext) -> list[Check | None]:
    return [compile_sass_check(slot, ctx) for slot in program.slots]
