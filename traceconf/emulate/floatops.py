"""PTX floating-point semantics on numpy arrays: exact where IEEE fixes the result, unknown elsewhere.

Registers hold bit patterns (uint64, zero-extended).  Every function takes
and returns bit patterns and, next to the result, a boolean array ``exact``:
False where the emulator cannot reproduce the hardware's result bit for bit
(those lanes are then tainted ``FLOAT``, as before).

* ``.rn`` add/sub/mul/div/sqrt of f16/f32 are computed in float64 and rounded
  once to the format: float64 has more than twice the precision plus two
  bits, so the double rounding is innocuous (Figueroa 1995).  f64 uses
  numpy's own IEEE operations.
* Directed rounding (``.rz .rm .rp``) is exact where the float64 result is
  the exact result (checked with an error-free transformation); otherwise
  unknown.
* f32 ``fma`` computes the exact product in float64, the sum with TwoSum,
  and resolves the one double-rounding case (a float64 sum exactly halfway
  between two f32 values) with the sign of the exact error.  f64 ``fma`` is
  unknown.
* ``.approx`` / ``.full`` operations (``div.approx``, ``sin``, ``ex2`` ...) are
  hardware approximations: unknown.
* ``.ftz`` flushes f32 subnormal inputs and results to sign-preserving zero;
  ``.sat`` clamps to [0, 1] with NaN giving +0.
"""

from __future__ import annotations

import numpy as np

U64 = np.uint64
FLOATS = {16: np.float16, 32: np.float32, 64: np.float64}
UINTS = {16: np.uint16, 32: np.uint32, 64: np.uint64}
ROUNDINGS = ("rn", "rz", "rm", "rp")
#: Float types whose operations are reproduced (bf16, tf32 and the fp8 formats are not).
EXACT_TYPES = frozenset({"f16", "f32", "f64"})


def to_float(bits, width: int) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint64).astype(UINTS[width]).view(FLOATS[width])


def from_float(values, width: int) -> np.ndarray:
    return np.asarray(values, dtype=FLOATS[width]).view(UINTS[width]).astype(np.uint64)


def flush_subnormal(values: np.ndarray) -> np.ndarray:
    """Subnormal f32 values become zero of the same sign (.ftz)."""
    tiny = np.abs(values) < np.finfo(np.float32).tiny
    return np.where(tiny & (values != 0), np.copysign(np.float32(0), values), values).astype(values.dtype)


def saturate(values: np.ndarray) -> np.ndarray:
    """.sat: clamp to [0, 1]; NaN gives +0."""
    return np.where(np.isnan(values), 0, np.clip(values, 0, 1)).astype(values.dtype)


