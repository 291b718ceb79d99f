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
from hypothesis import given, settings, strategies as st

from traceconf.emulate import taint
from traceconf.emulate.contents import SharedContents, gather, scatter
from traceconf.emulate.speculation import SpeculationFailed, check_inside
from traceconf.emulate.state import ThreadState, extent, select
from traceconf.sass.operands import signed32

CTAS, BYTES = 3, 256
#: A byte's taint after colliding stores of different values (unknown).
_UNSET_BYTE = np.uint8(taint.UNMODELLED)


def filled_contents(rng: np.random.Generator, taints: np.ndarray) -> SharedContents:
    """Shared memory of CTAS CTAs with random words, stored with ``taints`` (one per 4-byte word)."""
    contents = SharedContents(CTAS, BYTES)
    start = np.arange(0, CTAS * BYTES, 4, dtype=np.int64)
    scatter(contents.data, contents.taint, start, 4, rng.integers(0, 2**32, len(start), dtype=np.uint64), taints)
    return contents


def offsets_of(rng, layout: str, size: int, threads: int) -> np.ndarray:
    """Per thread, a byte offset of a ``size``-byte access in a CTA's ``BYTES``: aligned anywhere, or laid out as
    ``layout`` says ("collisions": four places; "some outside": a fifth past the end; "misaligned")."""
    if layout == "collisions":
        return rng.integers(0, 4, threads) * size
    if layout == "misaligned":
        return rng.integers(0, BYTES - size, threads) | (1 if size > 1 else 0)
    offsets = rng.integers(0, BYTES // size, threads) * size
    if layout == "some outside":
        offsets[rng.random(threads) < 0.2] = BYTES + 64
    return offsets


def deciding_taint(is_or: bool, x, x_bits, y, y_bits) -> np.ndarray:
    """The taint of ``x or y`` / ``x and y`` per lane, written out: a known side that decides the result alone
    (true for or, false for and) gives its taint, else both sides' (the definition taint.of_logic follows)."""
    x_true, y_true = ((np.broadcast_to(v, (64,)) & np.uint64(1)) == 1 for v in (x, y))
    x_decides = (x_true if is_or else ~x_true) & ((x_bits & taint.UNKNOWN) == 0)
    y_decides = (y_true if is_or else ~y_true) & ((y_bits & taint.UNKNOWN) == 0)
    return np.where(x_decides, x_bits, np.where(y_decides, y_bits, x_bits | y_bits))


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
        expected = deciding_taint(is_or, x, x_bits, y, y_bits)
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


def _copy(contents: SharedContents) -> SharedContents:
    twin = SharedContents(CTAS, BYTES)
    twin.data[:], twin.taint[:] = contents.data, contents.taint
    return twin


@pytest.mark.parametrize("size", [1, 2, 4, 8])
@pytest.mark.parametrize("case", ["inside", "some outside", "misaligned", "junk where not running", "collisions"])
def test_word_index_accesses_equal_load_and_store(size, case):
    """``SharedContents.word_index`` (of every thread, or of the running ones with the others at offset 0) serves
    only accesses inside and aligned, and then loads and stores what ``load`` and ``store`` do (colliding stores
    included)."""
    rng = np.random.default_rng(size * 11 + len(case))
    threads = CTAS * 64
    taints = rng.choice([taint.ZERO, taint.THREAD, taint.LOADED, taint.CTA], CTAS * BYTES // 4)
    contents = filled_contents(rng, taints)
    cta_index = np.repeat(np.arange(CTAS, dtype=np.int64), 64)
    cta_base = cta_index * BYTES
    offsets = offsets_of(rng, case, size, threads)
    lanes = rng.random(threads) < 0.5
    if case == "junk where not running":
        offsets = np.where(lanes, offsets, rng.integers(-3 * BYTES, 3 * BYTES, threads) | 1)
    values = rng.integers(0, 2**64, threads, dtype=np.uint64) & np.uint64((1 << (8 * size)) - 1)
    for bits in (np.uint64(taint.THREAD | taint.CTA_OPAQUE), rng.choice([taint.ZERO, taint.LOADED, taint.PARAMS],
                                                                        threads).astype(np.uint64)):
        word = contents.word_index(cta_base, offsets, size)
        served = case in ("inside", "collisions") or (case == "misaligned" and size == 1)     # a byte always fits
        assert (word is not None) == served
        if word is not None:
            got_values, got_bits = contents.load_words(word, size)
            every = np.ones(threads, dtype=bool)
            want_values, want_bits = contents.load(cta_index, offsets, size, every)
            assert (got_values == want_values).all() and (np.broadcast_to(got_bits, (threads,)) == want_bits).all()
            fast, general = _copy(contents), _copy(contents)
            fast.store_words(word, size, values, bits)
            general.store(cta_index, offsets, size, values, bits, every)
            assert (fast.data == general.data).all() and (fast.taint == general.taint).all()
        word = contents.word_index(cta_base, offsets * lanes, size)     # the threads not running read word 0
        assert (word is not None) == (served or case == "junk where not running")
        if word is not None:
            chosen = np.flatnonzero(lanes)
            got_values, got_bits = contents.load_words(word, size, lambda: chosen)
            want_values, want_bits = contents.load(cta_index, offsets, size, lanes)
            assert (got_values[lanes] == want_values[lanes]).all()
            assert (np.broadcast_to(got_bits, (threads,))[lanes] == want_bits[lanes]).all()
            fast, general = _copy(contents), _copy(contents)
            fast.store_words(word[chosen], size, values, bits, chosen)
            general.store(cta_index, offsets, size, values, bits, lanes)
            assert (fast.data == general.data).all() and (fast.taint == general.taint).all()


def test_one_byte_taint_is_compress_of_each():
    from traceconf.emulate.contents import compress, one_byte_taint
    rng = np.random.default_rng(6)
    choices = [taint.ZERO, taint.THREAD, taint.CTA_DECIDED, taint.CTA_OPAQUE | taint.LOADED, taint.PARAMS,
               taint.missing_param(3) | taint.CTA, taint.SHARED_WINDOW | taint.BRANCH]
    for bits in choices:
        assert one_byte_taint(np.uint64(bits)) == int(compress(np.array([bits], dtype=np.uint64))[0])
        assert int(compress(np.uint64(bits))) == one_byte_taint(np.uint64(bits))
        assert one_byte_taint(np.full(9, bits, dtype=np.uint64)) == one_byte_taint(np.uint64(bits))
    mixed = rng.choice(choices[:2], 50).astype(np.uint64)
    mixed[0], mixed[1] = choices[0], choices[1]
    assert one_byte_taint(mixed) is None


def test_of_logic_with_a_side_that_never_decides_equals_the_per_lane_rule():
    """``P0 AND PT``: a known side that decides no lane leaves the other's taint per lane (arrays included)."""
    rng = np.random.default_rng(7)
    choices = [taint.ZERO, taint.THREAD, taint.CTA | taint.THREAD, taint.LOADED, taint.LOADED | taint.THREAD]
    for _ in range(300):
        operation = ("and", "or", "xor")[rng.integers(3)]
        is_or = operation == "or"
        x_bits = rng.choice(choices, 64).astype(np.uint64) if rng.integers(2) else np.uint64(rng.choice(choices))
        y_bits = np.uint64(rng.choice(choices[:2]))
        x = rng.integers(0, 2, 64).astype(np.uint64)
        y = np.uint64(rng.integers(2))
        if rng.integers(2):
            x, x_bits, y, y_bits = y, y_bits, x, x_bits
        expected = np.broadcast_to(x_bits, (64,)) | np.broadcast_to(y_bits, (64,))
        if operation != "xor":
            expected = deciding_taint(is_or, x, x_bits, y, y_bits)
        assert (np.broadcast_to(taint.of_logic(operation, x, x_bits, y, y_bits), (64,)) == expected).all()


def test_derived_is_made_once_per_array_and_again_for_another():
    m = state()
    made = []
    first = np.arange(m.size, dtype=np.uint64)
    twice = [m.derived(first, "double", lambda a: made.append(1) or a * np.uint64(2)) for _ in range(2)]
    assert twice[0] is twice[1] and len(made) == 1
    equal = first.copy()            # equal contents, another array: made again (arrays, not values, are keys)
    assert (m.derived(equal, "double", lambda a: made.append(1) or a * np.uint64(2)) == twice[0]).all()
    assert len(made) == 2
    mask = np.arange(m.size) % 3 == 0
    plus = m.derived(first, "plus", lambda a: a + np.uint64(1), mask)
    assert m.derived(first, "plus", lambda a: a + np.uint64(5), mask) is plus
    assert (m.derived(first, "plus", lambda a: a + np.uint64(5), mask.copy()) == first + np.uint64(5)).all()
    for _ in range(40):             # the oldest entries go: a bounded cache
        m.derived(np.zeros(3), "other", lambda a: a)
    assert len(m._derived) <= 16


def test_predicate_combined_with_one_side_for_all_equals_the_combination():
    from traceconf.sass.semantics import _COMBINE, _combined
    rng = np.random.default_rng(8)
    x = rng.random(50) < 0.5
    for combine in _COMBINE.values():
        for y in (np.bool_(True), np.bool_(False), rng.random(50) < 0.5):
            got = np.broadcast_to(_combined(combine, x, y), (50,))
            assert (got == combine(x, y).astype(np.uint64)).all()


def test_read_back_of_one_taint_each_equals_the_per_lane_rule():
    from traceconf.sass.memory import _read_back, _read_back_lanes
    for content in (taint.ZERO, taint.CTA, taint.LOADED | taint.CTA_DECIDED, taint.THREAD):
        for address in (taint.ZERO, taint.CTA, taint.THREAD | taint.CTA_OPAQUE):
            one = _read_back(np.uint64(content), np.uint64(address))
            lanes = _read_back_lanes(np.full(4, content, dtype=np.uint64), np.full(4, address, dtype=np.uint64))
            assert np.ndim(one) == 0 and (np.broadcast_to(lanes, (4,)) == one).all()


class _Machine(ThreadState):
    """The parts of the emulator's machine the shared accesses of traceconf.sass.memory use."""

    def __init__(self, valid: np.ndarray):
        super().__init__(np.arange(CTAS), (64, 1, 1), (CTAS, 1, 1), 32, (0, 0))
        self.valid = valid
        self.all_valid = bool(valid.all())
        self.cta_index = np.repeat(np.arange(CTAS, dtype=np.int64), 64)

    def shared_base(self) -> np.ndarray:
        return self.cta_index * BYTES


_LAYOUTS = ["inside", "collisions", "some outside", "misaligned", "junk where not running"]


@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), size=st.sampled_from([1, 2, 4, 8]), layout=st.sampled_from(_LAYOUTS),
       running=st.sampled_from(["all", "some", "one", "padding"]), known=st.booleans())
