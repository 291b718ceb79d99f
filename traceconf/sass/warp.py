"""Warp-collective SASS instructions: SHFL, VOTE/VOTEU, MATCH, REDUX, evaluated over the lanes that execute them.

A lane that does not take part gives an undefined value to the lanes reading it (taint ``UNMODELLED``);
results carry the taint of every lane they combine.
"""

from __future__ import annotations

import numpy as np

from traceconf.emulate import taint
from traceconf.sass.operands import reader, writer

U64 = np.uint64
GROUP = 32
_LANE_BITS = U64(1) << np.arange(GROUP, dtype=np.uint64)


def _participants(m, mask):
    return m.valid if mask is None else mask


def _group_or(bits, participating, size):
    bits = np.where(participating, np.broadcast_to(bits, (size,)), taint.ZERO).reshape(-1, GROUP)
    return np.repeat(np.bitwise_or.reduce(bits, axis=1), GROUP)


def shfl(ops, mods, ctx):
    mode = next((x for x in mods if x in ("UP", "DOWN", "BFLY", "IDX")), "IDX")
    pred_out = writer(ops[0])
    dest = writer(ops[1])
    a, b, c = (reader(o, ctx, False) for o in ops[2:5])

    def run(m, mask):
        participating = _participants(m, mask)
        (value, value_bits), (lane_arg, lane_bits), (clamp_arg, clamp_bits) = a(m), b(m), c(m)
        value = np.broadcast_to(value, (m.size,))
        value_bits = np.broadcast_to(value_bits, (m.size,))
        lane = (m.lane % GROUP).astype(np.int64)
        bval = (np.broadcast_to(lane_arg, (m.size,)) & U64(31)).astype(np.int64)
        clamp = np.broadcast_to(clamp_arg, (m.size,))
        cval = (clamp & U64(31)).astype(np.int64)
        segment = ((clamp >> U64(8)) & U64(31)).astype(np.int64)
        max_lane = (lane & segment) | (cval & ~segment)
        min_lane = lane & segment
        if mode == "UP":
            source = lane - bval
            in_range = source >= max_lane
        else:
            source = {"DOWN": lane + bval, "BFLY": lane ^ bval, "IDX": min_lane | (bval & ~segment)}[mode]
            in_range = source <= max_lane
        source = np.where(in_range, source, lane)
        thread = np.arange(m.size) - lane + source
        result_bits = value_bits[thread] | lane_bits | clamp_bits | \
            np.where(participating[thread], taint.ZERO, taint.UNMODELLED)
        dest(m, value[thread], result_bits, mask)
        pred_out(m, in_range.astype(np.uint64), lane_bits | clamp_bits, mask)
    return run


def vote(ops, mods, ctx):
    mode = next((x for x in mods if x in ("ALL", "ANY", "EQ", "UNI")), "ANY")
    dest = writer(ops[0]) if ops[0].kind == "reg" else None
    pred_index = 1 if ops[0].kind == "reg" else 0
    pred_out = writer(ops[pred_index])
    source = reader(ops[pred_index + 1], ctx)

    def run(m, mask):
        participating = _participants(m, mask)
        value, bits = source(m)
        truth = ((np.broadcast_to(value, (m.size,)) & U64(1)) == 1) & participating
        groups, taking_part = truth.reshape(-1, GROUP), participating.reshape(-1, GROUP)
        out_bits = _group_or(bits, participating, m.size)
        if dest is not None:
            dest(m, np.repeat((groups * _LANE_BITS).sum(axis=1, dtype=np.uint64), GROUP), out_bits, mask)
        any_true = groups.any(axis=1)
        all_true = (groups | ~taking_part).all(axis=1)
        result = {"ANY": any_true, "ALL": all_true, "EQ": all_true | ~any_true, "UNI": all_true | ~any_true}[mode]
        pred_out(m, np.repeat(result, GROUP).astype(np.uint64), out_bits, mask)
    return run


def match(ops, mods, ctx):
    every = "ALL" in mods
    wide = "U64" in mods
    dest = writer(ops[0])
    pred_out = writer(ops[1]) if every and len(ops) > 2 else None
    source = reader(ops[-1], ctx, wide)

    def run(m, mask):
        participating = _participants(m, mask)
        value, value_bits = source(m)
        values = np.broadcast_to(value, (m.size,)).reshape(-1, GROUP)
        taking_part = participating.reshape(-1, GROUP)
        equal = (values[:, :, None] == values[:, None, :]) & taking_part[:, None, :]
        same = (equal * _LANE_BITS).sum(axis=2, dtype=np.uint64).reshape(-1)
        group_mask = np.repeat((taking_part * _LANE_BITS).sum(axis=1, dtype=np.uint64), GROUP)
        bits = _group_or(value_bits, participating, m.size)
        if every:
            all_equal = same == group_mask
            dest(m, np.where(all_equal, group_mask, U64(0)), bits, mask)
            if pred_out:
                pred_out(m, all_equal.astype(np.uint64), bits, mask)
        else:
            dest(m, same, bits, mask)
    return run


def _reduce_32(values: np.ndarray, taking_part: np.ndarray, operation: str, signed: bool) -> np.ndarray:
    """Per row (warp): the reduction of the 32-bit values of the lanes taking part."""
    words = values & U64(0xFFFF_FFFF)
    if operation in ("MIN", "MAX"):
        numbers = words.astype(np.int64) - (words >> U64(31)).astype(np.int64) * (1 << 32) if signed \
            else words.astype(np.int64)
        fill = np.iinfo(np.int64).max if operation == "MIN" else np.iinfo(np.int64).min
        pick = np.min if operation == "MIN" else np.max
        return pick(np.where(taking_part, numbers, fill), axis=1).astype(np.int64).view(np.uint64) & U64(0xFFFF_FFFF)
    if operation == "SUM":
        return np.where(taking_part, words, U64(0)).sum(axis=1, dtype=np.uint64) & U64(0xFFFF_FFFF)
    identity = {"AND": U64(0xFFFF_FFFF), "OR": U64(0), "XOR": U64(0)}[operation]
    function = {"AND": np.bitwise_and, "OR": np.bitwise_or, "XOR": np.bitwise_xor}[operation]
    return function.reduce(np.where(taking_part, words, identity), axis=1)


def redux(ops, mods, ctx):
    """REDUX[.SUM|.MIN|.MAX|.AND|.OR|.XOR][.S32] URd, Ra: the reduction over the lanes taking part, in every
    lane (plain REDUX is an AND, as ptxas prints redux.sync.and)."""
    operation = next((x for x in mods if x in ("SUM", "MIN", "MAX", "AND", "OR", "XOR")), "AND")
    signed = "S32" in mods
    dest = writer(ops[0])
    source = reader(ops[1], ctx, False)

    def run(m, mask):
        participating = _participants(m, mask)
        value, bits = source(m)
        values = np.broadcast_to(np.asarray(value, dtype=np.uint64), (m.size,)).reshape(-1, GROUP)
        result = _reduce_32(values, participating.reshape(-1, GROUP), operation, signed)
        dest(m, np.repeat(result, GROUP), _group_or(bits, participating, m.size), mask)
    return run
