"""Wavefronts of executions that share an address row and differ in their active lanes, from lane bitmasks.

A guarded access (a data-dependent ``if``, a conditional swap) executes at the same addresses in every CTA
and differs only in which lanes take part; :func:`traceconf.engine.count_wavefronts` meets each (row,
mask) once, but there are as many masks as the data makes.  For the multicast rule the work that depends on
the row alone is done once per row: each lane's (lane group, bank unit, bank row) key, and the bits of the
lanes below it with the same key.  An execution's count is then a few operations on its 64-bit mask: a lane
opens a new pass of its bank iff it is active and no active lane below it has its key, and a group needs as
many passes as its busiest bank (the rule :func:`traceconf.engine._multicast_passes` applies to sorted keys).

Only plans whose count is that rule go this way (:func:`counts_by_masks`): one request per access, served
once by banks (no placements, no second serving), multicast broadcasting, no load pairing (which depends on
the addresses of the active lanes); the engine runs every other plan on the addresses.  tests/test_lanemasks.py
holds the two equal for every rule set.
"""

from __future__ import annotations

import numpy as np

INACTIVE = -1


#: Executions per distinct row from which :func:`count` pays: it spends a few (lanes x lanes) operations on each
#: row, the engine's rules a sort of each execution's keys.
EXECUTIONS_PER_ROW = 16


def counts_by_masks(plan, rules) -> bool:
    """Does :func:`count` give the engine's count for executions of ``plan`` (an ``engine._Plan``)?"""
    lanes = plan.groups.ravel()
    return (plan.servings == ("banks",) and rules.broadcast != "single_word" and plan.requests == 1
            and plan.paired_groups is None and len(np.unique(lanes)) == len(lanes))


def pays(row: np.ndarray) -> np.ndarray:
    """Per execution (of the rows ``row``): is :func:`count` the cheaper way for it, its row shared by enough
    executions (not so where addresses come from data, a row each)?"""
    _, inverse, executions = _numbered(row)
    return executions[inverse] >= EXECUTIONS_PER_ROW