def test_shared_accesses_of_sass_equal_the_general_load_and_store(seed, size, layout, running, known):
    """The word paths of traceconf.sass.memory's shared loads and stores (every thread's word read at once, the
    running threads' words stored) load and store what ``SharedContents.load``/``store`` do at the running threads
    (misaligned, outside, colliding, junk where not running, partly unknown taints), and the taint read is one
    scalar exactly where the running threads' taints agree."""
    from traceconf.sass.memory import _shared_load, _shared_store
    rng = np.random.default_rng(seed)
    threads = CTAS * 64
    valid = np.ones(threads, dtype=bool) if running != "padding" else np.arange(threads) % 64 < 48
    m = _Machine(valid)
    choices = [taint.ZERO] if known else [taint.ZERO, taint.THREAD, taint.LOADED, taint.CTA, taint.UNMODELLED]
    contents = filled_contents(rng, rng.choice(choices, CTAS * BYTES // 4))
    offsets = offsets_of(rng, layout, size, threads)
    lanes = {"all": valid, "padding": valid, "some": valid & (rng.random(threads) < 0.5),
             "one": np.arange(threads) == rng.integers(threads)}[running]
    if layout == "junk where not running":
        offsets = np.where(lanes, offsets, rng.integers(-3 * BYTES, 3 * BYTES, threads) | 1)
    values, bits = _shared_load(m, contents, offsets, size, lanes)
    want_values, want_bits = contents.load(m.cta_index, offsets, size, lanes)
    assert (values[lanes] == want_values[lanes]).all()
    assert (np.broadcast_to(bits, (threads,))[lanes] == want_bits[lanes]).all()
    running_inside = contents.word_index(m.shared_base(), offsets * lanes, size) is not None
    if len(np.unique(want_bits[lanes])) == 1 and running_inside:
        assert np.ndim(bits) == 0       # one taint, as the words of the running threads alone give it
    stored = rng.integers(0, 2**64, threads, dtype=np.uint64)
    for stored_bits in (np.uint64(taint.THREAD | taint.CTA_OPAQUE),
                        rng.choice([taint.ZERO, taint.LOADED, taint.PARAMS], threads).astype(np.uint64)):
        fast, general = _copy(contents), _copy(contents)
        _shared_store(m, fast, offsets, size, stored, stored_bits, lanes)
        general.store(m.cta_index, offsets, size, stored, stored_bits, lanes)
        assert (fast.data == general.data).all() and (fast.taint == general.taint).all()


@pytest.mark.parametrize("max_steps", [1000, 1001])
def test_pcs_left_by_a_run_stopped_mid_way_are_where_the_threads_are(monkeypatch, max_steps):
    """While every thread runs together the machine does not write the pcs per step (Machine.run): stopped by the
    step limit after a step that ran them all (an odd limit: after the store), the pcs are still where the
    threads are, the next instruction."""
    from test_emulate_support import kernel_module, run
    from traceconf.emulate.simt import Machine
    from traceconf.errors import InputError
    machines = []
    original = Machine.run

    def recorded(self):
        machines.append(self)
        return original(self)
    monkeypatch.setattr(Machine, "run", recorded)
    module = kernel_module("""
    SPIN:
        st.shared.u32 [buf], 1;
        bra.uni SPIN;""", shared=".shared .align 4 .b8 buf[4];\n")
    with pytest.raises(InputError, match="max_steps"):
        run(module, max_steps=max_steps)
    machine = machines[-1]
    at = np.unique(machine.pc[machine.valid])
    assert len(at) == 1
    assert machine.compiled[int(at[0])].control == (machine.steps % 2 == 1)   # the branch follows the store


@pytest.mark.parametrize("running", ["all", "some"])
def test_an_lds_run_by_every_thread_writes_its_register_as_the_masked_write_does(running):
    """An ``LDS`` every thread runs writes its destination without a mask (one taint stays one scalar); under a
    mask the other threads keep what the register held.  Both read what ``SharedContents.load`` gives."""
    from traceconf.sass.memory import _contents_semantics, _read_back
    from traceconf.sass.opcodes import shared_op
    from traceconf.sass.operands import parse_operand
    rng = np.random.default_rng(9)
    threads = CTAS * 64
    m = _Machine(np.ones(threads, dtype=bool))
    contents = filled_contents(rng, np.full(CTAS * BYTES // 4, taint.ZERO))
    m.shared_contents = lambda: contents
    ops = [parse_operand("R5"), parse_operand("[R4]")]
    load = _contents_semantics(shared_op("LDS"), "LDS", ops, 1, None, None)
    old = rng.integers(0, 2**32, threads, dtype=np.uint64)
    m.write("R5", old, np.uint64(taint.LOADED), None)
    lanes = m.valid if running == "all" else rng.random(threads) < 0.5
    offsets = rng.integers(0, BYTES // 4, threads) * 4
    address_bits = np.uint64(taint.THREAD)
    load(m, None if running == "all" else lanes, lanes, offsets, m.spread(address_bits))
    want, want_bits = contents.load(m.cta_index, offsets, 4, lanes)
    value, bits = m.read("R5")
    assert (value == np.where(lanes, want, old)).all()
    expected_bits = np.where(lanes, _read_back(want_bits, address_bits), taint.LOADED)
    assert (np.broadcast_to(bits, (threads,)) == expected_bits).all()
    assert np.ndim(bits) == 0 or running == "some"


class _Rows(ThreadState):
    """A batch's thread state with the machine's address rows (simt.Machine._address_rows)."""

    from traceconf.emulate.simt import Machine
    _address_rows, _alike_in_every_cta, _warp_rows = Machine._address_rows, Machine._alike_in_every_cta, \
        Machine._warp_rows

    def __init__(self, ctas: int):
        super().__init__(np.arange(ctas), (64, 1, 1), (ctas, 1, 1), 32, (0, 0))


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), ctas=st.sampled_from([1, 2, 5]),
       offsets=st.sampled_from(["alike", "alike where accessing", "differ in one thread", "negative", "minus one"]),
       running=st.sampled_from(["all", "some", "none in a warp", "one"]), twice=st.booleans())
def test_address_rows_give_each_warp_its_addresses(seed, ctas, offsets, running, twice):
    """The rows a batch logs (one per warp of a CTA where every CTA accessing has the same address in each thread,
    else one per warp) give every warp the addresses of the general way, ``offsets | (lanes - 1)`` per warp: with
    the same offsets array met again (its look at the CTAs remembered), junk where not accessing, CTAs that differ
    in one thread, negative offsets and -1 (which is "no access" in a row)."""
    rng = np.random.default_rng(seed)
    m = _Rows(ctas)
    per_cta = m.padded
    lanes = {"all": None, "some": rng.random(m.size) < 0.5, "one": np.arange(m.size) == rng.integers(m.size),
             "none in a warp": (rng.random(m.size) < 0.7) & (np.arange(m.size) // 32 % 2 == 0)}[running]
    first = rng.integers(0, 1 << 12, per_cta) * 4
    at = np.tile(first, ctas)
    if offsets == "alike where accessing" and lanes is not None:
        at = np.where(lanes, at, rng.integers(-(1 << 40), 1 << 40, m.size))
    elif offsets == "differ in one thread":
        at[rng.integers(per_cta, m.size) if ctas > 1 else 0] += 4
    elif offsets == "negative":
        at[rng.integers(m.size)] = -8
    elif offsets == "minus one":
        at[rng.integers(m.size)] = -1
    accessing = np.ones(m.size, dtype=bool) if lanes is None else lanes
    warps = np.flatnonzero(accessing.reshape(-1, 32).any(axis=1))
    want = (at | (accessing.astype(np.int64) - 1)).reshape(-1, 32)[warps]
    for _ in range(1 + twice):
        patterns, index = m._address_rows(at, warps, lanes)
        got = patterns[index] | (accessing.reshape(-1, 32)[warps].astype(np.int64) - 1)
        assert np.array_equal(got, want)


@pytest.mark.parametrize("order", ["rising", "falling", "rising with a repeat"])
def test_a_store_to_rising_words_is_the_store_that_checks_for_collisions(order):
    """Stores to strictly rising words skip the look back for colliding lanes (none can collide): what they leave
    equals the general store's, and where a word repeats the look back still makes it unknown."""
    rng = np.random.default_rng(len(order))
    threads = CTAS * 64
    contents = filled_contents(rng, np.full(CTAS * BYTES // 4, taint.ZERO))
    cta_index = np.repeat(np.arange(CTAS, dtype=np.int64), 64)
    offsets = np.tile(np.sort(rng.choice(BYTES // 4, 64, replace=False)) * 4, CTAS)
    if order == "falling":
        offsets = offsets[::-1].copy()
    if order == "rising with a repeat":
        offsets[10] = offsets[9]
    values = rng.integers(0, 2**32, threads, dtype=np.uint64)
    fast, general = _copy(contents), _copy(contents)
    fast.store_words(contents.word_index(cta_index * BYTES, offsets, 4), 4, values, np.uint64(taint.THREAD))
    general.store(cta_index, offsets, 4, values, np.uint64(taint.THREAD), np.ones(threads, dtype=bool))
    assert (fast.data == general.data).all() and (fast.taint == general.taint).all()
    assert ((fast.taint == _UNSET_BYTE).any()) == (order == "rising with a repeat")


@pytest.mark.parametrize("kind", ["LDS", "STS"])
@pytest.mark.parametrize("elsewhere", [taint.CTA | taint.THREAD, taint.THREAD])
def test_a_running_address_taint_for_all_threads_loads_and_stores_what_the_per_thread_one_does(kind, elsewhere):
    """A shared load or store reads its address taint for the CTA dependence of the running threads alone: one
    taint for every thread where none of them depends on the CTA (``sass.memory._running_taint``) loads and stores
    what the per-thread taint does, whatever the threads not running hold (a register a guard skipped)."""
    from traceconf.sass.memory import _contents_semantics, _running_taint
    from traceconf.sass.opcodes import shared_op
    from traceconf.sass.operands import parse_operand
    rng = np.random.default_rng(11)
    threads = CTAS * 64
    lanes = rng.random(threads) < 0.5
    offsets = rng.integers(0, BYTES // 4, threads) * 4
    bits = np.where(lanes, rng.choice([taint.ZERO, taint.THREAD], threads), elsewhere).astype(np.uint64)
    running = int(np.bitwise_or.reduce(bits[lanes]))
    ops = [parse_operand("R5"), parse_operand("[R4]")] if kind == "LDS" else [parse_operand("[R4]"),
                                                                              parse_operand("R5")]
    stored = rng.choice([taint.ZERO, taint.LOADED], CTAS * BYTES // 4)
    outcomes = []
    for address_bits in (bits, _running_taint(_Machine(np.ones(threads, dtype=bool)), bits, running)):
        m = _Machine(np.ones(threads, dtype=bool))
        contents = filled_contents(np.random.default_rng(3), stored)
        m.shared_contents = lambda: contents
        m.write("R5", np.arange(threads, dtype=np.uint64), np.uint64(taint.THREAD), None)
        access = _contents_semantics(shared_op(kind), kind, ops, 1 if kind == "LDS" else 0, None, None)
        access(m, lanes, lanes, offsets, address_bits)
        value, value_bits = m.read("R5")
        outcomes.append((value.copy(), np.broadcast_to(value_bits, (threads,)).copy(), contents.data.copy(),
                         contents.taint.copy()))
    assert np.ndim(_running_taint(_Machine(np.ones(threads, dtype=bool)), bits, running)) == 1
    for got, want in zip(*outcomes):
        assert np.array_equal(got, want)


@pytest.mark.parametrize("combine", ["AND", "OR", "XOR"])
@pytest.mark.parametrize("shape", ["array", "scalar"])
def test_an_isetp_predicate_written_without_its_bit_mask_is_what_the_general_writer_writes(combine, shape):
    """ISETP writes :func:`_combined`'s values (0 or 1) through :func:`_bit_writer`, which skips the general
    predicate writer's ``& 1``: the same register, value and taint, on random predicates, guards and old values."""
    from traceconf.sass.operands import parse_operand, writer
    from traceconf.sass.semantics import _COMBINE, _bit_writer, _combined

    rng = np.random.default_rng(len(combine) * 3 + len(shape))
    dest = parse_operand("P3")
    for _ in range(20):
        general, fast = state(), state()
        old = rng.integers(0, 2, general.size, dtype=np.uint64)
        for m in (general, fast):
            m.write("P3", old, taint.ZERO, None)
        x = rng.random(general.size) < 0.5
        y = x[0] if shape == "scalar" else rng.random(general.size) < 0.5
        value = _combined(_COMBINE[combine], ~x if rng.random() < 0.5 else x, y)
        assert np.array_equal(np.asarray(value) & np.uint64(1), value) and np.asarray(value).dtype == np.uint64
        mask = None if rng.random() < 0.3 else rng.random(general.size) < 0.5
        bits = np.uint64(taint.THREAD) if rng.random() < 0.5 else rng.integers(0, 4, general.size, dtype=np.uint64)
        writer(dest)(general, value, bits, mask)
        _bit_writer(dest)(fast, value, bits, mask)
        assert np.array_equal(general.full(general.regs["P3"]), fast.full(fast.regs["P3"]))
        assert np.array_equal(general.full(general.taints["P3"]), fast.full(fast.taints["P3"]))


@pytest.mark.parametrize("base", [0, 1024])
def test_shared_offsets_computed_in_place_are_the_window_offsets_written_out(base):
    """:func:`traceconf.sass.memory.shared_offsets` against its definition on random window addresses (the
    reserved part, high words and the value left alone included)."""
    from traceconf.sass.memory import shared_offsets

    rng = np.random.default_rng(base)
    value = rng.integers(0, 2**64, 4096, dtype=np.uint64, endpoint=False)
    value[::3] = rng.integers(0, 2 * max(base, 64), len(value[::3]), dtype=np.uint64)
    before = value.copy()
    low = (value & np.uint64(0xFFFF_FFFF)).astype(np.int64)
    expected = np.where(low >= base, low - base, low)
    assert np.array_equal(shared_offsets(value, np.uint64(base)), expected)
    assert np.array_equal(value, before)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([1, 2, 4, 8]), st.sampled_from(["inside", "some outside",
                                                                                  "misaligned", "collisions"]))
def test_an_extent_remembered_per_array_gives_the_checks_what_they_compute_themselves(seed, size, layout):
    """``ThreadState.extent`` is the array's smallest and largest element, made once per array; the region check
    and the word view given it decide as they do computing it themselves (a thread not running anywhere)."""
    rng = np.random.default_rng(seed)
    m = state()
    offsets = offsets_of(rng, layout, size, m.size).astype(np.int64)
    lanes = rng.random(m.size) < 0.6
    offsets[~lanes] = rng.integers(-2 * BYTES, 2 * BYTES, m.size)[~lanes]
    made = []
    remembered = lambda values: m.derived(values, "counted extent", lambda v: made.append(1) or extent(v))
    assert m.extent(offsets) == (int(offsets.min()), int(offsets.max())) and m.extent(offsets) is m.extent(offsets)
    contents = SharedContents(m.size // 64, BYTES)
    cta_base = np.repeat(np.arange(m.size // 64, dtype=np.int64), 64) * BYTES
    for low, high in [(0, BYTES), tuple(sorted(rng.integers(-BYTES, 2 * BYTES, 2)))]:
        for running in (lambda: None, lambda: np.flatnonzero(lanes)):
            outcomes = []
            for extent_of in (extent, remembered):
                try:
                    check_inside((int(low), int(high)), offsets, size, running, extent_of)
                    outcomes.append("inside")
                except SpeculationFailed:
                    outcomes.append("failed")
            assert outcomes[0] == outcomes[1]
    assert len(made) == 1
    for at in (offsets, offsets * lanes):
        plain, given_extent = contents.word_index(cta_base, at, size), contents.word_index(cta_base, at, size,
                                                                                             m.extent)
        assert (plain is None and given_extent is None) or (plain == given_extent).all()


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), ctas=st.sampled_from([1, 3]), density=st.sampled_from([0.0, 0.02, 0.5, 1.0]))
def test_warp_rows_of_a_mask_met_again_are_its_warps_and_their_lane_bits(seed, ctas, density):
    """The warps an access under ``lanes`` logs and their lane masks (made once per mask array: a guard's mask
    serves several accesses) are those with a lane set and the sum of ``1 << lane`` over their lanes."""
    rng = np.random.default_rng(seed)
    m = _Rows(ctas)
    lanes = rng.random(m.size) < density
    by_warp = lanes.reshape(-1, 32)
    want_rows = np.flatnonzero(by_warp.any(axis=1))
    want_masks = (by_warp[want_rows].astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(axis=1,
                                                                                                dtype=np.uint64)
    for _ in range(2):
        rows, masks = m.derived(lanes, "warp rows", m._warp_rows)
        assert np.array_equal(rows, want_rows) and np.array_equal(masks, want_masks)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_class_codes_made_in_int32_are_the_parts_widened_first(seed):
    """engine._class_codes, made in int32 in place, equals the classes' parts each widened to int64 and shifted,
    over the whole range of their dtypes (int8 operation, kind and matrices, int16 bytes)."""
    from types import SimpleNamespace

    from traceconf.engine import _class_codes
    rng = np.random.default_rng(seed)
    n = 1000
    parts = SimpleNamespace(op=rng.integers(-128, 128, n).astype(np.int8), kind=rng.integers(0, 128, n).astype(np.int8),
                            bytes=rng.integers(0, 2**15, n).astype(np.int16),
                            matrices=rng.integers(0, 128, n).astype(np.int8))
    want = ((parts.op.astype(np.int64) << 24) | (parts.kind.astype(np.int64) << 16)
            | (parts.bytes.astype(np.int64) << 8) | parts.matrices.astype(np.int64))
    got = _class_codes(parts)
    assert got.dtype == np.int64 and np.array_equal(got, want)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([1, 2, 3]))
def test_assembled_executions_are_each_log_entry_looked_up_on_its_own(seed, machines):
    """grid.assemble looks each machine's warps up at once and offsets the entries' pattern indices in one pass:
    every execution gets the CTA, warp and address row that looking up each log entry on its own gives (a machine
    with nothing logged among them)."""
    from types import SimpleNamespace

    from traceconf.emulate.grid import assemble
    rng = np.random.default_rng(seed)
    logs = []
    for number in range(machines):
        warps = int(rng.integers(2, 20))
        machine = SimpleNamespace(cta_of_warp=rng.integers(0, 1000, warps), warp_of_warp=rng.integers(0, 16, warps),
                                  log=[])
        for _ in range(0 if number == 1 else int(rng.integers(1, 6))):
            rows = np.flatnonzero(rng.random(warps) < 0.6)
            patterns = rng.integers(-1, 4096, (int(rng.integers(1, 4)), 32))
            machine.log.append((rows, int(rng.integers(0, 50)), 1, 4, 0, patterns,
                                rng.integers(0, len(patterns), len(rows)), rng.integers(1, 2**32, len(rows)), 0,
                                None, None))
        logs.append(machine)
    parts = [(machine, entry) for machine in logs for entry in machine.log]
    acc = assemble("k", logs, 32)
    assert np.array_equal(acc.cta, np.concatenate([m.cta_of_warp[e[0]] for m, e in parts]))
    assert np.array_equal(acc.warp, np.concatenate([m.warp_of_warp[e[0]] for m, e in parts]))
    want_rows = np.concatenate([e[5][e[6]] for _, e in parts])
    assert np.array_equal(acc.patterns.rows[acc.patterns.index], want_rows)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans(), st.sampled_from([0.0, 0.3, 1.0]))
def test_the_guard_taint_where_skipped_ored_in_is_the_select_of_the_skipped_threads(seed, scalar, density):
    """with_guard's destinations take the guard's taint where it skips: ``written | taint_where_skipped`` is
    ``select(~holds, written | bits, written)``, for a taint per thread or one for all, the mask met before or not."""
    from traceconf.emulate.simt import taint_where_skipped
    rng = np.random.default_rng(seed)
    m = state()
    holds = rng.random(m.size) < density
    if rng.random() < 0.5:
        m.lane_ones(holds)              # the mask's lanes already made (its writes)
    written = np.uint64(rng.integers(0, 2**20)) if scalar else rng.integers(0, 2**20, m.size).astype(np.uint64)
    bits = np.uint64(rng.integers(1, 2**20))
    want = select(~holds, written | bits, written)
    assert np.array_equal(np.broadcast_to(written | taint_where_skipped(m, holds, bits), (m.size,)), want)
    assert np.array_equal(written | taint_where_skipped(m, np.bool_(False), bits), select(np.bool_(True),
                                                                                          written | bits, written))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["array", "scalar", "spread"]),
       st.sampled_from(["array", "scalar", "spread"]))
def test_the_low_word_of_a_sum_made_in_place_is_the_sum_masked(seed, made_shape, addend_shape):
    """IMAD's and LEA's low word, summed and masked in place on the product just made, is ``(made + addend) &
    M32`` for arrays, scalars and spread (read-only) addends, the addend left as it was."""
    from traceconf.sass.semantics import _low_word_of_sum
    rng = np.random.default_rng(seed)

    def operand(shape):
        value = rng.integers(0, 2**64, 64, dtype=np.uint64)
        return value[0] if shape == "scalar" else np.broadcast_to(value[:1], (64,)) if shape == "spread" else value
    a, b, addend = operand(made_shape), np.uint64(rng.integers(0, 2**32)), operand(addend_shape)
    kept = np.array(addend, copy=True)
    with np.errstate(over="ignore"):           # (wrapping is the point: a scalar product warns)
        want = (a * b + np.asarray(addend, dtype=np.uint64)) & np.uint64(0xFFFF_FFFF)
        got = _low_word_of_sum(np.asarray(a) * np.asarray(b), addend)
    assert np.array_equal(np.broadcast_to(got, (64,)), np.broadcast_to(want, (64,)))
    assert np.array_equal(addend, kept)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans(), st.sampled_from(["array", "scalar"]),
       st.sampled_from(["array", "scalar"]))
def test_compared_words_in_four_bytes_compare_as_the_widened_words(seed, unsigned, x_shape, y_shape):
    """ISETP reads its operands' low words as 4-byte integers: every compare gives what the 64-bit widened words
    (``& M32``, or signed32) give, sign boundaries and equal words included."""
    from traceconf.sass.semantics import _compared_word
    rng = np.random.default_rng(seed)
    edges = np.array([0, 1, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 + 2**31], dtype=np.uint64)
    values = [np.concatenate([edges, rng.integers(0, 2**64, 57, dtype=np.uint64)]) for _ in range(2)]
    values[1][:20] = values[0][:20] + np.uint64(2**32) * np.uint64(rng.integers(0, 3))      # equal low words
    x, y = (v[int(rng.integers(64))] if shape == "scalar" else v for v, shape in zip(values, (x_shape, y_shape)))
    wide = (lambda v: np.asarray(v, dtype=np.uint64) & np.uint64(0xFFFF_FFFF)) if unsigned else signed32
    for compare in (np.less, np.less_equal, np.greater, np.greater_equal, np.equal, np.not_equal):
        assert np.array_equal(compare(_compared_word(x, unsigned), _compared_word(y, unsigned)),
                              compare(wide(x), wide(y)))


@pytest.mark.parametrize("running, declared", [(20, 16), (16, 64), (32, 128), (32, 64), (5, 16)])
def test_the_extent_noted_is_that_of_the_running_threads_whatever_the_others_hold(running, declared):
    """record_access notes how far the accesses reach past the declared bytes only from the threads that access
    (the others' offsets, larger, reach nothing), and skips the look where every offset lies within them."""
    from test_emulate_support import kernel_module, run
    module = kernel_module(f"""
        mov.u32 %r1, %tid.x;
        shl.b32 %r2, %r1, 2;
        setp.lt.u32 %p1, %r1, {running};
        @%p1 st.shared.u32 [%r2], 0;
        ret;""", shared=f".shared .align 4 .b8 pad[{declared}];\n")
    notes = [note for note in run(module, grid=(3, 1, 1)).notes if "reach" in note]
    reach = 4 * running
    assert notes == ([f"accesses reach shared byte {reach} but the kernel's shared memory is {declared} bytes "
                      f"(PTX line 16)"] if reach > declared else [])


@pytest.mark.parametrize("size", [1, 2, 4, 8])
def test_words_known_inside_gather_what_the_checked_gather_does(size):
    """_packed with ``inside`` (take's "wrap" mode, no bounds check) gives the checked gather's values and taints
    for indices inside the word view, the first and last word included; unchecked indices past it still raise."""
    from traceconf.emulate.contents import _packed
    rng = np.random.default_rng(size)
    contents = filled_contents(rng, rng.choice([taint.ZERO, taint.THREAD, taint.LOADED], CTAS * BYTES // 4))
    words = CTAS * BYTES // size
    word = np.concatenate([[0, words - 1], rng.integers(0, words, 500)]).astype(np.int64)
    checked, known = (_packed(contents.data, contents.taint, word, size, inside) for inside in (False, True))
    assert all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(checked, known))
    with pytest.raises(IndexError):
        _packed(contents.data, contents.taint, np.array([words]), size)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans(), st.sampled_from(["array", "scalar", "spread"]))
def test_predicate_is_the_bit_compared_the_wide_way(seed, want, shape):
    """predicate_is (bit 0 narrowed to bytes, viewed as bools) is ``(value & 1) == want`` for arrays, scalars and
    spread views, whatever the other bits hold."""
    from traceconf.sass.operands import predicate_is
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 2**64, 64, dtype=np.uint64)
    value = values[0] if shape == "scalar" else np.broadcast_to(values[:1], (64,)) if shape == "spread" else values
    want_lanes = (np.asarray(value, dtype=np.uint64) & np.uint64(1)) == np.uint64(want)
    got = predicate_is(value, want)
    assert np.asarray(got).dtype == np.bool_ and np.array_equal(got, want_lanes)
