"""The wavefront engine: one vectorized interpreter of every device rule set.

For each warp-level execution the engine answers the question the rule sets
describe as data (:mod:`traceconf.rules`): into how many shared-memory passes
("wavefronts") does the hardware split it, how many would it need without bank
conflicts, and how bad is the worst conflict.

The executions of a :class:`~traceconf.accesses.WarpAccesses` fall into a
handful of classes (kind, bytes, matrices).  Per class the rule set fixes the
lane groups ("phases"), so each (execution, request, group) becomes one row of
a small matrix of bank-row keys, and every rule is an array operation over all
of those rows at once:

* multicast devices: sort the keys of each row; per bank, the number of
  distinct rows is a run count over the sorted keys; the group needs as many
  passes as its busiest bank;
* CC 1.x single-word broadcast: the guide's iterative procedure, one vector
  step per pass (at most 16 steps), over all half-warps together.

Both produce, per lane, the pass of its group that serves it (the per-bank rank
of its key; the step that serves it); a group's passes are the largest of
those.  :func:`count_wavefronts` keeps only the totals; :func:`lane_wavefronts`
runs the same code and keeps the per-lane passes, which is what ``explain``
draws.

:mod:`traceconf.reference` computes the same numbers one warp at a time with
dicts and loops; the property tests hold the two equal.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from traceconf.accesses import INACTIVE, WarpAccesses, from_table
from traceconf.errors import InputError
from traceconf import lanemasks
from traceconf.grouping import factorize, first_rows, group_aggregate
from traceconf.rules import RuleSet
from traceconf.schemas import EXECUTIONS, INSTRUCTION_RESULTS, KINDS, OPS

__all__ = ["analyze", "summarize", "instruction_results", "combine", "count_wavefronts", "lane_wavefronts", "LaneWavefronts",
           "instructions_from_sources"]

#: Sort keys per chunk; bounds the temporary arrays (~ a few tens of MB) and keeps them cache friendly.
CHUNK_KEYS = 1 << 18
GROUP_KEYS = ["device", "kernel", "instruction", "kind", "bytes"]
#: Executions hashed per step of the memo; keeps the (rows x lanes) temporaries in the L2 cache.
MEMO_CHUNK_ROWS = 4096
#: Above this fraction of distinct hashes the memo is skipped (checking it costs more than it saves).
MEMO_MAX_UNIQUE = 0.5
#: Odd 64-bit multipliers of the pattern hash, one per lane (fixed: results never depend on them; from a hash,
#: not numpy.random, whose import costs every command 10 ms).
_LANE_MULTIPLIERS = np.frombuffer(hashlib.shake_256(b"traceconf lane multipliers").digest(64 * 8), "<u8") | np.uint64(1)
_CLASS_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------

def analyze(accesses: WarpAccesses | pa.Table, rules: RuleSet, memoise: bool = True) -> pa.Table:
    """Wavefronts of every warp-level execution under ``rules`` (schema :data:`EXECUTIONS`).

    ``accesses`` is a :class:`WarpAccesses` or a long ACCESSES table (pivoted per
    kernel).  Rows keep the input order.  ``memoise`` (see :func:`count_wavefronts`)
    changes the speed, never the result.
    """
    if isinstance(accesses, pa.Table):
        try:
            parts = from_table(accesses, warp_size=rules.warp_size)
        except ValueError as error:
            raise InputError(f"{error} (rule set {rules.name!r} has {rules.warp_size}-lane warps)") from None
        tables = [analyze(part, rules, memoise) for part in parts]
        return pa.concat_tables(tables) if tables else EXECUTIONS.empty_table()
    _check_warp_size(accesses, rules)
    wavefronts, ideal, max_ways = count_wavefronts(accesses, rules, memoise)
    n = len(accesses)
    active_lanes = _row_counts(accesses.address != INACTIVE).astype(np.int16)
    kinds = pa.DictionaryArray.from_arrays(pa.array(accesses.kind.astype(np.int32)), pa.array(KINDS, pa.string()))
    return pa.table(
        {
            "device": pa.repeat(pa.scalar(rules.name, pa.string()), n),
            "kernel": pa.repeat(pa.scalar(accesses.kernel, pa.string()), n),
            "cta": accesses.cta.astype(np.int64, copy=False),
            "warp": accesses.warp.astype(np.int32, copy=False),
            "execution": accesses.execution.astype(np.int64, copy=False),
            "instruction": accesses.instruction.astype(np.int32, copy=False),
            "kind": kinds.cast(pa.string()),
            "bytes": accesses.bytes.astype(np.int16, copy=False),
            "active_lanes": active_lanes,
            "wavefronts": wavefronts,
            "ideal_wavefronts": ideal,
            "excess_wavefronts": wavefronts - ideal,
            "max_ways": max_ways.astype(np.int16),
        },
        schema=EXECUTIONS,
    )


def summarize(executions: pa.Table, scale: int = 1) -> pa.Table:
    """One INSTRUCTION_RESULTS row per (device, kernel, instruction, kind, bytes).

    ``scale`` multiplies executions and every sum: analysing one CTA and scaling
    by the grid size is exact when all CTAs access shared memory alike.
    """
    if isinstance(scale, bool) or not isinstance(scale, (int, np.integer)) or scale < 1:
        raise ValueError(f"scale must be a positive integer, got {scale!r}")
    grouped = group_aggregate(executions, GROUP_KEYS,
        [("execution", "count"), ("wavefronts", "sum"), ("ideal_wavefronts", "sum"),
         ("excess_wavefronts", "sum"), ("max_ways", "max")])
    return _results(grouped, {"executions": "execution_count", "wavefronts": "wavefronts_sum",
                              "ideal_wavefronts": "ideal_wavefronts_sum",
                              "excess_wavefronts": "excess_wavefronts_sum", "max_ways": "max_ways_max"},
                    int(scale))


def instruction_results(accesses: WarpAccesses | pa.Table, rules: RuleSet, scale: int = 1,
                        memoise: bool = True) -> pa.Table:
    """``summarize(analyze(accesses, rules, memoise), scale)``, added up per instruction straight from the
    counts: no EXECUTIONS table is built (a launch's batches hold hundreds of thousands of executions, and
    only their sums are kept)."""
    if isinstance(accesses, pa.Table):
        return summarize(analyze(accesses, rules, memoise), scale)
    _check_warp_size(accesses, rules)
    if isinstance(scale, bool) or not isinstance(scale, (int, np.integer)) or scale < 1:
        raise ValueError(f"scale must be a positive integer, got {scale!r}")
    wavefronts, ideal, max_ways = count_wavefronts(accesses, rules, memoise)
    # the executions of one instruction come in runs (an emulator logs every warp's at once): summed per run, then
    # per (instruction, kind, bytes), one code each (kinds and widths fit 8 and 16 bits)
    starts = _runs(accesses.instruction, accesses.kind, accesses.bytes)
    key = ((accesses.instruction[starts].astype(np.int64) << 24) | (accesses.kind[starts].astype(np.int64) << 16)
           | accesses.bytes[starts].astype(np.int64))
    group, groups = factorize(key)
    first = starts[first_rows(group, groups)]
    lengths = np.diff(starts, append=len(accesses))
    wavefront_sum, ideal_sum, executions = (np.bincount(group, per_run, groups).astype(np.int64) for per_run in (
        _run_sums(wavefronts, starts), _run_sums(ideal, starts), lengths))
    largest = np.zeros(groups, dtype=np.int16)
    np.maximum.at(largest, group, np.maximum.reduceat(max_ways, starts).astype(np.int16) if len(starts) else
                  largest[:0])
    kinds = pa.DictionaryArray.from_arrays(pa.array(accesses.kind[first].astype(np.int32)),
                                           pa.array(KINDS, pa.string()))
    grouped = pa.table({
        "device": pa.repeat(pa.scalar(rules.name, pa.string()), groups),
        "kernel": pa.repeat(pa.scalar(accesses.kernel, pa.string()), groups),
        "instruction": accesses.instruction[first].astype(np.int32),
        "kind": kinds.cast(pa.string()),
        "bytes": accesses.bytes[first].astype(np.int16),
        "executions": executions,
        "wavefronts": wavefront_sum,
        "ideal_wavefronts": ideal_sum,
        "excess_wavefronts": wavefront_sum - ideal_sum,
        "max_ways": largest,
    })
    return _results(grouped, {name: name for name in INSTRUCTION_RESULTS.names[len(GROUP_KEYS):]}, int(scale))


def _runs(*columns: np.ndarray) -> np.ndarray:
    """The first row of each run of rows equal in every column."""
    if not len(columns[0]):
        return np.zeros(0, dtype=np.intp)
    changes = columns[0][1:] != columns[0][:-1]
    for column in columns[1:]:
        changes |= column[1:] != column[:-1]
    return np.concatenate(([0], np.flatnonzero(changes) + 1))


def _run_sums(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The sum of ``values`` over each run (``starts``: :func:`_runs`), as int64."""
    return np.add.reduceat(values, starts, dtype=np.int64) if len(starts) else np.zeros(0, dtype=np.int64)


