"""Counting executions by address pattern and active-lane mask (ACCESSES' AddressPatterns, traceconf.lanemasks):
the very counts of the scalar reference and of the engine on the addresses, for every rule set."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traceconf import engine, lanemasks
from traceconf.accesses import AddressPatterns, WarpAccesses
from traceconf.engine import count_wavefronts, instruction_results, summarize, analyze
from traceconf.errors import InputError
from traceconf.reference import execution_cost
from traceconf.rules import builtin_names, load_rule_set
from traceconf.schemas import KIND_CODES, OP_CODES
from tests.test_engine import execution_with_op


def patterned(rows: list[tuple], masks: list[list[int]], warp_size: int) -> WarpAccesses:
    """WarpAccesses of every (row, mask): row ``(kind, bytes, matrices, addresses, op)`` with each of its masks."""
    pairs = [(r, m) for r, row_masks in enumerate(masks) for m in row_masks]
    n = len(pairs)
    which = np.array([r for r, _ in pairs], dtype=np.int64)

    def column(position: int, dtype, code=lambda v: v) -> np.ndarray:
        return np.array([code(rows[r][position]) for r in which], dtype=dtype)

    patterns = AddressPatterns(np.array([row[3] for row in rows], dtype=np.int64).reshape(-1, warp_size), which,
                               np.array([m for _, m in pairs], dtype=np.uint64))
    return WarpAccesses("k", np.zeros(n, np.int64), np.zeros(n, np.int32), np.arange(n) * 3 + 1,
                        (which % 3).astype(np.int32), column(0, np.int8, KIND_CODES.get), column(1, np.int16),
                        column(2, np.int8), None, column(4, np.int8, OP_CODES.get), patterns=patterns)


@st.composite
def shared_rows(draw, rules):
    """Rows of addresses (junk in some lanes no execution activates), repeated at whole bank-row shifts, each with
    a few masks: random ones, and for ldmatrix/stmatrix (every lane executes) the whole warp."""
    w = rules.warp_size
    drawn = draw(st.lists(execution_with_op(rules), min_size=1, max_size=4))
    rows, masks = [], []
    for kind, nbytes, matrices, address, op in drawn:
        junk = draw(st.integers(0, 1 << 16)) * nbytes
        full = [junk + 4 * lane if a == -1 else a for lane, a in enumerate(address)] if draw(st.booleans()) \
            else address
        for shift in draw(st.lists(st.integers(0, 64), min_size=1, max_size=3)):
            rows.append((kind, nbytes, matrices, [a if a == -1 else a + shift * rules.row_bytes for a in full], op))
            if kind in ("ldmatrix", "stmatrix"):
                masks.append([(1 << w) - 1])
            else:
                masks.append(draw(st.lists(st.integers(0, (1 << w) - 1), min_size=1, max_size=5)))
    return rows, masks


@pytest.mark.parametrize("name", builtin_names())
def test_patterns_count_as_the_reference_and_the_addresses(name, monkeypatch):
    rules = load_rule_set(name)
    monkeypatch.setattr(lanemasks, "EXECUTIONS_PER_ROW", 0)   # masks counted however few share a row

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(shared_rows(rules))
    def check(drawn):
        rows, masks = drawn
        acc = patterned(rows, masks, rules.warp_size)
        by_patterns = count_wavefronts(acc, rules)
        address = acc.patterns.addresses()
        plain = WarpAccesses("k", acc.cta, acc.warp, acc.execution, acc.instruction, acc.kind, acc.bytes,
                             acc.matrices, address, acc.op)
        by_addresses = count_wavefronts(plain, rules, memoise=False)
        assert all(np.array_equal(a, b) for a, b in zip(by_patterns, by_addresses))
        expected = [execution_cost(rules, rows[r][0], rows[r][1], rows[r][2], list(a), rows[r][4])
                    for r, a in zip(acc.patterns.index.tolist(), address.tolist())]
        assert list(zip(*(c.tolist() for c in by_patterns))) == [
            (c.wavefronts, c.ideal_wavefronts, c.max_ways) for c in expected]
        assert instruction_results(acc, rules, 7).equals(summarize(analyze(plain, rules), 7))

    check()


def test_mask_counting_covers_the_multicast_plans_and_leaves_the_others():
    """sm_90's word accesses go by masks; CC 1.x's single-word broadcast, load pairing and cp.async placements
    stay with the engine's rules on the addresses."""
    sm90 = load_rule_set("sm_90")
    assert lanemasks.counts_by_masks(engine._plan(sm90, "ld", 4, 0), sm90)
    assert lanemasks.counts_by_masks(engine._plan(sm90, "ldmatrix", 16, 4), sm90)
    assert not lanemasks.counts_by_masks(engine._plan(sm90, "cp_async", 16, 0, "bypass"), sm90)
    sm1x = load_rule_set("sm_1x")
    assert not lanemasks.counts_by_masks(engine._plan(sm1x, "ld", 4, 0), sm1x)
    paired = 0
    for name in builtin_names():
        rules = load_rule_set(name)
        for width in (4, 8, 16):
            if rules.pairing is not None and rules.pairing.applies("ld", min(width, rules.split_bytes)):
                plan = engine._plan(rules, "ld", width, 0)
                assert plan.paired_groups is not None and not lanemasks.counts_by_masks(plan, rules)
                paired += 1
    assert paired


