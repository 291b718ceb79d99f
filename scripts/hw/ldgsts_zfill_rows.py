#!/usr/bin/env python3
"""Configurations of the LDGSTS fill-pass bank-row probes (the ignore-src kernel, ldgsts_ignore_src.cu), their
manifest, and the fill pass's count under each candidate rule.

    python3 scripts/hw/ldgsts_zfill_rows.py configs OUT.txt           # the driver's input
    python3 scripts/hw/ldgsts_zfill_rows.py manifest SUMMARY OUT.csv  # the summary's rows with each copy's form
    python3 scripts/hw/ldgsts_zfill_rows.py predict OUT.csv           # v5 and v10 per config, per candidate
    python3 scripts/hw/ldgsts_zfill_rows.py fit MANIFEST              # rows each candidate's count equals
    python3 scripts/hw/ldgsts_zfill_rows.py table MANIFEST OUT.csv    # per fill-pass row: page, each count

The fill-pass halves probes (docs/hardware.md "LDGSTS fill-pass halves probes") left one family unexplained:
own_s5_d7, whose quarter-warps' destinations lie in two bank rows (two store passes), costs a wavefront a
quarter-warp more than traceconf's rule (the largest count of reading runs at one 16-byte position of the
128-byte source line).  Here every lane reads its own line (a run per lane), and each quarter-warp (all four
alike, four bank rows of their own) places its lanes' sources at chosen line positions and its destinations at
chosen (bank row, 16-byte unit): pairs of reading lanes in one row or two, at one position or two, their units
in one 32- or 64-byte part of the row or not; whole quarter-warps over two to four rows with one to four store
passes; random ones where the candidates disagree.  The `.ZFILL` register copy (v5) reads where the lane's flag
is set, the immediate-8 one (v10) in every lane.  Collected with
``KERNEL=ldgsts_ignore_src scripts/hw/collect_ldgsts_tables.sh ldgsts_zfill_rows``.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

from ldgsts_ignore_src import CHUNK, READS, command_line, flags, src_size_manifest, write_csv

REPS = 2
QUARTER = 8           # lanes whose 16-byte chunks fill one 128-byte wavefront
LINE = 128
LINE_APART = 8192     # each lane's source in a line of its own (a run per lane)
ROWS_A_QUARTER = 4    # bank rows of each quarter-warp's own
ZFILL, IMMEDIATE = 5, 10

#: A quarter-warp's lane: (line position of its source, bank row of its destination, 16-byte unit in the row,
#: whether it reads in the .ZFILL copy).
Lane = tuple[int, int, int, bool]


def _positions(group: dict) -> dict[int, set[int]]:
    runs: dict[int, set[int]] = {}
    for lane, (src, _) in group.items():
        runs.setdefault(src % LINE // CHUNK, set()).add(src - CHUNK * lane)
    return runs


def _line_runs(reading: dict) -> int:
    """The largest count of the reading lanes' runs (distinct source less 16 bytes a lane) at one 16-byte
    position of the 128-byte source line."""
    return max([len(runs) for runs in _positions(reading).values()] + [0])


def _store_passes(active: dict) -> int:
    """Passes of a 16-byte store to the destinations: per 16-byte unit of the bank row, its distinct rows."""
    return max(len({dst // LINE for _, dst in active.values() if dst // CHUNK % 8 == unit}) for unit in range(8))


def _rows(group: dict) -> dict[int, dict]:
    out: dict[int, dict] = {}
    for lane, (src, dst) in group.items():
        out.setdefault(dst // LINE, {})[lane] = (src, dst)
    return out


def current(active: dict, reading: dict) -> int:
    """traceconf's rule (the halves probes): the line-position runs, at least the store passes."""
    return max(_store_passes(active), _line_runs(reading))


def row_sum(active: dict, reading: dict) -> int:
    """The lead fitted to own_s5_d7 (224 of 226 halves rows): the line-position runs per destination bank row,
    summed over the rows, at least the store passes."""
    return max(_store_passes(active), sum(_line_runs(row) for row in _rows(reading).values()))


