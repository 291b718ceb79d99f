"""32-bit floating point at the SASS level, exact where the PTX level's is: FADD, FMUL, FFMA, FSETP, FMNMX.

These map one to one onto PTX ``add``/``mul``/``fma``/``setp``/``min``/``max`` ``.f32`` with the same
rounding (``.RN`` by default, ``.RZ``/``.RM``/``.RP``), ``.FTZ`` and ``.SAT``, so they use the PTX level's
IEEE arithmetic (:mod:`traceconf.emulate.floatops`); a lane it cannot reproduce bit for bit keeps the
``FLOAT`` taint.  SASS float operands carry their own sign modifiers: ``-R2`` negates and ``|R2|`` takes the
absolute value of the bit pattern (not the integer); an immediate written in decimal (``0.5``, ``1``,
``-INF``) is a float, one in hex a bit pattern.  Other floating point (``MUFU``, conversions, 64-bit and
half types) stays unknown, as before.

``FSETP``/``FMNMX`` only with ``--data`` (``ctx.memory``).  Without buffer contents ``FADD``/``FMUL``/``FFMA``
and ``I2FP`` are evaluated only where their operands are known (values computed from constants and indices,
such as the float steps of ptxas's 16-bit integer-division helper); elsewhere they stay ``FLOAT`` as before,
without evaluating a lane.
"""

from __future__ import annotations

import math

import numpy as np

from traceconf.emulate import floatops, taint
from traceconf.sass.operands import M32, Operand, SassContext, parse_operand, reader, writer

U64 = np.uint64
SIGN = U64(0x8000_0000)
_ROUNDINGS = {"RN": "rn", "RZ": "rz", "RM": "rm", "RP": "rp"}
_COMPARISONS = frozenset({"EQ", "NE", "LT", "LE", "GT", "GE", "EQU", "NEU", "LTU", "LEU", "GTU", "GEU", "NUM", "NAN"})
_COMBINE = {"AND": np.logical_and, "OR": np.logical_or, "XOR": np.logical_xor}
_WIDE = frozenset({"F64", "F16", "BF16", "F16x2", "BF16_V2", "H0_H0", "H1_H1"})


def _literal(text: str) -> U64 | None:
    """The f32 bit pattern of a decimal float immediate (``0.5``, ``1``, ``-INF``, ``+QNAN``), else None."""
    body = text.lstrip("+-").upper()
    negative = text.startswith("-")
    if body in ("INF", "QNAN", "NAN"):
        value = math.inf if body == "INF" else math.nan
    else:
        try:
            value = float(body)
        except ValueError:
            return None
    return U64(int(np.float32(-value if negative else value).view(np.uint32)))


def float_reader(op: Operand, ctx: SassContext):
    """``m -> (f32 bits, taint)`` of a float operand: sign modifiers on the bit pattern, decimal immediates as
    floats; None for an operand it cannot read."""
    if op.kind in ("float", "imm") and not op.text.lower().startswith(("0x", "-0x")):
        bits = _literal(op.text)
        return None if bits is None else (lambda m: (bits, taint.ZERO))
    if op.kind == "imm":                           # hex: the bit pattern itself
        bits = U64(op.value & 0xFFFF_FFFF)
        return lambda m: (bits, taint.ZERO)
    if op.kind not in ("reg", "const"):
        return None
    text = op.text.strip()
    negate, absolute = text.startswith("-"), "|" in text
    plain = reader(parse_operand(text.lstrip("-").strip("|")), ctx, False)

    def read(m):
        value, bits = plain(m)
        value = np.asarray(value, dtype=np.uint64) & M32
        if absolute:
            value = value & ~SIGN
        if negate:
            value = value ^ SIGN
        return value, bits
    return read


def _sources(ops: list[Operand], ctx: SassContext):
    readers = [float_reader(op, ctx) for op in ops]
    return None if any(read is None for read in readers) else readers


def _result(dest: Operand, sources, compute, ctx: SassContext):
    """Rd = compute(operand bits...): exact lanes as they are, the others FLOAT-tainted.  Without --data, lanes with
    an unknown operand are not evaluated (FLOAT, as an instruction nobody evaluates): what is left are values the
    kernel computes from constants and indices (the integer-division helpers' float steps)."""
    write = writer(dest)

    def run(m, mask):
        pairs = [read(m) for read in sources]
        bits = taint.ZERO
        for _, b in pairs:
            bits = bits | b
        unknown = (np.asarray(bits) & taint.UNKNOWN) != 0 if ctx.memory is None else False
        if np.all(unknown):
            write(m, U64(0), taint.FLOAT, mask)
            return
        values, exact = compute([value for value, _ in pairs])
        bits = bits | np.where(exact, taint.ZERO, taint.FLOAT)
        write(m, np.asarray(values, dtype=np.uint64), np.where(unknown, taint.FLOAT, bits), mask)
    return run


