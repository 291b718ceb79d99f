"""Compile register-to-register PTX instructions (integer, bitwise, predicate, moves, conversions).

Each compiler returns ``run(state, mask)``, which computes the result for
every thread and stores it where ``mask`` is set (None: all threads).  The
result's taint is the OR of the sources' taints, so dependence on loaded data,
floating point, missing parameters or the CTA index follows the value.
Floating-point arithmetic is evaluated where IEEE and the PTX ISA fix the
result bit for bit (:mod:`.floatops`); approximations (``.approx``, ``sin``,
``ex2`` ...) and the few cases numpy cannot reproduce exactly carry ``FLOAT``.
"""

from __future__ import annotations

import numpy as np

from traceconf.emulate import floatops, intops, taint
from traceconf.emulate.intops import FLOAT_TYPES, SIGNED_TYPES, TYPE_BITS
from traceconf.emulate.operands import Context, reader, register_key, split_destinations
from traceconf.emulate.program import Slot

U64 = np.uint64

#: Base of the generic window that maps shared memory (cvta.shared adds it, cvta.to.shared removes it).
SHARED_WINDOW_BASE = {32: 1 << 30, 64: 1 << 44}

FLOAT_ONLY_OPCODES = frozenset({"fma", "rcp", "sqrt", "rsqrt", "sin", "cos", "lg2", "ex2", "tanh", "testp",
                                "copysign", "cvt.pack", "fns", "frexp"})


def types_of(row: dict) -> list[str]:
    return [m for m in row["modifiers"] or [] if m in TYPE_BITS]


def _type_facts(row: dict) -> tuple[int, bool, bool]:
    kind = row["type"] or "b32"
    return TYPE_BITS.get(kind, 32), kind in SIGNED_TYPES, kind in FLOAT_TYPES


def _writer(row: dict, slot: Slot, position: int = 0):
    keys = [register_key(n, slot) for n in split_destinations(row["operands"][position])]
    return keys


def _sources(row: dict, slot: Slot, ctx: Context, first: int = 1):
    return [reader(op, slot, ctx) for op in row["operands"][first:]]


def _or_bits(pairs) -> np.ndarray:
    bits = taint.ZERO
    for _, b in pairs:
        bits = bits | b
    return bits


def unknown_result(row: dict, slot: Slot, ctx: Context, bits: np.uint64):
    """Destinations get an unknown value carrying ``bits`` (plus the sources' taints)."""
    operands = row["operands"] or []
    if not operands or operands[0]["kind"] not in ("reg", "vector"):
        return lambda m, mask: None
    keys = _writer(row, slot)
    sources = _sources(row, slot, ctx)

    def run(m, mask):
        extra = _or_bits([s(m) for s in sources]) | bits
        for key in keys:
            m.write(key, U64(0), extra, mask)
    return run


def _simple(row, slot, ctx, compute, result_bits=None):
    """One destination, computed from all source operands by ``compute(values) -> uint64``."""
    keys = _writer(row, slot)
    sources = _sources(row, slot, ctx)
    key = keys[0]
    # once on zeros, now: too few source operands (the parser takes any list) fail here, at compile time,
    # where compile_slot reports the instruction's line, not in the middle of a run
    compute([np.zeros(1, np.uint64) for _ in sources])

    def run(m, mask):
        pairs = [s(m) for s in sources]
        value = compute([p[0] for p in pairs])
        m.write(key, value, _or_bits(pairs), mask)
    return run


def compile_alu(slot: Slot, ctx: Context):
    """``run(state, mask)`` for an ALU instruction, or None when the opcode is not one."""
    row = slot.row
    opcode = row["opcode"]
    modifiers = row["modifiers"] or []
    bits, is_signed, is_float = _type_facts(row)
    if opcode in FLOAT_ONLY_OPCODES or (is_float and opcode in _ARITHMETIC):
        exact = _float(row, slot, ctx, modifiers, bits) if bits in floatops.FLOATS and \
            row["type"] in floatops.EXACT_TYPES else None
        return exact or unknown_result(row, slot, ctx, taint.FLOAT)
    handler = _HANDLERS.get(opcode)
    if handler is None:
        return None
    return handler(row, slot, ctx, modifiers, bits, is_signed)


# --------------------------------------------------------------------------- floating point


