"""The canonical access format: the ACCESSES table of :mod:`traceconf.schemas` as Parquet or CSV.

One row per lane of a warp-level shared access, with the ACCESSES column
names.  CSV may omit ``matrices`` (0) and ``kernel`` (the file's stem); Parquet
may too.  The optional instruction columns (``pc``, ``sass``, ``source_line``:
``ACCESS_INSTRUCTION_COLUMNS``, which ``traceconf convert`` writes) describe each
instruction as its first row says.  Rows are streamed in batches, so the file must list each kernel's
rows together and, within a kernel, the rows of one execution together with
execution ids ascending — the order ``traceconf convert`` writes.  A batch is
pivoted into :class:`WarpAccesses` by finding where the execution id changes
(no sort), so reading stays linear and memory flat.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from traceconf.accesses import INACTIVE, WarpAccesses
from traceconf.errors import InputError
from traceconf.sass.opcodes import opcode_text
from traceconf.schemas import ACCESS_INSTRUCTION_COLUMNS, ACCESSES, KINDS, LAUNCHES_KEY, OPS
from traceconf.traces.kernel import (BLOCK_LIMITS, GRID_LIMITS, BadLines, InstructionsSeen, KernelStart, chunked,
                                     dims_problem)
from traceconf.traces.options import ReadOptions

OPTIONAL = {"kernel", "matrices", "op", "source", "src_size", *ACCESS_INSTRUCTION_COLUMNS.names}
_INTEGER_COLUMNS = ("cta", "warp", "execution", "instruction", "lane", "address", "bytes", "matrices", "pc",
                    "source_line", "source", "src_size")
_NULLABLE_INTEGERS = ("pc", "source_line", "source", "src_size")          # empty: not recorded
_KIND_SET = pa.array(KINDS)
_OP_SET = pa.array(OPS)
# rows that carry one execution's per-execution values; all its rows must agree on them
_PER_EXECUTION = ("cta", "warp", "instruction", "kind", "bytes", "matrices", "op")


def default_kernel(path: Path) -> str:
    """The kernel of a table without a ``kernel`` column: a hive partition folder ``kernel=NAME`` above the
    file names it (URI-decoded, as pyarrow writes it), else the file's stem."""
    from urllib.parse import unquote

    for part in reversed(path.parent.parts):
        if part.startswith("kernel="):
            return unquote(part[len("kernel="):])
    return path.stem


def events(path: Path, options: ReadOptions, fmt: str, row_groups: tuple[int, int] | None = None) -> Iterator:
    """Reader events; ``row_groups`` = (first, end) reads only those row groups of a Parquet file (row numbers
    in errors stay those of the whole file)."""
    if row_groups is not None and fmt != "canonical_parquet":
        raise ValueError("row_groups applies to canonical Parquet files only")
    batches = _parquet_batches(path, options, row_groups) if fmt == "canonical_parquet" else \
        _csv_batches(path, options)
    reader = _Pivot(str(path), default_kernel(path), options, first_line=2 if fmt == "canonical_csv" else 1,
                    row_word="line" if fmt == "canonical_csv" else "row",
                    launches=_launches(path) if fmt == "canonical_parquet" else {})
    for batch, first_row, bad in batches:
        reader.bad_rows += bad
        yield from reader.batch(batch, first_row)
    yield from reader.finish()


#: The largest row group read: rows and decoded bytes a row group's metadata may claim.  One row group is
#: decoded at a time, so this bounds memory; ``traceconf convert`` writes far smaller ones.
MAX_ROW_GROUP_ROWS = 1 << 27
MAX_ROW_GROUP_BYTES = 4 << 30


def with_instructions(table: pa.Table, trace) -> pa.Table:
    """A chunk's ACCESSES rows as ``traceconf convert`` writes them (CONVERTED_ACCESSES): with each instruction's
    pc, SASS text and source line as the trace describes it (null where it records none)."""
    from traceconf.schemas import CONVERTED_ACCESSES

    ids, rows = np.unique(table.column("instruction").to_numpy(), return_inverse=True)
    described = [trace.seen(int(i)) or {} for i in ids]
    for name in ACCESS_INSTRUCTION_COLUMNS.names:
        values = [recorded_text(d) if name == "sass" else d.get(name) for d in described]
        field = ACCESS_INSTRUCTION_COLUMNS.field(name)
        table = table.append_column(field, pa.array(values, field.type).take(pa.array(rows)))
    return table.cast(CONVERTED_ACCESSES)


