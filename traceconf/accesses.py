"""Dense, per-warp form of the ACCESSES table.

The long ACCESSES table (one row per lane, see :mod:`traceconf.schemas`) is the
exchange format.  Inside the analyzer the same data lives as a
:class:`WarpAccesses`: one row per warp-level execution and one column per lane,
``-1`` marking an inactive lane.  Every rule of the engine is then an array
operation over all executions at once, and producers that naturally see whole
warps (the emulator, Accel-Sim lines) can fill it without a long-table detour.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from traceconf.grouping import factorize, first_rows
from traceconf.schemas import ACCESSES, KINDS, OPS, OPTIONAL_ACCESS_COLUMNS

INACTIVE = -1


@dataclass
class AddressPatterns:
    """Executions' addresses as a producer that sees whole warps has them: a row of every lane's address and
    the lanes that took part.  Execution ``i`` accessed ``rows[index[i], lane]`` in the lanes whose bit is set
    in ``mask[i]`` (bit ``lane``); the other lanes of its row hold whatever their registers held.

    Executions that differ only in their active lanes (a data-dependent guard) share a row, so the engine
    counts each distinct (row, mask) once instead of each execution (:func:`traceconf.engine.count_wavefronts`).
    """

    rows: np.ndarray         # (p, warp_size) int64
    index: np.ndarray        # (n,) int64: the row of each execution
    mask: np.ndarray         # (n,) uint64: the active lanes of each execution

    def active(self) -> np.ndarray:
        """(n, warp_size) bool: the active lanes."""
        return self._bits().view(bool)

    def _bits(self) -> np.ndarray:
        """(n, warp_size) uint8: 1 in the active lanes, 0 elsewhere."""
        masks = np.ascontiguousarray(self.mask, dtype="<u8").view(np.uint8).reshape(-1, 8)
        return np.unpackbits(masks, axis=1, count=self.rows.shape[1], bitorder="little")

    def addresses(self) -> np.ndarray:
        """(n, warp_size) int64: each execution's addresses, ``INACTIVE`` in its inactive lanes."""
        address = self.rows[self.index]
        # inactive lanes -1: address | (1 - 1) where active, address | (0 - 1) elsewhere (no branch per lane)
        address |= np.subtract(self._bits(), 1, dtype=np.int64)
        return address

    def take(self, executions: np.ndarray) -> "AddressPatterns":
        return AddressPatterns(self.rows, self.index[executions], self.mask[executions])

    @classmethod
    def concat(cls, parts: list["AddressPatterns"]) -> "AddressPatterns":
        starts = np.cumsum([0] + [len(p.rows) for p in parts[:-1]])
        return cls(np.concatenate([p.rows for p in parts]),
                   np.concatenate([p.index + start for p, start in zip(parts, starts)]),
                   np.concatenate([p.mask for p in parts]))


