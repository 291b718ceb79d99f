"""What each SASS instruction does, compiled once per static instruction into a numpy closure.

This module holds the integer datapath and the dispatch; warp collectives live in :mod:`.warp`, memory
in :mod:`.memory`, control flow in :mod:`.control`, operand readers and writers in :mod:`.operands`.
Integer, logic, predicate, move, conversion and warp instructions are
evaluated exactly on every thread (32-bit registers, 64-bit pairs, carries
through predicates).  Floating-point arithmetic is not evaluated: its results
carry :data:`taint.FLOAT` (with ``--data``, f32 FADD/FMUL/FFMA/FSETP/FMNMX are,
as the PTX level's: :mod:`.floats`).  The integer-division idiom ptxas emits
(``I2F.U32.RP`` → ``MUFU.RCP`` → ``F2I.FTZ.U32.TRUNC``, then integer
corrections) is evaluated in float32 without that taint, because its integer
correction steps make the final quotient exact for any reciprocal within the
hardware's error bound.  Loads give :data:`taint.LOADED` values; an opcode
the emulator does not know taints its destinations ``UNMODELLED`` and is
named once in the notes, never guessed.

Shared-memory instructions (``LDS``/``STS``/``ATOMS``/``LDSM``/``STSM``/
``LDGSTS`` and generic ``LD``/``ST``/``ATOM``/``RED`` whose address lies in
the shared window) record one warp-level access per warp, like the PTX
emulator; the width and kind come from :func:`traceconf.sass.opcodes.shared_op`.
"""

from __future__ import annotations

import numpy as np

from traceconf.emulate import intops, taint
from traceconf.emulate.simt import EXIT, Compiled, collective, with_guard
from traceconf.emulate.state import select
from traceconf.sass import opcodes
from traceconf.sass.control import (barrier, both, branch_if_divergent, guard_of, indirect_target, jump,
                                    jump_to_register, next_pc, return_to_register, target_of)
from traceconf.sass.floats import FLOAT_HANDLERS
from traceconf.sass.local import local_memory
from traceconf.sass.memory import (copy_counted_by_nsight, global_memory, misread_guard, other_memory,
                                   shared_memory)
from traceconf.sass.opcodes import global_op, shared_op, writes_memory
from traceconf.sass.operands import (M32, TRUE_PREDICATES, ZERO_REGS, Operand, SassContext, field_taint, pair_name,
                                     parse_operand, read_register, reader, record_field,
                                     predicate_is, signed32, taint_of, write_register, writer)
from traceconf.sass.warp import match, redux, shfl, vote

U64 = np.uint64

# --------------------------------------------------------------------------- instruction families


def _split(ops: list[Operand]):
    """(register destinations, predicate destinations, sources, trailing predicate sources) of an ALU op.

    SASS writes ``Rd, [Pout...,] sources..., [Pin...]``: predicate operands right after the register
    destination are carry/predicate outputs, predicates at the end are carry/predicate inputs.
    """
    dest = ops[0]
    rest = ops[1:]
    outs = []
    while rest and rest[0].kind == "pred" and not rest[0].negate:
        outs.append(rest[0])
        rest = rest[1:]
    ins = []
    while rest and rest[-1].kind == "pred":
        ins.insert(0, rest[-1])
        rest = rest[:-1]
    return dest, outs, rest, ins


def _mov(ops, mods, ctx):
    write, source = writer(ops[0]), reader(ops[1], ctx)

    def run(m, mask):
        value, bits = source(m)
        write(m, value, bits, mask)
    return run


def _imad(ops, mods, ctx):
    dest, outs, sources, ins = _split(ops)
    wide = "WIDE" in mods
    unsigned = "U32" in mods
    high = "HI" in mods
    a, b = reader(sources[0], ctx, False), reader(sources[1], ctx, False)
    # IMAD.WIDE adds a 64-bit pair; IMAD.HI adds the pair too and keeps the high word of the 64-bit sum
    c = reader(sources[2], ctx, wide or high) if len(sources) > 2 else (lambda m: (U64(0), taint.ZERO))
    carry_in = [reader(p, ctx) for p in ins] if "X" in mods else []
    write = writer(dest, wide=wide)
    carry_out = [writer(p) for p in outs]

    word = _word_writer(dest) if not (wide or high or carry_in or carry_out) else None

    def run(m, mask):
        (av, ab), (bv, bb), (cv, cb) = a(m), b(m), c(m)
        bits = ab | bb | cb
        if word is not None:
            # the low word of a product and a sum is the same for signed and unsigned operands
            product = np.asarray(av, dtype=np.uint64) * np.asarray(bv, dtype=np.uint64)
            word(m, _low_word_of_sum(product, cv), bits, mask)
            return
        if unsigned:
            x, y = np.asarray(av, dtype=np.uint64) & M32, np.asarray(bv, dtype=np.uint64) & M32
            product = x * y                                   # < 2**64: exact in uint64
        else:
            product = np.asarray(signed32(av) * signed32(bv), dtype=np.int64).view(np.uint64)
        for read in carry_in:
            value, b2 = read(m)
            cv = np.asarray(cv, dtype=np.uint64) + (np.asarray(value, dtype=np.uint64) & U64(1))
            bits = bits | b2
        if high:
            result = ((np.asarray(product, dtype=np.uint64) + np.asarray(cv, dtype=np.uint64)) >> U64(32)) & M32
        elif wide:
            result = np.asarray(product, dtype=np.uint64) + np.asarray(cv, dtype=np.uint64)
        else:
            total = (np.asarray(product, dtype=np.uint64) & M32) + (np.asarray(cv, dtype=np.uint64) & M32)
            for out in carry_out:
                out(m, total >> U64(32), bits, mask)
            result = total & M32
        write(m, result, bits, mask)
    return run


