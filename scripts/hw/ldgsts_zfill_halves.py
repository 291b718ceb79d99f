#!/usr/bin/env python3
"""Configurations of the LDGSTS fill-pass halves probes (the ignore-src kernel, ldgsts_ignore_src.cu), their
manifest, and the fill pass's count under each reading of "half".

    python3 scripts/hw/ldgsts_zfill_halves.py configs OUT.txt           # the driver's input
    python3 scripts/hw/ldgsts_zfill_halves.py manifest SUMMARY OUT.csv  # the summary's rows with each copy's form
    python3 scripts/hw/ldgsts_zfill_halves.py predict OUT.csv           # v5 and v10 per config, per hypothesis
    python3 scripts/hw/ldgsts_zfill_halves.py fit MANIFEST              # rows each hypothesis's count equals

sm_90's fill pass (docs/hardware.md "LDGSTS .ZFILL src-size probes") counts a quarter-warp's contiguous source
runs of its reading lanes apart for the lanes reading the first and the second half of their 32-byte source
sector.  On every page before these, that half is also the lane's parity and its destination's 32-byte sector
half.  Here they differ: sources shifted by 16 bytes in some lane pairs (``source``: the sector half flips
against the lane's parity) and destinations of some lane pairs swapped (``destination``: the destination half
flips against it), one run per lane (sources a line apart) with the halves split unevenly, and random mixes
of sources, destinations and zero-filling lanes among which the hypotheses disagree.  The `.ZFILL` register
copy (v5) reads where its src-size is non-zero, the immediate-8 one (v10) everywhere with a fill pass, the
16/0 forms in every lane (no fill pass: the sources rule alone at each pattern).  Collected with
``KERNEL=ldgsts_ignore_src scripts/hw/collect_ldgsts_tables.sh ldgsts_zfill_halves``.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

from ldgsts_ignore_src import CHUNK, READS, command_line, flags, src_size_manifest, write_csv

REPS = 2
QUARTER = 8           # lanes whose 16-byte chunks fill one 128-byte wavefront
LINE_APART = 8192     # sources of different runs this far apart (different lines, sectors and pages)
ZFILL, IMMEDIATE = 5, 10

#: What decides the "half" of a reading lane in the fill pass: its source's 32-byte sector half (the rule
#: traceconf has), its destination's, its lane's parity; "none": no split (the rule before the .ZFILL probes).
HYPOTHESES = {
    "source": lambda lane, src, dst: src // CHUNK % 2,
    "destination": lambda lane, src, dst: dst // CHUNK % 2,
    "parity": lambda lane, src, dst: lane % 2,
    "none": lambda lane, src, dst: 0,
}
#: Found after the run (docs/hardware.md "LDGSTS fill-pass halves probes"): the 16-byte position of the source
#: in its 128-byte line, traceconf's rule since.
FOUND = {"line_position": lambda lane, src, dst: src % 128 // CHUNK}


def _pairs(shifted: list[bool], swapped: list[bool]) -> tuple[list[int], list[int]]:
    """(global, shared offsets) of a warp whose lane pairs (2k, 2k + 1) of each quarter-warp read one run, a
    line per pair (the hgemm pattern), the pair's source 16 bytes on where ``shifted[k]`` (the pair straddles
    two sectors: the even lane reads a second half), its two destinations swapped where ``swapped[k]``."""
    gofs, sofs = [], []
    for lane in range(32):
        pair, odd = lane // 2 % 4, lane % 2
        gofs.append(LINE_APART * (lane // 2) + CHUNK * (odd + shifted[pair]))
        sofs.append(CHUNK * (lane - odd + (odd ^ swapped[pair])))
    return gofs, sofs


def _own_runs(source_halves: list[int], destination_halves: list[int]) -> tuple[list[int], list[int]]:
    """A run per lane (sources a line apart) reading the given half of its source sector, each quarter-warp's
    destinations in the given halves of 32-byte sectors of two 128-byte rows (the k-th of a half in the first
    row for k < 4: at most two store passes)."""
    gofs = [LINE_APART * lane + CHUNK * source_halves[lane % QUARTER] for lane in range(32)]
    sofs = []
    for lane in range(32):
        half = destination_halves[lane % QUARTER]
        k = destination_halves[:lane % QUARTER].count(half)
        sofs.append(256 * (lane // QUARTER) + 128 * (k // 4) + CHUNK * (2 * (k % 4) + half))
    return gofs, sofs


def _quarters(quarter: list[int]) -> list[int]:
    return quarter * 4


def _reading(lanes: set[int], size: int = 16) -> list[int]:
    """src-sizes of a quarter-warp in which ``lanes`` read ``size`` bytes and the others zero-fill."""
    return [size if lane in lanes else 0 for lane in range(QUARTER)]


def designed() -> list[tuple[str, list[int], list[int], list[int]]]:
    """(name, global offsets, shared offsets, v5 src-sizes) of the chosen configurations."""
    out = []
    # pairs 0 and 1 shifted (source half = not parity there), pairs 1 and 3 swapped (destination half = not
    # parity there): lanes 0..7 have parity 01010101, source halves 10100101, destination halves 01100110
    mixed = _pairs([True, True, False, False], [False, True, False, True])
    sets = {"all": set(range(8)), "parity4": {0, 2, 4, 6}, "source4": {1, 3, 4, 6}, "destination4": {0, 3, 4, 7},
            "source3": {0, 2, 5, 7}, "dest_parity": {1, 2, 5, 6}, "lanes0347": {0, 3, 4, 7, 5}, "odd": {1, 3, 5, 7},
            "low6": {0, 1, 2, 3, 4, 6}}
    for name, lanes in sets.items():
        out.append((f"mixed__{name}", *mixed, _quarters(_reading(lanes, 15 if name == "all" else 16))))
    for name in ("parity4", "source4", "destination4"):
        out.append((f"mixed__{name}_4b", *mixed, _quarters(_reading(sets[name], 4))))
    # one quarter-warp each: parity, source, destination and every lane
    out.append(("mixed__quarters", *mixed, sum((_reading(sets[n]) for n in ("parity4", "source4", "destination4",
                                                                            "odd")), [])))
    # every pair shifted (source half = not parity) and destinations swapped in pairs 0 and 2
    for shifted, swapped, tag in (([True] * 4, [True, False, True, False], "shift_all"),
                                  ([False] * 4, [True, True, False, False], "swap01"),
                                  ([True, False, True, False], [False] * 4, "shift02")):
        gofs, sofs = _pairs(shifted, swapped)
        for name in ("parity4", "source4", "destination4", "odd", "all"):
            out.append((f"{tag}__{name}", gofs, sofs, _quarters(_reading(sets[name], 15 if name == "all" else 16))))
    # a run per lane: the halves split unevenly, every lane reading (15 bytes) or some zero-filling
    own = {"s7_d5": ([0] * 7 + [1], [0] * 5 + [1] * 3), "s5_d7": ([0] * 5 + [1] * 3, [0] * 7 + [1]),
           "s6_d4": ([0] * 6 + [1] * 2, [0, 1] * 4), "s4_d6": ([1, 0] * 4, [1] * 6 + [0] * 2),
           "s8_d4": ([1] * 8, [1, 0, 0, 1, 1, 0, 0, 1])}
    for name, (source_halves, destination_halves) in own.items():
        gofs, sofs = _own_runs(source_halves, destination_halves)
        out.append((f"own_{name}__all15", gofs, sofs, _quarters([15] * QUARTER)))
        out.append((f"own_{name}__low6", gofs, sofs, _quarters(_reading(sets["low6"]))))
        out.append((f"own_{name}__even", gofs, sofs, _quarters(_reading(sets["parity4"]))))
    return out


def _random_config(rng: random.Random) -> tuple[list[int], list[int], list[int]]:
    """Sources in one to four lines per quarter-warp, any chunk of them; destinations a permutation of a
    128-byte row per quarter-warp (one store pass); src-sizes 0, 4 or 16."""
    gofs, sofs, sizes = [], [], []
    for quarter in range(4):
        lines = [LINE_APART * (4 * quarter + k) for k in range(rng.randint(1, 4))]
        gofs += [rng.choice(lines) + CHUNK * rng.randrange(8) for _ in range(QUARTER)]
        sofs += [128 * quarter + CHUNK * unit for unit in rng.sample(range(QUARTER), QUARTER)]
        sizes += [rng.choice((0, 0, 4, 16, 16)) for _ in range(QUARTER)]
    return gofs, sofs, sizes


def randomised(count: int = 70, seed: int = 21) -> list[tuple[str, list[int], list[int], list[int]]]:
    """``count`` random configurations at which the hypotheses' v5 counts are not all equal."""
    rng, out = random.Random(seed), []
    while len(out) < count:
        gofs, sofs, sizes = _random_config(rng)
        if len({fill_runs(name, gofs, sofs, sizes) for name in HYPOTHESES}) > 1:
            out.append((f"random__{len(out):02d}", gofs, sofs, sizes))
    return out


