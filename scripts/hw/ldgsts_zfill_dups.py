#!/usr/bin/env python3
"""LDGSTS duplicate-destination probes (tests/data/hw/ldgsts_zfill_dups): configurations of ldgsts_zfill_guard.cu
where lanes of quarter-warp 0 (lanes 0-7; 8-31 guarded off) write one 16-byte destination, mixing reading lanes
(src-size over 0) and zero-filling lanes (src-size 0), to find what the second round's missed ``dup`` copies
(tests/data/hw/ldgsts_zfill_heldout2, v2/v3 of dup 002, 024, 025, 044, 048, 059: the page 1-2 wavefronts over
traceconf) cost per lane.  Every active lane reads a 128-byte line of its own (``LINE_APART * lane + CHUNK *
position``); v2's src-size per lane as listed, v3 ignoring its source where that is 0, v1 src-size 8.  Families
(name prefixes):

- ``iso``: each quarter-warp of the six missed configurations alone, moved to quarter 0 (its lanes' slots, source
  positions, destination rows within the quarter's rows, units and src-sizes kept): ``iso__dup002_q0`` ...;
- ``g3``: slots 0-2 writing row 0 unit 0, src-sizes from (16, 8, 0), positions 0, 1, 2 (``_p012``) or all 0
  (``_p000``): ``g3__16_8_0_p012``;
- ``g3x``: ``g3``'s positions 0, 1, 2 and slot 3 reading 16 bytes at position 0 into row 0 unit 1;
- ``g4``: slots 0-3 on one destination, src-sizes from (16, 4, 0), positions 0-3;
- ``g22``: slots 0-3 in two pairs (the three ways) on row 0 units 0 and 1 (the pair with slot 0 on unit 0),
  src-sizes from (16, 0), positions 0-3: ``g22__01_23_16_0_0_16`` (sizes per slot);
- ``grow``: slots 0..k (k 1-7) on one destination, src-sizes 16, 0, 16, ... (``alt16``), 0, 16, 0, ... (``alt0``),
  zeros but the last 16 (``last16``), 16s but the first 0 (``first0``), each once (k 1's coincide), positions the
  slot numbers.

traceconf's counts are committed before the run (predictions.csv).

    python3 scripts/hw/ldgsts_zfill_dups.py configs OUT.txt
    python3 scripts/hw/ldgsts_zfill_dups.py manifest SUMMARY OUT.csv
    python3 scripts/hw/ldgsts_zfill_dups.py predict OUT.csv
    python3 scripts/hw/ldgsts_zfill_dups.py mismatches MANIFEST PREDICTIONS OUT.csv
    python3 scripts/hw/ldgsts_zfill_dups.py fill MANIFEST PREDICTIONS OUT.csv  # per fill copy: lanes, page, tool

Collected with ``KERNEL=ldgsts_zfill_guard PARTS=2 scripts/hw/collect_ldgsts_tables.sh ldgsts_zfill_dups``.
"""

from __future__ import annotations

import itertools
from functools import partial
from pathlib import Path

import ldgsts_zfill_heldout as first_round
from ldgsts_ignore_src import CHUNK, annotated, write_csv
from ldgsts_zfill_guard import FILL_COPIES, VARIANTS
from ldgsts_zfill_heldout import REPS, SECOND_ROUND, Tables, _lane, _tables
from ldgsts_zfill_rows import LINE, LINE_APART, QUARTER, ROWS_A_QUARTER

__all__ = ["MISSED", "REPS", "configs", "family", "fill", "lanes", "manifest", "mismatches", "predictions", "tables"]

#: The second round's configurations whose v2/v3 pages were over traceconf's count.
MISSED = (2, 24, 25, 44, 48, 59)

#: An active lane of quarter-warp 0: slot -> (source position, destination row, destination unit, src-size).
Lanes = dict[int, tuple[int, int, int, int]]


def quarter_zero(lanes: Lanes) -> Tables:
    """The kernel's tables with ``lanes`` active in quarter-warp 0, each reading a line of its own, every other
    lane guarded off."""
    out = []
    for lane in range(32):
        position, row, unit, size = lanes.get(lane, (0, 0, 0, 16))
        out.append(_lane(LINE_APART * lane + CHUNK * position, LINE * row + CHUNK * unit, lane in lanes, size))
    return _tables(out)


