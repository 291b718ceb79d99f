"""Warp-collective integer instructions: shfl, vote, match, activemask, redux, elect.

They are evaluated exactly over the lanes that execute them (the execution
mask).  PTX defines them on 32-lane warps; with a 64-wide warp size they act
on each aligned group of 32 lanes, as the PTX program was written for.
Reading a lane that does not take part gives an undefined value, which is
tainted ``UNMODELLED``.  Results carry the taint of every lane they combine.
"""

from __future__ import annotations

import numpy as np

from traceconf.emulate import intops, taint
from traceconf.emulate.alu import unknown_result
from traceconf.emulate.operands import Context, reader, register_key, split_destinations
from traceconf.emulate.program import Slot

U64 = np.uint64
GROUP = 32
_LANE_BITS = U64(1) << np.arange(GROUP, dtype=np.uint64)


def _participants(m, mask) -> np.ndarray:
    return m.valid if mask is None else mask


def _group_or(bits, participating) -> np.ndarray:
    """OR of the taints of the participating lanes of each 32-lane group, broadcast to its lanes."""
    bits = np.where(participating, bits, taint.ZERO).reshape(-1, GROUP)
    return np.repeat(np.bitwise_or.reduce(bits, axis=1), GROUP)


def _source_lanes(mode: str, lane: np.ndarray, lane_arg, clamp_arg) -> tuple[np.ndarray, np.ndarray]:
    """(the lane each lane reads, whether it was in range) of a shuffle, for lanes ``lane`` (0..31)."""
    bval = (np.broadcast_to(lane_arg, lane.shape) & U64(31)).astype(np.int64)
    clamp = np.broadcast_to(clamp_arg, lane.shape)
    cval = (clamp & U64(31)).astype(np.int64)
    segment = ((clamp >> U64(8)) & U64(31)).astype(np.int64)
    max_lane = (lane & segment) | (cval & ~segment)
    min_lane = lane & segment
    if mode == "up":
        source = lane - bval
        in_range = source >= max_lane
    else:
        source = {"down": lane + bval, "bfly": lane ^ bval, "idx": min_lane | (bval & ~segment)}[mode]
        in_range = source <= max_lane
    return np.where(in_range, source, lane), in_range


_GROUP_LANES = np.arange(GROUP, dtype=np.int64)


def shuffle(m, mask, mode: str, value, value_bits, lane_arg, lane_bits, clamp_arg, clamp_bits):
    """shfl.sync / SHFL (``mode``: up, down, bfly, idx): (value read, its taint, whether the source lane was in
    range, that predicate's taint) per thread; a source lane not taking part gives an undefined value."""
    participating = _participants(m, mask)
    if np.ndim(lane_arg) == 0 and np.ndim(clamp_arg) == 0:
        # one lane operand and clamp for every thread (reductions' SHFL.BFLY by an immediate): one pattern over a
        # 32-lane group serves every group
        source, in_range = _source_lanes(mode, _GROUP_LANES, lane_arg, clamp_arg)
        groups = m.size // GROUP

        def gathered(array):
            return np.broadcast_to(array, (m.size,)).reshape(groups, GROUP)[:, source].reshape(-1)
        absent = ~gathered(participating)
        result_bits = (value_bits if np.ndim(value_bits) == 0 else gathered(value_bits)) | lane_bits | clamp_bits
        if absent.any():
            result_bits = result_bits | np.where(absent, taint.UNMODELLED, taint.ZERO)
        return gathered(value), result_bits, np.tile(in_range.astype(np.uint64), groups), lane_bits | clamp_bits
    value = np.broadcast_to(value, (m.size,))
    value_bits = np.broadcast_to(value_bits, (m.size,))
    lane = (m.lane % GROUP).astype(np.int64)
    source, in_range = _source_lanes(mode, lane, lane_arg, clamp_arg)
    thread = np.arange(m.size) - lane + source
    result_bits = value_bits[thread] | lane_bits | clamp_bits | \
        np.where(participating[thread], taint.ZERO, taint.UNMODELLED)
    return value[thread], result_bits, in_range.astype(np.uint64), lane_bits | clamp_bits


def ballot(m, mask, value, bits):
    """vote.sync / VOTE over each 32-lane group: (ballot mask, any lane true, all lanes true, taint), per thread."""
    participating = _participants(m, mask)
    truth = ((np.broadcast_to(value, (m.size,)) & U64(1)) == 1) & participating
    groups, taking_part = truth.reshape(-1, GROUP), participating.reshape(-1, GROUP)
    mask_bits = np.repeat((groups * _LANE_BITS).sum(axis=1, dtype=np.uint64), GROUP)
    any_true = np.repeat(groups.any(axis=1), GROUP)
    all_true = np.repeat((groups | ~taking_part).all(axis=1), GROUP)
    return mask_bits, any_true, all_true, _group_or(np.broadcast_to(bits, (m.size,)), participating)


def matching_lanes(m, mask, values, value_bits):
    """match.sync / MATCH: (mask of the lanes holding each thread's value, mask of the lanes taking part, taint)."""
    participating = _participants(m, mask)
    grouped = np.broadcast_to(values, (m.size,)).reshape(-1, GROUP)
    taking_part = participating.reshape(-1, GROUP)
    equal = (grouped[:, :, None] == grouped[:, None, :]) & taking_part[:, None, :]
    same = (equal * _LANE_BITS).sum(axis=2, dtype=np.uint64).reshape(-1)
    group_mask = np.repeat((taking_part * _LANE_BITS).sum(axis=1, dtype=np.uint64), GROUP)
    return same, group_mask, _group_or(np.broadcast_to(value_bits, (m.size,)), participating)