def _float_result(row, slot, ctx, compute):
    """One destination from all sources: ``compute(values) -> (bits, exact)``; inexact lanes carry FLOAT."""
    key = _writer(row, slot)[0]
    sources = _sources(row, slot, ctx)

    def run(m, mask):
        pairs = [s(m) for s in sources]
        value, exact = compute([p[0] for p in pairs])
        m.write(key, value, _or_bits(pairs) | np.where(exact, taint.ZERO, taint.FLOAT), mask)
    return run


def _irrelevant(row, slot, ctx) -> bool:
    """No destination can reach an address, a condition or modelled memory (then computing it is wasted)."""
    relevant = ctx.relevant_registers
    return relevant is not None and not any(key in relevant for key in _writer(row, slot))


def _float(row, slot, ctx, modifiers, width):
    """Exact float arithmetic (see floatops), or None where the operation is an approximation."""
    opcode = row["opcode"]
    if _irrelevant(row, slot, ctx):
        return None
    rounding = next((m for m in modifiers if m in floatops.ROUNDINGS), None)
    ftz, sat = "ftz" in modifiers, "sat" in modifiers
    approximate = "approx" in modifiers or "full" in modifiers
    if opcode in ("add", "sub", "mul") or (opcode == "div" and not approximate):
        return _float_result(row, slot, ctx, lambda v: floatops.arithmetic(opcode, v[0], v[1], width, rounding,
                                                                            ftz, sat))
    if opcode == "rcp" and not approximate:
        one = floatops.from_float(np.ones(1), width)[0]
        return _float_result(row, slot, ctx, lambda v: floatops.arithmetic("div", one, v[0], width, rounding,
                                                                            ftz, sat))
    if opcode in ("fma", "mad") and not approximate:
        return _float_result(row, slot, ctx, lambda v: floatops.fma(v[0], v[1], v[2], width, rounding, ftz, sat))
    if opcode == "sqrt" and not approximate:
        return _float_result(row, slot, ctx, lambda v: floatops.square_root(v[0], width, rounding, ftz))
    if opcode in ("min", "max") and not any(m in modifiers for m in ("xorsign", "abs")):
        return _float_result(row, slot, ctx, lambda v: floatops.minimum_maximum(opcode, v[0], v[1], width, ftz,
                                                                                 "NaN" in modifiers))
    if opcode in ("abs", "neg"):
        sign = U64(1 << (width - 1))

        def sign_bit(v):
            value = intops.truncate(v[0], width)
            if ftz and width == 32:
                value = floatops.from_float(floatops.flush_subnormal(floatops.to_float(value, 32)), 32)
            result = value & ~sign if opcode == "abs" else value ^ sign
            return result, np.ones(np.shape(result), dtype=bool)
        return _float_result(row, slot, ctx, sign_bit)
    if opcode == "copysign":
        sign = U64(1 << (width - 1))
        return _float_result(row, slot, ctx, lambda v: ((intops.truncate(v[1], width) & ~sign)
                                                        | (intops.truncate(v[0], width) & sign),
                                                        np.ones(np.shape(v[1]), dtype=bool)))
    return None


# --------------------------------------------------------------------------- arithmetic


def _add(row, slot, ctx, modifiers, bits, is_signed, subtract=False):
    """add/sub with .sat and the carry chain (.cc sets the carry/borrow flag, addc/subc use it)."""
    key = _writer(row, slot)[0]
    a, b = _sources(row, slot, ctx)
    carry_in_used = row["opcode"] in ("addc", "subc")
    carry_out = "cc" in modifiers
    saturate = "sat" in modifiers

    def run(m, mask):
        (x, tx), (y, ty) = a(m), b(m)
        bits_out = tx | ty
        if saturate:
            exact = intops.signed(x, bits) - intops.signed(y, bits) if subtract else \
                intops.signed(x, bits) + intops.signed(y, bits)
            m.write(key, intops.saturate_signed(exact, bits), bits_out, mask)
            return
        x, y = intops.unsigned(x, bits), intops.unsigned(y, bits)
        carry_in = m.carry if carry_in_used else U64(0)
        if carry_in_used:
            bits_out = bits_out | m.carry_taint
        if subtract:
            value = intops.truncate(x - y - carry_in, bits)
            carry = (x < y) | ((x == y) & (carry_in == 1))          # borrow
        else:
            partial = intops.truncate(x + y, bits)
            value = intops.truncate(partial + carry_in, bits)
            carry = (partial < x) | (value < partial)
        if carry_out:
            carry = np.broadcast_to(np.asarray(carry, dtype=np.uint64), (m.size,))
            m.carry = carry if mask is None else np.where(mask, carry, m.carry)
            m.carry_taint = np.broadcast_to(bits_out if mask is None else np.where(mask, bits_out, m.carry_taint),
                                            (m.size,))
        m.write(key, value, bits_out, mask)
    return run