def _low_word_of_sum(made, addend):
    """``(made + addend) & M32`` for ``made`` uint64 just computed, or a scalar (no other holder: an array is
    summed and masked in place, no temporaries)."""
    addend = np.asarray(addend, dtype=np.uint64)
    if type(made) is not np.ndarray or made.shape != np.broadcast_shapes(made.shape, addend.shape):
        return (made + addend) & M32
    made += addend
    made &= M32
    return made


def _word_writer(dest: Operand):
    """Writer of a value already reduced to 32 bits into the register ``dest`` (no second mask), or ``dest``'s
    :func:`writer` where it is no plain register."""
    if dest.kind != "reg" or dest.wide:
        return writer(dest)
    name = dest.name
    return lambda m, value, bits, mask: write_register(m, name, value, bits, mask)


def _bit_writer(dest: Operand):
    """Writer of a value already 0 or 1 (:func:`_combined`'s) into the predicate ``dest`` (no pass to keep bit 0), or
    ``dest``'s :func:`writer` where it is no predicate."""
    if dest.kind != "pred":
        return writer(dest)
    name = dest.name
    return lambda m, value, bits, mask: write_register(m, name, value, bits, mask)


def _half_reader(op: Operand, ctx):
    """(reader of the whole register, whether the operand selects its high half: ``R3.H1``)."""
    high = op.text.rstrip("|").upper().endswith(".H1")
    plain = parse_operand(op.text.replace(".H1", "").replace(".H0", ""))
    return reader(plain, ctx, False), high


def _xmad(ops, mods, ctx):
    """sm_5x/6x XMAD d, a, b, c: a 16x16-bit multiply-add; three of them make a 32-bit multiply.

    product = half(a) * half(b) (low halves unless .H1, unsigned), shifted left 16 with
    .PSL; the addend is c, its low/high half with .CLO/.CHI, or c + (b << 16) with .CBCC; .MRG keeps the
    low 16 bits of the sum and puts the low half of b's register above them.
    """
    dest, outs, sources, _ = _split(ops)
    (a, a_high), (b, b_high) = _half_reader(sources[0], ctx), _half_reader(sources[1], ctx)
    c = reader(sources[2], ctx, False)
    write = writer(dest)
    if {"CSFU", "X", "S16"} & set(mods):
        return None          # signed halves, CSFU and carry forms: reported as not modelled

    def half(value, high):
        value = np.asarray(value, dtype=np.uint64)
        return (value >> U64(16)) & U64(0xFFFF) if high else value & U64(0xFFFF)

    def run(m, mask):
        (av, ab), (bv, bb), (cv, cb) = a(m), b(m), c(m)
        product = half(av, a_high) * half(bv, b_high)
        if "PSL" in mods:
            product = product << U64(16)
        addend = np.asarray(cv, dtype=np.uint64) & M32
        if "CLO" in mods:
            addend = addend & U64(0xFFFF)
        elif "CHI" in mods:
            addend = addend >> U64(16)
        elif "CBCC" in mods:
            addend = addend + ((np.asarray(bv, dtype=np.uint64) << U64(16)) & M32)
        total = (product + addend) & M32
        if "MRG" in mods:
            total = (total & U64(0xFFFF)) | ((np.asarray(bv, dtype=np.uint64) & U64(0xFFFF)) << U64(16))
        write(m, total, ab | bb | cb, mask)
    return run


def _iadd3(ops, mods, ctx):
    dest, outs, sources, ins = _split(ops)
    readers = [reader(s, ctx, False) for s in sources]
    if any(s.negate for s in sources):
        # -x is ~x + 1 as a 33-bit quantity, so that carries come out as the hardware's
        readers = [_negated_33(s, ctx) if s.negate else r for s, r in zip(sources, readers)]
    carry_in = [reader(p, ctx) for p in ins] if "X" in mods else []
    write, carry_out = writer(dest), [writer(p) for p in outs]

    word = _word_writer(dest) if readers and not (carry_in or carry_out) else None

    def run(m, mask):
        total, bits = U64(0), taint.ZERO
        if word is not None:        # no carry: the low word of the sum alone
            for read in readers[:-1]:
                value, b = read(m)
                total = total + np.asarray(value, dtype=np.uint64)
                bits = bits | b
            value, b = readers[-1](m)
            word(m, _low_word_of_sum(total, value), bits | b, mask)
            return
        for read in readers + carry_in:
            value, b = read(m)
            total = total + (np.asarray(value, dtype=np.uint64) & U64(0x1_FFFF_FFFF))
            bits = bits | b
        write(m, total & M32, bits, mask)
        carry = np.asarray(total, dtype=np.uint64) >> U64(32)
        if len(carry_out) == 1:
            carry_out[0](m, carry & U64(1), bits, mask)
        elif len(carry_out) == 2:
            # two carry predicates: together they count the carries (0, 1 or 2) a later .X adds back
            carry_out[0](m, (carry >= U64(1)).astype(np.uint64), bits, mask)
            carry_out[1](m, (carry >= U64(2)).astype(np.uint64), bits, mask)
    return run


def _negated_33(op: Operand, ctx):
    plain = reader(Operand(op.kind, op.text, name=op.name, value=op.value, wide=False, bank=op.bank,
                           registers=op.registers), ctx, False)

    def read(m):
        value, bits = plain(m)
        return ((~np.asarray(value, dtype=np.uint64)) & M32) + U64(1), bits
    return read