def test_a_negative_active_address_is_named_by_its_execution():
    rows = [("ld", 4, 0, [4 * lane for lane in range(32)], ""), ("ld", 4, 0, [-8] + [0] * 31, "")]
    acc = patterned(rows, [[1, 3], [2, 1]], 32)          # the second row's lane 0 is active in execution 3
    with pytest.raises(InputError, match="execution 10 has a negative address"):
        count_wavefronts(acc, load_rule_set("sm_90"))
    assert count_wavefronts(patterned(rows, [[1, 3], [2]], 32), load_rule_set("sm_90"))[0].tolist() == [1, 1, 1]


@pytest.mark.parametrize("name", ["sm_90", "cdna3"])
def test_a_row_read_by_several_classes_counts_each_class_by_its_rules(name):
    """Emulators give each row one class; a producer may share a row between classes: the class then joins the
    row's pattern after the rows are compared."""
    rules = load_rule_set(name)
    w = rules.warp_size
    rng = np.random.default_rng(5)
    address = (rng.integers(0, 64, w) * 16).tolist()
    masks = rng.integers(0, 1 << w, 12, dtype=np.uint64)
    acc = patterned([("ld", 4, 0, address, ""), ("st", 8, 0, address, "")], [masks[:6].tolist(),
                                                                            masks[6:].tolist()], w)
    acc.patterns.index[:] = 0                  # every execution reads row 0, half of them as 8-byte stores
    plain = WarpAccesses("k", acc.cta, acc.warp, acc.execution, acc.instruction, acc.kind, acc.bytes,
                         acc.matrices, acc.patterns.addresses(), acc.op)
    by_patterns, by_addresses = count_wavefronts(acc, rules), count_wavefronts(plain, rules, memoise=False)
    assert all(np.array_equal(a, b) for a, b in zip(by_patterns, by_addresses))


def test_masks_are_counted_where_rows_repeat_and_addresses_elsewhere(monkeypatch):
    """Rows shared by many executions go by masks; a row per execution (addresses from data) by the rules on
    the addresses: both the reference's counts."""
    rules = load_rule_set("sm_90")
    rng = np.random.default_rng(11)
    used = []
    original = lanemasks.count
    monkeypatch.setattr(lanemasks, "count", lambda *args: used.append(len(args[2])) or original(*args))
    per_row = [40, 40] + [1] * 40
    table = [("st", 4, 0, (rng.integers(0, 256, 32) * 4).tolist(), "") for _ in per_row]
    masks = [rng.integers(1, 1 << 32, count, dtype=np.uint64).tolist() for count in per_row]
    acc = patterned(table, masks, 32)
    expected = [execution_cost(rules, "st", 4, 0, list(a), "") for a in acc.patterns.addresses().tolist()]
    assert list(zip(*(c.tolist() for c in count_wavefronts(acc, rules)))) == [
        (c.wavefronts, c.ideal_wavefronts, c.max_ways) for c in expected]
    assert used == [80]                          # the 40 rows of one execution each went by their addresses