def combine(results: list[pa.Table]) -> pa.Table:
    """Merge partial summaries (e.g. of streamed trace chunks): sums add, max_ways takes the max."""
    if not results:
        return INSTRUCTION_RESULTS.empty_table()
    table = pa.concat_tables([r.select(INSTRUCTION_RESULTS.names).cast(INSTRUCTION_RESULTS) for r in results])
    grouped = group_aggregate(table, GROUP_KEYS,
        [("executions", "sum"), ("wavefronts", "sum"), ("ideal_wavefronts", "sum"),
         ("excess_wavefronts", "sum"), ("max_ways", "max")])
    return _results(grouped, {name: f"{name}_max" if name == "max_ways" else f"{name}_sum"
                              for name in INSTRUCTION_RESULTS.names[len(GROUP_KEYS):]}, 1)


@dataclass(frozen=True)
class LaneWavefronts:
    """Which wavefront of its execution served each lane's access, as the engine counted it.

    One entry per served piece: (execution ``row`` of the accesses given, ``lane``,
    ``request``, bank ``word``) — a lane touches every bank word of its access, in
    every request of a split access.  ``group`` indexes the lane groups the rules
    used for that execution (after load pairing; one per matrix for ldmatrix/stmatrix)
    and ``wavefront`` numbers the execution's wavefronts from 0, request by request,
    group by group, pass by pass.  The per-wavefront arrays list every wavefront,
    including those a rule adds without serving anything (``wavefront_extra``,
    ``extra_wavefronts``), so ``wavefronts[row]`` is the number of wavefronts of
    that row.
    """

    row: np.ndarray              # (k,) per served piece
    lane: np.ndarray
    request: np.ndarray
    group: np.ndarray
    wavefront: np.ndarray
    word: np.ndarray             # byte address // bank_bytes
    bank: np.ndarray
    wavefront_row: np.ndarray    # (w,) per wavefront, ordered by row, then wavefront index
    wavefront_index: np.ndarray
    wavefront_request: np.ndarray
    wavefront_group: np.ndarray
    wavefront_pass: np.ndarray   # 0-based pass inside its (request, group)
    wavefront_extra: np.ndarray  # True: added by the rule's extra_wavefronts, serves no lane
    wavefronts: np.ndarray       # (n,) per execution, as count_wavefronts
    ideal_wavefronts: np.ndarray
    max_ways: np.ndarray


def lane_wavefronts(accesses: WarpAccesses, rules: RuleSet) -> LaneWavefronts:
    """Per execution of ``accesses``, which lanes (and bank words) went into which wavefront.

    Runs the very lane grouping, pairing, request splitting and pass assignment that
    :func:`count_wavefronts` runs, keeping every lane's pass instead of only the totals;
    meant for a few executions (``explain``), not for whole launches.
    """
    _check_warp_size(accesses, rules)
    _check_addresses(accesses)
    n = len(accesses)
    pieces: list[tuple[np.ndarray, ...]] = []
    waves: list[tuple[np.ndarray, ...]] = []
    wavefronts = np.zeros(n, dtype=np.int32)
    ideal = np.zeros(n, dtype=np.int32)
    max_ways = np.zeros(n, dtype=np.int32)
    sourced = _counted_from_sources(accesses, rules)
    others = np.flatnonzero(~sourced)
    for rows, address, groups, plan in _parts(accesses.take(others), rules):
        rows = others[rows]
        ranks = np.zeros((plan.servings_requests, len(rows), groups.size), dtype=np.int32)
        passes = np.zeros((plan.servings_requests, len(rows), len(groups)), dtype=np.int32)
        wavefronts[rows], ideal[rows], max_ways[rows] = _count(address, groups, plan, rules, ranks, passes)
        piece, wave = _assignment(rows, address, groups, plan, rules, ranks, passes)
        pieces.append(piece)
        waves.append(wave)
    if sourced.any():
        rows = np.flatnonzero(sourced)
        served = []
        wavefronts[rows], ideal[rows], max_ways[rows] = _source_counts(accesses.take(rows), rules, served)
        piece, wave = _source_assignment(rows, accesses.address[rows], served, rules)
        pieces.append(piece)
        waves.append(wave)
    if not pieces:                                   # no executions: empty columns of the right count
        pieces, waves = [(np.zeros(0, np.int64),) * 7], [(np.zeros(0, np.int64),) * 6]
    row, lane, request, group, wavefront, word, bank = map(np.concatenate, zip(*pieces))
    order = np.lexsort((word, lane, wavefront, row))
    row, lane, request, group, wavefront, word, bank = (c[order] for c in (row, lane, request, group, wavefront,
                                                                            word, bank))
    w_row, w_index, w_request, w_group, w_pass, w_extra = map(np.concatenate, zip(*waves))
    order = np.lexsort((w_index, w_row))
    w_row, w_index, w_request, w_group, w_pass, w_extra = (c[order] for c in (w_row, w_index, w_request,
                                                                               w_group, w_pass, w_extra))
    return LaneWavefronts(row, lane, request, group, wavefront, word, bank, w_row, w_index, w_request, w_group,
                          w_pass, w_extra.astype(bool), wavefronts, ideal, max_ways)