def _iadd(ops, mods, ctx):
    """sm_5x/6x IADD / IADD32I / VIADD / UIADD: two sources."""
    dest, outs, sources, ins = _split(ops)
    return _iadd3([dest, *outs, *sources, *ins], mods, ctx)


def _lea(ops, mods, ctx):
    dest, outs, sources, ins = _split(ops)
    hi = "HI" in mods
    sx32 = "SX32" in mods
    shift_op = sources[-1]
    shift = (shift_op.value & 0x3F) if shift_op.kind == "imm" else None
    a, b = reader(sources[0], ctx, False), reader(sources[1], ctx, False)
    high_source = reader(sources[2], ctx, False) if hi and not sx32 and len(sources) > 3 else None
    carry_in = [reader(p, ctx) for p in ins] if "X" in mods else []
    write, carry_out = writer(dest), [writer(p) for p in outs]
    if shift is None:
        return None
    word = _word_writer(dest) if not (hi or carry_in or carry_out) else None

    def run(m, mask):
        (av, ab), (bv, bb) = a(m), b(m)
        bits = ab | bb
        if word is not None:        # no carry: the low word of the shifted sum alone
            word(m, _low_word_of_sum(np.asarray(av, dtype=np.uint64) << U64(shift), bv), bits, mask)
            return
        av = np.asarray(av, dtype=np.uint64) & M32
        if hi:
            if sx32:
                upper = np.where(av >> U64(31), M32, U64(0))
            elif high_source is not None:
                upper, ub = high_source(m)
                bits = bits | ub
                upper = np.asarray(upper, dtype=np.uint64) & M32
            else:
                upper = U64(0)
            wide = (upper << U64(32)) | av
            addend = (wide >> U64(32 - shift)) & M32 if shift else upper
        else:
            addend = (av << U64(shift)) & M32
        total = addend + (np.asarray(bv, dtype=np.uint64) & M32)
        for read in carry_in:
            value, cb = read(m)
            total = total + (np.asarray(value, dtype=np.uint64) & U64(1))
            bits = bits | cb
        write(m, total & M32, bits, mask)
        for out in carry_out:
            out(m, total >> U64(32), bits, mask)
    return run


def _iscadd(ops, mods, ctx):
    """sm_5x ISCADD Rd, a, b, shift = (a << shift) + b."""
    return _lea(ops, [], ctx)


def _shf(ops, mods, ctx):
    dest, _, sources, _ = _split(ops)
    left = "L" in mods
    high_result = "HI" in mods
    signed = "S32" in mods or "S64" in mods
    is64 = "U64" in mods or "S64" in mods
    lo, amount, hi = (reader(s, ctx, False) for s in sources[:3])
    write = writer(dest)
    high_only = high_result and not (left or signed or is64)     # SHF.R.U32.HI: a right shift of the high word

    def run(m, mask):
        (lv, lb), (sv, sb), (hv, hb) = lo(m), amount(m), hi(m)
        bits = lb | sb | hb
        s = np.asarray(sv, dtype=np.uint64) & (U64(63) if is64 else U64(31) if "W" in mods else U64(0xFFFF_FFFF))
        s = np.minimum(s, U64(63 if is64 else 32))
        if high_only:
            # bits 32.. of (hi:lo) >> s, s <= 32: the high word shifted alone (the low one reaches only bits below)
            write(m, (np.asarray(hv, dtype=np.uint64) & M32) >> s, bits, mask)
            return
        value = ((np.asarray(hv, dtype=np.uint64) & M32) << U64(32)) | (np.asarray(lv, dtype=np.uint64) & M32)
        if left:
            shifted = value << s
            result = shifted >> U64(32) if high_result else shifted
        elif signed:
            shifted = (value.astype(np.int64) if hasattr(value, "astype") else np.int64(value)) >> s.astype(np.int64)
            shifted = np.asarray(shifted).view(np.uint64)
            result = shifted >> U64(32) if high_result else shifted
        else:
            shifted = value >> s
            result = shifted >> U64(32) if high_result else shifted
        write(m, np.asarray(result, dtype=np.uint64) & M32, bits, mask)
    return run


def _shift(right: bool):
    """sm_5x SHL / SHR[.U32] Rd, a, b (SHR is arithmetic unless .U32)."""
    return lambda ops, mods, ctx: _compile_shift(ops, mods, ctx, right)


def _compile_shift(ops, mods, ctx, right: bool):
    dest, _, sources, _ = _split(ops)
    a, b = reader(sources[0], ctx, False), reader(sources[1], ctx, False)
    signed = "U32" not in mods
    write = writer(dest)

    def run(m, mask):
        (av, ab), (bv, bb) = a(m), b(m)
        s = np.minimum(np.asarray(bv, dtype=np.uint64) & M32, U64(32))
        if right and signed:
            result = (signed32(av) >> np.minimum(s, U64(31)).astype(np.int64)).view(np.uint64)
        elif right:
            result = (np.asarray(av, dtype=np.uint64) & M32) >> s
        else:
            result = np.asarray(av, dtype=np.uint64) << s
        write(m, np.asarray(result, dtype=np.uint64) & M32, ab | bb, mask)
    return run