def _exact_operands(ops: list[Operand], mods: list[str], ctx: SassContext, need_data: bool = True) -> bool:
    """Whether the float instruction can be evaluated: a 32-bit form, a register destination, and --data given
    (unless ``need_data`` is false: :func:`_result` evaluates only lanes whose operands are known)."""
    return (ctx.memory is not None or not need_data) and not _WIDE & set(mods) and bool(ops) and \
        ops[0].kind in ("reg", "pred")


def _arithmetic(op: str):
    """FADD / FMUL (and their 32I forms) Rd, a, b."""
    def compile_(ops, mods, ctx):
        if not _exact_operands(ops, mods, ctx, False) or len(ops) != 3 or not (sources := _sources(ops[1:], ctx)):
            return None
        rounding, ftz, sat = _rounding(mods)
        return _result(ops[0], sources, lambda v: floatops.arithmetic(op, v[0], v[1], 32, rounding, ftz, sat), ctx)
    return compile_


def _fma(ops, mods, ctx):
    if not _exact_operands(ops, mods, ctx, False) or len(ops) != 4 or not (sources := _sources(ops[1:], ctx)):
        return None
    rounding, ftz, sat = _rounding(mods)
    return _result(ops[0], sources, lambda v: floatops.fma(v[0], v[1], v[2], 32, rounding, ftz, sat), ctx)


def _i2fp(ops, mods, ctx):
    """I2FP.F32.{U32,S32}[.RZ|.RM|.RP] Rd, Ra: an integer to f32 (the u16 division helper's first step)."""
    if "F32" not in mods or not ({"U32", "S32"} & set(mods)) or len(ops) != 2 or \
            not _exact_operands(ops, mods, ctx, False):
        return None
    rounding = _rounding(mods)[0] or "rn"
    signed = "S32" in mods
    return _result(ops[0], [reader(ops[1], ctx, False)],
                   lambda v: floatops.int_to_float(v[0], 32, signed, 32, rounding), ctx)


def _fmnmx(ops, mods, ctx):
    if not _exact_operands(ops, mods, ctx) or len(ops) != 4 or ops[3].kind != "pred" or \
            not (sources := _sources(ops[1:3], ctx)):
        return None
    return _min_max(ops[0], sources, reader(ops[3], ctx), "FTZ" in mods, "NAN" in mods)


def _fsetp(ops, mods, ctx):
    comparison = next((m for m in mods if m in _COMPARISONS), None)
    if not _exact_operands(ops, mods, ctx) or len(ops) < 5 or comparison is None or \
            not (sources := _sources(ops[2:4], ctx)):
        return None
    combine = next((_COMBINE[m] for m in mods if m in _COMBINE), np.logical_and)
    return _setp(ops[:2], sources, reader(ops[4], ctx), comparison.lower(), combine, "FTZ" in mods)


def _rounding(mods: list[str]):
    """(rounding, flush to zero, saturate) of a float instruction's modifiers."""
    return next((_ROUNDINGS[m] for m in mods if m in _ROUNDINGS), None), "FTZ" in mods, "SAT" in mods


#: The float handlers of :data:`traceconf.sass.opcodes.TABLE` (the exact run of the instruction, or None
#: where it stays unknown: see the module docstring).
FLOAT_HANDLERS = {"add": _arithmetic("add"), "mul": _arithmetic("mul"), "fma": _fma, "min_max": _fmnmx,
                  "setp": _fsetp, "i2fp": _i2fp}


def _min_max(dest: Operand, sources, predicate, ftz: bool, propagate_nan: bool):
    """FMNMX Rd, a, b, P: the minimum where P holds, else the maximum (PTX min/max .f32)."""
    write = writer(dest)

    def run(m, mask):
        (a, ab), (b, bb), (p, pb) = sources[0](m), sources[1](m), predicate(m)
        low, low_exact = floatops.minimum_maximum("min", a, b, 32, ftz, propagate_nan)
        high, high_exact = floatops.minimum_maximum("max", a, b, 32, ftz, propagate_nan)
        take_min = (np.asarray(p, dtype=np.uint64) & U64(1)) == 1
        exact = np.where(take_min, low_exact, high_exact)
        write(m, np.where(take_min, low, high), ab | bb | pb | np.where(exact, taint.ZERO, taint.FLOAT), mask)
    return run


def _setp(dests: list[Operand], sources, condition, comparison: str, combine, ftz: bool):
    """FSETP.cmp.combine Pd, Pq, a, b, Pc: Pd = (a cmp b) combine Pc, Pq = !(a cmp b) combine Pc (as ISETP)."""
    outs = [writer(op) for op in dests]

    def run(m, mask):
        (a, ab), (b, bb), (c, cb) = sources[0](m), sources[1](m), condition(m)
        result = floatops.compare(comparison, a, b, 32, ftz)
        holds = (np.asarray(c, dtype=np.uint64) & U64(1)) == 1
        bits = ab | bb | cb
        outs[0](m, combine(result, holds).astype(np.uint64), bits, mask)
        outs[1](m, combine(~np.asarray(result), holds).astype(np.uint64), bits, mask)
    return run
