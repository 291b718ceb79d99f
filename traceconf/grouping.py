"""Grouping rows: ``factorize`` (a code per distinct value) and ``group_aggregate`` (pyarrow's
``Table.group_by(keys, use_threads=False).aggregate(...)``), the one home of both.

Why not call the libraries directly: pyarrow's group-by runs on acero, whose import loads pyarrow's dataset
and file-system modules and pandas (0.25 CPU-s, a third of what a one-kernel ``analyze`` costs), and
``pandas.factorize`` imports pandas; the tables a command groups are small (one row per instruction, per
kernel or per execution of one kernel).  Small inputs are grouped here with numpy and pyarrow's hash kernel
(``dictionary_encode``); large ones by the libraries, whose import cost is then noise and whose hash
tables are faster.  Both paths give the same table (same groups in the same first-appearance order, same
types: tests/test_grouping.py compares them).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["factorize", "first_rows", "group_aggregate"]

#: Rows from which pandas' and acero's hash tables are used: per row they are 2-4x faster than
#: ``dictionary_encode`` + numpy (acero 0.11 us, here 0.4 us over five keys), which repays their import
#: (0.25 CPU-s) from a few hundred thousand rows on.
LIBRARY_ROWS = 1 << 18

#: Values from which :func:`factorize` uses pandas' hash table: per value it is ~1.5x faster than
#: ``dictionary_encode`` (21 against 30 ms for 458,752 int64 keys), which repays its import (0.25-0.4 CPU-s) only
#: from ~10**7 values on; a launch's batches (up to 2**19 warp executions each, counted one after the other) stay
#: on pyarrow.
FACTORIZE_LIBRARY_ROWS = 1 << 24

#: Values per run from which :func:`factorize` hashes each run once instead of each value.
RUN_SHARE = 4

#: Type of a sum, by the numpy kind of the values summed (acero's: the widest of the kind).
_SUM_TYPES = {"i": np.int64, "u": np.uint64, "f": np.float64}


def factorize(values: np.ndarray) -> tuple[np.ndarray, int]:
    """(code of each value, number of distinct values); codes number the distinct values in order of first
    appearance (``pandas.factorize``'s codes).  Runs of equal values (an instruction's executions, logged
    together) are hashed once per run."""
    if len(values) > 1:
        starts = np.flatnonzero(values[1:] != values[:-1]) + 1
        if len(starts) < len(values) // RUN_SHARE:
            starts = np.concatenate(([0], starts))
            codes, distinct = factorize(values[starts])
            return np.repeat(codes, np.diff(starts, append=len(values))), distinct
    if len(values) >= FACTORIZE_LIBRARY_ROWS:
        import pandas as pd
        codes, uniques = pd.factorize(values)
        return codes, len(uniques)
    encoded = pc.dictionary_encode(_arrow(values))
    return encoded.indices.to_numpy().astype(np.intp), len(encoded.dictionary)


def first_rows(codes: np.ndarray, distinct: int) -> np.ndarray:
    """The first position of each code 0..distinct-1 in ``codes`` (as :func:`factorize` gives them: each occurs)."""
    first = np.empty(distinct, dtype=np.intp)
    first[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)        # the last write of each code is its first
    return first


def _arrow(values: np.ndarray) -> pa.Array:
    """A numeric numpy array as an Arrow array without copying (``pa.array`` would probe for pandas)."""
    if values.dtype.kind not in "iuf":            # numpy's bools are bytes, Arrow's bits
        raise TypeError(f"_arrow: {values.dtype}")
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])


def group_aggregate(table: pa.Table, keys: list[str], aggregations: list[tuple[str, str]]) -> pa.Table:
    """``table.group_by(keys, use_threads=False).aggregate(aggregations)`` with its groups in order of first
    appearance (acero's hash table has an order of its own): the key columns (their fields kept), then
    ``{column}_{function}`` for each (column, function) of ``aggregations``.  Functions: ``sum``, ``count`` and
    ``max`` of integer or floating-point columns without nulls (what the pipeline groups; anything else is a
    ValueError rather than a second set of null rules)."""
    for column, function in aggregations:
        values = table.column(column)
        if function not in ("sum", "count", "max") or values.null_count or not (
                pa.types.is_integer(values.type) or pa.types.is_floating(values.type)):
            raise ValueError(f"group_aggregate: {function} of {column} ({values.type}, {values.null_count} nulls)")
    if not keys:
        raise ValueError("group_aggregate: no key")
    if len(table) >= LIBRARY_ROWS:
        first = "_first_row"
        indexed = table.append_column(first, _arrow(np.arange(len(table))))
        grouped = indexed.group_by(keys, use_threads=False).aggregate([*aggregations, (first, "min")])
        return grouped.sort_by(f"{first}_min").drop_columns([f"{first}_min"])
    group, groups = _group_ids(table, keys)
    order = np.argsort(group.astype(np.uint16) if groups <= 1 << 16 else group, kind="stable")  # radix sort
    starts = np.searchsorted(group[order], np.arange(groups))
    columns = [table.column(key).take(_arrow(order[starts])) for key in keys]
    fields = [table.schema.field(key) for key in keys]
    for column, function in aggregations:
        if function == "count":
            result = np.bincount(group, minlength=groups).astype(np.int64)
        else:
            ordered = table.column(column).to_numpy()[order]
            if function == "sum":
                ordered = ordered.astype(_SUM_TYPES[ordered.dtype.kind])
            reduce = np.maximum if function == "max" else np.add
            result = reduce.reduceat(ordered, starts) if groups else ordered[:0]
        columns.append(_arrow(result))
        fields.append(pa.field(f"{column}_{function}", columns[-1].type))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def _group_ids(table: pa.Table, keys: list[str]) -> tuple[np.ndarray, int]:
    """(group of each row, number of groups); groups are numbered in order of first appearance."""
    group, bound = np.zeros(len(table), dtype=np.int64), 1
    for key in keys:
        encoded = pc.dictionary_encode(table.column(key).combine_chunks(), null_encoding="encode")
        distinct = len(encoded.dictionary)
        if bound * distinct >= 1 << 62:                   # renumber densely first: the product stays an int64
            group, bound = factorize(group)
        group = group * distinct + encoded.indices.to_numpy()
        bound *= distinct
    return factorize(group)