def lanes(t: Tables) -> Lanes:
    """The active lanes of quarter-warp 0 of ``quarter_zero``'s tables (its inverse there)."""
    gofs, sofs, active, sizes, _ = t
    return {lane: (gofs[lane] % LINE // CHUNK, sofs[lane] // LINE, sofs[lane] % LINE // CHUNK, sizes[lane])
            for lane in range(QUARTER) if active[lane]}


def _isolated() -> list[tuple[str, Tables]]:
    """Each quarter-warp of the missed ``dup`` configurations alone in quarter-warp 0."""
    second = dict(first_round.tables({"dup__": SECOND_ROUND["dup__"]}))
    out = []
    for k in MISSED:
        gofs, sofs, active, sizes, _ = second[f"dup__{k:03d}"]
        for quarter in range(4):
            first = QUARTER * quarter
            out.append((f"dup{k:03d}_q{quarter}", quarter_zero({
                lane - first: (gofs[lane] % LINE // CHUNK, sofs[lane] // LINE - ROWS_A_QUARTER * quarter,
                               sofs[lane] % LINE // CHUNK, sizes[lane])
                for lane in range(first, first + QUARTER) if active[lane]})))
    return out


def _sizes_name(sizes) -> str:
    return "_".join(map(str, sizes))


def _three(positions: tuple[int, ...], neighbour: bool) -> list[tuple[str, Tables]]:
    """Slots 0-2 on row 0 unit 0 at ``positions``, src-sizes from (16, 8, 0); where ``neighbour``, slot 3 reading
    16 bytes at position 0 into unit 1."""
    out = []
    for sizes in itertools.product((16, 8, 0), repeat=3):
        group = {slot: (positions[slot], 0, 0, size) for slot, size in enumerate(sizes)}
        suffix = "" if neighbour else "_p" + "".join(map(str, positions))
        out.append((_sizes_name(sizes) + suffix, quarter_zero(group | ({3: (0, 0, 1, 16)} if neighbour else {}))))
    return out


def _four() -> list[tuple[str, Tables]]:
    return [(_sizes_name(sizes), quarter_zero({slot: (slot, 0, 0, size) for slot, size in enumerate(sizes)}))
            for sizes in itertools.product((16, 4, 0), repeat=4)]


def _pairs() -> list[tuple[str, Tables]]:
    """Slots 0-3 in two pairs on units 0 and 1 of row 0, src-sizes from (16, 0)."""
    out = []
    for partner in (1, 2, 3):
        first = (0, partner)
        second = tuple(slot for slot in range(4) if slot not in first)
        for sizes in itertools.product((16, 0), repeat=4):
            out.append((f"{first[0]}{first[1]}_{second[0]}{second[1]}_{_sizes_name(sizes)}", quarter_zero(
                {slot: (slot, 0, int(slot in second), size) for slot, size in enumerate(sizes)})))
    return out


#: ``grow``'s src-size patterns: name -> the sizes of k + 1 lanes.
GROWING = {
    "alt16": lambda n: [16 if slot % 2 == 0 else 0 for slot in range(n)],
    "alt0": lambda n: [0 if slot % 2 == 0 else 16 for slot in range(n)],
    "last16": lambda n: [0] * (n - 1) + [16],
    "first0": lambda n: [0] + [16] * (n - 1),
}


def _growing() -> list[tuple[str, Tables]]:
    out, seen = [], []
    for k in range(1, QUARTER):
        for pattern, sizes in GROWING.items():
            t = quarter_zero({slot: (slot, 0, 0, size) for slot, size in enumerate(sizes(k + 1))})
            if t not in seen:
                seen.append(t)
                out.append((f"k{k}_{pattern}", t))
    return out


FAMILIES = {
    "iso__": _isolated,
    "g3__": lambda: _three((0, 1, 2), False) + _three((0, 0, 0), False),
    "g3x__": lambda: _three((0, 1, 2), True),
    "g4__": _four,
    "g22__": _pairs,
    "grow__": _growing,
}

tables = partial(first_round.tables, FAMILIES)
configs = partial(first_round.configs, FAMILIES)
predictions = partial(first_round.predictions, FAMILIES)


def family(name: str) -> str:
    """A configuration's family: its name before ``__``."""
    return name.partition("__")[0]


mismatches = partial(first_round.mismatches, families=FAMILIES, family_of=family)


def manifest(summary: Path, out: Path) -> None:
    """The summary's rows (one per launch and LDGSTS pc) with the variant, its form and the family."""
    annotated(summary, out, ["form", "family"],
              lambda row, variant: dict(form=VARIANTS[variant], family=family(row["config"])))


def _lane_text(slot: int, lane: tuple[int, int, int, int]) -> str:
    """``slot:position,size`` and, off row 0 unit 0, ``@row.unit``."""
    position, row, unit, size = lane
    return f"{slot}:{position},{size}" + (f"@{row}.{unit}" if (row, unit) != (0, 0) else "")


def fill(manifest_path: Path, predictions_path: Path) -> list[dict]:
    """Per configuration and fill copy (v1-v3): its lanes (``slot:position,size[@row.unit]``, v1's sizes 8), the
    page's wavefronts and ideal, v0's page, traceconf's prediction (made before the run) and page - prediction."""
    page, predicted = first_round.counts(manifest_path), first_round.counts(predictions_path)
    out = []
    for name, t in tables():
        active = lanes(t)
        for variant in FILL_COPIES:
            shown = {slot: lane[:3] + (8,) if variant == 1 else lane for slot, lane in active.items()}
            (wavefronts, ideal), (tool, tool_ideal) = page[name, variant], predicted[name, variant]
            out.append(dict(config=name, family=family(name), variant=variant,
                            lanes=" ".join(_lane_text(slot, lane) for slot, lane in shown.items()),
                            page_wavefronts=wavefronts, page_ideal=ideal, v0_wavefronts=page[name, 0][0],
                            predicted_wavefronts=tool, predicted_ideal=tool_ideal,
                            page_minus_predicted=wavefronts - tool, ideal_page_minus_predicted=ideal - tool_ideal))
    return out


if __name__ == "__main__":
    first_round.main(__doc__, FAMILIES, manifest, family,
                     fill=lambda path, predicted, out: write_csv(fill(Path(path), Path(predicted)), out))
