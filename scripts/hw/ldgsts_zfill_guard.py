#!/usr/bin/env python3
"""Configurations of the LDGSTS fill-pass minimal probes (ldgsts_zfill_guard.cu), their manifest, the fill pass
each copy adds and traceconf's rule's count (``koenig``).

    python3 scripts/hw/ldgsts_zfill_guard.py configs OUT.txt           # the driver's input
    python3 scripts/hw/ldgsts_zfill_guard.py manifest SUMMARY OUT.csv  # the summary's rows with form and lanes
    python3 scripts/hw/ldgsts_zfill_guard.py predict OUT.csv           # koenig's fill per config and copy
    python3 scripts/hw/ldgsts_zfill_guard.py predict_waits OUT.csv     # the found rule's, as predicted
    python3 scripts/hw/ldgsts_zfill_guard.py fill MANIFEST OUT.csv     # per config and copy: page, fill, koenig
    python3 scripts/hw/ldgsts_zfill_guard.py fit MANIFEST              # rows koenig's and waits' fill equal

The bank-row probes (docs/hardware.md "LDGSTS fill-pass bank-row probes") found the fill pass of a quarter-warp
whose destinations take several store passes (two lanes writing one 16-byte unit of the bank row in different
rows) 1 to 2 wavefronts over traceconf's rule, with all eight lanes of every quarter-warp active.  Here few lanes
are: every lane the guard keeps reads a line of its own (a run per lane, LINE_APART between lanes) at a 16-byte
position of it, and writes a (bank row, unit) of its quarter-warp's four rows; the four quarter-warps alike.  A
quarter-warp's lane is (slot, position, row, unit, reads), ``reads`` false where v2 and v3 zero-fill.  Families
(each a name prefix): ``e3`` every three lanes at slots 0, 1, 2 with (position, row, unit) in {0, 1}^3 and
distinct destinations; ``d3`` the same with two lanes at one destination (the triples the brief's 8*7*6 counts
but ``e3`` leaves out); ``s3`` three lanes at random slots; ``e2``, ``d2`` the pairs at slots 0, 1 alike; ``r4``
four random lanes over at least two store passes; ``z3`` three or four such lanes of which one or two zero-fill
in v2 and v3; ``x8`` twelve bank-row configurations (every lane active) as a cross-check of the new kernel
against the old pages.  Collected with ``KERNEL=ldgsts_zfill_guard scripts/hw/collect_ldgsts_tables.sh
ldgsts_zfill_guard``.
"""

from __future__ import annotations

import csv
import itertools
import random
from fractions import Fraction
from pathlib import Path

import ldgsts_zfill_rows as bank_rows
from ldgsts_ignore_src import CHUNK, annotated, command_line, write_csv
from ldgsts_zfill_rows import LINE, LINE_APART, QUARTER, ROWS_A_QUARTER

REPS = 1
CROSS_CHECK_REPS = 2
ALL_COPIES = 0b1111  # the four copies' guard bits (ldgsts_zfill_guard.cu)

#: Variant -> SASS form as compiled by nvcc 13.0 for sm_90 (ldgsts_zfill_guard.sass); each variant's destination
#: is 4096 B past the previous one's, which names its pc.
VARIANTS = {
    0: "@P1 LDGSTS.E.BYPASS.128 (guard: the sources part)",
    1: "@P3 LDGSTS.E.BYPASS.128.ZFILL [...], [R.64+0x8] (src-size 8 immediate)",
    2: "@P2 LDGSTS.E.BYPASS.128.ZFILL ..., P6 (src-size register)",
    3: "@P4 LDGSTS.E.BYPASS.128 ..., !P5 (ignore-src operand)",
}
FILL_COPIES = (1, 2, 3)

#: A quarter-warp's active lane: slot -> (line position of its source, bank row and 16-byte unit of its
#: destination, whether it reads in v2 and v3).
Quarter = dict[int, tuple[int, int, int, bool]]

