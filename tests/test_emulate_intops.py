"""Exact PTX integer semantics of traceconf.emulate.intops against plain-Python references."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from traceconf.emulate import intops

U = np.uint64


def arr(*values: int) -> np.ndarray:
    return np.array([v % (1 << 64) for v in values], dtype=np.uint64)


def to_signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


words = st.integers(min_value=0, max_value=(1 << 32) - 1)
longs = st.integers(min_value=0, max_value=(1 << 64) - 1)


def test_shr_signed_fills_with_the_sign_and_clamps_large_counts():
    value = arr(0xFFFF_FFF0)                                   # -16 as s32
    assert intops.shr(value, arr(2), 32, True)[0] == 0xFFFF_FFFC   # -4
    assert intops.shr(value, arr(40), 32, True)[0] == 0xFFFF_FFFF  # count >= width: sign fill
    assert intops.shr(value, arr(40), 32, False)[0] == 0
    assert intops.shr(value, arr(4), 32, False)[0] == 0x0FFF_FFFF
    assert intops.shl(arr(1), arr(32), 32)[0] == 0
    assert intops.shl(arr(3), arr(31), 32)[0] == 0x8000_0000


@given(words, words)
def test_mul_hi_lo_wide_32(a, b):
    for is_signed in (False, True):
        x, y = (to_signed(a, 32), to_signed(b, 32)) if is_signed else (a, b)
        product = x * y
        assert intops.mul(arr(a), arr(b), 32, is_signed, "lo")[0] == product % (1 << 32)
        assert intops.mul(arr(a), arr(b), 32, is_signed, "hi")[0] == (product >> 32) % (1 << 32)
        assert intops.mul(arr(a), arr(b), 32, is_signed, "wide")[0] == product % (1 << 64)


@given(longs, longs)
def test_mul_hi_64(a, b):
    assert intops.mul(arr(a), arr(b), 64, False, "hi")[0] == (a * b) >> 64
    x, y = to_signed(a, 64), to_signed(b, 64)
    assert intops.mul(arr(a), arr(b), 64, True, "hi")[0] == ((x * y) >> 64) % (1 << 64)


def test_mul_hi_signed_edge_cases():
    minimum = 1 << 31                                           # INT32_MIN
    assert intops.mul(arr(minimum), arr(minimum), 32, True, "hi")[0] == 0x4000_0000
    assert intops.mul(arr(0xFFFF_FFFF), arr(2), 32, True, "hi")[0] == 0xFFFF_FFFF   # -1 * 2 = -2
    assert intops.mul(arr(0xFFFF_FFFF), arr(2), 32, False, "hi")[0] == 1


@given(words, words)
def test_mul24(a, b):
    x, y = a & 0xFFFFFF, b & 0xFFFFFF
    assert intops.mul24(arr(a), arr(b), False, "lo")[0] == (x * y) % (1 << 32)
    assert intops.mul24(arr(a), arr(b), False, "hi")[0] == ((x * y) >> 16) % (1 << 32)
    sx, sy = to_signed(a, 24), to_signed(b, 24)
    assert intops.mul24(arr(a), arr(b), True, "hi")[0] == ((sx * sy) >> 16) % (1 << 32)


@given(words, words)
def test_divide_truncates_toward_zero(a, b):
    quotient, remainder, zero = intops.divide(arr(a), arr(b), 32, True)
    x, y = to_signed(a, 32), to_signed(b, 32)
    if y == 0:
        assert zero[0]
        return
    expected = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
    assert quotient[0] == expected % (1 << 32)
    assert remainder[0] == (x - expected * y) % (1 << 32)
    uq, ur, _ = intops.divide(arr(a), arr(b), 32, False)
    if b:
        assert (uq[0], ur[0]) == (a // b, a % b)


def bfe_reference(a: int, pos: int, length: int, bits: int, is_signed: bool) -> int:
    msb = bits - 1
    pos, length = pos & 0xFF, length & 0xFF
    if is_signed and length:
        sbit = a >> min(pos + length - 1, msb) & 1
    else:
        sbit = 0
    result = 0
    for i in range(bits):
        bit = (a >> (pos + i) & 1) if (i < length and pos + i <= msb) else sbit
        result |= bit << i
    return result


@settings(max_examples=300)
@given(words, st.integers(0, 300), st.integers(0, 300), st.booleans())
def test_bfe_against_the_isa_pseudocode(a, pos, length, is_signed):
    got = intops.bit_field_extract(arr(a), arr(pos), arr(length), 32, is_signed)[0]
    assert got == bfe_reference(a, pos, length, 32, is_signed)


@settings(max_examples=300)
@given(words, words, st.integers(0, 300), st.integers(0, 300))
def test_bfi_against_the_isa_pseudocode(a, b, pos, length):
    expected = b
    pos_, len_ = pos & 0xFF, length & 0xFF
    for i in range(len_):
        if pos_ + i > 31:
            break
        expected = (expected & ~(1 << (pos_ + i))) | ((a >> i & 1) << (pos_ + i))
    assert intops.bit_field_insert(arr(a), arr(b), arr(pos), arr(length), 32)[0] == expected


def prmt_reference(a: int, b: int, c: int, mode: str | None) -> int:
    source = (b << 32) | a
    tables = {"f4e": [[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6]],
              "b4e": [[0, 7, 6, 5], [1, 0, 7, 6], [2, 1, 0, 7], [3, 2, 1, 0]],
              "rc8": [[0] * 4, [1] * 4, [2] * 4, [3] * 4],
              "ecl": [[0, 1, 2, 3], [1, 1, 2, 3], [2, 2, 2, 3], [3, 3, 3, 3]],
              "ecr": [[0, 0, 0, 0], [0, 1, 1, 1], [0, 1, 2, 2], [0, 1, 2, 3]],
              "rc16": [[0, 1, 0, 1], [2, 3, 2, 3], [0, 1, 0, 1], [2, 3, 2, 3]]}
    result = 0
    for i in range(4):
        if mode is None:
            selector = c >> (4 * i) & 0xF
            byte = source >> (8 * (selector & 7)) & 0xFF
            if selector & 8:
                byte = 0xFF if byte & 0x80 else 0
        else:
            byte = source >> (8 * tables[mode][c & 3][i]) & 0xFF
        result |= byte << (8 * i)
    return result


@given(words, words, words, st.sampled_from([None, "f4e", "b4e", "rc8", "ecl", "ecr", "rc16"]))
def test_prmt(a, b, c, mode):
    assert intops.permute_bytes(arr(a), arr(b), arr(c), mode)[0] == prmt_reference(a, b, c, mode)


def test_prmt_known_values():
    # __byte_perm(0x33221100, 0x77665544, 0x5410) interleaves the low halves
    assert intops.permute_bytes(arr(0x33221100), arr(0x77665544), arr(0x5410), None)[0] == 0x55441100
    assert intops.permute_bytes(arr(0x000000F0), arr(0), arr(0x8888), None)[0] == 0xFFFFFFFF


@given(words, words, words, st.integers(0, 255))
def test_lop3(a, b, c, lut):
    expected = 0
    for i in range(32):
        index = (a >> i & 1) << 2 | (b >> i & 1) << 1 | (c >> i & 1)
        expected |= (lut >> index & 1) << i
    assert intops.lop3(arr(a), arr(b), arr(c), lut)[0] == expected


@given(longs)
def test_counting_instructions(value):
    low = value & 0xFFFF_FFFF
    assert intops.popcount(arr(value), 64)[0] == bin(value).count("1")
    assert intops.count_leading_zeros(arr(value), 32)[0] == 32 - low.bit_length()
    assert intops.count_leading_zeros(arr(value), 64)[0] == 64 - value.bit_length()
    assert intops.bit_reverse(arr(value), 32)[0] == int(f"{low:032b}"[::-1], 2)
    expected = low.bit_length() - 1 if low else 0xFFFF_FFFF
    assert intops.find_msb(arr(value), 32, False, False)[0] == expected


def test_bfind_signed_and_shift_amount():
    assert intops.find_msb(arr(0xFFFF_FFFF), 32, True, False)[0] == 0xFFFF_FFFF   # -1: no non-sign bit
    assert intops.find_msb(arr(0xFFFF_FF00), 32, True, False)[0] == 7
    assert intops.find_msb(arr(0x10), 32, False, True)[0] == 31 - 4


@given(words, words, st.integers(0, 70), st.booleans(), st.booleans())
def test_funnel_shift(a, b, amount, left, clamp):
    n = min(amount, 32) if clamp else amount & 31
    pair = (b << 32) | a
    expected = ((pair << n) >> 32) & 0xFFFF_FFFF if left else (pair >> n) & 0xFFFF_FFFF
    assert intops.funnel_shift(arr(a), arr(b), arr(amount), left, clamp)[0] == expected


def test_convert_with_and_without_saturation():
    assert intops.convert(arr(0xFFFF), 16, True, 32, True, False)[0] == 0xFFFF_FFFF      # s16 -1 -> s32 -1
    assert intops.convert(arr(0xFFFF), 16, False, 32, True, False)[0] == 0xFFFF         # u16 -> s32
    assert intops.convert(arr(0x1_0000_0005), 64, False, 32, False, False)[0] == 5      # truncation
    assert intops.convert(arr(0xFFFF_FFFF), 32, True, 8, False, True)[0] == 0           # -1 -> u8 sat
    assert intops.convert(arr(300), 32, True, 8, True, True)[0] == 127                  # 300 -> s8 sat
    assert intops.convert(arr(0xFFFF_FF00), 32, True, 8, True, True)[0] == 0x80         # -256 -> -128
    assert intops.convert(arr(0xFFFF_FFFF), 32, False, 32, True, True)[0] == 0x7FFF_FFFF


def test_compare_and_minmax_respect_signedness():
    minus_one, one = arr(0xFFFF_FFFF), arr(1)
    assert intops.compare("lt", minus_one, one, 32, True)[0]
    assert not intops.compare("lt", minus_one, one, 32, False)[0]
    assert not intops.compare("lo", minus_one, one, 32, True)[0]      # lo is always unsigned
    assert intops.minimum(minus_one, one, 32, True)[0] == 0xFFFF_FFFF
    assert intops.minimum(minus_one, one, 32, False)[0] == 1
    assert intops.absolute(arr(0xFFFF_FFFB), 32)[0] == 5
    assert intops.negate(arr(5), 32)[0] == 0xFFFF_FFFB


@given(words, words, words, st.sampled_from(sorted(intops.LOP3_FORMS)))
def test_lop3_forms_equal_the_minterms(a, b, c, lut):
    """The one- and two-operation tables (LOP3_FORMS) give what the minterms give, scalars among arrays too."""
    expected = 0
    for i in range(32):
        index = (a >> i & 1) << 2 | (b >> i & 1) << 1 | (c >> i & 1)
        expected |= (lut >> index & 1) << i
    assert intops.lop3(arr(a), arr(b), arr(c), lut)[0] == expected
    mixed = intops.lop3(np.uint64(a), arr(b), np.uint64(c), lut)
    assert np.broadcast_to(mixed, (1,))[0] == expected
