"""Where the CTA-class search splits a box: at the CTAs where a decision changes, read off the corners.

The split only chooses which corners run next (every box is still proved by its corners), so these tests
check that the cuts are where the decisions change, and that a search over decisions made by affine functions
of the CTA index ends with boxes whose CTAs all decide alike, after fewer corners than bisection.  The checks
around each step answer alike whether a taint is held as one value for every thread or per thread.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from traceconf.accesses import WarpAccesses
from traceconf.emulate import classes, taint
from traceconf.emulate.classes import Box, CtaRun, Watch, boundaries, partition

PADDED = 4                       # threads per CTA in these watches


def _decisions(functions, ctas):
    """A watch over ``ctas`` (1-D coordinates) whose every thread decides on each of ``functions`` in turn
    (``f(cta, thread)``, exact integers) until the first one that is not negative (a loop's exit test)."""
    watch = Watch([], len(ctas), PADDED)
    threads = np.repeat(np.asarray(ctas, dtype=np.float64), PADDED), np.tile(np.arange(PADDED), len(ctas))
    deciding = np.ones(len(ctas) * PADDED, dtype=bool)
    for number, function in enumerate(functions):
        values = function(*threads).astype(np.float64)
        rows = deciding.reshape(len(ctas), PADDED).any(axis=1)
        watch.decide(number, np.repeat(rows, PADDED), values)
        deciding = np.repeat(rows & (values.reshape(len(ctas), PADDED) < 0).all(axis=1), PADDED)
    return watch


def _runs(functions, corners):
    watch = _decisions(functions, [corner[0] for corner in corners])
    return {corner: CtaRun(watch.signature(i), WarpAccesses.empty("k"), {}, watch.decisions(i))
            for i, corner in enumerate(corners)}


def _cuts(function, span):
    runs = _runs([function], [(0, 0, 0), (span, 0, 0)])
    return boundaries(runs[(0, 0, 0)].decisions, runs[(span, 0, 0)].decisions, span)


def test_a_sign_change_between_two_ctas_cuts_at_the_first_cta_past_it():
    assert _cuts(lambda cta, thread: 2 * cta - 5 + 0 * thread, 10) == [3]         # -1 at 2, +1 at 3


def test_a_decision_landing_on_zero_cuts_before_and_after_that_cta():
    assert _cuts(lambda cta, thread: 2 * cta - 4 + 0 * thread, 10) == [2, 3]      # -, 0 at 2, +


def test_threads_crossing_at_different_ctas_give_each_cut():
    assert _cuts(lambda cta, thread: 4 * cta - 9 + thread, 10) == [2, 3]          # thread 1 lands on 0 at 2


def test_no_cut_where_the_decisions_agree_or_are_not_affine_between_the_corners():
    assert _cuts(lambda cta, thread: cta + 1 + thread, 10) == []                  # positive throughout
    assert _cuts(lambda cta, thread: cta * 3 // 2 - 5 + 0 * thread, 9) == []      # -5 to 8: not 9 equal steps


def test_split_makes_boxes_that_cover_the_box_once():
    box = Box((3, 0, 0), (20, 1, 0))
    assert [b.describe() for b in box.split(0, [5, 6, 17])] == ["3–4 × 0–1 × 0", "5 × 0–1 × 0", "6–16 × 0–1 × 0",
                                                               "17–20 × 0–1 × 0"]
    assert [b.describe() for b in box.split(1)] == ["3–20 × 0 × 0", "3–20 × 1 × 0"]


def _search(functions, ctas):
    emulated = []

    def run(corners):
        emulated.extend(corners)
        return _runs(functions, corners)
    proved = []
    result = partition((ctas, 1, 1), run, 128, budget=10 ** 6, accept=lambda box, run: proved.append(box),
                       batch_ctas=8)
    assert not result.left and sum(box.size for box in proved) == ctas
    return proved, emulated


def test_a_grid_stride_loop_splits_where_the_trip_count_changes():
    # the tutorial softmax's loop over 1823 rows on 264 CTAs: 7 trips up to CTA 238, 6 from 239 on (at 239 the
    # last test lands on 0)
    trips = [lambda cta, thread, k=k: cta + 264 * k - 1823 + 0 * thread for k in range(8)]
    proved, emulated = _search(trips, 264)
    assert sorted(b.describe() for b in proved) == ["0–238 × 0 × 0", "239 × 0 × 0", "240–263 × 0 × 0"]
    assert sorted(c[0] for c in emulated) == [0, 238, 239, 240, 263]


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 300), st.lists(st.tuples(st.integers(-40, 40), st.integers(-500, 500), st.integers(-3, 3)),
                                     min_size=1, max_size=4))
