"""Warp-collective SASS instructions: SHFL, VOTE/VOTEU, MATCH, REDUX.

Their semantics are the PTX level's (:mod:`traceconf.emulate.warp`, one home for both levels); this module
reads SASS operands and modifiers into them.
"""

from __future__ import annotations

import numpy as np

from traceconf.emulate.warp import ballot, matching_lanes, reduce_lanes, shuffle
from traceconf.sass.operands import reader, writer

U64 = np.uint64


def shfl(ops, mods, ctx):
    """SHFL.{IDX,UP,DOWN,BFLY} Pout, Rd, Ra, lane, clamp."""
    mode = next((x for x in mods if x in ("UP", "DOWN", "BFLY", "IDX")), "IDX").lower()
    pred_out = writer(ops[0])
    dest = writer(ops[1])
    a, b, c = (reader(o, ctx, False) for o in ops[2:5])

    def run(m, mask):
        value, value_bits, in_range, range_bits = shuffle(m, mask, mode, *a(m), *b(m), *c(m))
        dest(m, value, value_bits, mask)
        pred_out(m, in_range, range_bits, mask)
    return run


def vote(ops, mods, ctx):
    """VOTE.{ALL,ANY,EQ,UNI} [Rd,] Pout, Pin: Rd receives the ballot."""
    mode = next((x for x in mods if x in ("ALL", "ANY", "EQ", "UNI")), "ANY")
    dest = writer(ops[0]) if ops[0].kind == "reg" else None
    pred_index = 1 if ops[0].kind == "reg" else 0
    pred_out = writer(ops[pred_index])
    source = reader(ops[pred_index + 1], ctx)

    def run(m, mask):
        lanes, any_true, all_true, bits = ballot(m, mask, *source(m))
        if dest is not None:
            dest(m, lanes, bits, mask)
        result = {"ANY": any_true, "ALL": all_true, "EQ": all_true | ~any_true, "UNI": all_true | ~any_true}[mode]
        pred_out(m, result.astype(np.uint64), bits, mask)
    return run


def match(ops, mods, ctx):
    """MATCH.{ANY,ALL}[.U64] Rd, [Pout,] Ra."""
    every = "ALL" in mods
    dest = writer(ops[0])
    pred_out = writer(ops[1]) if every and len(ops) > 2 else None
    source = reader(ops[-1], ctx, "U64" in mods)

    def run(m, mask):
        same, group_mask, bits = matching_lanes(m, mask, *source(m))
        if every:
            all_equal = same == group_mask
            dest(m, np.where(all_equal, group_mask, U64(0)), bits, mask)
            if pred_out:
                pred_out(m, all_equal.astype(np.uint64), bits, mask)
        else:
            dest(m, same, bits, mask)
    return run


def redux(ops, mods, ctx):
    """REDUX[.SUM|.MIN|.MAX|.AND|.OR|.XOR][.S32] URd, Ra: the reduction over the lanes taking part, in every
    lane (plain REDUX is an AND, as ptxas prints redux.sync.and)."""
    operation = next((x for x in mods if x in ("SUM", "MIN", "MAX", "AND", "OR", "XOR")), "AND")
    operation = "add" if operation == "SUM" else operation.lower()
    signed = "S32" in mods
    dest = writer(ops[0])
    source = reader(ops[1], ctx, False)

    def run(m, mask):
        result, bits = reduce_lanes(m, mask, *source(m), operation, signed)
        dest(m, result, bits, mask)
    return run
