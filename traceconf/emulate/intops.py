"""PTX integer semantics on numpy arrays, one element per thread.

Every register holds its bit pattern zero-extended in a ``uint64`` array; an
instruction reinterprets it with :func:`unsigned` or :func:`signed` at its own
type width.  Results are returned as ``uint64`` bit patterns truncated to the
destination width.  These functions are pure and scalar-free so that the
tests can check them element by element against plain Python integers.
"""

from __future__ import annotations

import numpy as np

U64 = np.uint64
ALL_ONES = U64(0xFFFF_FFFF_FFFF_FFFF)

#: Width in bits of every PTX scalar type name.
TYPE_BITS = {
    "pred": 1,
    "b8": 8, "u8": 8, "s8": 8,
    "b16": 16, "u16": 16, "s16": 16, "f16": 16, "bf16": 16, "e4m3": 8, "e5m2": 8,
    "b32": 32, "u32": 32, "s32": 32, "f32": 32, "f16x2": 32, "bf16x2": 32, "tf32": 32,
    "b64": 64, "u64": 64, "s64": 64, "f64": 64,
    "b128": 128,
}
FLOAT_TYPES = frozenset({"f16", "bf16", "f32", "f64", "f16x2", "bf16x2", "tf32", "e4m3", "e5m2"})
SIGNED_TYPES = frozenset({"s8", "s16", "s32", "s64"})


def mask_of(bits: int) -> np.uint64:
    return ALL_ONES if bits >= 64 else U64((1 << bits) - 1)


def unsigned(value: np.ndarray, bits: int) -> np.ndarray:
    """The low ``bits`` of ``value`` as an unsigned number (uint64)."""
    return value if bits >= 64 else value & mask_of(bits)


def signed(value: np.ndarray, bits: int) -> np.ndarray:
    """The low ``bits`` of ``value`` as a two's complement number (int64)."""
    if bits >= 64:
        return value.view(np.int64)
    sign = U64(1 << (bits - 1))
    return ((value & mask_of(bits)) ^ sign).view(np.int64) - np.int64(1 << (bits - 1))


def bits_of(value: np.ndarray) -> np.ndarray:
    """Two's complement bit pattern (uint64) of an int64 array."""
    return value.view(np.uint64)


def truncate(value: np.ndarray, bits: int) -> np.ndarray:
    return unsigned(value, bits)


def _shift_count(amount: np.ndarray) -> np.ndarray:
    """Shift amounts are unsigned 32-bit; anything >= 64 behaves like 64."""
    return np.minimum(amount & U64(0xFFFF_FFFF), U64(64))


def shl(value: np.ndarray, amount: np.ndarray, bits: int) -> np.ndarray:
    count = _shift_count(amount)
    shifted = np.left_shift(value, np.minimum(count, U64(63)))
    return np.where(count >= bits, U64(0), truncate(shifted, bits))


def shr(value: np.ndarray, amount: np.ndarray, bits: int, is_signed: bool) -> np.ndarray:
    """shr.u / shr.s: logical or arithmetic; counts >= width give 0 or the sign fill."""
    count = np.minimum(_shift_count(amount), U64(bits))
    if is_signed:
        wide = signed(value, bits)
        result = np.right_shift(wide, np.minimum(count, U64(63)).astype(np.int64))
        return truncate(bits_of(result), bits)
    low = unsigned(value, bits)
    return np.where(count >= bits, U64(0), np.right_shift(low, np.minimum(count, U64(63))))


def _mul_high_u64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """High 64 bits of the 128-bit unsigned product (schoolbook on 32-bit halves)."""
    m32 = U64(0xFFFF_FFFF)
    a0, a1 = a & m32, a >> U64(32)
    b0, b1 = b & m32, b >> U64(32)
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    middle = (p00 >> U64(32)) + (p01 & m32) + (p10 & m32)
    return p11 + (p01 >> U64(32)) + (p10 >> U64(32)) + (middle >> U64(32))


def mul(a: np.ndarray, b: np.ndarray, bits: int, is_signed: bool, part: str) -> np.ndarray:
    """mul.lo / mul.hi / mul.wide; ``part`` is ``lo``, ``hi`` or ``wide`` (result width 2*bits)."""
    if part == "lo":
        return truncate(a * b, bits)
    if bits <= 32:
        if is_signed:
            product = bits_of(signed(a, bits) * signed(b, bits))
        else:
            product = unsigned(a, bits) * unsigned(b, bits)
        if part == "wide":
            return truncate(product, 2 * bits)
        return truncate(product >> U64(bits), bits)
    if part == "wide":
        raise ValueError("mul.wide has no 64-bit form")
    high = _mul_high_u64(a, b)
    if is_signed:
        # signed high = unsigned high - (a < 0 ? b : 0) - (b < 0 ? a : 0)  (mod 2^64)
        high = high - np.where(signed(a, 64) < 0, b, U64(0)) - np.where(signed(b, 64) < 0, a, U64(0))
    return high