def _mul_part(modifiers) -> str:
    return "hi" if "hi" in modifiers else "wide" if "wide" in modifiers else "lo"


def _mul(row, slot, ctx, modifiers, bits, is_signed):
    part = _mul_part(modifiers)
    return _simple(row, slot, ctx, lambda v: intops.mul(v[0], v[1], bits, is_signed, part))


def _mad(row, slot, ctx, modifiers, bits, is_signed):
    part = _mul_part(modifiers)
    out_bits = 2 * bits if part == "wide" else bits
    saturate = "sat" in modifiers

    def compute(v):
        product = intops.mul(v[0], v[1], bits, is_signed, part)
        if saturate and is_signed and part == "hi":
            return intops.saturate_signed(intops.signed(product, bits) + intops.signed(v[2], bits), bits)
        return intops.truncate(product + v[2], out_bits)
    if "cc" in modifiers or row["opcode"] == "madc":
        # extended-precision chains: the carry is reproduced exactly by an add after the product
        return _mad_with_carry(row, slot, ctx, modifiers, bits, is_signed, part)
    return _simple(row, slot, ctx, compute)


def _mad_with_carry(row, slot, ctx, modifiers, bits, is_signed, part):
    key = _writer(row, slot)[0]
    a, b, c = _sources(row, slot, ctx)
    carry_in_used = row["opcode"] == "madc"
    carry_out = "cc" in modifiers

    def run(m, mask):
        (x, tx), (y, ty), (z, tz) = a(m), b(m), c(m)
        product = intops.mul(x, y, bits, is_signed, part)
        carry_in = m.carry if carry_in_used else U64(0)
        first = intops.truncate(product + intops.unsigned(z, bits), bits)
        total = intops.truncate(first + carry_in, bits)
        bits_out = tx | ty | tz | (m.carry_taint if carry_in_used else taint.ZERO)
        if carry_out:
            carry = ((first < intops.unsigned(z, bits)) | (total < first)).astype(np.uint64)
            m.carry = carry if mask is None else np.where(mask, carry, m.carry)
            m.carry_taint = np.broadcast_to(bits_out if mask is None else np.where(mask, bits_out, m.carry_taint),
                                            (m.size,))
        m.write(key, total, bits_out, mask)
    return run


def _mul24(row, slot, ctx, modifiers, bits, is_signed):
    part = "hi" if "hi" in modifiers else "lo"
    if row["opcode"] == "mad24":
        return _simple(row, slot, ctx,
                       lambda v: intops.truncate(intops.mul24(v[0], v[1], is_signed, part) + v[2], 32))
    return _simple(row, slot, ctx, lambda v: intops.mul24(v[0], v[1], is_signed, part))


def _sad(row, slot, ctx, modifiers, bits, is_signed):
    def compute(v):
        if is_signed:
            diff = intops.bits_of(np.abs(intops.signed(v[0], bits) - intops.signed(v[1], bits)))
        else:
            x, y = intops.unsigned(v[0], bits), intops.unsigned(v[1], bits)
            diff = np.where(x > y, x - y, y - x)
        return intops.truncate(diff + v[2], bits)
    return _simple(row, slot, ctx, compute)


def _divide(row, slot, ctx, modifiers, bits, is_signed):
    key = _writer(row, slot)[0]
    a, b = _sources(row, slot, ctx)
    remainder = row["opcode"] == "rem"

    def run(m, mask):
        (x, tx), (y, ty) = a(m), b(m)
        x = np.broadcast_to(x, (m.size,))
        quotient, rest, by_zero = intops.divide(x, np.broadcast_to(y, (m.size,)), bits, is_signed)
        # the ISA leaves division by zero undefined: such lanes get an unknown result
        bits_out = tx | ty | np.where(by_zero, taint.UNMODELLED, taint.ZERO)
        m.write(key, rest if remainder else quotient, bits_out, mask)
    return run


