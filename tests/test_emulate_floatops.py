"""PTX floating point on numpy (traceconf.emulate.floatops) against exact rational arithmetic."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceconf.emulate import floatops as F

FINITE32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


def bits32(x: float) -> np.ndarray:
    return np.array([x], dtype=np.float32).view(np.uint32).astype(np.uint64)


def value32(bits: np.ndarray) -> float:
    return float(np.asarray(bits).astype(np.uint32).view(np.float32)[0])


def rounded(exact: Fraction, mode: str) -> float:
    """The f32 value ``exact`` rounds to in ``mode`` (search among float32 neighbours, ties to even)."""
    with np.errstate(all="ignore"):
        guess = np.float32(float(exact)) if abs(exact) < Fraction(2) ** 128 else np.float32(math.copysign(np.inf, exact))
        return _rounded(exact, mode, guess)


def _rounded(exact: Fraction, mode: str, guess: np.float32) -> float:
    candidates = {float(guess), float(np.nextafter(guess, np.float32(-np.inf))),
                  float(np.nextafter(guess, np.float32(np.inf)))}
    finite = sorted(c for c in candidates if math.isfinite(c))
    below = [c for c in finite if Fraction(c) <= exact]
    above = [c for c in finite if Fraction(c) >= exact]
    lo = below[-1] if below else -math.inf
    hi = above[0] if above else math.inf
    if mode == "rm":
        return lo
    if mode == "rp":
        return hi
    if mode == "rz":
        return lo if exact > 0 else hi
    if lo == hi:
        return lo
    # beyond the largest finite value, infinity stands where 2**128 would be (IEEE 754 overflow)
    low = Fraction(lo) if math.isfinite(lo) else -Fraction(2) ** 128
    high = Fraction(hi) if math.isfinite(hi) else Fraction(2) ** 128
    low_gap, high_gap = exact - low, high - exact
    if low_gap != high_gap:
        return lo if low_gap < high_gap else hi
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return hi if math.isfinite(lo) else lo           # the largest finite value has an odd significand
    return lo if int(np.float32(lo).view(np.uint32)) % 2 == 0 else hi


def same(got: float, want: float) -> bool:
    return got == want and math.copysign(1, got) == math.copysign(1, want) if got == 0 == want else got == want


@pytest.mark.parametrize("mode", F.ROUNDINGS)
@settings(max_examples=300, deadline=None)
@given(a=FINITE32, b=FINITE32)
def test_add_sub_mul_div_round_like_ieee(mode, a, b):
    for op in ("add", "sub", "mul", "div"):
        if op == "div" and b == 0:
            continue
        got, exact = F.arithmetic(op, bits32(a), bits32(b), 32, mode, False, False)
        if not exact[0]:
            assert mode != "rn" and op in ("add", "sub", "div")      # only directed rounding may give up
            continue
        fa, fb = Fraction(a), Fraction(b)
        truth = fa + fb if op == "add" else fa - fb if op == "sub" else fa * fb if op == "mul" else fa / fb
        if truth == 0:
            assert value32(got) == 0
            continue
        assert same(value32(got), rounded(truth, mode)), (op, a, b)


@pytest.mark.parametrize("mode", F.ROUNDINGS)
@settings(max_examples=300, deadline=None)
@given(a=FINITE32, b=FINITE32, c=FINITE32)
def test_fma_f32_is_exact_in_every_rounding_mode(mode, a, b, c):
    got, exact = F.fma(bits32(a), bits32(b), bits32(c), 32, mode, False, False)
    assert exact.all()
    truth = Fraction(a) * Fraction(b) + Fraction(c)
    if truth == 0:
        assert value32(got) == 0
        return
    assert same(value32(got), rounded(truth, mode)), (a, b, c)


def test_fma_resolves_the_double_rounding_halfway_case():
    # a*b + c = 1 + 2**-24 + 2**-60: float64 rounds it to 1 + 2**-24, exactly halfway between two f32
    a, b, c = 1 + 2.0 ** -23, 1 + 2.0 ** -23, -(2.0 ** -23 + 2.0 ** -46) + 2.0 ** -24
    truth = Fraction(a) * Fraction(b) + Fraction(c)
    got, _ = F.fma(bits32(np.float32(a)), bits32(np.float32(b)), bits32(np.float32(c)), 32, "rn", False, False)
    assert value32(got) == rounded(truth, "rn")


def test_setp_nan_semantics():
    nan, one = bits32(float("nan")), bits32(1.0)
    assert not F.compare("lt", nan, one, 32, False)[0] and F.compare("ltu", nan, one, 32, False)[0]
    assert not F.compare("ne", nan, one, 32, False)[0] and F.compare("neu", nan, one, 32, False)[0]
    assert F.compare("nan", nan, one, 32, False)[0] and not F.compare("num", nan, one, 32, False)[0]
    assert F.compare("eq", bits32(0.0), bits32(-0.0), 32, False)[0]


def test_float_to_int_saturates_and_maps_nan_to_zero():
    values = np.array([2.5, -2.5, 3e9, -3e9, float("nan"), -0.7], dtype=np.float32).view(np.uint32).astype(np.uint64)
    assert F.float_to_int(values, 32, 32, True, "rni", False).tolist() == [
        2, (-2) & 0xFFFF_FFFF, 0x7FFF_FFFF, 0x8000_0000, 0, 0xFFFF_FFFF]      # ties to even; -0.7 -> -1
    assert F.float_to_int(values, 32, 32, False, "rzi", False).tolist() == [2, 0, 3_000_000_000, 0, 0, 0]
    assert F.float_to_int(values, 32, 16, True, "rzi", False).tolist() == [2, 0xFFFE, 0x7FFF, 0x8000, 0, 0]
    assert F.float_to_int(values, 32, 8, False, "rmi", False).tolist() == [2, 0, 255, 0, 0, 0]


def test_int_to_float_and_ftz_sat():
    big = np.array([(1 << 24) + 1], dtype=np.uint64)
    nearest, exact = F.int_to_float(big, 32, False, 32, "rn")
    assert value32(nearest) == float(1 << 24) and exact[0]
    _, exact = F.int_to_float(big, 32, False, 32, "rp")
    assert not exact[0]                                   # directed and inexact: unknown
    tiny = bits32(1e-40)
    got, _ = F.arithmetic("add", tiny, bits32(0.0), 32, None, True, False)
    assert value32(got) == 0.0
    got, _ = F.arithmetic("mul", bits32(3.0), bits32(0.5), 32, None, False, True)
    assert value32(got) == 1.0
    got, _ = F.arithmetic("add", bits32(float("nan")), bits32(0.0), 32, None, False, True)
    assert value32(got) == 0.0


def test_min_max_skip_nan_and_leave_signed_zeros_open():
    got, exact = F.minimum_maximum("min", bits32(float("nan")), bits32(2.0), 32, False, False)
    assert value32(got) == 2.0 and exact[0]
    _, exact = F.minimum_maximum("max", bits32(0.0), bits32(-0.0), 32, False, False)
    assert not exact[0]