def _lop3(ops, mods, ctx):
    predicate_dest = ops[0].kind == "pred"
    pred_out = ops[0] if predicate_dest else None
    rest = ops[1:] if predicate_dest else ops
    dest, outs, sources, _ = _split(rest)
    if pred_out is None and outs:
        pred_out = outs[0]
    lut = sources[3].value & 0xFF if len(sources) > 3 and sources[3].kind == "imm" else None
    if lut is None:
        return None
    a, b, c = (reader(s, ctx, False) for s in sources[:3])
    write = _word_writer(dest)          # lop3 keeps the low word
    write_pred = writer(pred_out) if pred_out is not None else None
    # a & constant (lut 0xc0, the third source zero): a test of bits of a, as known as those bits are
    tested = sources[0] if lut == 0xC0 and sources[0].kind == "reg" and sources[1].kind == "imm" and \
        sources[2].name in ZERO_REGS else None

    def run(m, mask):
        (av, ab), (bv, bb), (cv, cb) = a(m), b(m), c(m)
        own = field_taint(m, tested.name, sources[1].value & 0xFFFF_FFFF) if tested is not None else None
        bits = ab | bb | cb if own is None else own
        result = intops.lop3(np.asarray(av, dtype=np.uint64), np.asarray(bv, dtype=np.uint64),
                             np.asarray(cv, dtype=np.uint64), lut, 32)
        write(m, result, bits, mask)
        if write_pred:
            write_pred(m, (result != 0).astype(np.uint64) if np.ndim(result) else U64(result != 0), bits, mask)
    return run


def _lop(ops, mods, ctx):
    """sm_5x LOP.AND/OR/XOR/PASS_B Rd, a, b (b may be ~b)."""
    dest, outs, sources, _ = _split(ops)
    a, b = reader(sources[0], ctx, False), reader(sources[1], ctx, False)
    operation = next((o for o in mods if o in ("AND", "OR", "XOR", "PASS_B")), "AND")
    write = writer(dest)

    def run(m, mask):
        (av, ab), (bv, bb) = a(m), b(m)
        av, bv = np.asarray(av, dtype=np.uint64), np.asarray(bv, dtype=np.uint64)
        result = {"AND": av & bv, "OR": av | bv, "XOR": av ^ bv, "PASS_B": bv}[operation]
        write(m, result & M32, ab | bb, mask)
    return run


_COMPARE = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal, "GT": np.greater,
            "GE": np.greater_equal}
_COMBINE = {"AND": np.logical_and, "OR": np.logical_or, "XOR": np.logical_xor}
_OPERATION = {combine: name.lower() for name, combine in _COMBINE.items()}      # taint.of_logic's names


def _isetp(ops, mods, ctx):
    compare = next((_COMPARE[x] for x in mods if x in _COMPARE), None)
    combine = next((_COMBINE[x] for x in mods if x in _COMBINE), np.logical_and)
    if compare is None:
        return None
    extended = "EX" in mods
    # equality needs no sign: the unsigned words compare alike (a pass per operand fewer)
    unsigned = "U32" in mods or (compare in (np.equal, np.not_equal) and not extended)
    # (writer, complemented) of each destination that is written (PT takes nothing: its result is not computed)
    outs = [(_bit_writer(op), complemented) for op, complemented in zip(ops[:2], (False, True))
            if op.name not in TRUE_PREDICATES]
    a, b = reader(ops[2], ctx, False), reader(ops[3], ctx, False)
    c = reader(ops[4], ctx)
    low = reader(ops[5], ctx) if extended and len(ops) > 5 else None

    def run(m, mask):
        (av, ab), (bv, bb), (cv, cb) = a(m), b(m), c(m)
        compared = ab | bb                     # the comparison's taint
        x, y = _compared_word(av, unsigned), _compared_word(bv, unsigned)
        if low is not None:
            # high words of a 64-bit compare: equal high words defer to the low words' result
            lv, lb = low(m)
            compared = compared | lb
            lower = (np.asarray(lv, dtype=np.uint64) & U64(1)) == 1
            strict = {np.less_equal: np.less, np.greater_equal: np.greater}.get(compare, compare)
            if compare in (np.equal,):
                result = np.equal(x, y) & lower
            elif compare in (np.not_equal,):
                result = np.not_equal(x, y) | lower
            else:
                result = strict(x, y) | (np.equal(x, y) & lower)
        else:
            result = compare(x, y)
        cond = (np.asarray(cv, dtype=np.uint64) & U64(1)) == 1
        result = np.asarray(result)
        for out, complemented in outs:
            value = ~result if complemented else result
            out(m, _combined(combine, value, cond), _decided(combine, value, compared, cond, cb), mask)
    return run


def _compared_word(value, unsigned: bool):
    """The low 32 bits of ``value`` as the number a 32-bit compare reads, unsigned or signed: an array as 4-byte
    integers (one narrowing pass; the compare needs no wider), a scalar as a uint64 or int64 one."""
    value = np.asarray(value, dtype=np.uint64)
    if value.ndim:
        word = value.astype(np.uint32)
        return word if unsigned else word.view(np.int32)
    return value & M32 if unsigned else signed32(value)


def _combined(combine, x: np.ndarray, y) -> np.ndarray:
    """``x COMBINE y`` of two predicates (bools) as 0/1 uint64; ``y`` one for all (``PT``, the common case) leaves
    ``x`` itself, its negation or a constant, with no pass for the combination."""
    if np.ndim(y) == 0:
        if combine is np.logical_xor:
            x = ~x if y else x
        elif bool(y) == (combine is np.logical_or):      # true OR anything, false AND anything
            return U64(1) if y else U64(0)
        return x.astype(np.uint64)
    return combine(x, y).astype(np.uint64)


def _decided(combine, x, x_bits, y, y_bits):
    """Taint of ``x COMBINE y`` (:func:`traceconf.emulate.taint.of_logic`, which reads predicates as they are:
    bools or 0/1)."""
    return taint.of_logic(_OPERATION[combine], x, x_bits, y, y_bits)