def _results(grouped: pa.Table, columns: dict[str, str], scale: int) -> pa.Table:
    data = {key: grouped.column(key) for key in GROUP_KEYS}
    for name, source in columns.items():
        column = grouped.column(source)
        data[name] = column if name == "max_ways" or scale == 1 else pc.multiply(column.cast(pa.int64()), scale)
    table = pa.table(data).cast(INSTRUCTION_RESULTS)
    return table.sort_by([(key, "ascending") for key in GROUP_KEYS])


# ---------------------------------------------------------------------------
# Classes of executions and their plans
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class _Plan:
    """How the executions of one class are cut into groups and requests."""

    groups: np.ndarray            # (G, S) lanes of each group
    paired_groups: np.ndarray | None   # (G/f, S*f) groups after load pairing, None if pairing never applies
    partners: tuple[int, ...]
    width: int                    # bytes per lane per request
    requests: int                 # separate requests per lane access (split_bytes)
    extra_wavefronts: int
    distinct: bool                # same bank row counts once (multicast/merge) or every access counts
    repeat: int = 1               # the whole access is served this many times (an atomic op's passes)
    servings: tuple[str, ...] = ("banks",)   # how each serving counts a group's passes (OpRule.servings)
    ideal_bytes: int = 0          # > 0: ideal = ceil(active lanes x width / ideal_bytes), capped (rule key ideal)

    @property
    def servings_requests(self) -> int:
        """Rows of the per-request arrays: every request of every serving, serving-major."""
        return len(self.servings) * self.requests