def rows_mixed(active: dict, reading: dict) -> int:
    """A fit to own_s5_d7 alone (222 of 226): the line-position runs plus one per bank row past the lowest
    whose reading lanes are at more than one line position, at least the store passes."""
    lowest = min(dst // LINE for _, dst in active.values())
    extra = sum(len(_positions(row)) > 1 for r, row in _rows(reading).items() if r != lowest)
    return max(_store_passes(active), _line_runs(reading) + extra)


CANDIDATES = {"current": current, "row_sum": row_sum, "rows_mixed": rows_mixed}


def _store_pass(active: dict) -> dict[int, int]:
    """Lane -> its store pass: the rank of its destination's row among the rows written at its 16-byte unit."""
    rows_at: dict[int, set[int]] = {}
    for _, dst in active.values():
        rows_at.setdefault(dst // CHUNK % 8, set()).add(dst // LINE)
    return {lane: sorted(rows_at[dst // CHUNK % 8]).index(dst // LINE) for lane, (_, dst) in active.items()}


def pass_extra(active: dict, reading: dict) -> int:
    """Derived after the run: the line-position runs plus one per store pass past the first."""
    return max(_store_passes(active), _line_runs(reading) + _store_passes(active) - 1)


def pass_sum(active: dict, reading: dict) -> int:
    """Derived after the run: the line-position runs of each store pass's reading lanes, summed over the
    passes."""
    passes = _store_pass(active)
    return max(_store_passes(active), sum(_line_runs({lane: place for lane, place in reading.items()
                                                       if passes[lane] == k}) for k in set(passes.values())))


def pass_positions(active: dict, reading: dict) -> int:
    """Derived after the run (the best found, 145 of 167): per line position, its reading runs over every store
    pass plus one per pass past the first with a reading lane at another position; the largest, at least the
    store passes."""
    passes, best = _store_pass(active), 0
    for position in range(8):
        count = 0
        for k in set(passes[lane] for lane in reading):
            in_pass = {lane: place for lane, place in reading.items() if passes[lane] == k}
            count += len(_positions(in_pass).get(position, ()))
            count += k > 0 and any(src % LINE // CHUNK != position for src, _ in in_pass.values())
        best = max(best, count)
    return max(_store_passes(active), best)


def waits(active: dict, reading: dict, own_destination: bool = True) -> int:
    """Found a session after the run, and traceconf's rule since (167 of 167; engine ``_fill_passes``): per active
    lane, the lanes it waits with (itself, the active lanes writing its 16-byte unit of the bank row in another
    row and, ``own_destination``, at its very destination, and for a reading lane the reading lanes at its line
    position); the most.  Without ``own_destination``: the rule as predicted before the minimal probes' run
    (ldgsts_zfill_guard.py: only reading lanes' counts, at least the store passes)."""
    def waits_with(lane: int, other: int) -> bool:
        (src, dst), (other_src, other_dst) = active[lane], active[other]
        at_position = lane in reading and other in reading and src % LINE // CHUNK == other_src % LINE // CHUNK
        at_unit = dst // CHUNK % 8 == other_dst // CHUNK % 8 and (own_destination or dst // LINE != other_dst // LINE)
        return other == lane or at_position or at_unit
    if not own_destination:
        return max([_store_passes(active)] + [sum(waits_with(lane, other) for other in active) for lane in reading])
    return max(sum(waits_with(lane, other) for other in active) for lane in active)


#: Found after the run (docs/hardware.md "LDGSTS fill-pass bank-row probes"): only ``waits`` fits every page.
FOUND = {"pass_extra": pass_extra, "pass_sum": pass_sum, "pass_positions": pass_positions, "waits": waits}


def _tables(quarter: list[Lane]) -> tuple[list[int], list[int], list[int]]:
    """(global offsets, shared offsets, v5 src-sizes) of a warp whose quarter-warps are all ``quarter``."""
    gofs, sofs, sizes = [], [], []
    for lane in range(32):
        position, row, unit, reads = quarter[lane % QUARTER]
        gofs.append(LINE_APART * lane + CHUNK * position)
        sofs.append(LINE * (ROWS_A_QUARTER * (lane // QUARTER) + row) + CHUNK * unit)
        sizes.append(16 if reads else 0)
    return gofs, sofs, sizes


def _filled(reading: list[tuple[int, int, int]], rows: int = 1) -> list[Lane]:
    """A quarter-warp whose lanes 0.. read at (position, row, unit), the rest zero-filling at position 0 in the
    units left, spread over ``rows`` rows (the first unit left in the last row, ...)."""
    used = {unit for _, _, unit in reading}
    free = [unit for unit in range(8) if unit not in used]
    rest = [(0, rows - 1 - k % rows, unit, False) for k, unit in enumerate(free)]
    return [(p, r, u, True) for p, r, u in reading] + rest[:QUARTER - len(reading)]


def _pairs() -> list[tuple[str, list[Lane]]]:
    """Two reading lanes: lane 0 at position 0, row 0, unit 0; lane 1 at ``position``, in ``row``, at ``unit``
    (unit 0 in row 1: two store passes)."""
    out = []
    for row in (0, 1):
        for position in (0, 1, 4):
            for unit in ((1, 2, 4, 7) if row == 0 else (0, 1, 2, 3, 4, 7)):
                out.append((f"pair_r{row}_p{position}_u{unit}", _filled([(0, 0, 0), (position, row, unit)])))
    return out


def _structured() -> list[tuple[str, list[Lane]]]:
    """Whole quarter-warps: own_s5_d7 and its neighbours (which lanes of the second row read at which
    position), a second row in one 64-byte half or spread, three and four rows (up to four store passes)."""
    out = []
    row0 = [(0, 0, 0), (0, 0, 2), (0, 0, 4), (0, 0, 6)]
    for name, second in {"s5_d7": [(0, 1, 0), (1, 1, 2), (1, 1, 4), (1, 0, 1)],
                         "row1_p0p1_near": [(0, 1, 0), (1, 1, 2)], "row1_p0p1_far": [(0, 1, 0), (1, 1, 4)],
                         "row1_p1p1": [(1, 1, 0), (1, 1, 4)], "row1_p0p0": [(0, 1, 0), (0, 1, 4)],
                         "row1_p1p0_odd": [(1, 1, 1), (0, 1, 3)], "row1_p1p0_oddfar": [(1, 1, 1), (0, 1, 5)],
                         "row1_p2p5": [(2, 1, 0), (5, 1, 4)], "row1_p0p1p2": [(0, 1, 0), (1, 1, 2), (2, 1, 4)],
                         "row1_three_p1": [(1, 1, 0), (1, 1, 2), (1, 1, 4)],
                         "row1_units_apart": [(0, 1, 1), (1, 1, 3)]}.items():
        out.append((f"rows2_{name}", _filled(row0 + second, 2)))
    s5_d7 = _filled(row0 + [(0, 1, 0), (1, 1, 2), (1, 1, 4), (1, 0, 1)])
    for name, lanes in {"low6": {0, 1, 2, 3, 4, 6}, "even": {0, 2, 4, 6}, "row1": {4, 5, 6}, "lanes46": {4, 6},
                        "lanes045": {0, 4, 5}, "lanes0367": {0, 3, 6, 7}}.items():
        out.append((f"rows2_s5_d7_{name}", [(p, r, u, lane in lanes) for lane, (p, r, u, _) in enumerate(s5_d7)]))
    out.append(("rows2_one_pass", _filled([(0, 0, 0), (0, 0, 1), (0, 0, 2), (0, 0, 3),
                                             (0, 1, 4), (1, 1, 5), (1, 1, 6), (0, 1, 7)])))
    out.append(("rows2_one_pass_mixed", _filled([(0, 0, 0), (1, 0, 1), (0, 0, 2), (1, 0, 3),
                                                   (0, 1, 4), (1, 1, 5), (0, 1, 6), (1, 1, 7)])))
    for rows in (3, 4):
        for name, positions in {"p0": [0] * 8, "p01": [0, 1] * 4, "p0123": [0, 1, 2, 3] * 2,
                                "rowpos": [r % 2 for r in range(8)]}.items():
            lanes = [(positions[lane], lane % rows, lane // rows * 2 % 8, True) for lane in range(QUARTER)]
            out.append((f"rows{rows}_stack_{name}", lanes))
    for passes in (1, 2, 3, 4):
        lanes = [((lane // passes) % 2, lane % passes, lane // passes, True) for lane in range(QUARTER)]
        out.append((f"passes{passes}_column", lanes))
    return out


def _random_quarter(rng: random.Random) -> list[Lane]:
    rows = rng.randint(2, 4)
    cells = rng.sample([(r, u) for r in range(rows) for u in range(8)], QUARTER)
    positions = rng.sample(range(8), rng.randint(1, 3))
    return [(rng.choice(positions), r, u, rng.random() < 0.7) for r, u in cells]


def randomised(count: int = 30, seed: int = 22) -> list[tuple[str, list[Lane]]]:
    """``count`` random quarter-warps (two to four rows, one to three positions) at which the candidates' v5 or
    v10 counts are not all equal."""
    rng, out = random.Random(seed), []
    while len(out) < count:
        quarter = _random_quarter(rng)
        gofs, sofs, sizes = _tables(quarter)
        if any(len({fill_runs(name, gofs, sofs, s) for name in CANDIDATES}) > 1 for s in (sizes, [8] * 32)):
            out.append((f"random__{len(out):02d}", quarter))
    return out


def tables() -> list[tuple[str, list[int], list[int], list[int]]]:
    return [(name, *_tables(quarter)) for name, quarter in _pairs() + _structured() + randomised()]


def configs() -> list[tuple[str, list[int]]]:
    return [(name, gofs + sofs + flags(READS["all"]) + sizes) for name, gofs, sofs, sizes in tables()]


def fill_runs(candidate: str, gofs: list[int], sofs: list[int], sizes: list[int]) -> int:
    """The fill pass of a copy whose lanes read where ``sizes`` is non-zero, per ``candidate``, summed over the
    quarter-warps."""
    rule, wavefronts = {**CANDIDATES, **FOUND}[candidate], 0
    for first in range(0, 32, QUARTER):
        active = {lane: (gofs[lane], sofs[lane]) for lane in range(first, first + QUARTER)}
        wavefronts += rule(active, {lane: place for lane, place in active.items() if sizes[lane]})
    return wavefronts


def fill_count(candidate: str, gofs: list[int], sofs: list[int], sizes: list[int]) -> tuple[int, int]:
    """(wavefronts, ideal) of a 16-byte copy with a fill pass: the sources rule over the reading lanes
    (traceconf's reference) plus :func:`fill_runs`, one ideal wavefront per quarter-warp."""
    from traceconf.reference import execution_cost
    from traceconf.rules import load_rule_set

    assert min(sizes) < 16, "no fill pass: every lane copies 16 bytes"
    reading = [sofs[lane] if sizes[lane] else -1 for lane in range(32)]
    sources = execution_cost(load_rule_set("sm_90"), "cp_async", CHUNK, 0, reading, "bypass", gofs, [16] * 32)
    return sources.wavefronts + fill_runs(candidate, gofs, sofs, sizes), sources.ideal_wavefronts + 4


def _copies(sizes: list[int]) -> list[tuple[int, list[int]]]:
    """The fill-pass copies of a configuration: v5 (unless every lane reads) and v10."""
    return [(v, s) for v, s in ((ZFILL, sizes), (IMMEDIATE, [8] * 32)) if min(s) < 16]


def predictions() -> list[dict]:
    """Per configuration and fill-pass copy: each candidate's count."""
    rows = []
    for name, gofs, sofs, sizes in tables():
        for variant, copy_sizes in _copies(sizes):
            counts = {c: fill_count(c, gofs, sofs, copy_sizes) for c in CANDIDATES}
            rows.append(dict(config=name, variant=variant, ideal=counts["current"][1],
                             **{c: wavefronts for c, (wavefronts, _) in counts.items()}))
    return rows


def _measured(manifest_path: Path) -> dict[tuple[str, int], tuple[int, int]]:
    return {(row["config"], int(row["variant"])): (int(row["wavefronts"]), int(row["ideal"]))
            for row in csv.DictReader(open(manifest_path, newline="")) if row["rep"] == "0"}


def fit_table(manifest_path: Path) -> list[dict]:
    """Per configuration and fill-pass copy: the first launch's page (wavefronts, ideal) and each candidate's
    wavefronts (predicted and found)."""
    measured, rows = _measured(manifest_path), []
    for name, gofs, sofs, sizes in tables():
        for variant, copy_sizes in _copies(sizes):
            wavefronts, ideal = measured[name, variant]
            rows.append(dict(config=name, variant=variant, page=wavefronts, ideal=ideal,
                             **{c: fill_count(c, gofs, sofs, copy_sizes)[0] for c in (*CANDIDATES, *FOUND)}))
    return rows


def fit(manifest_path: Path) -> tuple[int, dict[str, list[str]]]:
    """(fill-pass rows, per candidate (predicted and found) the first launches' rows ``config/vN`` whose page its
    count misses)."""
    measured = _measured(manifest_path)
    misses: dict[str, list[str]] = {c: [] for c in (*CANDIDATES, *FOUND)}
    total = 0
    for name, gofs, sofs, sizes in tables():
        for variant, copy_sizes in _copies(sizes):
            total += 1
            for c, missed in misses.items():
                if fill_count(c, gofs, sofs, copy_sizes) != measured[name, variant]:
                    missed.append(f"{name}/v{variant}")
    return total, misses


def manifest(summary: Path, out: Path) -> None:
    """The summary's rows (one per launch and LDGSTS pc) with the variant, its form and its src-sizes."""
    src_size_manifest(summary, out, {name: sizes for name, _, _, sizes in tables()}, ZFILL, IMMEDIATE)


if __name__ == "__main__":
    def print_fit(manifest_path):
        total, misses = fit(Path(manifest_path))
        for c, missed in misses.items():
            print(f"{c}: {total - len(missed)} of {total}; misses {' '.join(missed[:12])}")
    command_line(__doc__, configs, REPS, manifest, fit=print_fit,
                 table=lambda path, out: write_csv(fit_table(Path(path)), out),
                 predict=lambda path: write_csv(predictions(), path))