def _plop3(ops, mods, ctx):
    luts = [o.value & 0xFF for o in ops if o.kind == "imm"]
    inputs = [o for o in ops[2:] if o.kind == "pred"][:3]
    if len(luts) < 1 or len(inputs) < 3:
        return None
    outs = [writer(ops[0]), writer(ops[1])]
    readers = [reader(p, ctx) for p in inputs]

    def run(m, mask):
        values = [read(m) for read in readers]
        bits = taint_of(*values)
        a, b, c = ((np.asarray(v, dtype=np.uint64) & U64(1)) * U64(0xFFFF_FFFF) for v, _ in values)
        outs[0](m, intops.lop3(a, b, c, luts[0], 1), bits, mask)
        if len(luts) > 1:
            outs[1](m, intops.lop3(a, b, c, luts[1], 1), bits, mask)
    return run


def _psetp(ops, mods, ctx):
    """sm_5x PSETP.AND.AND Pd, Pq, a, b, c: Pd = (a OP1 b) OP2 c."""
    combines = [_COMBINE[x] for x in mods if x in _COMBINE]
    if len(combines) < 2:
        return None
    outs = [writer(ops[0]), writer(ops[1])]
    a, b, c = (reader(o, ctx) for o in ops[2:5])

    def run(m, mask):
        (av, ab), (bv, bb), (cv, cb) = a(m), b(m), c(m)
        x, y, z = ((np.asarray(v, dtype=np.uint64) & U64(1)) == 1 for v in (av, bv, cv))
        first = combines[0](x, y)
        first_bits = _decided(combines[0], x, ab, y, bb)
        for out, value in zip(outs, (first, ~first)):
            out(m, combines[1](value, z).astype(np.uint64), _decided(combines[1], value, first_bits, z, cb), mask)
    return run


def _sel(ops, mods, ctx):
    dest, _, sources, ins = _split(ops)
    a, b = reader(sources[0], ctx, False), reader(sources[1], ctx, False)
    predicate = reader(ins[0], ctx) if ins else None
    write = writer(dest)
    if predicate is None:
        return None

    def run(m, mask):
        (av, ab), (bv, bb), (pv, pb) = a(m), b(m), predicate(m)
        if type(pv) is np.ndarray and pv.ndim:
            # one mask (and its all-ones lanes) per predicate array: a swap selects several registers by it
            choose = m.derived(pv, "true", predicate_is)
            ones = m.lane_ones(choose)
        else:
            choose, ones = predicate_is(pv), None
        # the result depends on the chosen source only (a pointer to shared stays one)
        bits = ab if np.ndim(ab) == 0 and np.ndim(bb) == 0 and ab == bb else select(choose, ab, bb, ones)
        write(m, select(choose, av, bv, ones), bits | pb, mask)
    return run


def _imnmx(ops, mods, ctx):
    """IMNMX/VIMNMX Rd, a, b, P: min (P true) or max of a and b; VIADDMNMX Rd, a, b, c, P: of a + b (32-bit
    wrap-around) and c."""
    dest, _, sources, ins = _split(ops)
    if len(sources) == 3:
        addends = [reader(s, ctx, False) for s in sources[:2]]

        def a(m):
            (xv, xb), (yv, yb) = addends[0](m), addends[1](m)
            return (np.asarray(xv, dtype=np.uint64) + np.asarray(yv, dtype=np.uint64)) & M32, xb | yb
    else:
        a = reader(sources[0], ctx, False)
    b = reader(sources[-1], ctx, False)
    predicate = reader(ins[0], ctx) if ins else (lambda m: (U64(1), taint.ZERO))
    unsigned = "U32" in mods
    write = writer(dest)

    def run(m, mask):
        (av, ab), (bv, bb), (pv, pb) = a(m), b(m), predicate(m)
        if unsigned:
            x, y = np.asarray(av, dtype=np.uint64) & M32, np.asarray(bv, dtype=np.uint64) & M32
        else:
            x, y = signed32(av), signed32(bv)
        take_min = (np.asarray(pv, dtype=np.uint64) & U64(1)) == 1
        result = np.where(take_min, np.minimum(x, y), np.maximum(x, y))
        write(m, np.asarray(result).astype(np.int64).view(np.uint64) & M32, ab | bb | pb, mask)
    return run


def _unary(function):
    def compile_(ops, mods, ctx):
        dest, outs, sources, _ = _split(ops)
        source = reader(sources[0], ctx, False)
        write = writer(dest)

        def run(m, mask):
            value, bits = source(m)
            write(m, function(np.asarray(value, dtype=np.uint64) & M32, mods), bits, mask)
        return run
    return compile_


def _sgxt(ops, mods, ctx):
    """SGXT d, a, n: a's low n bits sign-extended (.U32: zero-extended); n >= 32 keeps a, n = 0 gives 0."""
    dest, _, sources, _ = _split(ops)
    a, width = reader(sources[0], ctx, False), reader(sources[1], ctx, False)
    unsigned = "U32" in mods
    write = writer(dest)

    def run(m, mask):
        (av, ab), (nv, nb) = a(m), width(m)
        n = np.minimum(np.asarray(nv, dtype=np.uint64) & U64(0xFF), U64(32))
        keep = (U64(1) << n) - U64(1)
        low = np.asarray(av, dtype=np.uint64) & keep
        if not unsigned:
            sign = np.where(n > 0, (low >> np.maximum(n, U64(1)) - U64(1)) & U64(1), U64(0))
            low = np.where(sign == 1, low | (~keep & M32), low)
        write(m, low & M32, ab | nb, mask)
    return run


def _flo(value, mods):
    """FLO[.U32][.SH]: the most significant non-sign bit (.SH: its distance from bit 31), as PTX bfind."""
    return intops.find_msb(value, 32, "U32" not in mods, "SH" in mods)


def _popc(value, mods):
    return intops.popcount(value, 32)