def tables() -> list[tuple[str, list[int], list[int], list[int]]]:
    return designed() + randomised()


def configs() -> list[tuple[str, list[int]]]:
    return [(name, gofs + sofs + flags(READS["all"]) + sizes) for name, gofs, sofs, sizes in tables()]


def fill_runs(hypothesis: str, gofs: list[int], sofs: list[int], sizes: list[int]) -> int:
    """The fill pass of a copy whose lanes read where ``sizes`` is non-zero: per quarter-warp the larger of its
    reading runs (distinct source less 16 bytes a lane) per ``hypothesis`` half and its destinations' 16-byte
    store passes (per 16-byte unit of the bank row, its distinct rows)."""
    half, wavefronts = {**HYPOTHESES, **FOUND}[hypothesis], 0
    for first in range(0, 32, QUARTER):
        lanes = range(first, first + QUARTER)
        runs = {}
        for lane in lanes:
            if sizes[lane]:
                runs.setdefault(half(lane, gofs[lane], sofs[lane]), set()).add(gofs[lane] - CHUNK * lane)
        stores = max(len({sofs[lane] // 128 for lane in lanes if sofs[lane] // CHUNK % 8 == unit})
                     for unit in range(8))
        wavefronts += max([stores] + [len(r) for r in runs.values()])
    return wavefronts


def fill_count(hypothesis: str, gofs: list[int], sofs: list[int], sizes: list[int]) -> tuple[int, int]:
    """(wavefronts, ideal) of a 16-byte copy with a fill pass (some lane copies fewer than 16 bytes, or the
    immediate-8 form): the sources rule over the reading lanes (traceconf's reference) plus :func:`fill_runs`,
    one ideal wavefront per quarter-warp.  The "source" hypothesis is traceconf's rule."""
    from traceconf.reference import execution_cost
    from traceconf.rules import load_rule_set

    assert min(sizes) < 16, "no fill pass: every lane copies 16 bytes"
    reading = [sofs[lane] if sizes[lane] else -1 for lane in range(32)]
    sources = execution_cost(load_rule_set("sm_90"), "cp_async", CHUNK, 0, reading, "bypass", gofs, [16] * 32)
    return sources.wavefronts + fill_runs(hypothesis, gofs, sofs, sizes), sources.ideal_wavefronts + 4


def predictions() -> list[dict]:
    """Per configuration and copy (v5 its src-sizes, v10 8 bytes in every lane): each hypothesis's count."""
    rows = []
    for name, gofs, sofs, sizes in tables():
        for variant, copy_sizes in ((ZFILL, sizes), (IMMEDIATE, [8] * 32)):
            counts = {h: fill_count(h, gofs, sofs, copy_sizes) for h in HYPOTHESES}
            rows.append(dict(config=name, variant=variant, ideal=counts["source"][1],
                             **{h: wavefronts for h, (wavefronts, _) in counts.items()}))
    return rows


def fit(manifest_path: Path) -> dict[str, list[str]]:
    """Per hypothesis (predicted and found): the first launches' v5 and v10 rows (``config/vN``) whose page its
    count misses."""
    measured = {(row["config"], int(row["variant"])): (int(row["wavefronts"]), int(row["ideal"]))
                for row in csv.DictReader(open(manifest_path, newline="")) if row["rep"] == "0"}
    misses: dict[str, list[str]] = {h: [] for h in (*HYPOTHESES, *FOUND)}
    for name, gofs, sofs, sizes in tables():
        for variant, copy_sizes in ((ZFILL, sizes), (IMMEDIATE, [8] * 32)):
            for h, missed in misses.items():
                if fill_count(h, gofs, sofs, copy_sizes) != measured[name, variant]:
                    missed.append(f"{name}/v{variant}")
    return misses


def manifest(summary: Path, out: Path) -> None:
    """The summary's rows (one per launch and LDGSTS pc) with the variant, its form and its src-sizes."""
    src_size_manifest(summary, out, {name: sizes for name, _, _, sizes in tables()}, ZFILL, IMMEDIATE)


if __name__ == "__main__":
    def print_fit(manifest_path):
        for h, missed in fit(Path(manifest_path)).items():
            print(f"{h}: {2 * len(tables()) - len(missed)} of {2 * len(tables())}; misses {' '.join(missed[:12])}")
    command_line(__doc__, configs, REPS, manifest, fit=print_fit, predict=lambda path: write_csv(predictions(), path))