#: Configurations of ldgsts_zfill_rows run again here (their v5 src-sizes for v2): one-pass and several-pass
#: pairs, own_s5_d7 and neighbours, stacked rows, four passes in a column, two random ones.
CROSS_CHECKED = ("pair_r0_p1_u1", "pair_r1_p0_u0", "pair_r1_p1_u0", "rows2_s5_d7", "rows2_row1_p1p1",
                 "rows2_row1_p0p1_near", "rows2_row1_p0p0", "rows2_s5_d7_even", "rows3_stack_p01", "passes4_column",
                 "random__00", "random__01")


def _distinct_destinations(lanes) -> bool:
    return len({(r, u) for _, r, u, *_ in lanes}) == len(lanes)


def _store_passes(quarter: Quarter) -> int:
    """Passes of a 16-byte store to the active lanes' destinations: per unit of the bank row, its distinct rows."""
    return max(len({r for _, r, u, _ in quarter.values() if u == unit}) for unit in range(8))


def _exhaustive(lanes: int) -> tuple[list[Quarter], list[Quarter]]:
    """Every ``lanes`` active lanes at slots 0.. with (position, row, unit) in {0, 1}^3, all distinct: (those
    with distinct destinations, those with two lanes at one destination)."""
    distinct, shared = [], []
    for cells in itertools.permutations(itertools.product((0, 1), repeat=3), lanes):
        quarter = {slot: (p, r, u, True) for slot, (p, r, u) in enumerate(cells)}
        (distinct if _distinct_destinations(cells) else shared).append(quarter)
    return distinct, shared


def _random_quarter(rng: random.Random, slots: list[int], positions: int, rows: int, units: int) -> Quarter:
    cells = rng.sample([(r, u) for r in range(rows) for u in range(units)], len(slots))
    return {slot: (rng.randrange(positions), r, u, True) for slot, (r, u) in zip(slots, cells)}


def _drawn(count: int, seed: int, draw, keep=lambda quarter: True) -> list[Quarter]:
    """``count`` distinct quarter-warps ``draw(rng)`` that ``keep`` accepts."""
    rng, out = random.Random(seed), []
    while len(out) < count:
        quarter = draw(rng)
        if keep(quarter) and quarter not in out:
            out.append(quarter)
    return out


def _three_random_slots(rng: random.Random) -> Quarter:
    slots = sorted(rng.sample(range(QUARTER), 3))
    return _random_quarter(rng, slots, 4, 3, 4) if slots != [0, 1, 2] else {}


def _four(rng: random.Random, slots: list[int]) -> Quarter:
    return _random_quarter(rng, slots, 3, 3, 4)


def _zero_filling(rng: random.Random) -> Quarter:
    slots = sorted(rng.sample(range(4), rng.choice((3, 4))))
    quarter = _random_quarter(rng, slots, 2, 2, 3)
    filling = rng.sample(slots, rng.choice((1, 2)))
    return {slot: (p, r, u, slot not in filling) for slot, (p, r, u, _) in quarter.items()}


def _several_passes(quarter: Quarter) -> bool:
    return len(quarter) > 0 and _store_passes(quarter) >= 2