def round_to(exact: np.ndarray, width: int, rounding: str) -> np.ndarray:
    """Round float64 values that are *exact* results to the format, in any of the four modes."""
    kind = FLOATS[width]
    with np.errstate(all="ignore"):
        nearest = exact.astype(kind)
        if rounding == "rn":
            return nearest
        back = nearest.astype(np.float64)
        if rounding == "rz":
            step = np.abs(back) > np.abs(exact)
            target = np.zeros_like(nearest)
        elif rounding == "rm":
            step = back > exact
            target = np.full_like(nearest, -np.inf)
        else:
            step = back < exact
            target = np.full_like(nearest, np.inf)
        return np.where(step, np.nextafter(nearest, target), nearest).astype(kind)


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s = fl(a + b) and the exact error e (a + b = s + e), float64 (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def arithmetic(op: str, x, y, width: int, rounding: str | None, ftz: bool, sat: bool):
    """add / sub / mul / div of two operands (bit patterns) -> (bits, exact)."""
    rounding = rounding or "rn"
    a, b = to_float(x, width), to_float(y, width)
    if ftz and width == 32:
        a, b = flush_subnormal(a), flush_subnormal(b)
    with np.errstate(all="ignore"):
        if width == 64:
            result = {"add": a + b, "sub": a - b, "mul": a * b, "div": a / b}[op]
            exact = np.full(result.shape, rounding == "rn")
            if rounding != "rn" and op in ("add", "sub"):
                _, error = _two_sum(a, b if op == "add" else -b)
                exact = (error == 0) | ~np.isfinite(result)
        else:
            wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
            wide = {"add": wide_a + wide_b, "sub": wide_a - wide_b, "mul": wide_a * wide_b,
                    "div": wide_a / wide_b}[op]
            if rounding == "rn":
                exact = np.ones(wide.shape, dtype=bool)
            elif op in ("add", "sub"):
                _, error = _two_sum(wide_a, wide_b if op == "add" else -wide_b)
                exact = (error == 0) | ~np.isfinite(wide)
            elif op == "mul":
                exact = np.ones(wide.shape, dtype=bool)       # 2 x 24 bits fit float64's 53
            else:
                exact = np.zeros(wide.shape, dtype=bool)
            result = round_to(wide, width, rounding)
    return _finish(result, width, ftz, sat), np.broadcast_to(exact, np.shape(result))


def fma(x, y, z, width: int, rounding: str | None, ftz: bool, sat: bool):
    """fma / mad of f32 (and f16) exactly; f64 is unknown -> (bits, exact)."""
    rounding = rounding or "rn"
    a, b, c = to_float(x, width), to_float(y, width), to_float(z, width)
    shape = np.broadcast_shapes(np.shape(a), np.shape(b), np.shape(c))
    if width == 64:
        with np.errstate(all="ignore"):
            return from_float(a * b + c, 64), np.zeros(shape, dtype=bool)
    if ftz and width == 32:
        a, b, c = flush_subnormal(a), flush_subnormal(b), flush_subnormal(c)
    with np.errstate(all="ignore"):
        product = a.astype(np.float64) * b.astype(np.float64)        # exact: 2 x 24 bits
        s, error = _two_sum(product, np.broadcast_to(c.astype(np.float64), shape))
        kind = FLOATS[width]
        down, up = round_to(s, width, "rm"), round_to(s, width, "rp")
        if rounding == "rn":
            # the one case where rounding s differs from rounding s + error: s halfway between neighbours
            d64, u64 = down.astype(np.float64), up.astype(np.float64)
            halfway = (error != 0) & (d64 != u64) & (s - d64 == u64 - s)
            result = np.where(halfway, np.where(error > 0, up, down), round_to(s, width, "rn"))
        else:
            # s = RN64(s + error); when s is itself representable the error decides the side
            representable = (down == up) & np.isfinite(s)
            lower = np.where(representable & (error < 0), np.nextafter(down, np.full_like(down, -np.inf)), down)
            upper = np.where(representable & (error > 0), np.nextafter(up, np.full_like(up, np.inf)), up)
            positive = (s > 0) | ((s == 0) & (error > 0))
            result = {"rm": lower, "rp": upper}.get(rounding, np.where(positive, lower, upper))
        result = np.asarray(result, dtype=kind)
    return _finish(result, width, ftz, sat), np.ones(shape, dtype=bool)


def square_root(x, width: int, rounding: str | None, ftz: bool):
    a = to_float(x, width)
    if ftz and width == 32:
        a = flush_subnormal(a)
    with np.errstate(all="ignore"):
        result = np.sqrt(a) if width == 64 else np.sqrt(a.astype(np.float64)).astype(FLOATS[width])
    exact = (rounding or "rn") == "rn"
    return _finish(result, width, ftz, False), np.full(np.shape(result), exact)


def minimum_maximum(op: str, x, y, width: int, ftz: bool, propagate_nan: bool):
    """min / max: a NaN operand gives the other (both NaN: canonical NaN; ``.NaN``: NaN wins); zeros of
    different signs are unknown (the ISA leaves the choice open)."""
    a, b = to_float(x, width), to_float(y, width)
    if ftz and width == 32:
        a, b = flush_subnormal(a), flush_subnormal(b)
    with np.errstate(all="ignore"):
        if propagate_nan:
            result = np.minimum(a, b) if op == "min" else np.maximum(a, b)
        else:
            result = np.fmin(a, b) if op == "min" else np.fmax(a, b)
    result = np.asarray(result, dtype=FLOATS[width])
    zeros = (a == 0) & (b == 0) & (np.signbit(a) != np.signbit(b))
    bits = _finish(result, width, ftz, False)
    nan = np.isnan(result)
    bits = np.where(nan, U64({16: 0x7FFF, 32: 0x7FFF_FFFF, 64: 0x7FFF_FFFF_FFFF_FFFF}[width]), bits)
    return bits, ~zeros


def compare(comparison: str, x, y, width: int, ftz: bool) -> np.ndarray:
    """setp on floats: ordered comparisons are false with a NaN, the ``u`` forms true; num / nan."""
    a, b = to_float(x, width), to_float(y, width)
    if ftz and width == 32:
        a, b = flush_subnormal(a), flush_subnormal(b)
    unordered = np.isnan(a) | np.isnan(b)
    base = comparison[:-1] if comparison.endswith("u") and comparison not in ("num",) else comparison
    with np.errstate(all="ignore"):
        if comparison == "num":
            return ~unordered
        if comparison == "nan":
            return unordered
        ordered = {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b,
                   "lo": a < b, "ls": a <= b, "hi": a > b, "hs": a >= b}[base]
    if comparison.endswith("u"):
        return ordered | unordered
    return ordered & ~unordered


def _finish(values: np.ndarray, width: int, ftz: bool, sat: bool) -> np.ndarray:
    values = np.asarray(values, dtype=FLOATS[width])
    if ftz and width == 32:
        values = flush_subnormal(values)
    if sat:
        values = saturate(values)
    return from_float(values, width)


# --------------------------------------------------------------------------- conversions

def float_to_int(x, source_width: int, dest_bits: int, dest_signed: bool, rounding: str, ftz: bool):
    """cvt.{rni,rzi,rmi,rpi}.{s,u}N.fM: round to an integer, saturate to the range, NaN -> 0."""
    a = to_float(x, source_width).astype(np.float64)
    if ftz and source_width == 32:
        a = flush_subnormal(a.astype(np.float32)).astype(np.float64)
    with np.errstate(all="ignore"):
        whole = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[rounding](a)
    low, high = (-(1 << (dest_bits - 1)), (1 << (dest_bits - 1)) - 1) if dest_signed else (0, (1 << dest_bits) - 1)
    nan = np.isnan(whole)
    clipped = np.clip(np.where(nan, 0, whole), low, high)
    # float64 cannot hold every 64-bit bound: compare, then build the bound's bit pattern exactly
    result = np.where(clipped >= float(high), U64(high & ((1 << 64) - 1)),
                      np.where(clipped <= float(low), U64(low & ((1 << 64) - 1)),
                               clipped.astype(np.int64).view(np.uint64) if dest_signed
                               else np.clip(clipped, 0, 2.0**63).astype(np.uint64)))
    mask = U64((1 << dest_bits) - 1) if dest_bits < 64 else U64((1 << 64) - 1)
    return np.asarray(result, dtype=np.uint64) & mask


def int_to_float(x, source_bits: int, source_signed: bool, width: int, rounding: str):
    """cvt.{rn,rz,rm,rp}.fM.{s,u}N -> (bits, exact)."""
    value = np.asarray(x, dtype=np.uint64)
    if source_bits < 64:
        value = value & U64((1 << source_bits) - 1)
    if source_signed:
        sign = U64(1 << (source_bits - 1))
        integers = ((value ^ sign).view(np.int64) - np.int64(1 << (source_bits - 1))) if source_bits < 64 \
            else value.view(np.int64)
    else:
        integers = value
    kind = FLOATS[width]
    with np.errstate(all="ignore"):
        nearest = integers.astype(kind)
    if rounding == "rn":
        return from_float(nearest, width), np.ones(np.shape(nearest), dtype=bool)
    # exact when the conversion lost nothing (|x| < 2**53 checks it in float64)
    wide = integers.astype(np.float64)
    exact = (np.abs(wide) < 2.0**53) & (nearest.astype(np.float64) == wide)
    return from_float(nearest, width), exact


def float_to_float(x, source_width: int, width: int, rounding: str | None, ftz: bool, sat: bool,
                   integral: str | None):
    """cvt between float formats, or cvt.rni.f32.f32 style rounding to an integral value -> (bits, exact)."""
    a = to_float(x, source_width)
    if ftz and source_width == 32:
        a = flush_subnormal(a)
    wide = a.astype(np.float64)
    if integral:
        with np.errstate(all="ignore"):
            wide = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[integral](wide)
        exact = np.ones(np.shape(wide), dtype=bool)
        result = wide.astype(FLOATS[width])
    elif width >= source_width:
        exact = np.ones(np.shape(wide), dtype=bool)
        result = wide.astype(FLOATS[width])
    else:
        result = round_to(wide, width, rounding or "rn")
        exact = np.ones(np.shape(wide), dtype=bool)
    return _finish(result, width, ftz, sat), exact