def _plan(rules: RuleSet, kind: str, nbytes: int, matrices: int, op: str = "") -> _Plan:
    if nbytes not in (1, 2, 4, 8, 16):
        raise InputError(f"{nbytes}-byte {kind} accesses are not supported (widths are 1, 2, 4, 8 or 16 bytes)")
    if not rules.supports(kind):
        raise InputError(f"rule set {rules.name!r} has no rule for {kind} (the instruction does not exist on "
                         f"{rules.title})")
    distinct = rules.merges(kind, op)
    repeat = rules.passes(kind, op)
    servings = rules.op_rule(kind, op).servings
    width = min(nbytes, rules.split_bytes)     # wider accesses are separate requests of split_bytes each
    requests = nbytes // width
    if rules.matrix is not None and kind in rules.matrix.kinds:
        lanes = rules.matrix.lanes
        if nbytes != rules.matrix.row_bytes or not 1 <= matrices <= rules.warp_size // lanes:
            raise InputError(f"{kind} with {matrices} matrices of {nbytes}-byte rows does not fit rule set "
                             f"{rules.name!r} ({rules.matrix.row_bytes}-byte rows, at most "
                             f"{rules.warp_size // lanes} matrices)")
        return _Plan(np.arange(matrices * lanes).reshape(matrices, lanes), None, (), width, requests, 0, distinct,
                     repeat, servings)           # a matrix's ideal is one wavefront per matrix, whatever the rule
    rule = rules.lane_group_rule(kind, width)  # lane groups are chosen by the request width
    groups = np.array(rule.groups)
    paired, partners = None, ()
    if rules.pairing is not None and rules.pairing.applies(kind, width):
        factor = rules.pairing.factor
        paired = groups.reshape(len(groups) // factor, factor * groups.shape[1])
        partners = rules.pairing.partners
    ideal_bytes = rules.banks * rules.bank_bytes if rules.ideal == "bytes" else 0
    return _Plan(groups, paired, partners, width, requests, rule.extra_wavefronts, distinct, repeat, servings,
                 ideal_bytes)


def count_wavefronts(acc: WarpAccesses, rules: RuleSet,
                     memoise: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(wavefronts, ideal_wavefronts, max_ways) per execution, as int32/int32/int32 arrays.

    With ``memoise`` the rules run once per distinct *pattern*: executions equal up to
    a shift of all their addresses by a multiple of ``row_bytes`` cost the same under
    every rule set (docs/rules.md, "Shift invariance"), and real kernels repeat a few
    patterns per instruction at many tile bases.  The results are identical either way.
    """
    n = len(acc)
    by_patterns = acc.patterns is not None and acc.source is None and memoise and n >= 2
    if not by_patterns:                              # (the patterns' memo checks the executions it counts)
        _check_addresses(acc)
    sourced = _counted_from_sources(acc, rules)
    if sourced.any():                                # copies counted from their sources; the rest as below
        results = tuple(np.zeros(n, dtype=np.int32) for _ in range(3))
        for rows, counts in ((sourced, _source_counts(acc.take(sourced), rules)),
                             (~sourced, count_wavefronts(acc.take(~sourced), rules, memoise))):
            for result, count in zip(results, counts):
                result[rows] = count
        return results
    if by_patterns:
        return _count_patterns(acc, rules)
    if not memoise or n < 2:
        return _count_executions(acc, rules)
    representative = _representatives(acc.address, _class_codes(acc), rules)
    unique = np.nonzero(representative == np.arange(n))[0]
    if len(unique) == n:
        return _count_executions(acc, rules)
    position = np.empty(n, dtype=np.intp)
    position[unique] = np.arange(len(unique))
    take = position[representative]
    return tuple(result[take] for result in _count_executions(acc.take(unique), rules))


#: Adds the eight bytes of a 64-bit word into its top byte (each byte a count, their sum below 256).
_BYTE_SUM = np.uint64(0x0101_0101_0101_0101)


def _row_counts(mask: np.ndarray) -> np.ndarray:
    """The true entries of each row of a 2-D bool array (int64).  Rows of whole 64-bit words are added eight
    lanes at a time (a bool is one byte, 0 or 1): a few word additions instead of a reduction along each
    short row, numpy's slow case."""
    rows, lanes = mask.shape
    if not lanes % 8 and lanes < 256 and mask.flags.c_contiguous:
        words = mask.view(np.uint64)
        total = words[:, 0].copy()
        for column in range(1, lanes // 8):
            total += words[:, column]                              # every byte stays below 256: no carry
        return ((total * _BYTE_SUM) >> np.uint64(56)).astype(np.int64)
    return np.count_nonzero(mask, axis=1)


def _check_warp_size(acc: WarpAccesses, rules: RuleSet) -> None:
    if acc.warp_size != rules.warp_size:
        raise InputError(f"kernel {acc.kernel!r}: accesses have {acc.warp_size} lanes per warp but "
                         f"rule set {rules.name!r} expects {rules.warp_size}; the producer must emit "
                         f"{rules.warp_size}-lane warps for this device")


def _check_addresses(acc: WarpAccesses) -> None:
    if len(acc) and acc.address.min() < INACTIVE:
        row = int(np.nonzero((acc.address < INACTIVE).any(axis=1))[0][0])
        raise InputError(f"kernel {acc.kernel!r}: execution {int(acc.execution[row])} has a negative address")


def _class_codes(acc: WarpAccesses) -> np.ndarray:
    """Per execution, its class (operation, kind, bytes, matrices) as one int64 below 2**31 (made in int32, in
    place, then widened once: a quarter of the CPU of widening each part first)."""
    code = np.left_shift(acc.op, 24, dtype=np.int32)
    code |= np.left_shift(acc.kind, 16, dtype=np.int32)
    code |= np.left_shift(acc.bytes, 8, dtype=np.int32)
    code |= acc.matrices
    return code.astype(np.int64)


def _count_patterns(acc: WarpAccesses, rules: RuleSet) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`count_wavefronts`'s memo over address patterns (:class:`~traceconf.accesses.AddressPatterns`):
    the rules run once per distinct (class, row, active lanes), rows compared after the shift by whole bank
    rows the memo of addresses allows, so the executions of one guarded instruction at many tile bases share
    their rows and differ only in masks.  (A row's lanes that none of its executions activates may hold any
    address: they only keep apart rows that could have been one.)"""
    patterns = acc.patterns
    if len(patterns.rows) and patterns.rows.min() < INACTIVE:  # a negative address, maybe in an inactive lane
        _check_addresses(acc)
    class_code = _class_codes(acc)
    row_class = np.zeros(len(patterns.rows), dtype=np.int64)
    row_class[patterns.index] = class_code
    one_class = np.array_equal(row_class[patterns.index], class_code)   # each row read by one class (as
    # emulators log them): the class goes with the row; else rows are compared alone and the class added after
    row = _representatives(patterns.rows, row_class if one_class else np.zeros_like(row_class), rules)
    row = row[patterns.index]                                    # each execution's first row of its pattern
    group = row if one_class else factorize((class_code << 32) | row)[0]
    if acc.warp_size <= 32:                                      # (groups below 2**31)
        key = np.left_shift(group, 32, dtype=np.int64)
        key |= patterns.mask.view(np.int64)      # (below 2**32: the same as widening it)
    else:                                                        # 64-bit masks: numbered first
        masks, distinct = factorize(patterns.mask.view(np.int64))
        key = group.astype(np.int64) * distinct + masks
    pair, pairs = factorize(key)
    first = first_rows(pair, pairs)                              # the first execution of each pair
    unique = acc.take(first)
    results = tuple(np.zeros(pairs, dtype=np.int32) for _ in range(3))
    for rows, plan in _classes(unique, rules):
        by_masks = lanemasks.pays(row[first[rows]]) if lanemasks.counts_by_masks(plan, rules) else \
            np.zeros(len(rows), dtype=bool)
        if by_masks.any():
            part = rows[by_masks]
            for result, count in zip(results, lanemasks.count(patterns.rows, row[first[part]],
                                                              unique.patterns.mask[part], plan, rules)):
                result[part] = count
        if not by_masks.all():
            part = rows[~by_masks]
            for result, count in zip(results, _count_executions(unique.take(part), rules)):
                result[part] = count
    return tuple(result[pair] for result in results)


def _representatives(address: np.ndarray, class_code: np.ndarray, rules: RuleSet) -> np.ndarray:
    """Per row of ``address`` (an execution's addresses, -1 inactive), the first row with the same pattern
    (itself if none): same ``class_code``, same active lanes, and addresses equal after subtracting each
    one's lowest active address rounded down to ``row_bytes``.  A hash proposes the pairs; an exact
    comparison confirms every one."""
    n, warp = address.shape
    if not n:
        return np.zeros(0, dtype=np.intp)
    # addresses below 2**31 (shared offsets always are) keep their normalised rows in 32 bits: half the memory
    # every pass below moves (a 32-bit hash only proposes more pairs, which the exact check turns down)
    narrow = int(address.max()) < 1 << 31
    multipliers = _LANE_MULTIPLIERS[:warp].astype(np.uint32) if narrow else _LANE_MULTIPLIERS[:warp]
    row_mask = np.uint64((1 << 64) - rules.row_bytes)            # clears the offset inside a bank row
    hashed = np.empty(n, dtype=multipliers.dtype)
    normal = np.empty(address.shape, dtype=np.int32 if narrow else np.int64)   # kept for the exact check
    for start in range(0, n, MEMO_CHUNK_ROWS):
        rows = slice(start, start + MEMO_CHUNK_ROWS)
        _normalised(address[rows], row_mask, out=normal[rows])
        np.matmul(normal[rows].view(multipliers.dtype), multipliers, out=hashed[rows])   # wraps around
    key = hashed.astype(np.uint64, copy=False)
    key ^= class_code.astype(np.uint64) * _CLASS_MULTIPLIER
    codes, distinct = factorize(key)                               # O(n) hash table
    if distinct > n * MEMO_MAX_UNIQUE:                             # few repeats: the check would cost more
        return np.arange(n)
    first = first_rows(codes, distinct)
    representative = first[codes]
    same = class_code == class_code[representative]
    pattern = normal[first]                                        # the normalised first occurrences
    for start in range(0, n, MEMO_CHUNK_ROWS):                     # exact check: a hash collision is no error
        rows = slice(start, start + MEMO_CHUNK_ROWS)
        differs = normal[rows] != pattern[codes[rows]]
        if differs.any():                                          # rare: a flat test first, rows only then
            same[rows] &= ~differs.any(axis=1)
    return np.where(same, representative, np.arange(n))


def _normalised(address: np.ndarray, row_mask: np.uint64, out: np.ndarray):
    """``out`` = addresses - base with inactive lanes kept at -1 (32-bit ``out``: for addresses below 2**31);
    base = lowest active address rounded down to the bank row (0 for a warp without active lanes)."""
    lowest = address.view(np.uint64).min(axis=1)                 # -1 (inactive) is the largest uint64
    base = np.where(lowest == np.uint64((1 << 64) - 1), np.uint64(0), lowest & row_mask).view(np.int64)
    np.subtract(address, base[:, None], out=out)
    np.maximum(out, INACTIVE, out=out)                             # inactive: -1 - base < -1; active: >= 0


def _count_executions(acc: WarpAccesses, rules: RuleSet) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rules applied to every execution (no memo)."""
    n = len(acc)
    wavefronts = np.zeros(n, dtype=np.int32)
    ideal = np.zeros(n, dtype=np.int32)
    max_ways = np.zeros(n, dtype=np.int32)
    for rows, address, groups, plan in _parts(acc, rules):
        wavefronts[rows], ideal[rows], max_ways[rows] = _count(address, groups, plan, rules)
    return wavefronts, ideal, max_ways


def _parts(acc: WarpAccesses, rules: RuleSet):
    """(rows, addresses, groups, plan) for the executions of ``acc``, cut by class (kind, bytes, matrices),
    into chunks, and by load pairing: each part is one lane-group layout."""
    for rows, plan in _classes(acc, rules):
        for begin in range(0, len(rows), _chunk_rows(plan, rules)):
            chunk_rows = rows[begin:begin + _chunk_rows(plan, rules)]
            address = acc.address[chunk_rows]
            if plan.paired_groups is None:
                yield chunk_rows, address, plan.groups, plan
                continue
            paired = _pairs(address, plan.partners)
            for which, groups in ((~paired, plan.groups), (paired, plan.paired_groups)):
                if which.any():
                    yield chunk_rows[which], address[which], groups, plan


def _classes(acc: WarpAccesses, rules: RuleSet):
    """(rows, plan) per class (operation, kind, bytes, matrices) of the executions of ``acc``; a class the rule
    set cannot count is an error naming its first execution."""
    if len(acc) == 0:
        return
    class_code = _class_codes(acc)
    group, groups = factorize(class_code)
    order = np.argsort(group.astype(np.uint16) if groups <= 1 << 16 else group, kind="stable")   # radix sort
    bounds = np.searchsorted(group[order], np.arange(groups + 1))
    codes = class_code[first_rows(group, groups)]
    for c in np.argsort(codes).tolist():                         # classes in the order of their codes
        code, rows = codes[c], order[bounds[c]:bounds[c + 1]]
        kind, nbytes, matrices = KINDS[int((code >> 16) & 0xFF)], int((code >> 8) & 0xFF), int(code & 0xFF)
        try:
            plan = _plan(rules, kind, nbytes, matrices, OPS[int(code >> 24)])
        except InputError as error:
            first = int(acc.execution[rows[0]])
            raise InputError(f"kernel {acc.kernel!r}, execution {first} (instruction "
                             f"{int(acc.instruction[rows[0]])}): {error.message}") from None
        yield rows, plan


def _chunk_rows(plan: _Plan, rules: RuleSet) -> int:
    return max(1, CHUNK_KEYS // (rules.warp_size * plan.servings_requests))


def _pairs(address: np.ndarray, partners: tuple[int, ...]) -> np.ndarray:
    """Per execution: does every active lane n read what lane n^x reads (or is n^x inactive), for some x?"""
    n, warp = address.shape
    lanes = np.arange(warp)
    paired = np.zeros(n, dtype=bool)
    for x in partners:
        if x & (x - 1) == 0:      # lanes n and n^x are the two halves of aligned blocks of 2x lanes: views
            blocks = address.reshape(n, warp // (2 * x), 2, x)
            a, b = blocks[:, :, 0, :], blocks[:, :, 1, :]
        else:
            low = lanes[lanes < lanes ^ x]
            a, b = address[:, low], address[:, low ^ x]
        agree = (a == b) | (a == INACTIVE) | (b == INACTIVE)
        paired |= agree.reshape(n, -1).all(axis=1)
    return paired


# ---------------------------------------------------------------------------
# Counting executions that share one group layout
# ---------------------------------------------------------------------------

def _count(address: np.ndarray, groups: np.ndarray, plan: _Plan, rules: RuleSet, ranks: np.ndarray | None = None,
           group_passes: np.ndarray | None = None):
    """(wavefronts, ideal, max_ways) of executions (rows of ``address``) cut into ``groups``.

    When given (by :func:`lane_wavefronts`), ``ranks`` (requests, executions, lanes of ``groups.ravel()``)
    receives the pass (1-based) of its group that serves each active lane in each request, 0 for inactive
    lanes, and ``group_passes`` (requests, executions, groups) each group's passes: the largest of its
    lanes' plus ``extra_wavefronts``, 0 for a group without active lanes.  "Requests" are those of every
    serving of the access in turn (``plan.servings``: a ZFILL copy is served twice).
    """
    n_groups, group_lanes = groups.shape
    lanes = groups.ravel()
    if np.array_equal(lanes, np.arange(len(lanes))):
        address = address[:, :len(lanes)]
    else:
        address = address[:, lanes]                  # group members side by side
    active = address != INACTIVE
    group_active = active.reshape(len(address), n_groups, group_lanes).any(axis=2)
    # Rows relative to the lowest row in use: bank and row relations are unchanged, keys stay small.
    lowest, highest = int(address.view(np.uint64).min()), int(address.max())   # -1 is the largest uint64
    base = lowest - lowest % rules.row_bytes if lowest <= highest else 0
    wavefronts = ideal = max_ways = 0
    for index in range(plan.servings_requests):
        serving, request = plan.servings[index // plan.requests], index % plan.requests
        shift = base - request * plan.width          # requests > 1 only for split accesses (CC 1.x, TeraScale)
        relative = address - shift                   # inactive lanes hold junk; ``active`` masks them
        rows = max(0, highest - shift) // rules.row_bytes + 1
        served_at = None if ranks is None else ranks[index]
        if serving == "placements":
            placed, placed_rows = _placements(relative, active, rows, group_lanes, plan, rules)
            passes = _multicast_passes(placed, active, placed_rows, n_groups, group_lanes,
                                       replace(plan, distinct=True), rules, served_at)
        elif serving == "one":                       # every active lane in the group's one pass
            passes = group_active.astype(np.int32)
            if served_at is not None:
                served_at[:] = active
        elif rules.broadcast == "single_word":
            passes = _single_word_passes(relative, active, n_groups, group_lanes, rules, served_at)
        else:
            passes = _multicast_passes(relative, active, rows, n_groups, group_lanes, plan, rules, served_at)
        passes = (passes + plan.extra_wavefronts) * group_active
        if group_passes is not None:
            group_passes[index] = passes
        wavefronts = wavefronts + passes.sum(axis=1)
        if plan.ideal_bytes:                         # the wavefronts the active bytes fill, at most those taken
            filled = -(-_row_counts(active) * plan.width // plan.ideal_bytes)
            ideal = ideal + np.minimum(filled, passes.sum(axis=1))
        else:
            ideal = ideal + group_active.sum(axis=1)
        max_ways = np.maximum(max_ways, passes.max(axis=1))
    return wavefronts * plan.repeat, ideal * plan.repeat, max_ways


def _assignment(rows: np.ndarray, address: np.ndarray, groups: np.ndarray, plan: _Plan, rules: RuleSet,
                ranks: np.ndarray, passes: np.ndarray):
    """(pieces, wavefronts) of executions ``rows`` as :func:`_count` left them: ``ranks[request, execution,
    position]`` is the 1-based pass that served the lane at ``groups.ravel()[position]`` (0: inactive),
    ``passes[request, execution, group]`` the group's passes.  Wavefronts are numbered request by request,
    group by group; a group's passes past its largest rank are the rule's extra wavefronts."""
    requests, m, n_groups = passes.shape
    group_lanes = groups.shape[1]
    lanes = groups.ravel()
    per_execution = passes.transpose(1, 0, 2).reshape(m, requests * n_groups)   # request-major order
    offset = np.cumsum(per_execution, axis=1) - per_execution
    # Pieces: one per (request, execution, position) with a rank, times the bank words of the access.
    r, i, j = np.nonzero(ranks)
    g = j // group_lanes
    wavefront = offset[i, r * n_groups + g] + ranks[r, i, j] - 1
    lane = lanes[j]
    start = address[i, lane] - address[i, lane] % plan.width + r % plan.requests * plan.width
    words = max(1, plan.width // rules.bank_bytes)
    word = (start // rules.bank_bytes)[:, None] + np.arange(words)
    piece = tuple(np.repeat(column, words) for column in (rows[i], lane, r, g, wavefront)) + (word.ravel(),)
    piece = piece + (piece[5] % rules.banks,)
    # Wavefronts: per (execution, request, group) its passes; those past the served ones are the extra ones.
    e, q, h = np.nonzero(per_execution.reshape(m, requests, n_groups))
    count = per_execution.reshape(m, requests, n_groups)[e, q, h]
    first = offset[e, q * n_groups + h]
    owner = np.repeat(np.arange(len(count)), count)
    pass_ = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
    served = ranks.reshape(requests, m, n_groups, group_lanes).max(axis=3)
    extra = pass_ >= served[q, e, h][owner]
    wave = (rows[e][owner], first[owner] + pass_, q[owner], h[owner], pass_, extra)
    return piece, wave


def _placements(relative: np.ndarray, active: np.ndarray, rows: int, group_lanes: int, plan: _Plan,
                rules: RuleSet) -> tuple[np.ndarray, int]:
    """(addresses, rows) whose multicast count is the ``placements`` count (docs/rules.md, step 4).

    A group's passes are its distinct placements ``(row, chunk XOR p)`` of its distinct destinations, ``chunk``
    the destination's ``plan.width``-byte unit inside its bank row and ``p`` the position in the group of the
    lowest lane writing it.  Each lane is given the address ``placement << row bits`` (bank 0, the placement
    as its row), so the multicast rule's distinct rows of the busiest bank are exactly the distinct placements.
    """
    m, warp = relative.shape
    position = np.arange(warp) % group_lanes
    unit = relative // plan.width
    # The lowest lane of each destination: a stable sort by (group, destination) puts it first in its run.
    span = int(unit[active].max()) + 2 if active.any() else 2
    destination = np.where(active, unit, span - 1) + (np.arange(warp) // group_lanes) * span
    order = np.argsort(destination, axis=1, kind="stable")
    ordered = np.take_along_axis(destination, order, axis=1)
    first = np.ones(ordered.shape, dtype=bool)
    np.not_equal(ordered[:, 1:], ordered[:, :-1], out=first[:, 1:])
    run_start = np.maximum.accumulate(np.where(first, np.arange(warp), 0), axis=1)
    writer = np.empty_like(order)
    np.put_along_axis(writer, order, np.take_along_axis(order, run_start, axis=1), axis=1)
    chunks = rules.row_bytes // plan.width
    placements_per_row = 1 << max(chunks - 1, group_lanes - 1, 1).bit_length()   # room for chunk XOR p
    placement = (relative // rules.row_bytes) * placements_per_row + ((unit % chunks) ^ position[writer])
    row_shift = rules.row_bytes.bit_length() - 1
    return np.where(active, placement, 0) << row_shift, rows * placements_per_row


def _multicast_passes(relative: np.ndarray, active: np.ndarray, rows: int, n_groups: int, group_lanes: int,
                      plan: _Plan, rules: RuleSet, served_at: np.ndarray | None = None) -> np.ndarray:
    """Per (execution, group): the busiest bank's number of distinct bank rows.

    A lane is served in the pass numbered by its key's rank among the distinct keys
    of its bank (1-based; written to ``served_at`` when given), so a group's passes
    are its largest rank.

    An aligned access of ``unit = max(width, bank_bytes)`` bytes touches all banks
    of its unit in one row, so every bank of a unit has the same count and one
    key per lane suffices: ``group | unit | row`` (``| lane`` when same-row
    accesses must not merge).  Inactive lanes get a unit past the last one, a
    bank of their own that never raises a group's maximum.
    """
    m, warp = relative.shape
    unit = max(plan.width, rules.bank_bytes)
    units = rules.banks * rules.bank_bytes // unit
    row_shift = rules.row_bytes.bit_length() - 1
    fits_int32 = rows << row_shift < 1 << 31         # the relative byte addresses themselves
    if not plan.distinct:
        rows *= group_lanes
    row_bits = max(1, rows.bit_length())
    unit_bits = units.bit_length()                   # room for the inactive unit
    group_bits = (n_groups - 1).bit_length()
    dtype = np.int32 if fits_int32 and row_bits + unit_bits + group_bits < 31 else np.int64
    relative = relative.astype(dtype, copy=False)
    group_prefix = (np.arange(warp, dtype=dtype) // group_lanes) << (unit_bits + row_bits)
    row = relative >> row_shift
    if not plan.distinct:                            # every access its own key: count, do not merge
        row = row * group_lanes + np.arange(warp, dtype=dtype) % group_lanes
    keys = (((relative >> (unit.bit_length() - 1)) & (units - 1)) << row_bits) | row | group_prefix
    # inactive lanes: their group's key past the last unit, by arithmetic (np.where branches per lane, several
    # times slower on an irregular mask); a wrapped difference still gives the key exactly
    keys = keys.astype(dtype, copy=False)
    keys -= (keys - (group_prefix | (units << row_bits))) * ~active
    if served_at is None:
        keys.sort(axis=1)                            # groups stay in their own slots (high bits)
    else:                                            # the same, remembering where each lane went
        order = np.argsort(keys, axis=1, kind="stable")
        keys = np.take_along_axis(keys, order, axis=1)
    change = keys[:, 1:] ^ keys[:, :-1]
    new_key = np.ones(keys.shape, dtype=bool)
    np.not_equal(change, 0, out=new_key[:, 1:])
    new_bank = np.ones(keys.shape, dtype=bool)
    np.greater_equal(change, 1 << row_bits, out=new_bank[:, 1:])
    count_type = np.int8 if warp < 128 else np.int16
    distinct_so_far = np.cumsum(new_key, axis=1, dtype=count_type)
    before_bank = ((distinct_so_far - new_key) * new_bank).astype(count_type, copy=False)
    np.maximum.accumulate(before_bank, axis=1, out=before_bank)
    per_bank = distinct_so_far - before_bank           # the rank of each key inside its bank
    if served_at is not None:
        np.put_along_axis(served_at, order, per_bank, axis=1)
        served_at *= active
    return per_bank.reshape(m, n_groups, group_lanes).max(axis=2).astype(np.int32)


def _single_word_passes(relative: np.ndarray, active: np.ndarray, n_groups: int, group_lanes: int,
                        rules: RuleSet, served_at: np.ndarray | None = None) -> np.ndarray:
    """CC 1.x §1.1, per (execution, group): steps of one broadcast word (most lanes, lowest word on ties)
    plus the lowest remaining lane of every other bank, until every lane is served.

    ``served_at`` (executions, lanes), when given, receives the step (1-based) that serves each lane; a
    group's passes are its last step, the largest of them."""
    m = len(relative)
    word = (relative >> (rules.bank_bytes.bit_length() - 1)).reshape(m * n_groups, group_lanes)
    remaining = active.reshape(m * n_groups, group_lanes).copy()
    bank = word & (rules.banks - 1)
    steps = np.zeros(len(word), dtype=np.int32)
    live = np.nonzero(remaining.any(axis=1))[0]
    word, bank, remaining = word[live], bank[live], remaining[live]
    same_word = word[:, :, None] == word[:, None, :]
    lower_same_bank = (bank[:, :, None] == bank[:, None, :]) & np.tri(group_lanes, k=-1, dtype=bool)
    no_word = np.iinfo(word.dtype).max
    step_of = None if served_at is None else served_at.reshape(m * n_groups, group_lanes)
    step = 0
    while len(live):
        step += 1
        steps[live] += 1
        lanes_of_word = np.where(remaining, (same_word & remaining[:, None, :]).sum(axis=2), 0)
        best = lanes_of_word.max(axis=1, keepdims=True)
        broadcast = np.where(remaining & (lanes_of_word == best), word, no_word).min(axis=1, keepdims=True)
        first_of_bank = remaining & ~(lower_same_bank & remaining[:, None, :]).any(axis=2)
        served = (remaining & (word == broadcast)) | (first_of_bank & (bank != (broadcast & (rules.banks - 1))))
        remaining &= ~served
        if step_of is not None:
            step_of[live] = np.where(served, step, step_of[live])
        keep = remaining.any(axis=1)
        live, word, bank, remaining = live[keep], word[keep], bank[keep], remaining[keep]
        same_word, lower_same_bank = same_word[keep], lower_same_bank[keep]
    return steps.reshape(m, n_groups)


# ---------------------------------------------------------------------------
# Copies counted from their global sources (``source_passes = "lines"``: docs/rules.md)
# ---------------------------------------------------------------------------

#: The measured unit of the ``lines`` rule: 16-byte copies (cp.async.cg, LDGSTS.BYPASS.128) from 128-byte
#: global lines of 32-byte sectors into the rule set's bank rows; a lane's key is its source and destination
#: chunks' XOR inside 64 bytes (the ldgsts_probe pages, docs/hardware.md).
SOURCE_CHUNK, SOURCE_LINE, SOURCE_KEY_SPAN = 16, 128, 64


def instructions_from_sources(accesses: WarpAccesses | pa.Table, rules: RuleSet) -> set[int]:
    """The instructions every execution of which ``rules`` count from their global sources."""
    if isinstance(accesses, pa.Table):
        if "source" not in accesses.column_names:
            return set()
        return set().union(*(instructions_from_sources(part, rules)
                             for part in from_table(accesses, warp_size=rules.warp_size)))
    if accesses.source is None:                  # no execution carries sources (the common case: no copies)
        return set()
    counted = _counted_from_sources(accesses, rules)
    return set(np.unique(accesses.instruction[counted]).tolist()) - \
        set(np.unique(accesses.instruction[~counted]).tolist())


def _counted_from_sources(acc: WarpAccesses, rules: RuleSet) -> np.ndarray:
    """Per execution: is it a 16-byte copy whose operation the rule set counts from its sources, with the
    source of every active lane known, or (an operation with ``fill_passes``) the lane zero-filling?"""
    counted = np.zeros(len(acc), dtype=bool)
    if acc.source is None and acc.src_size is None:
        return counted
    for op, rule in rules.ops.items():
        if rule.source_passes == "lines":
            counted |= (acc.op == OPS.index(op)) & (acc.bytes == SOURCE_CHUNK)
    active = acc.address != INACTIVE
    return counted & ~(_reading(acc, rules) & (acc.sources() < 0)).any(axis=1) & active.any(axis=1)


def _fill_rules(acc: WarpAccesses, rules: RuleSet) -> tuple[np.ndarray, np.ndarray]:
    """Per execution: does its operation have a fill pass (``fill_passes``), and one in every copy
    (``fill_always``)?"""
    fills, always = np.zeros(len(acc), dtype=bool), np.zeros(len(acc), dtype=bool)
    for op, rule in rules.ops.items():
        if rule.fill_passes:
            fills |= acc.op == OPS.index(op)
            always |= (acc.op == OPS.index(op)) & rule.fill_always
    return fills, always


def _reading(acc: WarpAccesses, rules: RuleSet) -> np.ndarray:
    """Per lane: is it active and reads its source (not a zero-filling lane, src-size 0, of an operation with
    a fill pass)?"""
    return (acc.address != INACTIVE) & ~(_fill_rules(acc, rules)[0][:, None] & (acc.src_sizes() == 0))


def _source_counts(acc: WarpAccesses, rules: RuleSet, served: list | None = None):
    """(wavefronts, ideal, max_ways) of copies by the ``lines`` rule over the lanes that read: drop lanes whose
    destination repeats a lower lane's (reading or zero-filling); the k-th lane counted from the highest to read a
    source chunk into a destination bank row at a destination chunk of one parity goes to request k; per request,
    lanes group by (source line, destination bank row); a lane is paired when a lane of its request reads the
    other half of its source sector into the other half of its destination sector; a group costs its distinct
    (chunk XOR inside 64 bytes, paired or, unpaired, the half of its source sector) keys.  Ideal: the wavefronts
    the bytes of the lanes kept fill (at most those taken).  A fill pass (``fill_passes``, :func:`_fill_passes`)
    adds its own.

    ``served``, when given (:func:`lane_wavefronts`), receives per chunk of executions (first row, request,
    group, wavefront) per lane, -1 for inactive lanes: groups numbered by their lowest lane, wavefronts group
    by group, a group's keys in the order of their lowest lanes; a dropped lane shares its writer's; then the
    fill pass's (:func:`_fill_passes`)."""
    wavefronts, ideal, max_ways = (np.zeros(len(acc), dtype=np.int32) for _ in range(3))
    lanes = np.arange(acc.warp_size)
    lower = lanes[None, :] < lanes[:, None]                      # [lane, other]: other < lane
    higher = lower.T                                             # [lane, other]: other > lane
    fill_runs, reading = _fill_passes(acc, rules), _reading(acc, rules)
    for start in range(0, len(acc), MEMO_CHUNK_ROWS):
        rows = slice(start, start + MEMO_CHUNK_ROWS)
        destination, source = acc.address[rows], acc.sources()[rows]
        active, written = reading[rows], destination != INACTIVE

        def same(values: np.ndarray) -> np.ndarray:              # [execution, lane, other]
            return values[:, :, None] == values[:, None, :]

        # a destination a lower lane writes, reading or zero-filling, is not read into again (the held-out probes)
        kept = active & ~(same(destination) & lower & written[:, None, :]).any(axis=2)
        chunk, place = source // SOURCE_CHUNK, destination // SOURCE_CHUNK
        row, xor = destination // rules.row_bytes, ((source ^ destination) % SOURCE_KEY_SPAN) // SOURCE_CHUNK
        # a chunk read into one row at places of one parity: the highest lane's in the first request, the next
        # highest's in the second, ...
        request = (same(chunk) & same(row) & same(place % 2) & higher & kept[:, None, :]).sum(axis=2)
        partner = ((chunk[:, None, :] == (chunk ^ 1)[:, :, None]) & (place[:, None, :] == (place ^ 1)[:, :, None])
                   & same(request) & kept[:, None, :])
        # paired lanes share a key; an unpaired lane's also names which half of its source sector it reads
        half = np.where(partner.any(axis=2), 2, chunk % 2)
        key = xor * 4 + half
        group = same(request) & same(source // SOURCE_LINE) & same(row)
        group &= kept[:, None, :] & kept[:, :, None]
        first = kept & ~(group & same(key) & lower).any(axis=2)       # the first lane of each (group, key)
        wavefronts[rows] = first.sum(axis=1)
        max_ways[rows] = np.where(kept, (group & first[:, None, :]).sum(axis=2), 0).max(axis=1)
        filled = -(-kept.sum(axis=1) * SOURCE_CHUNK // rules.row_bytes)     # one destination's bytes once
        ideal[rows] = np.minimum(filled, wavefronts[rows])
        runs = fill_runs[rows]
        if served is not None:
            fill_wave = wavefronts[rows][:, None] + np.cumsum(runs, axis=1) - runs   # a quarter's first
            leader = np.argmax(group, axis=2)                           # the lowest lane of a kept lane's group
            key_first = np.argmax(group & same(key), axis=2)
            leads = kept & (leader == lanes)
            group_index = (leads[:, None, :] & (lanes[None, None, :] < leader[:, :, None])).sum(axis=2)
            earlier = ((leader[:, None, :] < leader[:, :, None]) | (same(leader) & (lanes <= key_first[:, :, None])))
            wave = (first[:, None, :] & earlier).sum(axis=2) - 1
            writer = np.argmax(same(destination) & written[:, None, :], axis=2)
            pick = [np.take_along_axis(values, writer, axis=1) for values in (request, group_index, wave)]
            pick = [np.where(active, values, -1) for values in pick]
            # the fill pass's groups follow the reading lanes'; a zero-filling lane is in its quarter's first, and
            # so is a reading lane whose destination a lower zero-filling lane writes
            quarter_lanes = acc.warp_size // runs.shape[1]
            quarter = np.repeat(np.arange(runs.shape[1]), quarter_lanes)
            filling = written & ~(active & np.take_along_axis(active, writer, axis=1))
            fill_group = (leads.sum(axis=1)[:, None] + np.cumsum(runs > 0, axis=1) - 1)[:, quarter]
            for values, fill in zip(pick, (0, fill_group, fill_wave[:, quarter])):
                values[filling] = np.broadcast_to(fill, values.shape)[filling]
            served.append((start, *pick, fill_wave, fill_group[:, ::quarter_lanes], runs))
        wavefronts[rows] += runs.sum(axis=1)
        # the fill pass's ideal: a 16-byte store's from every active lane (a destination two write, twice)
        storing = np.count_nonzero(written, axis=1) * runs.any(axis=1)
        ideal[rows] += -(-storing * SOURCE_CHUNK // rules.row_bytes)
        max_ways[rows] = np.maximum(max_ways[rows], runs.max(axis=1))
    return wavefronts, ideal, max_ways


def _fill_passes(acc: WarpAccesses, rules: RuleSet) -> np.ndarray:
    """Per (execution, quarter-warp): the wavefronts of the fill pass of a copy whose operation has
    ``fill_passes`` and a lane of which zero-fills (copies fewer bytes than the copy; with ``fill_always``,
    every copy).  Every active lane waits with the active lanes (reading or zero-filling) writing its 16-byte
    unit of the bank row, in another row or at its very destination, and a reading lane also with the reading
    lanes whose sources lie at its 16-byte position of their 128-byte lines; the pass is the most lanes one lane
    waits with, itself included; 0 without an active lane.  Where the destinations are distinct and take one
    16-byte store pass this is the most lanes reading at one position (the ldgsts_zfill_halves probes: that
    position, not the half of the 32-byte sector, decides); elsewhere those a lane waits with at its unit add to
    those at its position (the ldgsts_zfill_rows, ldgsts_zfill_guard and ldgsts_zfill_dups probes).  A
    quarter-warp is the lanes whose 16-byte chunks fill one wavefront (docs/rules.md "Copies from their
    sources")."""
    active, sizes, (fills, always) = acc.address != INACTIVE, acc.src_sizes(), _fill_rules(acc, rules)
    on = fills & (always | (active & (sizes >= 0) & (sizes < acc.bytes[:, None])).any(axis=1))
    group_lanes = rules.banks * rules.bank_bytes // SOURCE_CHUNK
    shape = (len(acc), acc.warp_size // group_lanes, group_lanes)
    reading, live = _reading(acc, rules).reshape(shape), active.reshape(shape)
    position = (acc.sources() // SOURCE_CHUNK % (SOURCE_LINE // SOURCE_CHUNK)).reshape(shape)
    unit = (acc.address // SOURCE_CHUNK % (rules.row_bytes // SOURCE_CHUNK)).reshape(shape)
    runs = np.zeros(shape[:2], dtype=np.int64)
    itself = np.eye(group_lanes, dtype=bool)
    for start in range(0, len(acc), MEMO_CHUNK_ROWS):
        rows = slice(start, start + MEMO_CHUNK_ROWS)

        def same(values: np.ndarray) -> np.ndarray:              # [execution, quarter, lane, other]
            return values[rows, :, :, None] == values[rows, :, None, :]

        waits = same(unit) & live[rows, :, None, :] | itself
        waits |= same(position) & reading[rows, :, :, None] & reading[rows, :, None, :]
        runs[rows] = np.where(live[rows], waits.sum(axis=3), 0).max(axis=2)
    return (runs * on[:, None]).astype(np.int32)


def _source_assignment(rows: np.ndarray, address: np.ndarray, served: list, rules: RuleSet):
    """(pieces, wavefronts) of copies counted from their sources (``rows``, their destinations ``address``), as
    :func:`_assignment` gives them, from :func:`_source_counts`'s per-lane (request, group, wavefront)."""
    request, group, wave, fill_first, fill_group, runs = (np.concatenate([chunk[k] for chunk in served])
                                                          for k in range(1, 7))
    i, lane = np.nonzero(wave >= 0)
    words = SOURCE_CHUNK // rules.bank_bytes
    word = (address[i, lane] // rules.bank_bytes)[:, None] + np.arange(words)
    piece = tuple(np.repeat(column, words) for column in (rows[i], lane, request[i, lane], group[i, lane],
                                                          wave[i, lane])) + (word.ravel(),)
    piece = piece + (piece[5] % rules.banks,)
    # one entry per (execution, wavefront) of the reading lanes: its request and group, its pass inside the
    # group (a group's wavefronts are consecutive)
    reads = wave[i, lane] < fill_first[i, 0]
    span = int((fill_first + runs).max(initial=0)) + 1                # more than any wavefront index
    lane_waves = np.unique(i * span + wave[i, lane])
    _, first = np.unique(i[reads] * span + wave[i, lane][reads], return_index=True)
    e, index, g = i[reads][first], wave[i, lane][reads][first], group[i, lane][reads][first]
    starts = np.ones(len(e), dtype=bool)              # (none where no lane reads)
    starts[1:] = (e[1:] != e[:-1]) | (g[1:] != g[:-1])
    pass_ = index - index[starts][np.cumsum(starts) - 1]
    # then the fill pass's: request 0, a group per quarter-warp; those serving no zero-filling lane are extra
    f, q = np.nonzero(runs)
    fill_pass = np.arange(runs[f, q].sum()) - np.repeat(np.cumsum(runs[f, q]) - runs[f, q], runs[f, q])
    f, q = np.repeat(f, runs[f, q]), np.repeat(q, runs[f, q])
    fill_index = fill_first[f, q] + fill_pass
    extra = ~np.isin(f * span + fill_index, lane_waves)
    return piece, (rows[np.r_[e, f]], np.r_[index, fill_index], np.r_[request[i, lane][reads][first], np.zeros_like(f)],
                   np.r_[g, fill_group[f, q]], np.r_[pass_, fill_pass], np.r_[np.zeros(len(e), dtype=bool), extra])