def _cross_checked() -> list[tuple[str, Quarter]]:
    """The CROSS_CHECKED configurations of ldgsts_zfill_rows as quarter-warps (every lane active; reading where
    the old v5 src-size is not 0)."""
    old = {name: (gofs, sofs, sizes) for name, gofs, sofs, sizes in bank_rows.tables()}
    out = []
    for name in CROSS_CHECKED:
        gofs, sofs, sizes = old[name]
        quarter = {slot: (gofs[slot] % LINE // CHUNK, sofs[slot] // LINE, sofs[slot] // CHUNK % 8, sizes[slot] > 0)
                   for slot in range(QUARTER)}
        assert tables(quarter)[:2] == [gofs, sofs] and tables(quarter)[3] == sizes, name
        out.append((name, quarter))
    return out


def quarters() -> list[tuple[str, Quarter]]:
    """Every configuration: (``FAMILY__NAME``, its quarter-warp), in the order the driver runs them (the
    cross-check first, the shared destinations last: what a profiling cut short would lose)."""
    e3, d3 = _exhaustive(3)
    e2, d2 = _exhaustive(2)
    families = {
        "e2": e2, "e3": e3,
        "s3": _drawn(60, 3, _three_random_slots, lambda q: len(q) > 0),
        "r4": _drawn(200, 4, lambda rng: _four(rng, [0, 1, 2, 3]), _several_passes)
        + _drawn(60, 44, lambda rng: _four(rng, sorted(rng.sample(range(QUARTER), 4))), _several_passes),
        "z3": _drawn(80, 5, _zero_filling, _several_passes),
        "d2": d2, "d3": d3,
    }
    out = [(f"x8__{name}", quarter) for name, quarter in _cross_checked()]
    return out + [(f"{family}__{k:03d}", quarter) for family, members in families.items()
                  for k, quarter in enumerate(members)]


def tables(quarter: Quarter) -> list[list[int]]:
    """[gofs, sofs, active, sizes, ignore] of a warp whose four quarter-warps are ``quarter``; lanes not active
    keep the offsets of position 0, row 0, unit 0 (their guards are off)."""
    gofs, sofs, active, sizes, ignore = [], [], [], [], []
    for lane in range(32):
        position, row, unit, reads = quarter.get(lane % QUARTER, (0, 0, 0, True))
        gofs.append(LINE_APART * lane + CHUNK * position)
        sofs.append(LINE * (ROWS_A_QUARTER * (lane // QUARTER) + row) + CHUNK * unit)
        on = lane % QUARTER in quarter
        active.append(ALL_COPIES if on else 0)
        sizes.append(16 if reads else 0)
        ignore.append(int(not reads))
    return [gofs, sofs, active, sizes, ignore]


def launches(name: str) -> int:
    """Launches of a configuration in a row (REPS; the cross-check's as the bank-row probes')."""
    return CROSS_CHECK_REPS if name.startswith("x8__") else REPS


def configs() -> list[tuple[str, list[int]]]:
    return [(name, sum(tables(quarter), [])) for name, quarter in quarters()]


def lanes(quarter: Quarter) -> str:
    """``slot:position,row,unit`` per active lane, ``,z`` where it zero-fills in v2 and v3."""
    return " ".join(f"{slot}:{p},{r},{u}{'' if reads else ',z'}" for slot, (p, r, u, reads) in sorted(quarter.items()))


def reading(quarter: Quarter, variant: int) -> Quarter:
    """The lanes of ``quarter`` that read in copy ``variant`` (every active one but where v2 and v3 zero-fill)."""
    return {slot: lane for slot, lane in quarter.items() if variant in (0, 1) or lane[3]}


def _fill(rule, quarter: Quarter, variant: int) -> int:
    """``rule``'s fill pass of a quarter-warp (ldgsts_zfill_rows's candidates), or 0 for the ignore-src copy where
    no active lane zero-fills (no fill pass)."""
    if variant == 3 and all(lane[3] for lane in quarter.values()):
        return 0
    gofs, sofs = tables(quarter)[:2]
    active = {slot: (gofs[slot], sofs[slot]) for slot in quarter}
    return rule(active, {slot: active[slot] for slot in reading(quarter, variant)})


def koenig(quarter: Quarter, variant: int) -> int:
    """traceconf's fill pass before (ldgsts_zfill_rows ``current``: the most reading lanes, each a run, at one
    16-byte position of their lines, at least the store passes of the active lanes)."""
    return _fill(bank_rows.current, quarter, variant)


def waits(quarter: Quarter, variant: int, own_destination: bool = True) -> int:
    """traceconf's fill pass (ldgsts_zfill_rows ``waits``: the most lanes one reading lane waits with); without
    ``own_destination`` as the lead predicted it before the run, from the bank-row pages (predictions_waits.csv:
    lanes writing one destination did not wait for each other)."""
    return _fill(lambda active, read: bank_rows.waits(active, read, own_destination), quarter, variant)


def predictions() -> list[dict]:
    """Per configuration and fill-pass copy: koenig's fill pass of each quarter-warp."""
    return [dict(config=name, variant=variant, koenig_fill=koenig(quarter, variant))
            for name, quarter in quarters() for variant in FILL_COPIES]


def predictions_waits() -> list[dict]:
    """Per configuration and fill-pass copy: the found rule's fill pass as committed before the data came back."""
    return [dict(config=name, variant=variant, waits_fill=waits(quarter, variant, own_destination=False))
            for name, quarter in quarters() for variant in FILL_COPIES]


def sources(quarter: Quarter, variant: int) -> tuple[int, int]:
    """(wavefronts, ideal) of the copy's sources part over its reading lanes, per warp, as traceconf's reference
    counts a guarded plain copy (as ldgsts_zfill_rows.fill_count)."""
    from traceconf.reference import execution_cost
    from traceconf.rules import load_rule_set

    gofs, sofs = tables(quarter)[:2]
    read = reading(quarter, variant)
    destinations = [sofs[lane] if lane % QUARTER in read else -1 for lane in range(32)]
    cost = execution_cost(load_rule_set("sm_90"), "cp_async", CHUNK, 0, destinations, "bypass", gofs, [16] * 32)
    return cost.wavefronts, cost.ideal_wavefronts


def _first_launches(manifest_path: Path) -> dict[tuple[str, int], tuple[int, int]]:
    return {(row["config"], int(row["variant"])): (int(row["wavefronts"]), int(row["ideal"]))
            for row in csv.DictReader(open(manifest_path, newline="")) if row["rep"] == "0"}


def _text(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{float(value):g}"


def fill_table(manifest_path: Path) -> list[dict]:
    """Per configuration and fill-pass copy: its page, the plain copy's (v0) page, the sources part over the
    copy's reading lanes (traceconf; v0's page where every active lane reads), the fill pass per quarter-warp
    (page less sources, over 4), the store passes, the most reading lanes at one position, and koenig's fill."""
    measured, rows = _first_launches(manifest_path), []
    for name, quarter in quarters():
        for variant in FILL_COPIES:
            (page, ideal), (v0, v0_ideal) = measured[name, variant], measured[name, 0]
            part = sources(quarter, variant)[0]
            read = reading(quarter, variant)
            rows.append(dict(config=name, family=name.partition("__")[0], lanes=lanes(quarter), variant=variant,
                             page=page, ideal=ideal, v0_page=v0, v0_ideal=v0_ideal, sources=part,
                             fill=_text(Fraction(page - part, 4)), passes=_store_passes(quarter),
                             most_at_a_position=max([sum(p == q for q, *_ in read.values()) for p, *_ in
                                                     read.values()] + [0]),
                             koenig_fill=koenig(quarter, variant), waits_fill=waits(quarter, variant)))
    return rows


def fit(manifest_path: Path, candidate: str = "koenig") -> dict[tuple[str, int], tuple[int, int]]:
    """(family, variant) -> (rows whose fill pass ``candidate``'s (koenig, waits) equals, rows)."""
    counts: dict[tuple[str, int], tuple[int, int]] = {}
    for row in fill_table(manifest_path):
        equal, total = counts.get((row["family"], row["variant"]), (0, 0))
        counts[row["family"], row["variant"]] = (equal + (row["fill"] == str(row[f"{candidate}_fill"])), total + 1)
    return counts


def manifest(summary: Path, out: Path) -> None:
    """The summary's rows (one per launch and LDGSTS pc) with the variant, its form, the family and the lanes."""
    described = dict(quarters())

    def describe(row: dict, variant: int) -> dict:
        return dict(form=VARIANTS[variant], family=row["config"].partition("__")[0],
                    lanes=lanes(described[row["config"]]))
    annotated(summary, out, ["form", "family", "lanes"], describe)


if __name__ == "__main__":
    def print_fit(manifest_path):
        for candidate in ("koenig", "waits"):
            for (family, variant), (equal, total) in fit(Path(manifest_path), candidate).items():
                print(f"{family} v{variant}: {candidate} {equal} of {total}")
    command_line(__doc__, configs, launches, manifest, fit=print_fit,
                 fill=lambda path, out: write_csv(fill_table(Path(path)), out),
                 predict=lambda path: write_csv(predictions(), path),
                 predict_waits=lambda path: write_csv(predictions_waits(), path))
