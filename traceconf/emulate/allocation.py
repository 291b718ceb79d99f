"""Pointer parameters without a value, where the copy-source rule needs them: at cudaMalloc's alignment.

Nsight counts an ``LDGSTS.BYPASS`` (cp.async.cg) from the 128-byte lines, 32-byte sectors and 16-byte chunks its
lanes' global sources fall in (docs/rules.md, "Copies from their sources"), so the count needs the sources only
modulo 128 bytes.  cudaMalloc returns allocations aligned to :data:`ALIGNMENT` bytes: a source that is a pointer
parameter plus a known offset, with the pointer at the start of its allocation, is known modulo 128 without the
pointer's value.  That is the assumption made, by default, for a 64-bit parameter without a value; ``--param
NAME=ADDRESS`` replaces it by the real address (only ``ADDRESS mod 128`` matters to the count: a pointer 16 bytes
into its allocation is ``--param NAME=16``).

How: such a parameter holds a stand-in address (:func:`value_without_param`), with its taint bit as any parameter
without a value, so every address computed from it stays unknown everywhere (no global access, branch or shared
address is decided by it).  Only the global source of a copy looks at it (:func:`copy_sources`): where a lane's
source depends on nothing unknown but one such parameter and lies within :data:`OFFSET_RANGE` of its stand-in,
it is that pointer plus a known offset.  The stand-ins' bits above the alignment are scattered, so a source
computed from the pointer some other way (scaled, shifted, masked above the alignment) lands far from it and stays
unknown, as do copies mixing pointers.
"""

from __future__ import annotations

import numpy as np

from traceconf.emulate import taint

#: cudaMalloc's alignment of every allocation (CUDA C++ Programming Guide, "Device Memory Accesses").
ALIGNMENT = 256
#: A source within this many bytes of a stand-in (either side) is taken as its pointer plus that offset.
OFFSET_RANGE = 1 << 32
#: Stand-ins lie in [STAND_IN_FLOOR, 2 * STAND_IN_FLOOR): user-space addresses, none near another's range.
STAND_IN_FLOOR = 1 << 46
_SCATTER = 0x9E37_79B9_7F4A_7C15            # 2^64 / golden ratio: consecutive indices far apart


def stand_in(index: int) -> int:
    """The address a 64-bit parameter (``index``) without a value holds: :data:`ALIGNMENT`-aligned, its other
    bits scattered."""
    return STAND_IN_FLOOR | ((index + 1) * _SCATTER) & (STAND_IN_FLOOR - 1) & ~(ALIGNMENT - 1)


def value_without_param(index: int, size: int) -> int:
    """The raw bytes of parameter ``index`` (``size`` bytes) without a value: a stand-in address for a 64-bit
    one (a pointer, as far as anyone can tell), 0 otherwise; the taint bit makes it unknown either way."""
    return stand_in(index) if size == 8 and index < taint.MAX_TRACKED_PARAMS - 1 else 0


def copy_sources(value: np.ndarray, bits: np.ndarray, lanes: np.ndarray, warp_size: int
                 ) -> tuple[np.ndarray, int]:
    """(each lane's global source, -1 where unknown; the taint bits of the parameters taken at :data:`ALIGNMENT`)
    of a copy whose lanes ``lanes`` read source ``value`` (taint ``bits``): a known source as is, one that is a
    pointer parameter without a value plus a known offset as that offset from the pointer's stand-in.  A warp
    whose lanes' sources are known relative to different bases (a known address, or two parameters) has none:
    where the lines of one lie relative to the other's is unknown."""
    value, bits = np.asarray(value, dtype=np.uint64), np.asarray(bits, dtype=np.uint64) & taint.UNKNOWN
    if not bits.any():                      # every source known (a --param pointer, --data): nothing to decide
        return np.where(lanes, value.view(np.int64), -1), 0
    basis = np.where(lanes & (bits == 0), taint.ZERO, taint.UNKNOWN)
    for bit in np.unique(bits[lanes & (bits != 0) & ((bits & ~taint.PARAMS) == 0)]):
        index = int(bit).bit_length() - 1 - taint.PARAM_FIRST_BIT
        if int(bit) & (int(bit) - 1) or not value_without_param(index, 8):
            continue                        # more than one parameter, or one whose bit others share
        offset = (value - np.uint64(stand_in(index))).view(np.int64)
        basis = np.where(lanes & (bits == bit) & (-OFFSET_RANGE <= offset) & (offset < OFFSET_RANGE), bit, basis)
    known = lanes & (basis != taint.UNKNOWN)
    by_warp, known_by_warp = basis.reshape(-1, warp_size), known.reshape(-1, warp_size)
    mixed = np.where(known_by_warp, by_warp, taint.ZERO).max(axis=1) > \
        np.where(known_by_warp, by_warp, taint.UNKNOWN).min(axis=1)
    known &= ~np.repeat(mixed, warp_size)
    assumed = int(np.bitwise_or.reduce(basis[known])) if known.any() else 0
    return np.where(known, value.view(np.int64), -1), assumed


def assumed_note(names: list[str], places: list[str]) -> str:
    """The analysis note of copies counted from sources through parameters ``names`` taken at :data:`ALIGNMENT`."""
    plural = len(names) > 1
    return (f"the global sources of the copies at {', '.join(places)} are offsets from parameter"
            f"{'s' if plural else ''} {', '.join(names)}, which ha{'ve' if plural else 's'} no value: "
            f"{'they are' if plural else 'it is'} taken at the start of a {ALIGNMENT}-byte-aligned allocation "
            f"(cudaMalloc's alignment), which decides the global lines an LDGSTS.BYPASS count from its sources "
            f"depends on; --param NAME=ADDRESS counts at the real address (only ADDRESS mod 128 matters)")


def with_assumption(note: str, names: list[str]) -> str:
    """The model note of a copy counted from sources that are offsets from parameters ``names`` without a value
    (RESULT_ROWS ``model_note``, the explain picture's): the rule's ``note`` and the assumption."""
    plural = len(names) > 1
    return (f"{note}; its sources are offsets from parameter{'s' if plural else ''} {', '.join(names)} without a "
            f"value, taken {ALIGNMENT}-byte aligned as cudaMalloc returns them (--param NAME=ADDRESS: the real "
            f"address)")