def _minmax(row, slot, ctx, modifiers, bits, is_signed):
    fn = intops.minimum if row["opcode"] == "min" else intops.maximum

    def compute(v):
        result = fn(v[0], v[1], bits, is_signed)
        for extra in v[2:]:
            result = fn(result, extra, bits, is_signed)
        return result
    return _simple(row, slot, ctx, compute)


def _abs(row, slot, ctx, modifiers, bits, is_signed):
    return _simple(row, slot, ctx, lambda v: intops.absolute(v[0], bits))


def _neg(row, slot, ctx, modifiers, bits, is_signed):
    return _simple(row, slot, ctx, lambda v: intops.negate(v[0], bits))


# --------------------------------------------------------------------------- bitwise


def _logic(row, slot, ctx, modifiers, bits, is_signed):
    opcode = row["opcode"]
    if opcode == "not":
        return _simple(row, slot, ctx, lambda v: intops.truncate(~v[0], bits))
    if opcode == "cnot":
        return _simple(row, slot, ctx, lambda v: (intops.unsigned(v[0], bits) == 0).astype(np.uint64))
    fn = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[opcode]
    if row.get("type") == "pred":        # a known deciding side decides alone
        key, (a, b) = _writer(row, slot)[0], _sources(row, slot, ctx)

        def run(m, mask):
            (x, x_bits), (y, y_bits) = a(m), b(m)
            m.write(key, fn(x, y) & U64(1), taint.of_logic(opcode, x, x_bits, y, y_bits), mask)
        return run
    return _simple(row, slot, ctx, lambda v: intops.truncate(fn(v[0], v[1]), bits))


def _shift(row, slot, ctx, modifiers, bits, is_signed):
    if row["opcode"] == "shl":
        return _simple(row, slot, ctx, lambda v: intops.shl(v[0], v[1], bits))
    return _simple(row, slot, ctx, lambda v: intops.shr(v[0], v[1], bits, is_signed))


def _funnel(row, slot, ctx, modifiers, bits, is_signed):
    left, clamp = "l" in modifiers, "clamp" in modifiers
    return _simple(row, slot, ctx, lambda v: intops.funnel_shift(v[0], v[1], v[2], left, clamp))


def _bfe(row, slot, ctx, modifiers, bits, is_signed):
    return _simple(row, slot, ctx, lambda v: intops.bit_field_extract(v[0], v[1], v[2], bits, is_signed))


def _bmsk(row, slot, ctx, modifiers, bits, is_signed):
    """bmsk.{clamp,wrap}.b32 d, a, b: ``b`` one bits from bit ``a`` (the PTX ISA's semantics, both modes)."""
    clamp = "clamp" in modifiers

    def mask(v):
        a, b = intops.truncate(v[0], 32), intops.truncate(v[1], 32)
        start, width = a & U64(31), b & U64(31)
        low = (U64(0xFFFF_FFFF) << start) & U64(0xFFFF_FFFF)
        end = start + width
        overflow = end >= 32
        if clamp:
            low = np.where(a >= 32, U64(0), low)
            overflow = overflow | (a >= 32) | (b >= 32)
        high = np.where(overflow, U64(0), np.where(width == 0, U64(0xFFFF_FFFF),
                                                   (U64(0xFFFF_FFFF) << (end & U64(31))) & U64(0xFFFF_FFFF)))
        return low & (high ^ U64(0xFFFF_FFFF))
    return _simple(row, slot, ctx, mask)


def _bfi(row, slot, ctx, modifiers, bits, is_signed):
    return _simple(row, slot, ctx, lambda v: intops.bit_field_insert(v[0], v[1], v[2], v[3], bits))


def _prmt(row, slot, ctx, modifiers, bits, is_signed):
    mode = next((m for m in modifiers if m in ("f4e", "b4e", "rc8", "ecl", "ecr", "rc16")), None)
    return _simple(row, slot, ctx, lambda v: intops.permute_bytes(v[0], v[1], v[2], mode))