def _brev(value, mods):
    return intops.bit_reverse(value, 32)


def _iabs(value, mods):
    return intops.absolute(value, 32)


#: PRMT modes (.F4E...): the PTX level's prmt modes.
_PRMT_MODES = ("F4E", "B4E", "RC8", "ECL", "ECR", "RC16")


def _prmt(ops, mods, ctx):
    """PRMT Rd, Ra, selector, Rb: bytes of {Rb, Ra} picked as prmt.b32 picks them."""
    dest, _, sources, _ = _split(ops)
    a, selector, b = (reader(s, ctx, False) for s in sources[:3])
    write = writer(dest)
    mode = next((m.lower() for m in mods if m in _PRMT_MODES), None)

    def run(m, mask):
        (av, ab), (sv, sb), (bv, bb) = a(m), selector(m), b(m)
        result = intops.permute_bytes(np.asarray(av, dtype=np.uint64), np.asarray(bv, dtype=np.uint64),
                                      np.asarray(sv, dtype=np.uint64), mode)
        write(m, result, ab | sb | bb, mask)
    return run


def _bmsk(ops, mods, ctx):
    """BMSK[.W] Rd, position, width: the PTX level's bmsk (.W wraps, else clamps)."""
    dest, _, sources, _ = _split(ops)
    position, width = reader(sources[0], ctx, False), reader(sources[1], ctx, False)
    write = writer(dest)

    def run(m, mask):
        (pv, pb), (wv, wb) = position(m), width(m)
        write(m, intops.bit_mask(np.asarray(pv, dtype=np.uint64), np.asarray(wv, dtype=np.uint64), "W" in mods),
              pb | wb, mask)
    return run


def _s2r(ops, mods, ctx):
    write, source = writer(ops[0]), reader(ops[1], ctx)
    wide = ops[0].kind == "reg" and "64" in mods

    def run(m, mask):
        value, bits = source(m)
        if wide:
            writer(ops[0], wide=True)(m, value, bits, mask)
        else:
            write(m, value, bits, mask)
    return run


def _ldc(ops, mods, ctx):
    wide = "64" in mods
    source = reader(Operand(**{**ops[1].__dict__, "wide": wide}), ctx)
    write = writer(ops[0], wide=wide)

    def run(m, mask):
        value, bits = source(m)
        write(m, value, bits, mask)
    return run


def _p2r(ops, mods, ctx):
    """P2R Rd, PR, Rx, mask: Rd = (Rx & ~mask) | (predicates P0..P6 & mask)."""
    dest = writer(ops[0])
    base = reader(ops[2], ctx, False)
    field_mask = ops[3].value if len(ops) > 3 and ops[3].kind == "imm" else 0x7F
    shift = 8 * (int(mods[0][1]) if mods and mods[0].startswith("B") and mods[0][1:].isdigit() else 0)
    prefix = "UP" if ops[1].text.startswith("UPR") else "P"

    def run(m, mask):
        value, bits = base(m)
        packed, field_bits = U64(0), taint.ZERO
        for index in range(7):
            if field_mask >> index & 1:
                pv, pb = read_register(m, f"{prefix}{index}")
                packed = packed | ((np.asarray(pv, dtype=np.uint64) & U64(1)) << U64(index))
                field_bits = field_bits | pb
        packed = packed << U64(shift)
        keep = U64((~(field_mask << shift)) & 0xFFFF_FFFF)
        dest(m, (np.asarray(value, dtype=np.uint64) & keep) | packed, bits | field_bits, mask)
        if ops[2].name not in ZERO_REGS:
            record_field(m, ops[0].name, field_mask << shift, field_bits, mask)
    return run


def _r2p(ops, mods, ctx):
    source = reader(ops[1], ctx, False)
    field_mask = ops[2].value if len(ops) > 2 and ops[2].kind == "imm" else 0x7F
    # the byte comes on the register (``R2P PR, R10.B1, 0x7``: bits 8-14 of R10), or as a modifier
    byte = ops[1].text.rpartition(".")[2] if ops[1].kind == "reg" else ""
    byte = byte if byte.startswith("B") and byte[1:].isdigit() else mods[0] if mods else ""
    shift = 8 * (int(byte[1]) if byte.startswith("B") and byte[1:].isdigit() else 0)

    def run(m, mask):
        value, bits = source(m)
        if ops[1].kind == "reg":
            own = field_taint(m, ops[1].name, field_mask << shift)
            bits = bits if own is None else own
        value = np.asarray(value, dtype=np.uint64) >> U64(shift)
        for index in range(7):
            if field_mask >> index & 1:
                write_register(m, f"P{index}", (value >> U64(index)) & U64(1), bits, mask)
    return run


def _hfma2_constant(ops, mods, ctx):
    """ptxas loads constants with ``HFMA2.MMA Rd, -RZ, RZ, hi, lo`` (0 * 0 + c): the result is c's halves."""
    if len(ops) == 5 and {ops[1].name, ops[2].name} == {"RZ"} and all(o.kind in ("imm", "float") for o in ops[3:]):
        halves = [np.float16(float(o.text)).view(np.uint16) if o.kind == "float" or o.text.isdigit()
                  else np.uint16(o.value) for o in ops[3:]]
        value = U64((int(halves[0]) << 16) | int(halves[1]))
        write = writer(ops[0])
        return lambda m, mask: write(m, value, taint.ZERO, mask)
    return None


#: Integer source types an I2F names (none: S32).
_I2F_SOURCES = ("U8", "S8", "U16", "S16", "U32", "S32", "U64", "S64")


