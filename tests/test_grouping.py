"""traceconf.grouping gives what pyarrow's acero group-by and pandas.factorize give, on either of its paths."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from traceconf import grouping
from traceconf.grouping import factorize, group_aggregate
from traceconf.schemas import EXECUTIONS


def _executions(rng: np.random.Generator, rows: int) -> pa.Table:
    """Random rows of the engine's EXECUTIONS table (field metadata and non-null fields included), in two chunks."""
    def column(field: pa.Field) -> pa.Array:
        if pa.types.is_string(field.type):
            return pa.array(rng.choice(["ld", "st", "atom", "x" * 40], rows).tolist(), field.type)
        return pa.array(rng.integers(0, 5 if field.name in ("instruction", "bytes") else 1000, rows), field.type)
    half = pa.table({field.name: column(field) for field in EXECUTIONS}, schema=EXECUTIONS)
    return pa.concat_tables([half, half.slice(rows // 3)])


AGGREGATIONS = [("execution", "count"), ("wavefronts", "sum"), ("ideal_wavefronts", "sum"), ("max_ways", "max"),
                ("max_ways", "sum"), ("cta", "max")]


def _keys_of(table: pa.Table, keys: list[str]) -> list[tuple]:
    return list(zip(*[table.column(key).to_pylist() for key in keys]))


@pytest.mark.parametrize("keys", [["device", "kernel", "instruction", "kind", "bytes"], ["instruction"], ["kind"],
                                  ["bytes", "kind"]])
@pytest.mark.parametrize("rows", [0, 1, 7, 500])
def test_group_aggregate_is_acero_group_by_in_first_appearance_order(monkeypatch, keys, rows):
    table = _executions(np.random.default_rng(rows), rows)
    expected = table.group_by(keys, use_threads=False).aggregate(AGGREGATIONS)
    got = group_aggregate(table, keys, AGGREGATIONS)
    assert got.schema.equals(expected.schema, check_metadata=True)
    assert _keys_of(got, keys) == list(dict.fromkeys(_keys_of(table, keys)))      # acero's order is its own
    by_keys = [(key, "ascending") for key in keys]
    assert got.sort_by(by_keys).equals(expected.sort_by(by_keys))
    monkeypatch.setattr(grouping, "LIBRARY_ROWS", 1)                              # the large-table path
    assert group_aggregate(table, keys, AGGREGATIONS).equals(got)


def test_group_aggregate_keeps_null_keys_and_sums_floats_and_unsigned_as_acero():
    table = pa.table({"key": pa.array([3, None, 3, 1, None], pa.int8()),
                      "f": pa.array([0.5, 1.0, 2.25, -1.0, 3.0], pa.float32()),
                      "u": pa.array([1, 2, 3, 4, 250], pa.uint8())})
    aggregations = [("f", "sum"), ("f", "max"), ("u", "sum"), ("u", "max"), ("u", "count")]
    assert group_aggregate(table, ["key"], aggregations).equals(
        table.group_by(["key"], use_threads=False).aggregate(aggregations))


def test_group_aggregate_refuses_what_it_does_not_cover():
    table = pa.table({"key": ["a", "b", "a"], "v": pa.array([1, None, 2], pa.int32()), "b": [True, False, True],
                      "w": [1, 2, 3]})
    for keys, aggregations in ((["key"], [("v", "sum")]), (["key"], [("v", "count")]), (["key"], [("b", "max")]),
                               (["key"], [("w", "mean")]), ([], [("w", "sum")])):
        with pytest.raises(ValueError):
            group_aggregate(table, keys, aggregations)


@pytest.mark.parametrize("runs", [False, True])
@pytest.mark.parametrize("distinct", [1, 5, 1000])
def test_factorize_is_pandas_factorize_on_both_paths(monkeypatch, distinct, runs):
    rng = np.random.default_rng(distinct)
    values = (rng.integers(0, distinct, 3000).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    if runs:                                     # runs of equal values, as executions of one instruction come
        values = np.repeat(values, rng.integers(1, 12, len(values)))
    expected_codes, uniques = pd.factorize(values)
    for library_rows in (grouping.FACTORIZE_LIBRARY_ROWS, 10):
        monkeypatch.setattr(grouping, "FACTORIZE_LIBRARY_ROWS", library_rows)
        codes, count = factorize(values)
        assert count == len(uniques) and codes.dtype == np.intp
        assert np.array_equal(codes, expected_codes)
    assert factorize(np.array([], np.uint64))[1] == 0


@pytest.mark.parametrize("distinct", [1, 7, 500])
def test_first_rows_are_each_codes_first_position(distinct):
    values = np.random.default_rng(distinct).integers(0, distinct, 2000)
    codes, count = factorize(values)
    first = grouping.first_rows(codes, count)
    _, expected = np.unique(codes, return_index=True)
    assert np.array_equal(first, expected) and np.array_equal(codes[first], np.arange(count))