def _lop3(row, slot, ctx, modifiers, bits, is_signed):
    lut_operand = row["operands"][4]
    if lut_operand["kind"] != "imm":
        return unknown_result(row, slot, ctx, taint.UNMODELLED)
    lut = int(lut_operand["value"]) & 0xFF
    keys = _writer(row, slot)
    a, b, c = (reader(op, slot, ctx) for op in row["operands"][1:4])
    # lop3.{and,or}.b32 d|p, a, b, c, immLut, q: p = (d != 0) and/or q
    combine = next((_BOOL_OPS[m] for m in modifiers if m in ("and", "or")), None)
    q = reader(row["operands"][5], slot, ctx) if combine is not None and len(row["operands"]) > 5 else None

    def run(m, mask):
        (x, tx), (y, ty), (z, tz) = a(m), b(m), c(m)
        result = intops.lop3(x, y, z, lut, bits)
        m.write(keys[0], result, tx | ty | tz, mask)
        if q is not None and len(keys) > 1:
            other, tq = q(m)
            m.write(keys[1], combine((result != 0).astype(np.uint64), other & U64(1)), tx | ty | tz | tq, mask)
    return run


def _count(row, slot, ctx, modifiers, bits, is_signed):
    opcode = row["opcode"]
    if opcode == "popc":
        return _simple(row, slot, ctx, lambda v: intops.popcount(v[0], bits))
    if opcode == "clz":
        return _simple(row, slot, ctx, lambda v: intops.count_leading_zeros(v[0], bits))
    if opcode == "brev":
        return _simple(row, slot, ctx, lambda v: intops.bit_reverse(v[0], bits))
    shift_amount = "shiftamt" in modifiers
    return _simple(row, slot, ctx, lambda v: intops.find_msb(v[0], bits, is_signed, shift_amount))


# --------------------------------------------------------------------------- comparisons and selects

_BOOL_OPS = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}
_FLOAT_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan")
_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs")


def _setp(row, slot, ctx, modifiers, bits, is_signed):
    types = types_of(row)
    source_type = types[-1] if types else "b32"
    comparison = next((m for m in modifiers if m in _COMPARISONS), None)
    float_comparison = next((m for m in modifiers if m in _FLOAT_COMPARISONS), None)
    if source_type in FLOAT_TYPES:
        if source_type not in floatops.EXACT_TYPES or float_comparison is None or _irrelevant(row, slot, ctx):
            return unknown_result(row, slot, ctx, taint.FLOAT)
        width, ftz = TYPE_BITS[source_type], "ftz" in modifiers

        def compare(a, b, bits_unused, signed_unused):
            return floatops.compare(float_comparison, a, b, width, ftz)
        comparison_function = compare
    elif comparison is None:
        return unknown_result(row, slot, ctx, taint.FLOAT)
    else:
        def comparison_function(a, b, width, signed):
            return intops.compare(comparison, a, b, width, signed)
    bits, is_signed = TYPE_BITS[source_type], source_type in SIGNED_TYPES
    operation = next((m for m in modifiers if m in _BOOL_OPS), None)
    combine = _BOOL_OPS.get(operation)
    keys = _writer(row, slot)
    sources = _sources(row, slot, ctx)
    needed = 3 if combine is not None else 2     # a, b (and c for .and/.or/.xor): checked at compile time,
    if len(sources) < needed:                    # where compile_slot reports the instruction's line
        raise ValueError(f"{row['opcode']} needs {needed} source operands, got {len(sources)}")
    to_integer = row["opcode"] == "set"
    dest_type = types[0] if to_integer and len(types) > 1 else None

    def run(m, mask):
        pairs = [s(m) for s in sources]
        outcome = np.asarray(comparison_function(pairs[0][0], pairs[1][0], bits, is_signed)).astype(np.uint64)
        bits_out = _or_bits(pairs)
        complement = outcome ^ U64(1)
        complement_bits = bits_out
        if combine is not None:
            other, other_bits = pairs[2][0] & U64(1), pairs[2][1]
            compared = pairs[0][1] | pairs[1][1]
            bits_out = taint.of_logic(operation, outcome, compared, other, other_bits)
            complement_bits = taint.of_logic(operation, complement, compared, other, other_bits)
            outcome, complement = combine(outcome, other), combine(complement, other)
        if to_integer:
            true_value = U64(0x3F800000) if dest_type == "f32" else U64(0xFFFF_FFFF)
            m.write(keys[0], outcome * true_value, bits_out, mask)
            return
        m.write(keys[0], outcome, bits_out, mask)
        if len(keys) > 1:
            m.write(keys[1], complement, complement_bits, mask)
    return run