def _i2f_rp(ops, mods, ctx):
    """I2F.U32.RP / I2F.RP (S32, the default source type) to f32, rounding toward +inf: the division idiom's
    first step (ptxas's unsigned and signed divides), evaluated in float32."""
    types = [x for x in mods if x in _I2F_SOURCES]
    if "RP" not in mods or types not in ([], ["U32"], ["S32"]) or "F64" in mods or "F16" in mods:
        return None
    dest, _, sources, _ = _split(ops)
    source, write = reader(sources[0], ctx, False), writer(dest)
    integer = (lambda value: np.asarray(value, dtype=np.uint64)) if types == ["U32"] else signed32

    def run(m, mask):
        value, bits = source(m)
        exact = integer(value).astype(np.float64)
        rounded = exact.astype(np.float32)
        rounded = np.where(rounded.astype(np.float64) < exact, np.nextafter(rounded, np.float32(np.inf)), rounded)
        write(m, np.asarray(rounded, dtype=np.float32).view(np.uint32).astype(np.uint64), bits, mask)
    return run


def _mufu_rcp(ops, mods, ctx):
    if "RCP" not in mods or "64H" in mods:
        return None
    dest, _, sources, _ = _split(ops)
    source, write = reader(sources[0], ctx, False), writer(dest)

    def run(m, mask):
        value, bits = source(m)
        x = np.atleast_1d(np.asarray(value, dtype=np.uint64)).astype(np.uint32).view(np.float32)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            r = (np.float32(1.0) / x).astype(np.float32)
        write(m, r.view(np.uint32).astype(np.uint64), bits, mask)
    return run


def _f2i_trunc(ops, mods, ctx):
    if "TRUNC" not in mods or "U32" not in mods or "F64" in mods:
        return None
    dest, _, sources, _ = _split(ops)
    source, write = reader(sources[0], ctx, False), writer(dest)

    def run(m, mask):
        value, bits = source(m)
        x = np.atleast_1d(np.asarray(value, dtype=np.uint64)).astype(np.uint32).view(np.float32).astype(np.float64)
        x = np.nan_to_num(np.trunc(x), nan=0.0, posinf=4294967295.0, neginf=0.0)
        write(m, np.clip(x, 0, 4294967295).astype(np.uint64), bits, mask)
    return run


# --------------------------------------------------------------------------- dispatch


#: The table's int/float/warp handler names (:data:`traceconf.sass.opcodes.TABLE`) → compilers.
HANDLERS = {
    "mov": _mov, "imad": _imad, "xmad": _xmad, "iadd3": _iadd3, "iadd": _iadd, "lea": _lea, "iscadd": _iscadd,
    "shf": _shf, "shl": _shift(False), "shr": _shift(True), "lop3": _lop3, "lop": _lop, "isetp": _isetp,
    "plop3": _plop3, "psetp": _psetp, "sel": _sel, "imnmx": _imnmx, "flo": _unary(_flo), "popc": _unary(_popc),
    "brev": _unary(_brev), "iabs": _unary(_iabs), "prmt": _prmt, "sgxt": _sgxt, "bmsk": _bmsk, "s2r": _s2r,
    "ldc": _ldc, "p2r": _p2r, "r2p": _r2p, "i2f": _i2f_rp, "f2i": _f2i_trunc, "hfma2": _hfma2_constant,
    "mufu": _mufu_rcp, "shfl": shfl, "vote": vote, "match": match, "redux": redux, **FLOAT_HANDLERS,
}


def _control(slot, family: str, transfer: str, ops, mods, guard, ctx: SassContext, labels) -> Compiled:
    """A control transfer: followed where its destination is known, else the warp stops with the reason."""
    def stop(reason):
        return Compiled(lambda m, active, mask: m.stop(slot, active, 0, reason), True, slot)
    if transfer == "indirect":
        # BRX/BRXU Rx offset: relative to the next instruction; JMX/JMXU: absolute
        base = next_pc(slot, ctx) if family.startswith("BRX") else 0
        run = jump_to_register(slot, guard, ops, ctx, base, f"indirect branch ({family})", False)
        return Compiled(run, True, slot) if run is not None else stop(f"indirect branch ({family}) without a register")
    if transfer == "branch":
        destination = target_of(ops, slot, ctx, labels)
        if destination is None:
            return stop("branch target is not an instruction of the listing")
        if "DIV" in mods:
            return Compiled(branch_if_divergent(slot, guard, ops, ctx, destination), True, slot)
        condition = next((op for op in ops if op.kind == "pred"), None)
        if condition is not None:
            # "BRA.U !UP0, target" / "BRA P1, target": a predicate operand is a condition too
            guard = both(guard, guard_of({"guard": condition.name, "guard_negated": condition.negate}, ctx))
        return Compiled(jump(slot, guard, destination), True, slot)
    if transfer == "reconverge":
        # sm_5x/6x SYNC / BRK / CONT jump to the point their enclosing SSY / PBK / PCNT named
        destination = ctx.reconvergence.get(int(slot.row["pc"]))
        if destination is None:
            return stop(f"{family} without an enclosing {opcodes.RECONVERGE_JUMPS[family]}")
        return Compiled(jump(slot, guard, destination), True, slot)
    if transfer == "call":
        if indirect_target(ops) is not None:
            # a call through a function pointer (or a virtual call): CALL.REL.NOINC R8 `(kernel), the address
            # relative to the function's start, as the binary's function-pointer tables hold it
            return Compiled(jump_to_register(slot, guard, ops, ctx, 0, "indirect call", False), True, slot)
        destination = target_of(ops, slot, ctx, labels)
        if destination is None:
            return stop("call target is not a function of the listing")
        return Compiled(jump(slot, guard, destination), True, slot)
    if transfer == "return":
        run = return_to_register(slot, guard, ops, ctx)
        return Compiled(jump(slot, guard, EXIT) if run is None else run, True, slot)
    if transfer == "exit":
        return Compiled(jump(slot, guard, EXIT), True, slot)
    if transfer == "barrier" and not any(x in mods for x in ("ARV", "ARRIVE")):
        return Compiled(barrier(slot, guard, ops, mods, ctx), True, slot)
    return Compiled(lambda m, active, mask: None, False, slot)          # BAR.ARV, and the marks (BSSY...)