def recorded_text(described: dict) -> str | None:
    """The SASS text a trace recorded for an instruction; None where its kind stands in for it (a reader without
    the text names the instruction by its kind, as :meth:`_Pivot._described` does, and has no pc)."""
    text = described.get("sass")
    return None if text == described.get("kind") and described.get("pc") is None else text


def launches_metadata(launches: dict) -> dict[str, str]:
    """The Parquet key-value metadata that carries each kernel's launch facts (``LAUNCHES_KEY``: what
    :func:`_launches` gives back)."""
    import json

    return {LAUNCHES_KEY: json.dumps(launches, default=str)}


def _launches(path: Path) -> dict:
    """The launch facts ``traceconf convert`` stored with each kernel (``LAUNCHES_KEY``); {} when none."""
    import json

    try:
        metadata = pq.read_metadata(path).metadata or {}
        stored = json.loads(metadata.get(LAUNCHES_KEY.encode(), b"{}"))
    except (pa.ArrowException, OSError, ValueError, RecursionError):   # the batch reader reports an unreadable file
        return {}
    return {kernel: _launch_facts(facts) for kernel, facts in stored.items()} if isinstance(stored, dict) else {}


#: Launch facts given back from a converted table: a file's metadata is input like its rows, so only facts of
#: the right shape come back (grid and block within CUDA's limits, scalars), never a key the analysis sets.
_STORED_FACTS = ("kernel_name", "kernel_id", "binary_version", "shmem_bytes", "nregs", "warps_per_cta",
                 "cuda_stream_id", "trace_version", "nvbit_version", "lineinfo")


def _launch_facts(facts) -> dict:
    if not isinstance(facts, dict):
        return {}
    kept = {key: facts[key] for key in _STORED_FACTS
            if isinstance(facts.get(key), (str, bool)) or type(facts.get(key)) is int}
    for key, limits in (("grid", GRID_LIMITS), ("block", BLOCK_LIMITS)):
        dims = facts.get(key)
        if (isinstance(dims, list) and len(dims) == 3 and all(type(v) is int for v in dims)
                and dims_problem(key, tuple(dims), limits) is None):
            kept[key] = dims
    return kept


def _check_row_groups(metadata, path: Path) -> None:
    """Refuse, before anything is decoded, a Parquet file whose metadata claims row groups too large to read."""
    for index in range(metadata.num_row_groups):
        group = metadata.row_group(index)
        if group.num_rows > MAX_ROW_GROUP_ROWS or group.total_byte_size > MAX_ROW_GROUP_BYTES or \
                group.num_rows < 0 or group.total_byte_size < 0:
            raise InputError(f"row group {index} claims {group.num_rows:,} rows and {group.total_byte_size:,} "
                             f"bytes; a row group may hold at most {MAX_ROW_GROUP_ROWS:,} rows and "
                             f"{MAX_ROW_GROUP_BYTES >> 30} GiB here (rewrite the file with smaller row groups)",
                             str(path))


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:200]


