"""The pivot between the long ACCESSES table and dense WarpAccesses, both ways."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from traceconf.accesses import INACTIVE, WarpAccesses, from_table
from traceconf.schemas import ACCESSES, KINDS


def _warps(address: np.ndarray, kind: list[int], kernel: str = "k") -> WarpAccesses:
    n = len(address)
    return WarpAccesses(kernel, np.arange(n) // 4, (np.arange(n) % 4).astype(np.int32), np.arange(n) * 3,
                        np.arange(n, dtype=np.int32) % 5, np.asarray(kind, np.int8),
                        np.full(n, 4, np.int16), np.zeros(n, np.int8), address)


@st.composite
def warp_batches(draw):
    n = draw(st.integers(1, 12))
    address = np.array(draw(st.lists(st.lists(st.integers(-1, 4096), min_size=32, max_size=32),
                                     min_size=n, max_size=n)), dtype=np.int64)
    address[address < 0] = INACTIVE
    address[:, 0] = np.maximum(address[:, 0], 0)  # every execution has an active lane
    kind = draw(st.lists(st.integers(0, len(KINDS) - 1), min_size=n, max_size=n))
    return _warps(address, kind)


def _same(a: WarpAccesses, b: WarpAccesses) -> None:
    for name in ("cta", "warp", "execution", "instruction", "kind", "bytes", "matrices", "address"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


@settings(max_examples=60, deadline=None)
@given(warp_batches(), st.booleans())
def test_round_trip_in_any_row_order(warps, shuffle):
    table = warps.to_table()
    if shuffle:  # rows of an execution need not be adjacent nor lanes in order
        table = table.take(pa.array(np.random.default_rng(0).permutation(table.num_rows)))
    (back,) = from_table(table, warp_size=32)
    _same(back, warps)


def test_several_kernels_pivot_separately():
    one = _warps(np.tile(np.arange(32) * 4, (2, 1)), [0, 1], "a")
    two = _warps(np.tile(np.arange(32) * 8, (3, 1)), [1, 1, 2], "b")
    parts = from_table(pa.concat_tables([one.to_table(), two.to_table()]), warp_size=32)
    assert [p.kernel for p in parts] == ["a", "b"]
    _same(parts[0], one)
    _same(parts[1], two)


def _bad(table: pa.Table, column: str, at: int, value) -> pa.Table:
    values = table.column(column).to_pylist()
    values[at] = value
    return table.set_column(table.schema.get_field_index(column), ACCESSES.field(column), pa.array(values,
                            ACCESSES.field(column).type))


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("column, value, message", [
    ("kind", "st", "mixes different kind"), ("warp", 3, "mixes different warp"),
    ("bytes", 8, "mixes different bytes"), ("kind", "load", "unknown access kind 'load'"),
    ("lane", 0, "a lane appears twice")])
def test_inconsistent_executions_are_named(column, value, message, shuffle):
    table = _warps(np.tile(np.arange(32) * 4, (3, 1)), [0, 0, 0]).to_table()
    table = _bad(table, column, 40, value)  # a row inside the second execution
    if shuffle:
        table = table.take(pa.array(np.random.default_rng(1).permutation(table.num_rows)))
    with pytest.raises(ValueError, match=message):
        from_table(table, warp_size=32)


def test_lanes_must_fit_the_warp():
    table = _warps(np.tile(np.arange(32) * 4, (1, 1)), [0]).to_table()
    with pytest.raises(ValueError, match="does not fit a warp of 16"):
        from_table(table, warp_size=16)


def test_instruction_kinds_come_from_each_instructions_first_execution():
    rng = np.random.default_rng(3)
    n = 500
    instruction = rng.integers(0, 40, n).astype(np.int32)
    kind, nbytes = rng.integers(0, 3, n).astype(np.int8), rng.choice([1, 4, 16], n).astype(np.int16)
    acc = WarpAccesses("k", np.zeros(n, np.int64), np.zeros(n, np.int32), np.arange(n), instruction, kind, nbytes,
                       np.zeros(n, np.int8), np.zeros((n, 32), np.int64))
    kinds, widths = acc.instruction_kinds()
    ids, first = np.unique(instruction, return_index=True)
    assert list(kinds) == ids.tolist() and list(widths) == ids.tolist()
    assert [kinds[i] for i in ids.tolist()] == [KINDS[k] for k in kind[first]]
    assert [widths[i] for i in ids.tolist()] == nbytes[first].tolist()


@pytest.mark.parametrize("warp_size", [32, 64])
def test_lane_masks_and_address_patterns_invert_each_other(warp_size):
    """The emulator packs each warp's active lanes into a word (simt.lane_masks); AddressPatterns unpacks them:
    the addresses it builds are the row's in the active lanes and INACTIVE elsewhere."""
    from traceconf.accesses import AddressPatterns
    from traceconf.emulate.simt import lane_masks

    rng = np.random.default_rng(warp_size)
    active = rng.random((50, warp_size)) < rng.random((50, 1))
    rows = rng.integers(0, 1 << 20, (7, warp_size))
    index = rng.integers(0, 7, 50)
    patterns = AddressPatterns(rows, index, lane_masks(active))
    assert patterns.mask.dtype == np.uint64 and np.array_equal(patterns.active(), active)
    assert np.array_equal(patterns.addresses(), np.where(active, rows[index], INACTIVE))
    acc = WarpAccesses("k", np.zeros(50, np.int64), np.zeros(50, np.int32), np.arange(50), np.zeros(50, np.int32),
                       np.zeros(50, np.int8), np.full(50, 4, np.int16), np.zeros(50, np.int8), None,
                       patterns=patterns)
    assert len(acc) == 50 and acc.warp_size == warp_size
    part = acc.take(np.array([3, 1]))
    assert part.patterns is not None and np.array_equal(part.address, patterns.addresses()[[3, 1]])
    both = WarpAccesses.concat([acc, part])
    assert both.patterns is not None and np.array_equal(both.address, patterns.addresses()[list(range(50)) + [3, 1]])