def compile_instruction(slot, ctx: SassContext, labels: dict[str, int]) -> Compiled:
    row = slot.row
    family = row["opcode"]
    mods = list(row["modifiers"] or [])
    full = ".".join([family, *mods])
    ops = [parse_operand(o) for o in row["operands"] or []]
    guard = guard_of(row, ctx)
    entry = opcodes.opcode_of(family)

    if entry is not None and entry.role == "control":
        return _control(slot, family, entry.detail, ops, mods, guard, ctx, labels)
    if opcodes.writes_shared_opaquely(family) and ctx.shared_values:
        def forget(m, mask):
            m.shared_contents().forget(m.cta_index[m.valid if mask is None else mask])
        return Compiled(with_guard(forget, guard, slot, writes_memory=True), False, slot)   # it changes shared memory
    if opcodes.has_no_effect(family):
        return Compiled(lambda m, active, mask: None, False, slot)

    body = None
    if shared_op(full) is not None:
        every_lane = misread_guard(row, full)
        if every_lane is not None:
            return _copy_under_misread_guard(full, ops, mods, ctx, slot, guard, every_lane)
        body = shared_memory(full, ops, mods, ctx, slot)
    if body is None and global_op(full) is not None:
        body = global_memory(full, ops, mods, ctx, slot)
    if body is None and entry is not None and entry.role == "local":
        body = local_memory(ops, mods, ctx, entry.access[0] == "ld")
    if body is None and entry is not None and entry.detail in HANDLERS:
        # a handler returns None for a form it does not model (an operand shape, a modifier); anything it
        # raises is a bug and surfaces as one
        body = HANDLERS[entry.detail](ops, mods, ctx)
        if body is not None and entry.role == "warp":
            body = collective(body, written_registers(row))
    if body is None:
        loads = opcodes.reads_into_registers(family)
        if loads is not None:
            body = other_memory(ops, mods, loads)
        else:
            bits = taint.FLOAT if entry is not None and entry.role == "float" else taint.UNMODELLED
            if bits is taint.UNMODELLED:
                ctx.unknown_opcodes[full] = ctx.unknown_opcodes.get(full, 0) + 1
            body = _unknown(ops, bits)
    return Compiled(with_guard(body, guard, slot if shared_op(full) is not None else None,
                               written_registers(row) if guard is not None else (), writes_memory(full)), False, slot)


def _copy_under_misread_guard(opcode: str, ops: list[Operand], mods: list[str], ctx: SassContext, slot, guard,
                              every_lane: bool) -> Compiled:
    """An ``LDGSTS`` guarded on the predicate Nsight reads as false there (:func:`misread_guard`): the copy runs
    where the guard holds (what it does to shared memory), while the lanes counted are every one that reached it
    (``@!P0``) or none (``@P0``), whatever the guard holds: the guard decides no count."""
    execute = with_guard(shared_memory(opcode, ops, mods, ctx, slot, record=False), guard, writes_memory=True)
    count = copy_counted_by_nsight(opcode, ops, ctx, slot, guard) if every_lane else None

    def run(m, active, mask):
        execute(m, active, mask)
        if count is not None:
            count(m, mask)
    return Compiled(run, False, slot)


def written_registers(row: dict) -> tuple[str, ...]:
    """The registers an instruction may write: its leading register (with the pair or quad its width
    implies) and the predicates right after it (at worst a few more than it writes: their taint only grows)."""
    ops = [parse_operand(o) for o in row["operands"] or []]
    mods = list(row["modifiers"] or [])
    if ops and ops[0].kind == "pred" and ops[0].name in ("PT", "UPT") and len(ops) > 1 and ops[1].kind == "reg":
        ops = ops[1:]                   # ATOMG.E.ADD PT, Rd, [a], Rb: the register after the (unwritten) PT
    if not ops or ops[0].kind not in ("reg", "pred") or ops[0].negate:
        return ()
    names = [ops[0].name]
    if ops[0].kind == "reg":
        # matrix instructions write a group of registers the modifiers do not spell (HMMA.16816.F32: four)
        matrix = getattr(opcodes.opcode_of(row["opcode"]), "role", None) == "matrix"
        width = 4 if "128" in mods or "4" in mods or matrix else \
            2 if ("64" in mods or "WIDE" in mods or "2" in mods or ops[0].wide) else 1
        for _ in range(width - 1):
            names.append(pair_name(names[-1]))
    names += [op.name for op in ops[1:3] if op.kind == "pred" and not op.negate]
    return tuple(names)


def _unknown(ops: list[Operand], bits):
    """Destinations (the leading register/predicate operands) get an unknown value carrying ``bits``."""
    destinations = []
    for op in ops[:2]:
        if op.kind in ("reg", "pred") and not op.negate:
            destinations.append(op)
            if op.kind == "reg":
                break
        else:
            break
    writers = [writer(op) for op in destinations]
    wide = [op for op in destinations if op.kind == "reg"]
    extra = [writer(Operand("reg", "", name=pair_name(wide[0].name)))] if wide and wide[0].wide else []

    def run(m, mask):
        for write in writers + extra:
            write(m, U64(0), bits, mask)
    return run
