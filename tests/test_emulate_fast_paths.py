"""The emulator core's fast paths give what the general code gives (issue 20 item 3).

Shared loads read every thread's word at once (``SharedContents.load_lanes``) instead of selecting lanes
(``SharedContents.load``); ``gather`` may fold the taints of a read to one scalar; a register's taint the same
in every thread is kept as one scalar (``ThreadState.write``).  Each is compared here with the general path on
random inputs, offsets outside the CTA's bytes and misaligned ones included.  Whole kernels are compared with
the hardware in tests/test_hw_families.py and tests/test_sass_hw.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from traceconf.emulate import taint
from traceconf.emulate.contents import SharedContents, gather, scatter
from traceconf.emulate.state import ThreadState, select
from traceconf.sass.operands import signed32

CTAS, BYTES = 3, 256


def filled_contents(rng: np.random.Generator, taints: np.ndarray) -> SharedContents:
    """Shared memory of CTAS CTAs with random words, stored with ``taints`` (one per 4-byte word)."""
    contents = SharedContents(CTAS, BYTES)
    start = np.arange(0, CTAS * BYTES, 4, dtype=np.int64)
    scatter(contents.data, contents.taint, start, 4, rng.integers(0, 2**32, len(start), dtype=np.uint64), taints)
    return contents


@pytest.mark.parametrize("size", [1, 2, 4, 8])
@pytest.mark.parametrize("case", ["inside", "some outside", "misaligned", "uniform taint", "junk where not running"])
def test_load_lanes_equals_load_at_the_lanes(size, case):
    rng = np.random.default_rng(size * 7 + len(case))
    threads = CTAS * 64
    words = CTAS * BYTES // 4
    taints = np.full(words, taint.THREAD) if case == "uniform taint" else \
        rng.choice([taint.ZERO, taint.THREAD, taint.LOADED, taint.CTA], words)
    contents = filled_contents(rng, taints)
    cta_index = np.repeat(np.arange(CTAS, dtype=np.int64), 64)
    offsets = rng.integers(0, BYTES // size, threads) * size
    if case == "some outside":
        offsets[rng.random(threads) < 0.2] = BYTES + 64
        offsets[rng.random(threads) < 0.1] = -size
    if case == "misaligned":
        offsets = rng.integers(0, BYTES - size, threads)
    lanes = rng.random(threads) < 0.5
    if case == "junk where not running":      # an address register a guard skipped: odd, or outside the CTA
        offsets = np.where(lanes, offsets, rng.integers(-3 * BYTES, 3 * BYTES, threads) | 1)
    values, bits = contents.load(cta_index, offsets, size, lanes)
    fast_values, fast_bits = contents.load_lanes(cta_index * BYTES, offsets, size, lanes)
    fast_bits = np.broadcast_to(fast_bits, (threads,))
    assert (fast_values[lanes] == values[lanes]).all()
    assert (fast_bits[lanes] == bits[lanes]).all()


def test_gather_folds_a_uniform_taint_to_one_scalar():
    rng = np.random.default_rng(1)
    contents = filled_contents(rng, np.full(CTAS * BYTES // 4, taint.CTA))
    start = rng.integers(0, CTAS * BYTES // 4, 500) * 4
    values, bits = gather(contents.data, contents.taint, start, 4)
    one_values, one_bits = gather(contents.data, contents.taint, start, 4, one_taint=True)
    assert np.ndim(one_bits) == 0 and (bits == one_bits).all() and (values == one_values).all()
    mixed = filled_contents(rng, rng.choice([taint.ZERO, taint.CTA], CTAS * BYTES // 4))
    _, mixed_bits = gather(mixed.data, mixed.taint, start, 4, one_taint=True)
    assert (mixed_bits == gather(mixed.data, mixed.taint, start, 4)[1]).all()


def state() -> ThreadState:
    return ThreadState(np.arange(2), (48, 1, 1), (2, 1, 1), 32, (0, 0))


def test_a_uniform_taint_is_kept_as_one_scalar_and_reads_as_the_general_write():
    rng = np.random.default_rng(2)
    m = state()
    mask = rng.random(m.size) < 0.5
    m.write("R1", np.arange(m.size, dtype=np.uint64), taint.THREAD, None)
    assert np.ndim(m.taints["R1"]) == 0
    m.write("R1", np.uint64(7), taint.THREAD, mask)           # the same taint under a mask: still one scalar
    assert np.ndim(m.taints["R1"]) == 0
    m.write("R1", np.uint64(9), taint.LOADED, mask)           # another taint in some threads: per thread
    value, bits = m.read("R1")
    expected = np.where(mask, np.uint64(9), np.where(mask, np.uint64(7), np.arange(m.size, dtype=np.uint64)))
    assert (value == expected).all()
    assert (np.broadcast_to(bits, (m.size,)) == np.where(mask, taint.LOADED, taint.THREAD)).all()
    m.write("R2", value, np.full(m.size, taint.CTA), None)     # a per-thread taint that is uniform
    assert np.ndim(m.taints["R2"]) == 0 and m.taints["R2"] == taint.CTA


def test_select_is_np_where():
    rng = np.random.default_rng(3)
    mask = rng.random(100) < 0.5
    a, b = rng.integers(0, 2**64, 100, dtype=np.uint64), rng.integers(0, 2**64, 100, dtype=np.uint64)
    for new, old in ((a, b), (a, np.uint64(5)), (np.uint64(7), b), (np.uint64(7), np.uint64(5))):
        assert np.array_equal(select(mask, new, old), np.where(mask, new, old))
    assert select(np.bool_(False), np.uint64(7), np.uint64(5)) == 5
    signed = rng.integers(-9, 9, 100)             # another dtype: np.where's own promotion
    assert np.array_equal(select(mask, signed, b), np.where(mask, signed, b))
    assert not np.shares_memory(select(mask, a, b), a) and not np.shares_memory(select(mask, a, b), b)


def test_signed32_of_an_array_is_the_low_word_as_a_signed_number():
    values = np.array([0, 1, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF, 0x1_2345_6789, 0xFFFF_FFFF_8000_0000],
                      dtype=np.uint64)
    expected = [v - (1 << 32) if v & 0x8000_0000 else v for v in (int(x) & 0xFFFF_FFFF for x in values)]
    assert signed32(values).tolist() == expected
    assert [int(signed32(v)) for v in values] == expected       # the scalar path


def test_of_logic_with_one_taint_per_side_equals_the_per_lane_rule():
    rng = np.random.default_rng(4)
    choices = [taint.ZERO, taint.THREAD, taint.CTA | taint.THREAD, taint.LOADED, taint.LOADED | taint.THREAD]
    for _ in range(300):
        operation = ("and", "or")[rng.integers(2)]
        is_or = operation == "or"
        x_bits, y_bits = (np.uint64(rng.choice(choices)) for _ in range(2))
        x = rng.integers(0, 2, 64).astype(np.uint64) if rng.integers(2) else np.uint64(rng.integers(2))
        y = rng.integers(0, 2, 64).astype(np.uint64) if rng.integers(2) else np.uint64(rng.integers(2))
        x_true, y_true = ((np.broadcast_to(v, (64,)) & np.uint64(1)) == 1 for v in (x, y))
        x_decides = (x_true if is_or else ~x_true) & ((x_bits & taint.UNKNOWN) == 0)
        y_decides = (y_true if is_or else ~y_true) & ((y_bits & taint.UNKNOWN) == 0)
        expected = np.where(x_decides, x_bits, np.where(y_decides, y_bits, x_bits | y_bits))
        assert (np.broadcast_to(taint.of_logic(operation, x, x_bits, y, y_bits), (64,)) == expected).all()


def test_a_guarded_write_keeps_one_taint_where_with_guard_gives_the_skipped_threads_the_same():
    """Under a guard whose taint is one value (simt.with_guard), a write whose new taint is the old one with the
    guard's taint added stays one scalar: with_guard gives the threads the guard skips that taint too."""
    rng = np.random.default_rng(5)
    m = state()
    m.write("R1", np.arange(m.size, dtype=np.uint64), taint.THREAD, None)
    holds = rng.random(m.size) < 0.5
    m.guard_taint, m.guard_keys, m.guard_holds = taint.CTA, ("R1",), holds
    m.write("R1", np.uint64(9), taint.THREAD, holds)
    assert np.ndim(m.taints["R1"]) == 0 and m.taints["R1"] == taint.THREAD | taint.CTA
    m.write("R1", np.uint64(3), taint.LOADED, rng.random(m.size) < 0.5)     # another mask: per thread
    assert np.ndim(m.taints["R1"]) == 1
    m.guard_keys, m.guard_taint = (), taint.ZERO
    m.write("R2", np.uint64(1), taint.ZERO, None)
    m.guard_keys, m.guard_taint = ("R1",), taint.CTA
    m.write("R2", np.uint64(2), taint.ZERO, holds)                            # not a guarded destination
    assert (np.broadcast_to(m.taints["R2"], (m.size,)) == np.where(holds, taint.CTA, taint.ZERO)).all()