@dataclass
class WarpAccesses:
    """Warp-level executions of one kernel.

    ``address[i, lane]`` is the byte address lane ``lane`` of execution ``i``
    accessed, or ``INACTIVE``.  ``kind`` holds codes of :data:`traceconf.schemas.KINDS`.
    A producer may give ``patterns`` instead of ``address`` (None): the addresses are then built from them
    the first time they are read.
    """

    kernel: str
    cta: np.ndarray          # (n,) int64
    warp: np.ndarray         # (n,) int32
    execution: np.ndarray    # (n,) int64
    instruction: np.ndarray  # (n,) int32
    kind: np.ndarray         # (n,) int8
    bytes: np.ndarray        # (n,) int16
    matrices: np.ndarray     # (n,) int8
    address: np.ndarray | None   # (n, warp_size) int64; None: built from ``patterns`` when first read
    op: np.ndarray | None = None  # (n,) int8 codes of OPS (atomics); None: unknown for every execution
    # (n, warp_size) int64: a copy's per-lane global source address (ACCESSES ``source``), -1 where unknown or
    # inactive; None: unknown for every execution
    source: np.ndarray | None = None
    # (n, warp_size) int16: the bytes a copy's lane copies from its source (ACCESSES ``src_size``; 0: it zero-fills),
    # -1 where the copy has no src-size operand or it is unknown, or the lane is inactive; None: -1 everywhere
    src_size: np.ndarray | None = None
    patterns: AddressPatterns | None = None

    def __post_init__(self) -> None:
        if self.op is None:
            self.op = np.zeros(len(self.kind), dtype=np.int8)
        if self._address is None and self.patterns is None:
            raise ValueError("WarpAccesses needs its addresses or their patterns")

    def sources(self) -> np.ndarray:
        """``source``, with -1 for every lane where it is None."""
        return np.full((len(self), self.warp_size), INACTIVE, dtype=np.int64) if self.source is None else self.source

    def src_sizes(self) -> np.ndarray:
        """``src_size``, with -1 for every lane where it is None."""
        return np.full((len(self), self.warp_size), INACTIVE, dtype=np.int16) if self.src_size is None else self.src_size

    @property
    def warp_size(self) -> int:
        return int((self.patterns.rows if self._address is None else self._address).shape[1])

    def __len__(self) -> int:
        return len(self.kind)

    @classmethod
    def empty(cls, kernel: str, warp_size: int = 32) -> "WarpAccesses":
        z = np.zeros(0, dtype=np.int64)
        return cls(kernel, z, z.astype(np.int32), z, z.astype(np.int32), z.astype(np.int8),
                   z.astype(np.int16), z.astype(np.int8), np.zeros((0, warp_size), dtype=np.int64))

    def take(self, rows: np.ndarray) -> "WarpAccesses":
        return WarpAccesses(self.kernel, self.cta[rows], self.warp[rows], self.execution[rows],
                            self.instruction[rows], self.kind[rows], self.bytes[rows],
                            self.matrices[rows], None if self._address is None else self._address[rows],
                            self.op[rows], None if self.source is None else self.source[rows],
                            None if self.src_size is None else self.src_size[rows],
                            None if self.patterns is None else self.patterns.take(rows))

    @classmethod
    def concat(cls, parts: list["WarpAccesses"]) -> "WarpAccesses":
        if not parts:
            raise ValueError("nothing to concatenate")
        first = parts[0]
        source = None if all(p.source is None for p in parts) else np.concatenate([p.sources() for p in parts])
        src_size = None if all(p.src_size is None for p in parts) else np.concatenate([p.src_sizes() for p in parts])
        patterned = all(p.patterns is not None for p in parts)
        return cls(first.kernel,
                   *(np.concatenate([getattr(p, name) for p in parts])
                     for name in ("cta", "warp", "execution", "instruction", "kind", "bytes", "matrices")),
                   None if patterned else np.concatenate([p.address for p in parts]),
                   np.concatenate([p.op for p in parts]), source, src_size,
                   AddressPatterns.concat([p.patterns for p in parts]) if patterned else None)

    def instruction_kinds(self) -> tuple[dict[int, str], dict[int, int]]:
        """(kind, bytes per lane) of each instruction that executed, from its first execution."""
        if not len(self):
            return {}, {}
        first = first_rows(*factorize(self.instruction))            # a hash: no sort of every execution
        order = np.argsort(self.instruction[first], kind="stable")
        ids, where = self.instruction[first][order], first[order]
        return ({ident: KINDS[int(self.kind[at])] for ident, at in zip(ids.tolist(), where.tolist())},
                {ident: int(self.bytes[at]) for ident, at in zip(ids.tolist(), where.tolist())})

    def to_table(self) -> pa.Table:
        """Long ACCESSES table: one row per active lane."""
        rows, lanes = np.nonzero(self.address != INACTIVE)
        kinds = np.asarray(KINDS, dtype=object)[self.kind[rows]]
        return pa.table(
            {
                "kernel": pa.array(np.full(len(rows), self.kernel, dtype=object), pa.string()),
                "cta": self.cta[rows],
                "warp": self.warp[rows].astype(np.int32),
                "execution": self.execution[rows],
                "instruction": self.instruction[rows].astype(np.int32),
                "lane": lanes.astype(np.int16),
                "address": self.address[rows, lanes],
                "bytes": self.bytes[rows].astype(np.int16),
                "kind": pa.array(kinds, pa.string()),
                "matrices": self.matrices[rows].astype(np.int8),
                "op": pa.array(np.asarray(OPS, dtype=object)[self.op[rows]], pa.string()),
                "source": pa.array(self.sources()[rows, lanes], pa.int64(), mask=self.sources()[rows, lanes] < 0),
                "src_size": pa.array(self.src_sizes()[rows, lanes], pa.int16(), mask=self.src_sizes()[rows, lanes] < 0),
            },
            schema=ACCESSES,
        )