def test_every_proved_box_decides_alike_and_costs_no_more_corners_than_bisection(ctas, lines):
    functions = [lambda cta, thread, c=c, k=k, d=d: c * cta + k + d * thread for c, k, d in lines]
    proved, emulated = _search(functions, ctas)
    everyone = _decisions(functions, range(ctas))
    for box in proved:
        assert len({everyone.signature(cta) for cta in range(box.low[0], box.high[0] + 1)}) == 1, box
    cut = len(emulated)
    original = classes.boundaries
    try:
        classes.boundaries = lambda low, high, span: []
        _, bisected = _search(functions, ctas)
    finally:
        classes.boundaries = original
    assert cut <= len(bisected) + 2 * classes.MAX_CUTS


# --------------------------------------------------------------------------- the checks' scalar-taint paths


class _Machine:
    """What a check reads of a machine: the thread count and the watch."""

    def __init__(self, size):
        self.size = size
        self.watch = Watch([], 2, size // 2)


TAINTS = [taint.ZERO, taint.CTA, taint.CTA | taint.LOADED, taint.CTA | taint.CTA_OPAQUE, taint.LOADED,
          taint.CTA_DECIDED, taint.FLOAT | taint.CTA_OPAQUE]


def _token(token):
    """A check's answer, comparable: arrays as tuples."""
    if token is None or isinstance(token, np.ndarray):
        return None if token is None else tuple(token.tolist())
    return tuple(_token(part) for part in token)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(TAINTS), st.booleans()), min_size=1, max_size=3),
       st.sampled_from([None, *TAINTS]), st.integers(0, 2 ** 32 - 1), st.sampled_from(["sum", "product", "none"]))
def test_checks_give_the_same_answer_for_a_taint_held_as_one_value_or_per_thread(sources, guard, seed, rule):
    from traceconf.emulate.classes import Rule, arithmetic, comparison, decision_inputs
    size = 8
    rng = np.random.default_rng(seed)
    values = [rng.integers(0, 2 ** 33, size, dtype=np.uint64) for _ in sources]
    active = rng.random(size) < 0.8
    active[0] = True
    holds = rng.random(size) < 0.5
    rules = {"sum": Rule(lambda v: sum(np.asarray(x, dtype=np.float64) for x in v), 32, read_bits=(32,) * 3),
             "product": Rule(lambda v: np.prod([np.asarray(x, dtype=np.float64) for x in v], axis=0), 32,
                             (1, 2) if len(sources) > 1 else (), read_bits=(32,) * 3),
             "none": None}

    def answers(spread):
        def held(bits):
            return np.full(size, bits, dtype=np.uint64) if spread else bits
        readers = [lambda m, v=v, b=b: (v, held(b)) for v, (b, _) in zip(values, sources)]
        guard_reader = None if guard is None else (lambda m: (holds, held(guard)))
        machine = _Machine(size)
        found = [_token(arithmetic(["r"], readers, guard_reader, rules[rule]).before(machine, active)),
                 _token(decision_inputs(guard_reader, readers[:1], readers[1:]).before(machine, active))]
        if len(readers) > 1:
            found.append(_token(comparison(["p"], readers[0], readers[1], lambda v: np.asarray(v, np.float64),
                                           float(2 ** 31), 7, guard_reader, readers[2:]).before(machine, active)))
        return found, machine.watch.opaque.tolist(), machine.watch.records
    assert answers(False) == answers(True)
