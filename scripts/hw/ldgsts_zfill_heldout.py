#!/usr/bin/env python3
"""Configurations of the LDGSTS fill-pass held-out probes (ldgsts_zfill_guard.cu), their manifest and the tool's
counts committed before the run.

    python3 scripts/hw/ldgsts_zfill_heldout.py configs OUT.txt           # the driver's input
    python3 scripts/hw/ldgsts_zfill_heldout.py manifest SUMMARY OUT.csv  # the summary's rows with form and family
    python3 scripts/hw/ldgsts_zfill_heldout.py predict OUT.csv           # traceconf's count per config and copy
    python3 scripts/hw/ldgsts_zfill_heldout.py mismatches MANIFEST PREDICTIONS OUT.csv  # rows page != prediction

The fill-pass rule (docs/rules.md "Copies from their sources" step 6) was found on the bank-row probes and
amended on the minimal-lane probes (ldgsts_zfill_guard.py); these configurations are new to it: whole 32-lane
tables of the same kernel (v0 plain, v1 src-size 8, v2 src-size register, v3 ignore-src; every lane's four guard
bits set or none), seeded random, one launch each.  Families (each a name prefix): ``full__alike`` every lane active
reading a line of its own at a random 16-byte position, writing a random (row, unit) of its quarter-warp's four
bank rows (about one lane in ten the destination of another lane of its quarter), v2's src-size drawn from
SIZES and v3 zero-filling where it is 0, the four quarter-warps alike; ``full__own`` the same, each
quarter-warp drawn on its own; ``part`` three to seven active lanes a quarter-warp (the guard), otherwise as ``fullD``;
``lines`` two or four lanes a 128-byte line reading consecutive chunks (hgemm, Triton), some with two or three
lanes reading one chunk, destinations over one to four rows, duplicates possible; ``swz`` tiles: 16-byte chunks
of 64- or 128-byte shared rows, plain or XOR-swizzled (``chunk ^ (row % 8)`` in 128-byte rows), from row-major
global tiles of 32- to 256-byte rows, with edge masks (the last lanes or rows zero-filling, guarded off or
reading part of their chunk).  Collected with ``KERNEL=ldgsts_zfill_guard PARTS=4
scripts/hw/collect_ldgsts_tables.sh ldgsts_zfill_heldout``.  The second round (ldgsts_zfill_heldout2.py) draws
SECOND_ROUND: these families at other seeds and ``dup``; the third (ldgsts_zfill_heldout3.py) THIRD_ROUND.
"""

from __future__ import annotations

import csv
import random
import sys
from functools import partial
from pathlib import Path

from ldgsts_ignore_src import CHUNK, annotated, command_line, write_csv
from ldgsts_zfill_guard import ALL_COPIES, VARIANTS
from ldgsts_zfill_rows import LINE, LINE_APART, QUARTER, ROWS_A_QUARTER

REPS = 1
PROBE = "ldgsts_zfill_guard"  # the kernel the configurations run on
SIZES = (16, 16, 16, 0, 8, 4, 12)  # v2's src-size, drawn per lane
SHARING = 0.1  # a lane's chance of writing another lane's destination of its quarter-warp

#: [gofs, sofs, active, sizes, ignore] per lane, the driver's tables.
Tables = list[list[int]]


def _lane(gofs: int, sofs: int, active: bool, size: int) -> tuple[int, int, int, int, int]:
    return gofs, sofs, ALL_COPIES if active else 0, size, int(size == 0)


def _tables(lanes: list[tuple[int, int, int, int, int]]) -> Tables:
    return [list(column) for column in zip(*lanes)]