def _numbered(row: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(row, return_inverse=True, return_counts=True)`` of row numbers (small and non-negative), by
    counting instead of sorting."""
    executions = np.bincount(row)
    used = np.flatnonzero(executions)
    number = np.zeros(len(executions), dtype=np.intp)
    number[used] = np.arange(len(used))
    return used, number[row], executions[used]


#: Executions counted per step: keeps the (executions x lanes) temporaries in the L2 cache.
CHUNK = 8192


def count(rows: np.ndarray, row: np.ndarray, mask: np.ndarray, plan, rules) -> tuple[np.ndarray, ...]:
    """(wavefronts, ideal, max_ways) of executions of one class: execution ``i`` accessed ``rows[row[i]]`` in
    the lanes set in ``mask[i]`` (a lane holding ``INACTIVE`` takes no part either)."""
    groups = plan.groups
    n_groups, group_lanes = groups.shape
    lanes = groups.ravel()
    width = len(lanes)
    word = np.dtype("<u4") if width <= 32 else np.dtype("<u8")     # lane bits, by position in ``lanes``
    used, row, _ = _numbered(row)
    keys = _row_keys(rows[used][:, lanes], plan, rules)
    below, present, contested = (values.astype(word) for values in keys)
    if np.array_equal(lanes, np.arange(width)):                  # the masks' bits are positions already
        active_bits = mask.astype(word) & present[row]
    else:
        active_bits = _bits(_unpacked(mask, rules.warp_size)[:, lanes], word) & present[row]
    group_bits = np.array([sum(1 << j for j in range(g * group_lanes, (g + 1) * group_lanes))
                           for g in range(n_groups)], dtype=word)
    group_active = (active_bits[:, None] & group_bits) != 0
    # a group's passes: its busiest contested bank unit's, 1 if it has none but an active lane
    passes = group_active.astype(np.int64)
    if contested.shape[2]:
        # a lane opens a pass of its bank unit when it is active and no active lane below it has its key; in a
        # row without two lanes of one key (no lane has any below) every active lane does
        opens = active_bits.copy()
        shared = np.flatnonzero(below.any(axis=1)[row])
        for start in range(0, len(shared), CHUNK):
            part = shared[start:start + CHUNK]
            blocked = below[row[part]]
            np.bitwise_and(blocked, active_bits[part, None], out=blocked)
            opens[part] = _bits((blocked == 0) & _unpacked(active_bits[part], width), word)
        # a unit at a time over the executions (a maximum along the few units of each is numpy's slow case)
        column = np.empty(min(len(row), CHUNK), dtype=word)
        for start in range(0, len(row), CHUNK):
            part = slice(start, start + CHUNK)
            rows_of, opened, out = row[part], opens[part], column[:len(row[part])]
            for group in range(contested.shape[1]):
                busiest = passes[part, group]
                for unit in range(contested.shape[2]):
                    # (row numbers from _numbered lie inside: "wrap" never wraps, and with ``out`` it is not
                    # buffered as "raise" is)
                    np.take(contested[:, group, unit], rows_of, out=out, mode="wrap")
                    out &= opened
                    np.maximum(busiest, np.bitwise_count(out), out=busiest)
                passes[part, group] = busiest
    passes = (passes + plan.extra_wavefronts) * group_active
    wavefronts = passes.sum(axis=1)
    if plan.ideal_bytes:                         # the wavefronts the active bytes fill, at most those taken
        filled = -(-np.bitwise_count(active_bits).astype(np.int64) * plan.width // plan.ideal_bytes)
        ideal = np.minimum(filled, wavefronts)
    else:
        ideal = group_active.sum(axis=1)
    return wavefronts * plan.repeat, ideal * plan.repeat, passes.max(axis=1)


def _row_keys(address: np.ndarray, plan, rules) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of ``address`` (rows, positions: the lanes of ``plan.groups``, in order), as uint64 bits by
    position: ``below`` (rows, positions), the present lanes below each with its (group, bank unit, bank row) key;
    ``present`` (rows,), the lanes with an address; ``contested`` (rows, groups, units), per group the lanes of
    each bank unit where two keys meet (the others never need more than one pass), zeros after the last."""
    n_groups, group_lanes = plan.groups.shape
    width = address.shape[1]
    present = address != INACTIVE
    # relative to each row's lowest address rounded down to a bank row: the counts do not change (shift
    # invariance, docs/rules.md) and the keys of present lanes are small and non-negative
    lowest = np.where(present, address, np.iinfo(np.int64).max).min(axis=1)
    base = np.where(present.any(axis=1), lowest - lowest % rules.row_bytes, 0)
    relative = np.where(present, address - base[:, None], 0)
    unit = max(plan.width, rules.bank_bytes)
    units = rules.banks * rules.bank_bytes // unit
    position = np.arange(width)
    bank_row = relative >> (rules.row_bytes.bit_length() - 1)
    if not plan.distinct:                                        # every access its own key: count, do not merge
        bank_row = bank_row * group_lanes + position % group_lanes
    cell = (position // group_lanes) * units + ((relative >> (unit.bit_length() - 1)) & (units - 1))
    bit = np.uint64(1) << position.astype(np.uint64)
    same_key = ((cell[:, :, None] == cell[:, None, :]) & (bank_row[:, :, None] == bank_row[:, None, :])
                & present[:, None, :])
    below = ((same_key & np.tri(width, k=-1, dtype=bool)) * bit).sum(axis=2, dtype=np.uint64)  # distinct bits: OR
    first_of_key = present & (below == 0)
    in_cell = (cell[:, None, :] == np.arange(n_groups * units)[None, :, None]) & present[:, None, :]
    keys_in_cell = (in_cell & first_of_key[:, None, :]).sum(axis=2)
    cell_bits = (in_cell * bit).sum(axis=2, dtype=np.uint64).reshape(-1, n_groups, units)
    contested = (keys_in_cell >= 2).reshape(-1, n_groups, units)
    # per group its contested units first, as many columns as the most contested group has
    order = np.argsort(~contested, axis=2, kind="stable")
    kept = int(contested.sum(axis=2).max(initial=0))
    contested_bits = np.take_along_axis(np.where(contested, cell_bits, 0), order, axis=2)[:, :, :kept]
    return below, (present * bit).sum(axis=1, dtype=np.uint64), contested_bits


def _unpacked(bits: np.ndarray, width: int) -> np.ndarray:
    """(n, width) bool: bit ``j`` of each of ``bits`` (n,) little-endian words."""
    return np.unpackbits(np.ascontiguousarray(bits).view(np.uint8).reshape(len(bits), -1), axis=1,
                         count=width, bitorder="little").view(bool)


def _bits(flags: np.ndarray, word: np.dtype) -> np.ndarray:
    """(n,) ``word``: the (n, width) bool ``flags`` as bits, column ``j`` bit ``j``."""
    packed = np.packbits(flags, axis=1, bitorder="little")
    if packed.shape[1] < word.itemsize:
        packed = np.concatenate([packed, np.zeros((len(packed), word.itemsize - packed.shape[1]), np.uint8)], axis=1)
    return np.ascontiguousarray(packed).view(word).ravel()