def reduce_lanes(m, mask, value, bits, operation: str, is_signed: bool):
    """redux.sync / REDUX (``operation``: add, min, max, and, or, xor) of the 32-bit values of the lanes taking
    part, in every thread of the group: (result, taint)."""
    participating = _participants(m, mask)
    value = intops.truncate(np.broadcast_to(np.asarray(value, dtype=np.uint64), (m.size,)), 32)
    taking_part = participating.reshape(-1, GROUP)
    if operation == "add":
        result = np.where(taking_part, value.reshape(-1, GROUP), U64(0)).sum(axis=1, dtype=np.uint64)
    elif operation in ("min", "max"):
        numbers = intops.signed(value, 32) if is_signed else value.astype(np.int64)
        neutral = np.iinfo(np.int64).max if operation == "min" else np.iinfo(np.int64).min
        grouped = np.where(taking_part, numbers.reshape(-1, GROUP), neutral)
        result = (grouped.min(axis=1) if operation == "min" else grouped.max(axis=1)).view(np.uint64)
    else:
        neutral = U64(0xFFFF_FFFF) if operation == "and" else U64(0)
        grouped = np.where(taking_part, value.reshape(-1, GROUP), neutral)
        result = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[operation].reduce(grouped, axis=1)
    return intops.truncate(np.repeat(result, GROUP), 32), _group_or(np.broadcast_to(bits, (m.size,)), participating)


def _shfl(slot: Slot, ctx: Context):
    row = slot.row
    modes = [m for m in row["modifiers"] if m in ("up", "down", "bfly", "idx")]
    mode = modes[0] if modes else "idx"
    keys = [register_key(n, slot) for n in split_destinations(row["operands"][0])]
    a, b, c = (reader(op, slot, ctx) for op in row["operands"][1:4])

    def run(m, mask):
        value, value_bits, in_range, range_bits = shuffle(m, mask, mode, *a(m), *b(m), *c(m))
        m.write(keys[0], value, value_bits, mask)
        if len(keys) > 1:
            m.write(keys[1], in_range, range_bits, mask)
    return run


def _vote(slot: Slot, ctx: Context):
    row = slot.row
    mode = next((m for m in row["modifiers"] if m in ("all", "any", "uni", "ballot")), "any")
    key = register_key(split_destinations(row["operands"][0])[0], slot)
    predicate = reader(row["operands"][1], slot, ctx)

    def run(m, mask):
        lanes, any_true, all_true, bits = ballot(m, mask, *predicate(m))
        result = lanes if mode == "ballot" else \
            {"any": any_true, "all": all_true, "uni": all_true | ~any_true}[mode].astype(np.uint64)
        m.write(key, result, bits, mask)
    return run


def _activemask(slot: Slot, ctx: Context):
    key = register_key(split_destinations(slot.row["operands"][0])[0], slot)

    def run(m, mask):
        participating = _participants(m, mask).reshape(-1, GROUP)
        m.write(key, np.repeat((participating * _LANE_BITS).sum(axis=1, dtype=np.uint64), GROUP), taint.ZERO, mask)
    return run


def _match(slot: Slot, ctx: Context):
    row = slot.row
    every = "all" in row["modifiers"]
    keys = [register_key(n, slot) for n in split_destinations(row["operands"][0])]
    source = reader(row["operands"][1], slot, ctx)
    bits = intops.TYPE_BITS.get(row["type"] or "b32", 32)

    def run(m, mask):
        value, value_bits = source(m)
        same, group_mask, result_bits = matching_lanes(m, mask, intops.truncate(value, bits), value_bits)
        if every:
            all_equal = same == group_mask
            m.write(keys[0], np.where(all_equal, group_mask, U64(0)), result_bits, mask)
            if len(keys) > 1:
                m.write(keys[1], all_equal.astype(np.uint64), result_bits, mask)
        else:
            m.write(keys[0], same, result_bits, mask)
    return run


def _redux(slot: Slot, ctx: Context):
    row = slot.row
    operation = next((m for m in row["modifiers"] if m in ("add", "min", "max", "and", "or", "xor")), "add")
    is_signed = row["type"] in intops.SIGNED_TYPES
    key = register_key(split_destinations(row["operands"][0])[0], slot)
    source = reader(row["operands"][1], slot, ctx)
    if row["type"] in intops.FLOAT_TYPES:
        return unknown_result(row, slot, ctx, taint.FLOAT)

    def run(m, mask):
        result, bits = reduce_lanes(m, mask, *source(m), operation, is_signed)
        m.write(key, result, bits, mask)
    return run


def _elect(slot: Slot, ctx: Context):
    """elect.sync d|p: d = lane id of the leader (lowest taking part), p = this lane is the leader."""
    names = split_destinations(slot.row["operands"][0])
    if len(names) == 1:
        names = ["_"] + names
    leader_key, is_leader_key = (register_key(n, slot) if n != "_" else None for n in names[:2])

    def run(m, mask):
        participating = _participants(m, mask).reshape(-1, GROUP)
        leader = np.repeat(np.argmax(participating, axis=1), GROUP).astype(np.uint64)
        if leader_key:
            m.write(leader_key, leader, taint.ZERO, mask)
        if is_leader_key:
            m.write(is_leader_key, (leader == (m.lane % GROUP).astype(np.uint64)).astype(np.uint64), taint.ZERO, mask)
    return run


HANDLERS = {"shfl": _shfl, "vote": _vote, "activemask": _activemask, "match": _match, "redux": _redux,
            "elect": _elect}


def compile_warp(slot: Slot, ctx: Context):
    handler = HANDLERS.get(slot.row["opcode"])
    return handler(slot, ctx) if handler else None