def mul24(a: np.ndarray, b: np.ndarray, is_signed: bool, part: str) -> np.ndarray:
    """mul24.lo/hi: 24x24-bit product (48 bits); .lo = bits 0-31, .hi = bits 16-47."""
    if is_signed:
        product = bits_of(signed(a, 24) * signed(b, 24))
    else:
        product = unsigned(a, 24) * unsigned(b, 24)
    return truncate(product if part == "lo" else product >> U64(16), 32)


def saturate_signed(value: np.ndarray, bits: int) -> np.ndarray:
    """Clamp an exact (int64) result into the signed range of ``bits``."""
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return truncate(bits_of(np.clip(value, low, high)), bits)


def divide(a: np.ndarray, b: np.ndarray, bits: int, is_signed: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(quotient, remainder, divided_by_zero) with C truncation toward zero."""
    if is_signed:
        x, y = signed(a, bits), signed(b, bits)
        zero = y == 0
        safe = np.where(zero, 1, y)
        # |x| // |y| computed on uint64 so that INT64_MIN / -1 cannot overflow
        magnitude = np.abs(x).view(np.uint64) // np.abs(safe).view(np.uint64)
        negative = (x < 0) != (safe < 0)
        quotient = np.where(negative, (~magnitude) + U64(1), magnitude)
        remainder = bits_of(x) - quotient * bits_of(safe)
        return truncate(quotient, bits), truncate(remainder, bits), zero
    x, y = unsigned(a, bits), unsigned(b, bits)
    zero = y == 0
    safe = np.where(zero, U64(1), y)
    return np.where(zero, mask_of(bits), x // safe), np.where(zero, x, x % safe), zero


def minimum(a, b, bits, is_signed):
    if is_signed:
        return truncate(bits_of(np.minimum(signed(a, bits), signed(b, bits))), bits)
    return np.minimum(unsigned(a, bits), unsigned(b, bits))


def maximum(a, b, bits, is_signed):
    if is_signed:
        return truncate(bits_of(np.maximum(signed(a, bits), signed(b, bits))), bits)
    return np.maximum(unsigned(a, bits), unsigned(b, bits))


def absolute(a, bits):
    return truncate(bits_of(np.abs(signed(a, bits))), bits)


def negate(a, bits):
    return truncate((~a) + U64(1), bits)


def compare(op: str, a: np.ndarray, b: np.ndarray, bits: int, is_signed: bool) -> np.ndarray:
    """setp/set comparison on integers: eq ne lt le gt ge (signedness from the type), lo ls hi hs (unsigned)."""
    if op in ("lo", "ls", "hi", "hs"):
        is_signed = False
        op = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}[op]
    x, y = (signed(a, bits), signed(b, bits)) if is_signed else (unsigned(a, bits), unsigned(b, bits))
    return {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal}[op](x, y)


def funnel_shift(a: np.ndarray, b: np.ndarray, amount: np.ndarray, left: bool, clamp: bool) -> np.ndarray:
    """shf.l / shf.r .b32: shift the 64-bit {b, a} and keep the upper (l) or lower (r) word."""
    count = np.minimum(unsigned(amount, 32), U64(32)) if clamp else unsigned(amount, 32) & U64(31)
    pair = (unsigned(b, 32) << U64(32)) | unsigned(a, 32)
    if left:
        return truncate((pair << count) >> U64(32), 32)
    return truncate(pair >> count, 32)


def _low_mask(length: np.ndarray) -> np.ndarray:
    """(1 << length) - 1 for lengths 0..64."""
    return np.where(length >= 64, ALL_ONES, (U64(1) << np.minimum(length, U64(63))) - U64(1))


def bit_field_extract(a: np.ndarray, position: np.ndarray, length: np.ndarray, bits: int,
                      is_signed: bool) -> np.ndarray:
    """bfe: PTX ISA semantics, including positions/lengths past the msb."""
    msb = U64(bits - 1)
    pos = position & U64(0xFF)
    size = length & U64(0xFF)
    value = unsigned(a, bits)
    inside = pos <= msb
    available = np.where(inside, U64(bits) - np.minimum(pos, msb), U64(0))
    kept = np.minimum(size, available)
    field = np.where(inside, value >> np.minimum(pos, msb), U64(0)) & _low_mask(kept)
    if not is_signed:
        return field
    sign_at = np.minimum(pos + size - U64(1), msb)
    sign = np.where(size == 0, U64(0), (value >> np.where(size == 0, U64(0), sign_at)) & U64(1))
    return truncate(np.where(sign == 1, field | ~_low_mask(kept), field), bits)


def bit_field_insert(a: np.ndarray, b: np.ndarray, position: np.ndarray, length: np.ndarray,
                     bits: int) -> np.ndarray:
    """bfi: insert the low ``length`` bits of a into b at ``position``."""
    msb = U64(bits - 1)
    pos = position & U64(0xFF)
    size = length & U64(0xFF)
    inside = pos <= msb
    kept = np.where(inside, np.minimum(size, U64(bits) - np.minimum(pos, msb)), U64(0))
    shift = np.minimum(pos, msb)
    field_mask = np.where(inside, _low_mask(kept) << shift, U64(0))
    return truncate((unsigned(b, bits) & ~field_mask) | ((a << shift) & field_mask), bits)


def bit_mask(position: np.ndarray, width: np.ndarray, wrap: bool) -> np.ndarray:
    """bmsk.b32 (SASS BMSK): ``width`` one bits from bit ``position`` up, cut at bit 31; .wrap takes both operands
    modulo 32, .clamp (the default) makes a position past bit 31 an empty mask and a width past 31 a full one."""
    position, width = unsigned(position, 32), unsigned(width, 32)
    low, size = position & U64(31), width & U64(31)
    start = (ALL_ONES << low) & mask_of(32)
    end = (ALL_ONES << (low + size)) & mask_of(32)
    overflow = low + size >= 32
    if not wrap:
        start = np.where(position >= 32, U64(0), start)
        overflow = overflow | (position >= 32) | (width >= 32)
    end = np.where(overflow, U64(0), np.where(size == 0, mask_of(32), end))
    return start & ~end & mask_of(32)


#: Byte selectors of the prmt modes, indexed [mode][c & 3] -> source byte of result bytes 0..3.
_PRMT_MODES = {
    "f4e": ((0, 1, 2, 3), (1, 2, 3, 4), (2, 3, 4, 5), (3, 4, 5, 6)),
    "b4e": ((0, 7, 6, 5), (1, 0, 7, 6), (2, 1, 0, 7), (3, 2, 1, 0)),
    "rc8": ((0, 0, 0, 0), (1, 1, 1, 1), (2, 2, 2, 2), (3, 3, 3, 3)),
    "ecl": ((0, 1, 2, 3), (1, 1, 2, 3), (2, 2, 2, 3), (3, 3, 3, 3)),
    "ecr": ((0, 0, 0, 0), (0, 1, 1, 1), (0, 1, 2, 2), (0, 1, 2, 3)),
    "rc16": ((0, 1, 0, 1), (2, 3, 2, 3), (0, 1, 0, 1), (2, 3, 2, 3)),
}


def permute_bytes(a: np.ndarray, b: np.ndarray, control: np.ndarray, mode: str | None) -> np.ndarray:
    """prmt.b32: pick bytes of the 8-byte {b, a}; generic mode may replicate a byte's sign."""
    source = (unsigned(b, 32) << U64(32)) | unsigned(a, 32)
    result = np.zeros(np.shape(source), dtype=np.uint64)
    if mode is None:
        for byte in range(4):
            selector = (control >> U64(4 * byte)) & U64(0xF)
            picked = (source >> ((selector & U64(7)) * U64(8))) & U64(0xFF)
            replicate = (selector & U64(8)) != 0
            picked = np.where(replicate, np.where(picked & U64(0x80), U64(0xFF), U64(0)), picked)
            result |= picked << U64(8 * byte)
        return result
    table = np.asarray(_PRMT_MODES[mode], dtype=np.uint64)
    rows = (control & U64(3)).astype(np.intp)
    for byte in range(4):
        picked = (source >> (table[rows, byte] * U64(8))) & U64(0xFF)
        result |= picked << U64(8 * byte)
    return result


#: lop3 tables of one or two operations (ptxas's ``a & b``, ``a ^ b``, ``a | b``...): a pass or two instead of one
#: per minterm (tests/test_emulate_intops.py checks each against the minterms).
LOP3_FORMS = {
    0xF0: lambda a, b, c: a, 0xCC: lambda a, b, c: b, 0xAA: lambda a, b, c: c,
    0x0F: lambda a, b, c: ~a, 0x33: lambda a, b, c: ~b, 0x55: lambda a, b, c: ~c,
    0xC0: lambda a, b, c: a & b, 0xA0: lambda a, b, c: a & c, 0x88: lambda a, b, c: b & c,
    0xFC: lambda a, b, c: a | b, 0xFA: lambda a, b, c: a | c, 0xEE: lambda a, b, c: b | c,
    0x3C: lambda a, b, c: a ^ b, 0x5A: lambda a, b, c: a ^ c, 0x66: lambda a, b, c: b ^ c,
    0x30: lambda a, b, c: a & ~b, 0x0C: lambda a, b, c: ~a & b, 0x50: lambda a, b, c: a & ~c,
    0x80: lambda a, b, c: a & b & c, 0xFE: lambda a, b, c: a | b | c, 0x96: lambda a, b, c: a ^ b ^ c,
    0xF8: lambda a, b, c: a | (b & c), 0xEA: lambda a, b, c: (a & b) | c, 0xEC: lambda a, b, c: (a & c) | b,
}


def lop3(a: np.ndarray, b: np.ndarray, c: np.ndarray, lut: int, bits: int = 32) -> np.ndarray:
    """lop3.b32: bit i of the result is lut[(a_i << 2) | (b_i << 1) | c_i]."""
    form = LOP3_FORMS.get(lut)
    if form is not None and all(getattr(v, "dtype", None) == np.uint64 for v in (a, b, c)):
        return truncate(form(a, b, c), bits)
    result = np.zeros(np.shape(a), dtype=np.uint64)
    for index in range(8):
        if lut >> index & 1:
            term = (a if index & 4 else ~a) & (b if index & 2 else ~b) & (c if index & 1 else ~c)
            result = result | term
    return truncate(result, bits)


_POPCOUNT16 = sum((np.arange(1 << 16) >> bit) & 1 for bit in range(16)).astype(np.uint64)   # 2 ms, a loop 13


def popcount(a: np.ndarray, bits: int) -> np.ndarray:
    value = unsigned(a, bits)
    total = np.zeros(np.shape(value), dtype=np.uint64)
    for shift in range(0, bits, 16):
        total = total + _POPCOUNT16[((value >> U64(shift)) & U64(0xFFFF)).astype(np.intp)]
    return total


def bit_length(a: np.ndarray) -> np.ndarray:
    """Number of significant bits of a uint64 (0 for 0), exact via float64 on 32-bit halves."""
    high = (a >> U64(32)).astype(np.float64)
    low = (a & U64(0xFFFF_FFFF)).astype(np.float64)
    high_len = np.frexp(high)[1].astype(np.uint64)
    low_len = np.frexp(low)[1].astype(np.uint64)
    return np.where(high_len > 0, high_len + U64(32), low_len)


def count_leading_zeros(a: np.ndarray, bits: int) -> np.ndarray:
    return U64(bits) - bit_length(unsigned(a, bits))


def find_msb(a: np.ndarray, bits: int, is_signed: bool, shift_amount: bool) -> np.ndarray:
    """bfind: position of the most significant non-sign bit, 0xffffffff when there is none."""
    value = unsigned(a, bits)
    if is_signed:
        value = np.where(signed(a, bits) < 0, truncate(~value, bits), value)
    length = bit_length(value)
    none = length == 0
    position = length - U64(1)
    if shift_amount:
        position = U64(bits - 1) - position
    return np.where(none, U64(0xFFFF_FFFF), truncate(position, 32))


_REVERSED_BYTES = np.array([int(f"{i:08b}"[::-1], 2) for i in range(256)], dtype=np.uint64)


def bit_reverse(a: np.ndarray, bits: int) -> np.ndarray:
    value = unsigned(a, bits)
    result = np.zeros(np.shape(value), dtype=np.uint64)
    for byte in range(bits // 8):
        piece = _REVERSED_BYTES[((value >> U64(8 * byte)) & U64(0xFF)).astype(np.intp)]
        result |= piece << U64(bits - 8 * (byte + 1))
    return result


def convert(value: np.ndarray, source_bits: int, source_signed: bool, dest_bits: int, dest_signed: bool,
            saturate: bool) -> np.ndarray:
    """cvt between integer types: extend by the source type, then truncate or clamp to the destination."""
    if not saturate:
        extended = bits_of(signed(value, source_bits)) if source_signed else unsigned(value, source_bits)
        return truncate(extended, dest_bits)
    if source_signed:
        exact = signed(value, source_bits)
        if dest_signed:
            return saturate_signed(exact, dest_bits)
        high = (1 << dest_bits) - 1 if dest_bits < 64 else None
        clipped = np.maximum(exact, 0).view(np.uint64)
        return clipped if high is None else np.minimum(clipped, U64(high))
    exact = unsigned(value, source_bits)
    high = (1 << (dest_bits - 1)) - 1 if dest_signed else (1 << dest_bits) - 1 if dest_bits < 64 else None
    return exact if high is None else np.minimum(exact, U64(high))