def _parquet_batches(path: Path, options: ReadOptions, row_groups: tuple[int, int] | None = None):
    try:
        present = pq.read_schema(path).names
        # dictionary-decoded strings: millions of repeated kernel/kind names stay integer codes
        file = pq.ParquetFile(path, read_dictionary=[n for n in ("kernel", "kind", "sass") if n in present])
    except (pa.ArrowException, OSError, ValueError, KeyError, IndexError) as error:
        # a corrupt footer can fail in many ways inside pyarrow (a schema without the columns it names ...)
        raise InputError(f"unreadable Parquet file: {_first_line(error)}", str(path)) from None
    _check_row_groups(file.metadata, path)
    names = file.schema_arrow.names
    missing = [name for name in ACCESSES.names if name not in names and name not in OPTIONAL]
    if missing:
        raise InputError(f"access table lacks column(s) {', '.join(missing)}", str(path))
    size = file.metadata.num_rows or 1
    groups = None
    done = 0
    if row_groups is not None:
        first, end = row_groups
        if not 0 <= first < end <= file.num_row_groups:
            raise InputError(f"row groups {first}..{end - 1} requested, the file has {file.num_row_groups}", str(path))
        groups = range(first, end)
        done = sum(file.metadata.row_group(i).num_rows for i in range(first))
    batches = file.iter_batches(batch_size=options.chunk_executions * 32, row_groups=groups)
    while True:
        try:
            batch = next(batches, None)
            if batch is not None:
                for name in ("kernel", "kind"):   # dictionary indices are not checked by the reader
                    if name in batch.schema.names:
                        batch.column(name).validate(full=True)
        except (pa.ArrowException, OSError, ValueError) as error:
            raise InputError(f"unreadable Parquet data after row {done:,}: {_first_line(error)}", str(path)) \
                from None
        if batch is None:
            return
        table = pa.Table.from_batches([batch])
        yield _normalize(table, path), done, 0
        done += table.num_rows
        if options.progress is not None:
            options.progress(int(path.stat().st_size * done / size), path.stat().st_size)


def _csv_batches(path: Path, options: ReadOptions):
    total = path.stat().st_size
    read_options = pacsv.ReadOptions(block_size=1 << 22)
    try:
        with pacsv.open_csv(path, read_options=read_options) as probe:
            raw_names = probe.schema.names
    except (pa.ArrowException, OSError, ValueError) as error:
        raise InputError(f"unreadable CSV: {_first_line(error)}", str(path)) from None
    names = [name.strip() for name in raw_names]
    missing = [name for name in ACCESSES.names if name not in names and name not in OPTIONAL]
    if missing:
        raise InputError(f"CSV header lacks column(s) {', '.join(missing)}", str(path), 1, 1)
    with open(path, "rb") as raw:
        try:
            reader = pacsv.open_csv(
                raw, read_options=read_options,
                convert_options=pacsv.ConvertOptions(column_types={name: pa.string() for name in raw_names}))
        except pa.ArrowInvalid as error:
            raise InputError(f"unreadable CSV: {error}", str(path)) from None
        done = 0
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                return
            except (pa.ArrowException, OSError, ValueError) as error:
                raise InputError(f"unreadable CSV after line {done + 1}: {error}", str(path), done + 2) from None
            table = pa.Table.from_batches([batch]).rename_columns(names)
            converted, bad = _convert_csv(table, path, done, options.skip_bad)
            yield _normalize(converted, path), done, bad
            done += table.num_rows
            if options.progress is not None:
                options.progress(raw.tell(), total)


def _convert_csv(table: pa.Table, path: Path, first_row: int, skip_bad: bool) -> tuple[pa.Table, int]:
    """String columns → typed columns; rows with a non-integer or unknown kind are dropped or raised."""
    valid = np.ones(table.num_rows, dtype=bool)
    first_problem = None
    columns = {}
    for name in table.column_names:
        column = pc.utf8_trim_whitespace(table.column(name))
        if name in _INTEGER_COLUMNS:
            empty = pc.equal(pc.utf8_length(pc.fill_null(column, "")), 0).to_numpy(zero_copy_only=False) \
                if name in _NULLABLE_INTEGERS else np.zeros(table.num_rows, dtype=bool)
            ok = pc.fill_null(pc.match_substring_regex(column, r"^[+-]?\d{1,18}$"), False)
            hexadecimal = pc.fill_null(pc.match_substring_regex(column, r"^0[xX][0-9a-fA-F]{1,16}$"), False)
            values = pc.cast(pc.if_else(ok, column, "0"), pa.int64()).to_numpy().copy()
            hex_rows = np.flatnonzero(hexadecimal.to_numpy(zero_copy_only=False))
            if len(hex_rows):
                text = column.take(pa.array(hex_rows)).to_pylist()
                values[hex_rows] = np.array([int(v, 16) for v in text], dtype=np.uint64).view(np.int64)
            good = ok.to_numpy(zero_copy_only=False) | hexadecimal.to_numpy(zero_copy_only=False) | empty
            columns[name] = pa.array(values, mask=empty)
            message = f"column {name!r}: expected an integer"
        elif name == "kind":
            good = pc.fill_null(pc.is_in(column, value_set=_KIND_SET), False).to_numpy(zero_copy_only=False)
            columns[name] = column
            message = f"column 'kind': expected one of {', '.join(KINDS)}"
        else:
            good = np.ones(table.num_rows, dtype=bool)
            columns[name] = column
        bad_rows = np.flatnonzero(~good)
        if len(bad_rows) and (first_problem is None or bad_rows[0] < first_problem[0]):
            first_problem = (int(bad_rows[0]), message, name)
        valid &= good
    if first_problem is not None and not skip_bad:
        row, message, name = first_problem
        value = table.column(name)[row].as_py()
        raise InputError(f"{message}, got {value!r}", str(path), first_row + row + 2)
    converted = pa.table(columns)
    bad = int((~valid).sum())
    return (converted.filter(pa.array(valid)) if bad else converted), bad


