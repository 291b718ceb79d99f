"""A shuffle by one lane operand and clamp for every thread (a reduction's SHFL.BFLY by an immediate) gathers
one 32-lane pattern per group; it gives what the per-thread path gives, values, taints and range predicate."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from traceconf.emulate import taint
from traceconf.emulate.warp import shuffle


@pytest.mark.parametrize("mode", ["up", "down", "bfly", "idx"])
@pytest.mark.parametrize("warp_size", [32, 64])
@pytest.mark.parametrize("case", ["every lane", "some lanes", "one taint"])
def test_one_pattern_per_group_equals_the_per_thread_shuffle(mode, warp_size, case):
    rng = np.random.default_rng(len(mode) * warp_size + len(case))
    size = 3 * 64
    machine = SimpleNamespace(size=size, lane=np.arange(size) % warp_size, valid=np.ones(size, dtype=bool))
    mask = None if case != "some lanes" else rng.random(size) < 0.7
    value = rng.integers(0, 2 ** 32, size, dtype=np.uint64)
    bits = taint.THREAD if case == "one taint" else rng.choice([taint.ZERO, taint.LOADED, taint.CTA], size)
    for lane_arg, clamp_arg in [(1, 0x1F), (16, 0x1F), (3, 0), (5, 0x1C1F), (0, 0x101F)]:
        lane, clamp = np.uint64(lane_arg), np.uint64(clamp_arg)
        fast = shuffle(machine, mask, mode, value, bits, lane, taint.ZERO, clamp, taint.ZERO)
        general = shuffle(machine, mask, mode, value, bits, np.full(size, lane), taint.ZERO, np.full(size, clamp),
                          taint.ZERO)
        for mine, theirs in zip(fast, general):
            assert np.array_equal(np.broadcast_to(mine, (size,)), np.broadcast_to(theirs, (size,)))
