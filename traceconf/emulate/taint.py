"""Per-thread taint bits: where a register's value came from.

Every register carries, next to its value, a ``uint64`` bit set per thread.
Bits are OR-ed through every instruction, so a value knows whether it depends
on something the emulator cannot know (data loaded from memory, floating
point, a missing kernel parameter, an unmodelled instruction), on the CTA
index (which decides whether one CTA may stand for all), or on the generic
shared window (which makes a generic address a shared one).
"""

from __future__ import annotations

import numpy as np

LOADED = np.uint64(1 << 0)        # value read from memory (ld, atom, tex, ...)
FLOAT = np.uint64(1 << 1)         # result of floating-point arithmetic
UNMODELLED = np.uint64(1 << 2)    # uninitialised register, undefined result, instruction not modelled
CTA = np.uint64(1 << 3)           # depends on %ctaid / %clusterid: differs between CTAs
SHARED_WINDOW = np.uint64(1 << 4)  # generic address derived from the shared window (cvta.shared)
BRANCH = np.uint64(1 << 5)        # written on one side of a branch whose direction is unknown for the lane
THREAD = np.uint64(1 << 6)        # may differ between the lanes of a warp (thread index, memory contents)
# While CTA classes are sought (emulate/classes.py), CTA means "affine in the CTA index so far"; these two
# refine it: a comparison of affine values is DECIDED (one value per CTA class), anything else OPAQUE.
CTA_DECIDED = np.uint64(1 << 7)   # depends on the CTA index only through recorded comparisons
CTA_OPAQUE = np.uint64(1 << 8)    # depends on the CTA index in a way no class argument covers
PARAM_FIRST_BIT = 9               # bit 9 + k: kernel parameter k has no value
MAX_TRACKED_PARAMS = 64 - PARAM_FIRST_BIT

PARAMS = np.uint64(((1 << 64) - 1) ^ ((1 << PARAM_FIRST_BIT) - 1))
#: Bits that make a value unknown (an address or branch condition with them cannot be evaluated).
UNKNOWN = LOADED | FLOAT | UNMODELLED | BRANCH | PARAMS
#: Unknown for another reason than a kernel parameter without a value: an address with these may point anywhere
#: (a pointer read back from memory may be a shared one); a parameter the host gave points to global memory.
WILD = UNKNOWN & ~PARAMS
#: Any dependence on the CTA index.
CTA_ANY = CTA | CTA_DECIDED | CTA_OPAQUE
ZERO = np.uint64(0)


def read_back(bits):
    """Taint of a value read from memory: a CTA dependence it carries (from the address, or stored with it)
    is never known to be affine in the CTA index, since a load may take part of a stored value."""
    bits = np.asarray(bits, dtype=np.uint64)
    by_cta = (bits & CTA_ANY) != 0
    return np.where(by_cta, bits | CTA_OPAQUE, bits) if by_cta.any() else bits


def missing_param(index: int) -> np.uint64:
    return np.uint64(1 << (PARAM_FIRST_BIT + min(index, MAX_TRACKED_PARAMS - 1)))


def missing_params(bits: int, names: list[str]) -> list[str]:
    """Names of the kernel parameters whose missing value ``bits`` depends on."""
    found = []
    for index, name in enumerate(names):
        if bits >> (PARAM_FIRST_BIT + min(index, MAX_TRACKED_PARAMS - 1)) & 1:
            found.append(name)
    return found


def describe(bits: int) -> str:
    """Why a value is unknown, in words (missing parameters are reported separately, as errors)."""
    reasons = []
    if bits & int(LOADED):
        reasons.append("data loaded from memory")
    if bits & int(FLOAT):
        reasons.append("floating-point arithmetic")
    if bits & int(UNMODELLED):
        reasons.append("a value the emulator does not model")
    if bits & int(BRANCH):
        reasons.append("a register written under a branch whose direction is unknown")
    return " and ".join(reasons) or "nothing"


def of_logic(operation: str, x, x_bits, y, y_bits) -> np.ndarray:
    """Taint of the predicate ``x and y`` (``operation``: "and", "or" or "xor"), both levels: where one side is
    known and decides it alone (false AND anything, true OR anything) the other does not matter (CUB's merge
    compares a key read past its list's end, a padding word nothing wrote, where its index test has decided the
    step); elsewhere, and always for XOR (no side decides it alone), the taint of both."""
    x_bits, y_bits = np.asarray(x_bits, dtype=np.uint64), np.asarray(y_bits, dtype=np.uint64)
    if operation == "xor":
        return x_bits | y_bits
    is_or = operation == "or"
    if not x_bits.ndim and not y_bits.ndim:
        # one taint per side (the common case): where no side that could decide alone has a taint other than
        # both together, every lane gets both together, with no pass over the lanes
        both = x_bits | y_bits
        if (x_bits == both or not _may_decide(is_or, x, x_bits)) and \
                (y_bits == both or not _may_decide(is_or, y, y_bits)):
            return both
    if not y_bits.ndim and not y_bits and not _may_decide(is_or, y, y_bits):
        return x_bits       # a known side that never decides (``PT`` in ``P0 AND PT``): each lane has x's taint
    if not x_bits.ndim and not x_bits and not _may_decide(is_or, x, x_bits):
        return y_bits
    x_true, y_true = (np.asarray(x, dtype=np.uint64) & np.uint64(1)) == 1, (np.asarray(y, dtype=np.uint64) & np.uint64(1)) == 1
    x_decides = (x_true if is_or else ~x_true) & ((x_bits & UNKNOWN) == 0)
    y_decides = (y_true if is_or else ~y_true) & ((y_bits & UNKNOWN) == 0)
    return np.where(x_decides, x_bits, np.where(y_decides, y_bits, x_bits | y_bits))


def _may_decide(is_or: bool, value, bits) -> bool:
    """Whether some lane of ``value`` (taint ``bits``, one for all) may decide ``AND``/``OR`` alone: it is known and
    false (true for OR); a per-lane value may."""
    if bits & UNKNOWN:
        return False
    return np.ndim(value) > 0 or bool(int(value) & 1) == is_or