def _selp(row, slot, ctx, modifiers, bits, is_signed):
    key = _writer(row, slot)[0]
    a, b, c = _sources(row, slot, ctx)
    is_slct = row["opcode"] == "slct"
    types = types_of(row)
    if is_slct and types and types[-1] in FLOAT_TYPES:
        return unknown_result(row, slot, ctx, taint.FLOAT)

    def run(m, mask):
        (x, tx), (y, ty), (z, tz) = a(m), b(m), c(m)
        choose_first = intops.signed(z, 32) >= 0 if is_slct else (z & U64(1)) == 1
        # the selected operand's taint only: a shared window pointer stays one through selp
        m.write(key, np.where(choose_first, x, y), np.where(choose_first, tx, ty) | tz, mask)
    return run


# --------------------------------------------------------------------------- moves and conversions


def _mov(row, slot, ctx, modifiers, bits, is_signed):
    destination, source = row["operands"][0], row["operands"][1]
    if destination["kind"] == "vector":          # unpack: {%r1, %r2} = %rd1
        keys = [register_key(n, slot) if n != "_" else None for n in destination["elements"]]
        width = bits // len(keys)
        read = reader(source, slot, ctx)

        def unpack(m, mask):
            value, b = read(m)
            for index, key in enumerate(keys):
                if key is not None:
                    m.write(key, intops.truncate(value >> U64(index * width), width), b, mask)
        return unpack
    key = register_key(destination["name"], slot)
    if source["kind"] == "vector":               # pack: %rd1 = {%r1, %r2}
        parts = [reader({"kind": "reg", "name": n}, slot, ctx) for n in source["elements"]]
        width = bits // len(parts)

        def pack(m, mask):
            value, b = U64(0), taint.ZERO
            for index, part in enumerate(parts):
                v, t = part(m)
                value = value | (intops.truncate(v, width) << U64(index * width))
                b = b | t
            m.write(key, value, b, mask)
        return pack
    read = reader(source, slot, ctx)

    def move(m, mask):
        value, b = read(m)
        m.write(key, intops.truncate(value, bits), b, mask)
    return move


def _cvt(row, slot, ctx, modifiers, bits, is_signed):
    types = types_of(row)
    if len(types) >= 2 and (types[0] in FLOAT_TYPES or types[1] in FLOAT_TYPES):
        return _cvt_float(row, slot, ctx, modifiers, types[0], types[1]) or \
            unknown_result(row, slot, ctx, taint.FLOAT)
    if len(types) < 2:
        return unknown_result(row, slot, ctx, taint.FLOAT)
    dest, source = types[0], types[1]
    saturate = "sat" in modifiers
    return _simple(row, slot, ctx, lambda v: intops.convert(
        v[0], TYPE_BITS[source], source in SIGNED_TYPES, TYPE_BITS[dest], dest in SIGNED_TYPES, saturate))


def _cvt_float(row, slot, ctx, modifiers, dest: str, source: str):
    """cvt with a float side, exact where the ISA fixes the result (see floatops), else None."""
    if _irrelevant(row, slot, ctx):
        return None
    exact_types = floatops.EXACT_TYPES
    if (dest in FLOAT_TYPES and dest not in exact_types) or (source in FLOAT_TYPES and source not in exact_types):
        return None
    ftz, sat = "ftz" in modifiers, "sat" in modifiers
    integral = next((m for m in modifiers if m in ("rni", "rzi", "rmi", "rpi")), None)
    rounding = next((m for m in modifiers if m in floatops.ROUNDINGS), None)
    if dest not in FLOAT_TYPES:                                   # float -> integer
        if integral is None:
            return None
        return _float_result(row, slot, ctx, lambda v: (
            floatops.float_to_int(v[0], TYPE_BITS[source], TYPE_BITS[dest], dest in SIGNED_TYPES, integral, ftz),
            np.ones(np.shape(v[0]), dtype=bool)))
    if source not in FLOAT_TYPES:                                 # integer -> float
        def convert(v):
            value, exact = floatops.int_to_float(v[0], TYPE_BITS[source], source in SIGNED_TYPES,
                                                 TYPE_BITS[dest], rounding or "rn")
            if sat:
                value = floatops.from_float(floatops.saturate(floatops.to_float(value, TYPE_BITS[dest])),
                                            TYPE_BITS[dest])
            return value, exact
        return _float_result(row, slot, ctx, convert)
    return _float_result(row, slot, ctx, lambda v: floatops.float_to_float(
        v[0], TYPE_BITS[source], TYPE_BITS[dest], rounding, ftz, sat, integral))