def _address(accesses: WarpAccesses) -> np.ndarray:
    if accesses._address is None:
        accesses._address = accesses.patterns.addresses()
    return accesses._address


def _set_address(accesses: WarpAccesses, address: np.ndarray | None) -> None:
    accesses._address = address
    if address is not None:              # addresses given anew: the patterns no longer describe them
        accesses.patterns = None


#: ``address`` is built from ``patterns`` when first read (the dataclass's field stays its constructor argument;
#: the counting path reads the patterns and never needs the (executions, lanes) array)
WarpAccesses.address = property(_address, _set_address)


def from_table(table: pa.Table, warp_size: int | None = None) -> list[WarpAccesses]:
    """Pivot a long ACCESSES table into one :class:`WarpAccesses` per kernel.

    Rows of one execution must agree on cta, warp, instruction, kind, bytes and
    matrices; a lane may appear once per execution.  Raises ``ValueError``
    naming the first offending execution otherwise.
    """
    missing = [name for name in ACCESSES.names if name not in table.column_names
               and name not in OPTIONAL_ACCESS_COLUMNS]
    if missing:
        raise ValueError(f"access table lacks column(s) {', '.join(missing)}")
    result = []
    kernels = table.column("kernel")
    if table.num_rows == 0:
        return result
    first = kernels[0]
    # One kernel is the usual case; comparing with the first name is cheaper than hashing every row.
    names = [first.as_py()] if pc.all(pc.equal(kernels, first)).as_py() else pc.unique(kernels).to_pylist()
    for kernel in names:
        part = table if len(names) == 1 else table.filter(pc.equal(kernels, kernel))
        result.append(_pivot(kernel, part, warp_size))
    return result


def _column(table: pa.Table, name: str, dtype) -> np.ndarray:
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=dtype)