def _normalize(table: pa.Table, path: Path) -> pa.Table:
    """Add defaults for optional columns and cast to the ACCESSES types."""
    if "kernel" not in table.column_names:
        table = table.append_column("kernel", pa.array([default_kernel(path)] * table.num_rows, pa.string()))
    if "matrices" not in table.column_names:
        table = table.append_column("matrices", pa.array(np.zeros(table.num_rows, dtype=np.int8)))
    if "op" not in table.column_names:
        table = table.append_column("op", pa.nulls(table.num_rows, pa.string()))
    for name, kind in (("source", pa.int64()), ("src_size", pa.int16())):
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(table.num_rows, kind))
    fields = list(ACCESSES) + [f for f in ACCESS_INSTRUCTION_COLUMNS if f.name in table.column_names]
    schema = pa.schema([table.schema.field(f.name) if pa.types.is_dictionary(table.schema.field(f.name).type) else f
                        for f in fields])
    try:
        return table.select(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise InputError(f"access table does not match the ACCESSES schema: {error}", str(path)) from None


class _Pivot:
    """Turns consecutive ACCESSES batches into WarpAccesses chunks, kernel by kernel."""

    def __init__(self, path: str, default_kernel: str, options: ReadOptions, first_line: int, row_word: str,
                 launches: dict):
        self.path = path
        self.default_kernel = default_kernel
        self.options = options
        self.first_line = first_line  # file line (CSV) or row number (Parquet) of row 0
        self.row_word = row_word
        self.kernel: str | None = None
        self.finished: set[str] = set()
        self.carry: pa.Table | None = None  # rows of an execution that may continue in the next batch
        self.carry_row = 0
        self.instructions: set[int] = set()
        self.bad_rows = 0  # skipped rows not yet reported (reported once a kernel has started)
        self.launches = launches  # kernel -> the launch facts the converted trace stated

    def _where(self, row: int) -> dict:
        number = self.first_line + row
        return {"file": self.path, "line": number} if self.row_word == "line" else {"file": f"{self.path}: row {number}"}

    def batch(self, table: pa.Table, first_row: int) -> Iterator:
        kernels = table.column("kernel").unify_dictionaries().combine_chunks() \
            if pa.types.is_dictionary(table.schema.field("kernel").type) else table.column("kernel")
        n = len(kernels)
        if n == 0:
            return
        # kernel runs, found without turning millions of names into Python strings
        if pa.types.is_dictionary(kernels.type):  # one dictionary: equal names have equal codes
            codes = kernels.indices.to_numpy(zero_copy_only=False)
            differs = codes[1:] != codes[:-1]
        else:
            differs = pc.not_equal(kernels.slice(1), kernels.slice(0, n - 1)).to_numpy(zero_copy_only=False)
        bounds = np.concatenate(([0], np.flatnonzero(differs) + 1, [n]))
        for begin, end in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            name = kernels[begin].as_py()
            if name != self.kernel:
                yield from self._flush()
                if name in self.finished:
                    raise InputError(f"rows of kernel {name!r} are not contiguous (sort the table by kernel, "
                                     "then execution)", **self._where(first_row + begin))
                if self.kernel is not None:
                    self.finished.add(self.kernel)
                self.kernel = name
                self.instructions = set()
                yield KernelStart(name, {**self.launches.get(name, {}), "format": "canonical", "file": self.path})
            part = table.slice(begin, end - begin)
            if self.carry is not None:
                part = pa.concat_tables([self.carry, part])
                row0 = self.carry_row
            else:
                row0 = first_row + begin
            execution = part.column("execution").to_numpy()
            last = int(np.searchsorted(execution, execution[-1])) if np.all(execution[1:] >= execution[:-1]) else None
            if last is None:
                bad = int(np.flatnonzero(execution[1:] < execution[:-1])[0]) + 1
                raise InputError(f"execution {execution[bad]} follows execution {execution[bad - 1]}: rows must "
                                 "be sorted by execution within a kernel", **self._where(row0 + bad))
            self.carry, self.carry_row = part.slice(last), row0 + last
            yield from self._emit(part.slice(0, last), row0)
        yield from self._bad()

    def _bad(self) -> Iterator:
        if self.bad_rows and self.kernel is not None:
            yield BadLines(self.bad_rows)
            self.bad_rows = 0

    def _flush(self) -> Iterator:
        if self.carry is not None:
            carry, self.carry = self.carry, None
            yield from self._emit(carry, self.carry_row)

    def finish(self) -> Iterator:
        yield from self._flush()
        if self.kernel is None:  # no (valid) rows at all: still one launch, with no accesses
            self.kernel = self.default_kernel
            yield KernelStart(self.kernel, {"format": "canonical", "file": self.path})
        yield from self._bad()

    def _emit(self, table: pa.Table, row0: int) -> Iterator:
        if table.num_rows == 0:
            return
        accesses = self._pivot(table, row0)
        ids, first_executions = np.unique(accesses.instruction, return_index=True)
        first = {i: e for i, e in zip(ids.tolist(), first_executions.tolist()) if i not in self.instructions}
        if first:
            self.instructions.update(first)
            # each instruction's first row, found once for all (not a pass over the batch per instruction)
            row_ids, first_rows = np.unique(table.column("instruction").to_numpy(), return_index=True)
            rows = dict(zip(row_ids.tolist(), first_rows.tolist()))
            yield InstructionsSeen([self._described(table, i, rows[i], accesses, e) for i, e in first.items()])
        yield from chunked(accesses, self.options.chunk_executions)

    @staticmethod
    def _described(table: pa.Table, instruction: int, row: int, accesses: WarpAccesses, execution: int) -> dict:
        """An instruction's description: its first row's pc, SASS text and source line where the table has
        them (a table without them names it by its kind)."""
        kind = KINDS[accesses.kind[execution]]
        said = {name: table.column(name)[row].as_py() for name in ACCESS_INSTRUCTION_COLUMNS.names
                if name in table.column_names}
        sass = (said.get("sass") or "").strip() or kind       # blank text is no text
        opcode = opcode_text(sass) or kind
        return {"instruction": instruction, "pc": said.get("pc"), "sass": sass, "opcode": opcode, "kind": kind,
                "bytes": int(accesses.bytes[execution]), "matrices": int(accesses.matrices[execution]),
                "source_line": said.get("source_line")}

    def _pivot(self, table: pa.Table, row0: int) -> WarpAccesses:
        execution = table.column("execution").to_numpy()
        # rows of an execution are contiguous (checked by batch()): a new execution starts where the id changes
        change = execution[1:] != execution[:-1]
        starts = np.concatenate(([0], np.flatnonzero(change) + 1))
        values = {}
        for name in _PER_EXECUTION:
            array, lookup = self._per_row(table, name, row0)
            # the first row that differs from its execution's first row is the first change inside an execution
            differs = np.flatnonzero((array[1:] != array[:-1]) & ~change)
            if lookup is not None and len(differs):  # dictionary codes: equal names may still have two codes
                differs = differs[lookup[array[differs + 1]] != lookup[array[differs]]]
            if len(differs):
                bad = int(differs[0]) + 1
                raise InputError(f"execution {execution[bad]} mixes different {name} values",
                                 **self._where(row0 + bad))
            values[name] = array[starts] if lookup is None else lookup[array[starts]]
        for name, low, high in (("bytes", 1, 255), ("matrices", 0, 127)):   # the engine packs them in 8 bits
            per_execution = values[name].astype(np.int64)
            outside = np.flatnonzero((per_execution < low) | (per_execution > high))
            if len(outside):
                bad = int(starts[outside[0]])
                raise InputError(f"{name} {per_execution[outside[0]]} is out of range {low}..{high}",
                                 **self._where(row0 + bad))
        lane = table.column("lane").to_numpy().astype(np.int64)
        if len(lane) and (lane.min() < 0 or lane.max() >= 32):
            bad = int(np.flatnonzero((lane < 0) | (lane >= 32))[0])
            raise InputError(f"lane {lane[bad]} is outside a warp of 32", **self._where(row0 + bad))
        row = np.zeros(len(execution), dtype=np.int64)
        np.cumsum(change, out=row[1:])
        flat = row * 32 + lane
        address = table.column("address").to_numpy()
        # lanes usually ascend within an execution; only otherwise is a sort needed to find duplicates
        ascending = not np.any(flat[1:] <= flat[:-1])
        if not ascending and np.any(np.diff(np.sort(flat)) == 0):
            ordered = np.sort(flat)
            duplicate = ordered[np.flatnonzero(np.diff(ordered) == 0)[0]]
            bad = int(np.flatnonzero(flat == duplicate)[1])
            raise InputError(f"lane {lane[bad]} appears twice in execution {execution[bad]}", **self._where(row0 + bad))
        if ascending and len(flat) == 32 * len(starts):  # every lane of every execution, in order
            address = address.astype(np.int64).reshape(-1, 32)
        else:
            dense = np.full((len(starts), 32), INACTIVE, dtype=np.int64)
            dense.reshape(-1)[flat] = address
            address = dense

        def per_lane(name: str, dtype) -> np.ndarray | None:
            """A copy's optional per-lane column (its global sources, src-sizes), -1 where null."""
            if table.column(name).null_count == table.num_rows:
                return None
            dense = np.full((len(starts), 32), INACTIVE, dtype=dtype)
            dense.reshape(-1)[flat] = pc.fill_null(table.column(name), INACTIVE).to_numpy()
            return dense
        return WarpAccesses("", values["cta"].astype(np.int64), values["warp"].astype(np.int32), execution[starts],
                            values["instruction"].astype(np.int32), values["kind"].astype(np.int8),
                            values["bytes"].astype(np.int16), values["matrices"].astype(np.int8), address,
                            values["op"].astype(np.int8), per_lane("source", np.int64), per_lane("src_size", np.int16))

    def _per_row(self, table: pa.Table, name: str, row0: int) -> tuple[np.ndarray, np.ndarray | None]:
        """A per-execution column, row by row, as (values, None) or, for dictionary-coded kinds, as
        (dictionary indices, kind code of each dictionary entry)."""
        column = table.column(name)
        if name == "op":
            names = pc.fill_null(column.cast(pa.string()), "")
            codes = pc.index_in(names, value_set=_OP_SET)
            if codes.null_count:
                bad = int(np.flatnonzero(codes.is_null().to_numpy(zero_copy_only=False))[0])
                raise InputError(f"unknown operation {names[bad].as_py()!r} (expected one of "
                                 f"{', '.join(OPS[1:])} or empty)", **self._where(row0 + bad))
            return codes.to_numpy(zero_copy_only=False).astype(np.int8), None
        if name != "kind":
            return column.to_numpy(), None
        column = column.combine_chunks()
        if pa.types.is_dictionary(column.type):  # map the few dictionary entries, not the rows
            entry_codes = pc.index_in(column.dictionary, value_set=_KIND_SET)
            if entry_codes.null_count == 0 and column.indices.null_count == 0:
                return column.indices.to_numpy(), entry_codes.to_numpy()
            codes = entry_codes.take(column.indices)
        else:
            codes = pc.index_in(column, value_set=_KIND_SET)
        if codes.null_count:
            bad = int(np.flatnonzero(codes.is_null().to_numpy(zero_copy_only=False))[0])
            raise InputError(f"unknown access kind {table.column('kind')[bad].as_py()!r} (expected one of "
                             f"{', '.join(KINDS)})", **self._where(row0 + bad))
        return codes.to_numpy(), None