def _cvta(row, slot, ctx, modifiers, bits, is_signed):
    """cvta.shared adds the generic shared window base and marks the value; cvta.to.shared undoes it."""
    key = _writer(row, slot)[0]
    read = reader(row["operands"][1], slot, ctx)
    space = row["state_space"] or next((m for m in modifiers if m in ("shared", "global", "local", "const",
                                                                         "param")), None)
    to_space = "to" in modifiers
    base = U64(SHARED_WINDOW_BASE[32 if bits <= 32 else 64])

    if space != "shared":
        def identity(m, mask):
            value, b = read(m)
            m.write(key, intops.truncate(value, bits), b & ~taint.SHARED_WINDOW, mask)
        return identity

    if not to_space:
        def to_generic(m, mask):
            value, b = read(m)
            m.write(key, intops.truncate(value + base, bits), b | taint.SHARED_WINDOW, mask)
        return to_generic

    def to_shared(m, mask):
        value, b = read(m)
        # a generic address that never came from the shared window has no shared offset we can know
        outside = (b & taint.SHARED_WINDOW) == 0
        bits_out = (b & ~taint.SHARED_WINDOW) | np.where(outside, taint.UNMODELLED, taint.ZERO)
        m.write(key, intops.truncate(value - base, bits), bits_out, mask)
    return to_shared


def _isspacep(row, slot, ctx, modifiers, bits, is_signed):
    """isspacep.{shared,shared::cta,shared::cluster,global} p, a: whether the generic address lies in the shared
    window (known from its provenance); a global answer takes every other generic address for global, and the
    local, const and param windows are not modelled."""
    key = _writer(row, slot)[0]
    read = reader(row["operands"][1], slot, ctx)
    space = next((m.split("::")[0] for m in modifiers if m.split("::")[0] in ("shared", "global")), None)
    if space is None:
        return unknown_result(row, slot, ctx, taint.UNMODELLED)

    def run(m, mask):
        value, b = read(m)
        inside = ((b & taint.SHARED_WINDOW) != 0).astype(np.uint64)
        m.write(key, inside if space == "shared" else inside ^ U64(1), b & ~taint.SHARED_WINDOW, mask)
    return run


def _szext(row, slot, ctx, modifiers, bits, is_signed):
    """szext.{clamp,wrap}.{u32,s32} d, a, b: the low ``b`` bits of ``a``, zero- or sign-extended (the ISA's
    semantics: ``b`` >= 32 keeps all bits with .clamp and wraps modulo 32 with .wrap, 0 keeps none)."""
    clamp = "clamp" in modifiers

    def extend(v):
        a, b = intops.truncate(v[0], 32), intops.truncate(v[1], 32)
        width = b & U64(31)
        too_large = (b >= 32) if clamp else np.zeros(np.shape(b), bool)
        mask = np.where(too_large, U64(0), (U64(0xFFFF_FFFF) << width) & U64(0xFFFF_FFFF))
        sign = (a >> ((width + U64(31)) & U64(31))) & U64(1)          # bit width - 1
        sign = np.where((width == 0) | too_large | (not is_signed), U64(0), sign)
        return (a & (mask ^ U64(0xFFFF_FFFF))) | np.where(sign == 1, mask, U64(0))
    return _simple(row, slot, ctx, extend)


_ARITHMETIC = frozenset({"add", "sub", "mul", "mad", "div", "rem", "min", "max", "abs", "neg", "fma"})

_HANDLERS = {
    "add": _add, "addc": _add,
    "sub": lambda *a: _add(*a, subtract=True), "subc": lambda *a: _add(*a, subtract=True),
    "mul": _mul, "mad": _mad, "madc": _mad, "mul24": _mul24, "mad24": _mul24, "sad": _sad,
    "div": _divide, "rem": _divide, "min": _minmax, "max": _minmax, "abs": _abs, "neg": _neg,
    "and": _logic, "or": _logic, "xor": _logic, "not": _logic, "cnot": _logic,
    "shl": _shift, "shr": _shift, "shf": _funnel, "bfe": _bfe, "bfi": _bfi, "prmt": _prmt, "lop3": _lop3,
    "bmsk": _bmsk, "szext": _szext,
    "popc": _count, "clz": _count, "brev": _count, "bfind": _count,
    "setp": _setp, "set": _setp, "selp": _selp, "slct": _selp,
    "mov": _mov, "cvt": _cvt, "cvta": _cvta, "isspacep": _isspacep,
}