def _destinations(rng: random.Random, quarter: int, count: int, rows: int = ROWS_A_QUARTER,
                  sharing: float = SHARING) -> list[int]:
    """``count`` shared offsets in the quarter-warp's own first ``rows`` bank rows: distinct cells but where a lane
    takes (chance ``sharing``) an earlier lane's."""
    cells = rng.sample(range(rows * 8), count)
    out: list[int] = []
    for cell in cells:
        out.append(rng.choice(out) if out and rng.random() < sharing else
                   LINE * (ROWS_A_QUARTER * quarter + cell // 8) + CHUNK * (cell % 8))
    return out


def _own_lines(rng: random.Random, active_slots: list[list[int]]) -> Tables:
    """Per quarter-warp its ``active_slots``: each lane a line of its own at a random position, a random
    destination of its quarter's rows and src-size; lanes not active keep position 0, row 0, unit 0."""
    lanes = []
    for quarter, slots in enumerate(active_slots):
        destinations = dict(zip(slots, _destinations(rng, quarter, len(slots))))
        for slot in range(QUARTER):
            lane = QUARTER * quarter + slot
            on = slot in destinations
            lanes.append(_lane(LINE_APART * lane + CHUNK * (rng.randrange(8) if on else 0),
                               destinations.get(slot, LINE * ROWS_A_QUARTER * quarter), on,
                               rng.choice(SIZES) if on else 16))
    return _tables(lanes)


def _alike(rng: random.Random) -> Tables:
    """Every lane active, the four quarter-warps as the first."""
    first = _own_lines(rng, [list(range(QUARTER))])
    lanes = []
    for lane in range(32):
        gofs, sofs, active, size, _ = (column[lane % QUARTER] for column in first)
        lanes.append(_lane(gofs + LINE_APART * (lane - lane % QUARTER), sofs + LINE * ROWS_A_QUARTER *
                           (lane // QUARTER), active > 0, size))
    return _tables(lanes)


def _different(rng: random.Random) -> Tables:
    return _own_lines(rng, [list(range(QUARTER))] * 4)


def _partial(rng: random.Random) -> Tables:
    return _own_lines(rng, [sorted(rng.sample(range(QUARTER), rng.randint(3, 7))) for _ in range(4)])


def _shared_lines(rng: random.Random, repeated: bool) -> Tables:
    """Lanes ``k`` (2 or 4) a line reading consecutive chunks from a random start; where ``repeated``, some lines'
    lanes read one chunk two or three at a time; each quarter-warp's destinations over its first one to four rows,
    any two alike by chance; src-sizes random."""
    k = rng.choice((2, 4))
    starts = [rng.randrange(8 - k + 1) for _ in range(32 // k)]
    chunks = [starts[lane // k] + lane % k for lane in range(32)]
    if repeated:
        for line in range(32 // k):
            if rng.random() < 0.6:
                together = rng.sample(range(k * line, k * line + k), min(k, rng.choice((2, 3))))
                for lane in together[1:]:
                    chunks[lane] = chunks[together[0]]
    lanes = []
    for quarter in range(4):
        rows = rng.randint(1, ROWS_A_QUARTER)
        for slot in range(QUARTER):
            lane = QUARTER * quarter + slot
            sofs = LINE * (ROWS_A_QUARTER * quarter + rng.randrange(rows)) + CHUNK * rng.randrange(8)
            lanes.append(_lane(LINE_APART * (lane // k) + CHUNK * chunks[lane], sofs, True, rng.choice(SIZES)))
    return _tables(lanes)


#: Global tile rows' bytes, shared rows' bytes, global rows' pitches (a tile's own rows or a matrix's) of ``swz``.
SOURCE_ROWS = (32, 64, 128, 256)
SHARED_ROWS = (64, 128)
PITCHES = (0, 1024, 4096, 8192)
EDGES = ("none", "fill_lanes", "fill_rows", "guard_lanes", "guard_rows", "part_chunk")


def _tile(rng: random.Random) -> Tables:
    """Lane ``l`` copies the tile's chunk ``l`` (row-major) from a global tile of ``SOURCE_ROWS`` bytes a row (at a
    pitch of its own rows or a matrix's, from a random column) to a shared tile of ``SHARED_ROWS`` bytes a row
    starting at a random row, plain or XOR-swizzled in its 128-byte rows; an edge mask from EDGES."""
    width, shared_row, swizzled = rng.choice(SOURCE_ROWS), rng.choice(SHARED_ROWS), rng.random() < 0.6
    pitch = rng.choice(PITCHES) or width
    column = CHUNK * rng.randrange((pitch - width) // CHUNK + 1) if pitch > width else 0
    first_row = rng.randrange(8)
    edge, cut = rng.choice(EDGES), rng.randint(1, 12)
    lanes = []
    for lane in range(32):
        source_row, source_chunk = divmod(lane, width // CHUNK)
        offset = shared_row * first_row + CHUNK * lane
        row, unit = divmod(offset // CHUNK, LINE // CHUNK)
        if swizzled:
            unit ^= row % 8
        last = lane >= 32 - cut
        rows = 32 * CHUNK // width
        last_row = source_row >= rows - min(rows - 1, max(1, cut // 4))
        size = {"fill_lanes": 0 if last else 16, "fill_rows": 0 if last_row else 16,
                "part_chunk": rng.choice((4, 8, 12)) if source_chunk == width // CHUNK - 1 else 16}.get(edge, 16)
        on = not ((edge == "guard_lanes" and last) or (edge == "guard_rows" and last_row))
        lanes.append(_lane(pitch * source_row + column + CHUNK * source_chunk, LINE * row + CHUNK * unit, on,
                           size))
    return _tables(lanes)


#: Name prefix (the family before ``__``) -> its draw, in a round's order.
DRAWS = {"full__alike_": _alike, "full__own_": _different, "part__": _partial,
         "lines__": lambda rng: _shared_lines(rng, rng.random() < 1 / 3), "swz__": _tile}


def _round(count: int, first_seed: int, families: dict = DRAWS) -> dict:
    """Name prefix -> (configurations, seed, draw): ``count`` of each family, seeded first_seed, first_seed + 1, ..."""
    return {prefix: (count, first_seed + k, draw) for k, (prefix, draw) in enumerate(families.items())}


FAMILIES = _round(60, 61)


def _duplicates(rng: random.Random) -> Tables:
    """Each quarter-warp on its own: five to eight active lanes, their destinations one to three cells of its
    first one to three rows each (pairs and triples of lanes writing one destination, in any lane order), each a
    random position of a line of its own or of 2-4 lanes' line, src-size from DUP_SIZES."""
    k = rng.choice((1, 2, 3, 4))
    lanes = []
    for quarter in range(4):
        slots = sorted(rng.sample(range(QUARTER), rng.randint(5, 8)))
        rows = rng.randint(1, 3)
        cells = rng.sample(range(rows * 8), rng.randint(2, len(slots) - 2))
        destinations = dict(zip(slots, rng.sample(cells + rng.choices(cells, k=len(slots) - len(cells)),
                                                  len(slots))))
        for slot in range(QUARTER):
            lane, on = QUARTER * quarter + slot, slot in destinations
            cell = destinations.get(slot, 0)
            lanes.append(_lane(LINE_APART * (lane // k) + CHUNK * (rng.randrange(8) if on else 0),
                               LINE * (ROWS_A_QUARTER * quarter + cell // 8) + CHUNK * (cell % 8), on,
                               rng.choice(DUP_SIZES) if on else 16))
    return _tables(lanes)


DUP_SIZES = (16, 12, 8, 4, 0, 0)  # dup's src-size, drawn per lane (a zero fill one lane in three)

#: The second round (tests/data/hw/ldgsts_zfill_heldout2): the five families at new seeds, and ``dup``.
SECOND_ROUND = {**_round(40, 71), "dup__": (60, 76, _duplicates)}

#: The third round (tests/data/hw/ldgsts_zfill_heldout3): the second round's six families at new seeds.
THIRD_ROUND = _round(35, 81, {**DRAWS, "dup__": _duplicates})


def bound(families: dict) -> tuple:
    """(tables, configs, predictions, mismatches) of a later round's ``families``."""
    return (partial(tables, families), partial(configs, families), partial(predictions, families),
            partial(mismatches, families=families))


def tables(families: dict = FAMILIES) -> list[tuple[str, Tables]]:
    """Every configuration of ``families`` (the first round's, SECOND_ROUND or THIRD_ROUND): (prefix and number, its
    tables), distinct within a prefix, in the driver's order; a family given as a function (ldgsts_zfill_dups.py)
    enumerates its (name suffix, tables) itself."""
    out = []
    for prefix, drawing in families.items():
        if callable(drawing):
            out += [(prefix + suffix, t) for suffix, t in drawing()]
            continue
        count, seed, draw = drawing
        rng, drawn = random.Random(seed), []
        while len(drawn) < count:
            candidate = draw(rng)
            if candidate not in drawn:
                drawn.append(candidate)
        out += [(f"{prefix}{k:03d}", t) for k, t in enumerate(drawn)]
    return out


def family(name: str) -> str:
    """A configuration's family: its name less the number (``full__alike``, ``full__own``, ``part``, ...)."""
    return name[:-3].removesuffix("_").removesuffix("_")


def configs(families: dict = FAMILIES) -> list[tuple[str, list[int]]]:
    return [(name, sum(t, [])) for name, t in tables(families)]


def manifest(summary: Path, out: Path) -> None:
    """The summary's rows (one per launch and LDGSTS pc) with the variant, its form and the family."""
    annotated(summary, out, ["form", "family"],
              lambda row, variant: dict(form=VARIANTS[variant], family=family(row["config"])))


def predictions(families: dict = FAMILIES) -> list[dict]:
    """Per configuration and copy (v0-v3, the kernel's LDGSTS in pc order): traceconf's wavefronts, ideal and
    whether resolved, analysing the kernel with the configuration's tables as --data (the tests' tool_on_probe)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
    from test_ldgsts_tables_support import tool_on_probe

    out = []
    for name, flat in configs(families):
        rows = tool_on_probe(PROBE, flat)[1]
        copies = sorted(pc for pc, row in rows.items() if "LDGSTS" in row["text"])
        assert len(copies) == len(VARIANTS), (name, copies)
        for variant, pc in enumerate(copies):
            out.append(dict(config=name, variant=variant, pc=f"{pc:#06x}", wavefronts=rows[pc]["wavefronts"],
                            ideal=rows[pc]["ideal_wavefronts"], resolved=rows[pc]["resolved"]))
    return out


def counts(path: Path) -> dict[tuple[str, int], tuple[int, int]]:
    """(config, variant) -> (wavefronts, ideal) of a manifest's first launches or of predictions.csv."""
    return {(row["config"], int(row["variant"])): (int(row["wavefronts"]), int(row["ideal"]))
            for row in csv.DictReader(open(path, newline="")) if row.get("rep", "0") == "0"}


def reading(t: Tables, variant: int) -> list[bool]:
    """Per lane: active and reading in copy ``variant`` (v2 a src-size over 0, v3 not ignoring its source)."""
    gofs, sofs, active, sizes, ignore = t
    return [active[lane] > 0 and (variant < 2 or (sizes[lane] if variant == 2 else not ignore[lane]) > 0)
            for lane in range(32)]


def under_lower_zero_fill(t: Tables, variant: int) -> list[tuple[int, int]]:
    """(reading lane, the lower active lane that zero-fills the same destination) of copy ``variant``: the lanes
    where the held-out pages were under traceconf's count (a post-run observation, not traceconf's rule)."""
    sofs, active, reads = t[1], t[2], reading(t, variant)
    return [(lane, lower) for lane in range(32) if reads[lane]
            for lower in [next((k for k in range(lane) if active[k] and not reads[k] and sofs[k] == sofs[lane]),
                               None)] if lower is not None]


def _quarter_lanes(t: Tables, quarter: int) -> str:
    """``lane:position,row,unit,size`` of a quarter-warp's active lanes (row of its destination's 128-byte rows)."""
    gofs, sofs, active, sizes, ignore = t
    return " ".join(f"{lane}:{gofs[lane] % LINE // CHUNK},{sofs[lane] // LINE},{sofs[lane] % LINE // CHUNK},"
                    f"{sizes[lane]}{',i' if ignore[lane] else ''}" for lane in range(QUARTER * quarter,
                                                                          QUARTER * quarter + QUARTER)
                    if active[lane])


def mismatches(manifest_path: Path, predictions_path: Path, families: dict = FAMILIES,
               family_of=family) -> list[dict]:
    """Per configuration and copy whose page is not the prediction: both counts, the differences, the reading
    lanes whose destination a lower lane zero-fills, and the lanes of their quarter-warps (``family_of`` a name's
    family)."""
    page, predicted, described = counts(manifest_path), counts(predictions_path), dict(tables(families))
    rows = []
    for (name, variant), (wavefronts, ideal) in predicted.items():
        if page[name, variant] != (wavefronts, ideal):
            t = described[name]
            pairs = under_lower_zero_fill(t, variant)
            quarters = sorted({lane // QUARTER for lane, _ in pairs})
            rows.append(dict(config=name, family=family_of(name), variant=variant,
                             page_wavefronts=page[name, variant][0], page_ideal=page[name, variant][1],
                             predicted_wavefronts=wavefronts, predicted_ideal=ideal,
                             over_wavefronts=wavefronts - page[name, variant][0],
                             over_ideal=ideal - page[name, variant][1],
                             reader_and_lower_zero_fill=" ".join(f"{lane}<{lower}" for lane, lower in pairs),
                             quarters=" | ".join(f"q{q}: {_quarter_lanes(t, q)}" for q in quarters)))
    return rows


def main(doc: str, families: dict, annotate=manifest, family_of=family, **commands) -> None:
    """The command line of the round of ``families`` (``annotate`` its manifest, ``family_of`` a name's family,
    ``commands`` a script's own)."""
    command_line(doc, lambda: configs(families), REPS, annotate,
                 predict=lambda path: write_csv(predictions(families), path),
                 mismatches=lambda path, predicted, out: write_csv(
                     mismatches(Path(path), Path(predicted), families, family_of), out), **commands)


if __name__ == "__main__":
    main(__doc__, FAMILIES)