def _kind_codes(names: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Codes of :data:`KINDS` for kind names; an unknown name raises ``ValueError``."""
    codes = pc.index_in(names, value_set=pa.array(KINDS))
    if codes.null_count:
        unknown = names.filter(pc.is_null(codes))[0].as_py()
        raise ValueError(f"unknown access kind {unknown!r} (expected one of {', '.join(KINDS)})")
    return codes.to_numpy(zero_copy_only=False)


def _pivot(kernel: str, table: pa.Table, warp_size: int | None) -> WarpAccesses:
    execution = _column(table, "execution", np.int64)
    lane = _column(table, "lane", np.int64)
    if len(lane) and (lane.min() < 0):
        raise ValueError("negative lane number in access table")
    width = warp_size or (64 if len(lane) and lane.max() >= 32 else 32)
    if len(lane) and lane.max() >= width:
        raise ValueError(f"lane {int(lane.max())} does not fit a warp of {width}")
    runs = bool(np.all(execution[1:] >= execution[:-1]))
    if runs:  # the usual order: executions are runs, found without a sort
        change = execution[1:] != execution[:-1]
        first = np.concatenate(([0], np.flatnonzero(change) + 1))[:len(execution)]  # first table row of each
        ids = execution[first]
        row = np.zeros(len(execution), dtype=np.int64)
        np.cumsum(change, out=row[1:])
    else:
        ids, row = np.unique(execution, return_inverse=True)
        first = np.full(len(ids), -1, dtype=np.int64)
        first[row[::-1]] = np.arange(len(row))[::-1]  # first table row of each execution
    n = len(ids)

    def report(name: str, bad: np.ndarray) -> None:
        if len(bad):
            raise ValueError(f"execution {int(ids[row[bad[0]]])} of kernel {kernel!r} mixes different {name} values")

    def check(name: str, values: np.ndarray) -> None:
        """Every row must carry its execution's value (inside a run: its predecessor's)."""
        if runs:
            report(name, np.flatnonzero((values[1:] != values[:-1]) & ~change) + 1)
        else:
            report(name, np.flatnonzero(values != values[first][row]))

    def per_execution(name: str, dtype) -> np.ndarray:
        values = _column(table, name, dtype)
        check(name, values)
        return values[first]

    # Kinds are strings: look up only one per execution, then compare neighbours as strings.
    kind_names = table.column("kind")
    if runs:
        codes = _kind_codes(kind_names.take(pa.array(first)))
        if len(execution) > 1:
            differs = pc.fill_null(pc.not_equal(kind_names.slice(1), kind_names.slice(0, len(execution) - 1)), True)
            bad = np.flatnonzero(differs.to_numpy(zero_copy_only=False) & ~change) + 1
            _kind_codes(kind_names.take(pa.array(bad[:1])))  # an unknown name is named as such
            report("kind", bad)
    else:
        all_codes = _kind_codes(kind_names)
        check("kind", all_codes)
        codes = all_codes[first]
    kind = codes.astype(np.int8)

    flat = row * width + lane
    # Lanes rising inside every run cannot repeat; otherwise count them.
    rising = runs and bool(np.all((lane[1:] > lane[:-1]) | change))
    if len(flat) and not rising and np.bincount(flat, minlength=n * width).max() > 1:
        raise ValueError(f"kernel {kernel!r}: a lane appears twice in one execution")
    address = np.full((n, width), INACTIVE, dtype=np.int64)
    address.reshape(-1)[flat] = _column(table, "address", np.int64)
    op = None
    if "op" in table.column_names:
        names = pc.fill_null(table.column("op"), "")
        codes = pc.index_in(names, value_set=pa.array(OPS))
        if codes.null_count:
            unknown = names.filter(pc.is_null(codes))[0].as_py()
            raise ValueError(f"unknown operation {unknown!r} (expected one of {', '.join(OPS[1:])})")
        all_ops = codes.to_numpy(zero_copy_only=False).astype(np.int8)
        check("op", all_ops)
        op = all_ops[first]

    def per_lane(name: str, what: str, dtype) -> np.ndarray | None:
        """An optional per-lane column as (executions, lanes), -1 where null; None where absent or all null."""
        if name not in table.column_names or table.column(name).null_count == table.num_rows:
            return None
        dense = np.full((n, width), INACTIVE, dtype=dtype)
        given = np.asarray(pc.fill_null(table.column(name), INACTIVE).to_numpy(zero_copy_only=False), dtype)
        if given.min() < INACTIVE:
            raise ValueError(f"kernel {kernel!r}: a negative {what} in access table")
        dense.reshape(-1)[flat] = given
        return dense
    return WarpAccesses(kernel, per_execution("cta", np.int64), per_execution("warp", np.int32), ids,
                        per_execution("instruction", np.int32), kind,
                        per_execution("bytes", np.int16), per_execution("matrices", np.int8), address, op,
                        per_lane("source", "source address", np.int64), per_lane("src_size", "src-size", np.int16))
