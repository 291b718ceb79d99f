#!/usr/bin/env python3
"""Configurations of the LDGSTS.BYPASS probes (ldgsts_probe.cu) and the summary of their Source pages.

    python3 scripts/hw/ldgsts_probe.py configs OUT.txt [--part N/M | --cache-none-subset]  # the driver's input
    python3 scripts/hw/ldgsts_probe.py configs OUT.txt --fit [--part N/M]  # the fitting group (fit_configs)
    python3 scripts/hw/ldgsts_probe.py configs OUT.txt --repeats [--part N/M]  # repeated sources (repeat_configs)
    python3 scripts/hw/ldgsts_probe.py configs OUT.txt --check [--part N/M]  # their second set (check_configs)
    python3 scripts/hw/ldgsts_probe.py export REPORT LOG DIR  # there: one Source page CSV per profiled launch
    python3 scripts/hw/ldgsts_probe.py summary PAGES OUT.csv  # one row per launch and LDGSTS pc

Each configuration varies one factor against the base case (one warp, 32 lanes copying 512 contiguous
bytes from one aligned global run to 512 contiguous shared bytes): the global source pattern (lines per
quarter-warp, offset in the line, misalignment), the shared destination pattern (rotation in the 128-byte
row, 2/4/8-way conflicts, the measured kernels' XOR swizzle and 272-byte rows), guard-predicated-off lanes
and where their (computed, unused) addresses point, copies in flight and commit grouping, the ignore-src
form, L2-resident sources, warps per CTA and CTAs; plus seeded random patterns for fitting.  Every launch
runs ``REPS`` times in a row in one process (run-to-run variance), with Nsight's default cache control
(caches flushed: sources come from DRAM), and the ``CACHE_NONE_SUBSET`` again with ``--cache-control none``.
"""

from __future__ import annotations

import csv
import random
import sys
from collections import Counter
from pathlib import Path

REPS = 3
CHUNK = 16
LINE = 128
COMMIT_EACH, SRCSIZE, PREWARM, TWICE = 1, 2, 4, 8


def config(name, gofs, sofs, flags=None, grid=1, copies=1, gstep=0, sstep=0, cta_stride=0, mode=0, reps=REPS):
    flags = flags if flags is not None else [1] * len(gofs)
    assert len(gofs) == len(sofs) == len(flags) <= 1024
    assert all(0 <= s and s + (copies - 1) * sstep + (8192 if mode & TWICE else 0) <= 65536 - CHUNK for s in sofs)
    return dict(name=name, threads=len(gofs), grid=grid, copies=copies, gstep=gstep, sstep=sstep,
                cta_stride=cta_stride, mode=mode, reps=reps, gofs=list(gofs), sofs=list(sofs), flags=list(flags))


def lanes(n=32):
    return range(n)


def configs() -> list[dict]:
    out = []
    contiguous = [CHUNK * l for l in lanes()]
    out.append(config("base", contiguous, contiguous))
    # destination rotated by r chunks inside the 128-byte bank row (the source stays one aligned line per quarter)
    for r in range(1, 8):
        out.append(config(f"dst_rot{r}", contiguous, [CHUNK * (l + r) for l in lanes()]))
    # source misaligned by r chunks (each quarter-warp spans two lines), destination aligned
    for r in range(1, 8):
        out.append(config(f"src_rot{r}", [CHUNK * (l + r) for l in lanes()], contiguous))
    # both shifted alike: no rotation between source and destination, both misaligned
    for r in (1, 3, 4):
        out.append(config(f"both_rot{r}", [CHUNK * (l + r) for l in lanes()], [CHUNK * (l + r) for l in lanes()]))
    # source lines: L lanes per global line, lines 1 KiB apart; at offset 0 of the line or at the lane's
    # own position in the row (source chunk = destination chunk: no rotation)
    for per_line in (1, 2, 4, 8):
        out.append(config(f"lines{per_line}_off0", [1024 * (l // per_line) + CHUNK * (l % per_line) for l in lanes()],
                          contiguous))
        if per_line < 8:
            out.append(config(f"lines{per_line}_samepos", [1024 * (l // per_line) + CHUNK * (l % 8) for l in lanes()],
                              contiguous))
    # hgemm's operand copies: pairs of lanes take 32 B of one row (rows 8 KiB apart) at 32k bytes into it
    for k in range(4):
        out.append(config(f"hgemm_k{k}", [8192 * (l // 2) + 32 * k + CHUNK * (l % 2) for l in lanes()], contiguous))
    # Triton's A operand (64-byte rows 512 B apart, 4 lanes a row) into its XOR-swizzled destination,
    # first (h0) or second (h1) half of each line; and the same sources into a plain destination
    swizzled = [CHUNK * (8 * (l // 8) + ((l % 8) ^ (l // 8))) for l in lanes()]
    for h in (0, 1):
        triton_a = [512 * (l // 4) + 64 * h + CHUNK * (l % 4) for l in lanes()]
        out.append(config(f"triton_a_h{h}", triton_a, swizzled))
        out.append(config(f"triton_a_h{h}_linear", triton_a, contiguous))
        out.append(config(f"triton_a_h{h}_srcsize", triton_a, swizzled, mode=SRCSIZE))
    out.append(config("triton_a_h0_ignoresrc", [512 * (l // 4) + CHUNK * (l % 4) for l in lanes()], swizzled,
                      flags=[3] * 32, mode=SRCSIZE))
    # Triton's B operand: one line per quarter, same swizzle
    out.append(config("triton_b", [512 * (l // 8) + CHUNK * (l % 8) for l in lanes()], swizzled))
    # the wmma tf32 C tile: 256-byte global rows (1 KiB apart) into 272-byte shared rows, rows 2j and 2j+1
    for j in range(4):
        rows = [2 * j + l // 16 for l in lanes()]
        out.append(config(f"wmma_c_j{j}", [1024 * r + CHUNK * (l % 16) for l, r in zip(lanes(), rows)],
                          [272 * r + CHUNK * (l % 16) for l, r in zip(lanes(), rows)]))
    # shared conflicts with an aligned contiguous source
    for stride in (32, 64, 128, 256):
        out.append(config(f"dst_stride{stride}", contiguous, [stride * l for l in lanes()]))
    out.append(config("dst_xor1", contiguous, [CHUNK * (l ^ 1) for l in lanes()]))
    out.append(config("dst_reversed", contiguous, [CHUNK * (31 - l) for l in lanes()]))
    out.append(config("src_reversed", [CHUNK * (31 - l) for l in lanes()], contiguous))
    out.append(config("src_same", [0] * 32, contiguous))
    out.append(config("src_pairs", [CHUNK * (l // 2) for l in lanes()], contiguous))
    out.append(config("lines1_dst_stride128", [1024 * l for l in lanes()], [128 * l for l in lanes()]))
    # guard predicate: 8 (16, 24) active lanes; where the predicated-off lanes' addresses point
    first8 = [1 if l < 8 else 0 for l in lanes()]
    out.append(config("active8_rest_contiguous", contiguous, contiguous, first8))
    out.append(config("active8_rest_scattered", contiguous,
                      [CHUNK * l if l < 8 else 128 * l for l in lanes()] , first8))
    out.append(config("active8_rest_lines", [CHUNK * l if l < 8 else 4096 * l for l in lanes()], contiguous, first8))
    out.append(config("active8_rest_lane0", [0 if l >= 8 else CHUNK * l for l in lanes()],
                      [0 if l >= 8 else CHUNK * l for l in lanes()], first8))
    out.append(config("active8_threads8", contiguous[:8], contiguous[:8]))
    out.append(config("active16_rest_scattered", [CHUNK * l if l < 16 else 4096 * l for l in lanes()],
                      [CHUNK * l if l < 16 else 128 * l for l in lanes()], [1 if l < 16 else 0 for l in lanes()]))
    out.append(config("active_odd_rest_contiguous", contiguous, contiguous, [l % 2 for l in lanes()]))
    out.append(config("active0_rest_scattered", [4096 * l for l in lanes()], [128 * l for l in lanes()], [0] * 32))
    # copies in flight from one warp and commit grouping
    out.append(config("inflight4_one_commit", contiguous, contiguous, copies=4, gstep=512, sstep=512))
    out.append(config("inflight4_commit_each", contiguous, contiguous, copies=4, gstep=512, sstep=512,
                      mode=COMMIT_EACH))
    out.append(config("inflight16_one_commit", contiguous, contiguous, copies=16, gstep=512, sstep=512))
    out.append(config("inflight4_dst_rot3", contiguous, [CHUNK * (l + 3) for l in lanes()], copies=4, gstep=512,
                      sstep=512))
    out.append(config("inflight4_hgemm", [8192 * (l // 2) + CHUNK * (l % 2) for l in lanes()], contiguous,
                      copies=4, gstep=32, sstep=512))
    out.append(config("twice_base", contiguous, contiguous, mode=TWICE))
    out.append(config("twice_dst_rot3", contiguous, [CHUNK * (l + 3) for l in lanes()], mode=TWICE))
    # L2-resident sources
    for name in ("base", "dst_rot3", "lines1_off0", "hgemm_k1", "triton_a_h1", "wmma_c_j1", "src_rot1"):
        base = next(c for c in out if c["name"] == name)
        out.append(dict(base, name=f"{name}_l2hit", mode=base["mode"] | PREWARM))
    # warps per CTA (each warp its own 512 B of source and destination) and CTAs
    for warps in (4, 8, 32):
        n = 32 * warps
        out.append(config(f"warps{warps}_base", [CHUNK * t for t in range(n)], [CHUNK * t for t in range(n)]))
        out.append(config(f"warps{warps}_dst_rot3", [CHUNK * t for t in range(n)],
                          [CHUNK * (t + 3) for t in range(n)]))
    out.append(config("warps8_hgemm", [8192 * (t // 2) + CHUNK * (t % 2) for t in range(256)],
                      [CHUNK * t for t in range(256)]))
    out.append(config("warps8_triton_a_h1", [512 * (t // 4) + 64 + CHUNK * (t % 4) for t in range(256)],
                      [512 * (t // 32) + CHUNK * (8 * ((t % 32) // 8) + ((t % 8) ^ ((t % 32) // 8))) for t in range(256)]))
    for grid in (132, 1056):
        for name in ("warps4_base", "warps4_dst_rot3"):
            base = next(c for c in out if c["name"] == name)
            out.append(dict(base, name=f"{name}_grid{grid}", grid=grid, cta_stride=65536, reps=REPS))
    # seeded random patterns: a permutation of 32 chunks (conflict-free as STS.128 per quarter or not),
    # sources anywhere in 4 lines (any chunk, any lane order)
    rng = random.Random(21)
    for i in range(12):
        dst = [CHUNK * c for c in rng.sample(range(32), 32)]
        src = [1024 * rng.randrange(4) + CHUNK * rng.randrange(8) for _ in lanes()]
        out.append(config(f"random_perm{i:02d}", src, dst))
    for i in range(12):
        dst = [CHUNK * rng.randrange(256) for _ in lanes()]
        src = [1024 * rng.randrange(32) + CHUNK * rng.randrange(8) for _ in lanes()]
        out.append(config(f"random_any{i:02d}", src, dst))
    names = [c["name"] for c in out]
    assert len(names) == len(set(names))
    return out


#: Where source chunk c (of 32) lies: 4 lines 1 KiB apart, 8 chunks each (as ``random_perm*``).
def chunk_source(c: int) -> int:
    return 1024 * (c // 8) + CHUNK * (c % 8)


def within_blocks(rng: random.Random, block: int) -> list[int]:
    """A permutation of 32 chunks that moves chunks only inside their aligned block of ``block``."""
    return [c for b in range(0, 32, block) for c in rng.sample(range(b, b + block), block)]


def of_blocks(rng: random.Random, block: int) -> list[int]:
    """A permutation of 32 chunks that moves whole aligned blocks of ``block``, each kept in order."""
    return [block * b + c for b in rng.sample(range(32 // block), 32 // block) for c in range(block)]


def sector_sets(rng: random.Random) -> list[int]:
    """Each quarter-warp four whole sectors (chunk pairs) drawn from any line, its 8 chunks in random order."""
    sectors = rng.sample(range(16), 16)
    out = []
    for q in range(4):
        chunks = [2 * s + h for s in sectors[4 * q:4 * q + 4] for h in (0, 1)]
        out += rng.sample(chunks, 8)
    return out


#: Permutation families of fit_configs: name -> (rng -> permutation of 32 chunks).
PERMUTATIONS = {
    "inquarter": lambda rng: within_blocks(rng, 8),     # chunks stay in their quarter-warp's line / row
    "quarters": lambda rng: of_blocks(rng, 8),          # whole quarter-warps moved
    "sectors": lambda rng: of_blocks(rng, 2),           # whole sectors moved, each in order
    "insector": lambda rng: within_blocks(rng, 2),      # the two chunks of a sector swapped or not
    "sectorsets": sector_sets,                          # quarter-warps' sector sets across lines
    "any": lambda rng: rng.sample(range(32), 32),
}


def fit_configs() -> list[dict]:
    """The fitting group (issue 21): more seeded random permutations of 32 chunks like ``random_perm*`` (a
    destination permutation, sources anywhere in 4 lines), then structured permutations that isolate one factor,
    each on the source side (destinations contiguous), the destination side (sources contiguous in 4 lines) and
    both (independent permutations): within quarter-warps, of whole quarter-warps, of whole sectors, within
    sectors, quarter-warps' sector sets across lines, and any; reversed orders; random guard subsets."""
    rng = random.Random(2108)
    contiguous = list(range(32))
    out = []
    for i in range(120):
        dst = [CHUNK * c for c in rng.sample(range(32), 32)]
        src = [1024 * rng.randrange(4) + CHUNK * rng.randrange(8) for _ in lanes()]
        out.append(config(f"fit_perm{i:03d}", src, dst))
    for family, permutation in PERMUTATIONS.items():
        for i in range(5):
            for side in ("src", "dst", "both"):
                src = permutation(rng) if side != "dst" else contiguous
                dst = permutation(rng) if side != "src" else contiguous
                out.append(config(f"fit_{family}_{side}{i}", [chunk_source(c) for c in src], [CHUNK * c for c in dst]))
    reversed_orders = {"all": list(range(31, -1, -1)), "inquarter": [8 * (l // 8) + 7 - l % 8 for l in lanes()],
                       "quarters": [8 * (3 - l // 8) + l % 8 for l in lanes()]}
    for name, order in reversed_orders.items():
        for side in ("src", "dst", "both"):
            src, dst = (order if side != "dst" else contiguous), (order if side != "src" else contiguous)
            out.append(config(f"fit_reversed_{name}_{side}", [chunk_source(c) for c in src], [CHUNK * c for c in dst]))
    for i in range(24):
        active = rng.randrange(4, 29)
        on = set(rng.sample(range(32), active))
        dst = [CHUNK * c for c in rng.sample(range(32), 32)]
        src = [1024 * rng.randrange(4) + CHUNK * rng.randrange(8) for _ in lanes()]
        out.append(config(f"fit_guard{i:02d}_on{active}", src, dst, [int(l in on) for l in lanes()], reps=2))
    out = [dict(c, reps=2) for c in out]
    names = [c["name"] for c in out]
    assert len(names) == len(set(names))
    return out


def repeat_configs() -> list[dict]:
    """Repeated sources (issue 21, after the fitting group): one warp, every lane copying chunk ``l`` (of 32, in 4
    lines, ``chunk_source``) to chunk ``l`` of 4 shared rows (4 wavefronts), then a few lanes given other chunks
    so that a chunk has two to four readers: every ordered pair of quarter-warp 0 (lane ``o`` reads lane ``l``'s
    chunk: the second reader at each place and chunk XOR), the pairs of quarter-warp 2 whose places differ by 2 or
    6, a reader from quarter-warp 1 writing into row 0 (its place swapped with the lane there), two first readers of
    one wavefront each with a later reader, three or four readers of one chunk (some in the second request), a
    later reader whose write a lower lane's destination drops or whose guard is off, pairs with destinations
    reversed within the quarter-warp (lane order against place order); then seeded permutations whose chunks
    repeat within a row (``fit_perm``-like, each row's sources from two of the 4 lines)."""
    out = []

    def reading(name, assigned, places=None, flags=None):
        """Lane l reads chunk ``places[l]`` (``assigned`` lane -> chunk instead) into place ``places[l]``."""
        places = places if places is not None else list(range(32))
        chunks = [assigned.get(lane, place) for lane, place in enumerate(places)]
        out.append(config(f"rep_{name}", [chunk_source(c) for c in chunks], [CHUNK * p for p in places], flags,
                          reps=2))

    for first in range(8):
        for second in range(8):
            if first != second:
                reading(f"pair_{first}_{second}", {second: first})
    for first in range(16, 24):
        for second in range(16, 24):
            if (first ^ second) % 4 == 2:
                reading(f"pair_{first}_{second}", {second: first})
    for first, place in ((0, 2), (0, 6), (0, 1), (0, 4), (3, 1), (5, 3)):
        places = list(range(32))
        places[9], places[place] = place, 9
        reading(f"cross_{first}_9at{place}", {9: first}, places)
        reading(f"cross_9at{place}_{first}", {first: 9}, places)
    for name, assigned in (("0_2_1_3", {2: 0, 3: 1}), ("0_2_4_6", {2: 0, 6: 4}), ("0_6_1_7", {6: 0, 7: 1}),
                           ("0_2_5_7", {2: 0, 7: 5}), ("1_3_4_6", {3: 1, 6: 4}), ("0_6_5_3", {6: 0, 3: 5})):
        reading(f"two_{name}", assigned)
    chains = {"0_2_4": {2: 0, 4: 0}, "0_2_6": {2: 0, 6: 0}, "0_4_2": {4: 0, 2: 0}, "0_6_4": {6: 0, 4: 0},
              "4_2_0": {2: 4, 0: 4}, "2_0_6": {0: 2, 6: 2}, "0_2_4_6": {2: 0, 4: 0, 6: 0}, "6_4_2_0": {4: 6, 2: 6, 0: 6},
              "0_1_2_3": {1: 0, 2: 0, 3: 0}, "1_3_5_7": {3: 1, 5: 1, 7: 1}, "0_3_6": {3: 0, 6: 0}, "0_2_1": {2: 0, 1: 0},
              # the third reader in the second request (lane 4: chunk 0 at lane 0's XOR), lane 2 sharing its key
              # with lane 6 (chunk 4)
              "0_2_4_and_4to6": {2: 0, 4: 0, 6: 4}, "2_0_6_and_6to4": {0: 2, 6: 2, 4: 6},
              # lanes 4 and 5 in the second request (chunks 0 and 1 at lanes 0 and 1's XOR), a later reader of chunk 0
              "req1_4_5_then_6": {4: 0, 5: 1, 6: 0}, "req1_4_5_then_7": {4: 0, 5: 1, 7: 1},
              "req1_4_5_then_2": {4: 0, 5: 1, 2: 0}}
    for name, assigned in chains.items():
        reading(f"chain_{name}", assigned)
    for first, second, over in ((0, 10, 2), (0, 14, 6), (1, 11, 3)):
        places = list(range(32))
        places[second] = over
        reading(f"dropped_{first}_{second}over{over}", {second: first}, places)
    for first, second in ((0, 2), (0, 6)):
        reading(f"guarded_{first}_{second}", {second: first}, flags=[int(l != second) for l in lanes()])
    reversed_places = [8 * (l // 8) + 7 - l % 8 for l in lanes()]
    for first, second in ((0, 2), (2, 0), (0, 6), (6, 0), (1, 3), (3, 1), (0, 4), (0, 1)):
        reading(f"rev_{first}_{second}", {second: reversed_places[first]}, reversed_places)
    rng = random.Random(2111)
    for i in range(REPEAT_PERMUTATIONS):
        places = rng.sample(range(32), 32)
        row_lines = [rng.sample(range(4), 2) for _ in range(4)]
        chunks = [8 * rng.choice(row_lines[p // 8]) + rng.randrange(8) for p in places]
        reading(f"perm{i:03d}", dict(enumerate(chunks)), places)
    names = [c["name"] for c in out]
    assert len(names) == len(set(names))
    return out


#: How many seeded permutations ``repeat_configs`` ends with.
REPEAT_PERMUTATIONS = 60


def check_configs() -> list[dict]:
    """A second set for the repeated sources (issue 21), drawn after the rule was fitted to ``repeat_configs``:
    seeded ``fit_perm``-like permutations (sources anywhere in 4 lines), ``rep_perm``-like ones (each row's sources
    from one or two lines, a chunk read twice into a row at one parity), the same with random guard subsets, one chunk read at 5 to 8 places of a row or into
    several rows, repeats with misaligned sources or swizzled destinations, a repeated chunk's reader dropped (a
    lower lane writes its destination), and four warps or two CTAs each warp its own pattern."""
    rng = random.Random(2112)
    out = []

    def add(name, chunks, places, flags=None, threads=32, **launch):
        out.append(config(f"chk_{name}", [chunk_source(c % 32) + 4096 * (c // 32) for c in chunks],
                          [CHUNK * p for p in places], flags or [1] * threads, reps=2, **launch))

    def repeating(lines_per_row):
        """Chunks into a permutation of 32 places, each row's from ``lines_per_row`` lines, drawn until a chunk
        is read into one row at two places of one parity (where the requests' order matters)."""
        while True:
            places = rng.sample(range(32), 32)
            row_lines = [rng.sample(range(4), lines_per_row) for _ in range(4)]
            chunks = [8 * rng.choice(row_lines[p // 8]) + rng.randrange(8) for p in places]
            readers = Counter((c, p // 8, p % 2) for c, p in zip(chunks, places))
            if max(readers.values()) > 1:
                return chunks, places

    for i in range(40):
        places = rng.sample(range(32), 32)
        add(f"anyline{i:02d}", [rng.randrange(32) for _ in lanes()], places)
    for i in range(80):
        add(f"rowlines{i:02d}", *repeating(1 + i % 2))
    for i in range(16):
        on = set(rng.sample(range(32), rng.randrange(8, 29)))
        add(f"guard{i:02d}_on{len(on)}", *repeating(2), flags=[int(l in on) for l in lanes()])
    for readers in range(5, 9):                  # one chunk at `readers` places of row 0, the others their own
        at = sorted(rng.sample(range(8), readers))
        add(f"many{readers}", [at[0] if l in at else l for l in lanes()], list(lanes()))
    add("same_chunk_rows", [8 * (l // 8) if l % 2 == 0 else l for l in lanes()], list(lanes()))
    add("one_chunk_two_rows", [0 if l in (0, 2, 8, 10) else l for l in lanes()], list(lanes()))
    for r in (1, 3):                            # sources misaligned by r chunks, lane 2 and 6 re-reading lane 0's
        chunks = [l + r for l in lanes()]
        chunks[2] = chunks[6] = chunks[0]
        add(f"rot{r}_repeats", chunks, list(lanes()))
    swizzled = [8 * (l // 8) + ((l % 8) ^ (l // 8)) for l in lanes()]
    for i in range(4):
        chunks = [swizzled[l] for l in lanes()]
        for lane in rng.sample(range(32), 4):
            chunks[lane] = chunks[8 * (lane // 8) + rng.randrange(8)]
        add(f"swizzled{i}", chunks, swizzled)
    for first, dropped, over in ((0, 18, 2), (1, 21, 5), (4, 26, 0)):
        places = list(lanes())
        places[dropped] = over                   # a lower lane (over) writes it: lane `dropped` is dropped
        chunks = list(lanes())
        chunks[dropped] = chunks[over + 2] = first
        add(f"dropped_{first}_{dropped}over{over}", chunks, places)
    patterns = [repeating(2) for _ in range(4)]
    add("warps4", [c + 32 * (t // 32) for t in range(128) for c in [patterns[t // 32][0][t % 32]]],
        [p + 32 * (t // 32) for t in range(128) for p in [patterns[t // 32][1][t % 32]]], threads=128)
    chunks, places = repeating(2)
    add("grid2", chunks, places, grid=2, cta_stride=65536)
    names = [c["name"] for c in out]
    assert len(names) == len(set(names))
    return out


#: The configurations also run with ``--cache-control none`` (sources left in L2 by the launches before).
CACHE_NONE_SUBSET = ("base", "dst_rot1", "dst_rot3", "dst_rot4", "src_rot1", "src_rot4", "lines1_off0", "lines2_off0",
                     "lines4_off0", "lines4_samepos", "hgemm_k0", "hgemm_k1", "triton_a_h0", "triton_a_h1", "triton_b",
                     "wmma_c_j0", "wmma_c_j1", "wmma_c_j2", "wmma_c_j3", "dst_stride32", "dst_stride128",
                     "active8_rest_contiguous", "active8_rest_scattered", "inflight4_one_commit", "warps8_base",
                     "random_perm00", "random_perm01", "random_any00", "random_any01")


def write_configs(path: Path, options: list[str]) -> None:
    chosen = configs()
    sets = {"--fit": fit_configs, "--repeats": repeat_configs, "--check": check_configs}
    if options[:1] and options[0] in sets:
        chosen, options = sets[options[0]](), options[1:]
    if options[:1] == ["--cache-none-subset"]:
        chosen = [c for c in chosen if c["name"] in CACHE_NONE_SUBSET]
    elif options[:1] == ["--part"]:
        part, parts = map(int, options[1].split("/"))
        chosen = chosen[part::parts]
    with open(path, "w") as f:
        for c in chosen:
            f.write(" ".join(str(c[k]) for k in ("name", "threads", "grid", "copies", "gstep", "sstep",
                                                  "cta_stride", "mode", "reps")) + "\n")
            for key in ("gofs", "sofs", "flags"):
                f.write(" ".join(map(str, c[key])) + "\n")


def single_table(page: str) -> str:
    """ncu 2025.3 prints a -lineinfo kernel's source table twice; keep one copy when the copies are identical."""
    lines = page.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith('"Kernel Name"')]
    tables = ["".join(lines[a:b]) for a, b in zip(starts, starts[1:] + [len(lines)])]
    return tables[0] if tables and all(t == tables[0] for t in tables) else page


def numbered(names: list[str]) -> list[str]:
    """NAME_rREP per name, REP the count of the same name before it."""
    seen: Counter = Counter()
    out = []
    for name in names:
        out.append(f"{name}_r{seen[name]}")
        seen[name] += 1
    return out


def launch_names(log: str) -> list[str]:
    """The NAME of each "LAUNCH NAME REP" line of a driver's log, in order.  Nsight's own output, in the same
    log, can cut such a line anywhere (``LAUNCH ran==PROF== Profiling ...``): the rest of it is the next line
    that is neither Nsight's nor another launch's."""
    names, cut = [], None
    for line in log.splitlines():
        if cut is not None and not line.startswith(("==PROF==", "LAUNCH ")):
            names.append((cut + line).split()[0])
            cut = None
        elif line.startswith("LAUNCH "):
            head, nsight, _ = line[len("LAUNCH "):].partition("==PROF==")
            if nsight and len(head.split()) < 2:
                cut = head
            else:
                names.append(head.split()[0])
    return names


def export(report: Path, log: Path, out: Path) -> None:
    """One Source page per profiled launch, named NAME_rREP from the program's "LAUNCH NAME REP" lines when
    they match the report's launches one to one, else INDEX_KERNEL.  REP counts NAME's earlier lines: Nsight's
    own output, in the same log, can cut a line after its name."""
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    raw = subprocess.run(["ncu", "-i", str(report), "--page", "raw", "--csv", "--metrics", "launch__grid_size"],
                         capture_output=True, text=True, check=True).stdout
    rows = list(csv.DictReader(line for line in raw.splitlines(keepends=True) if line.startswith('"')))
    kernels = [r["Kernel Name"] for r in rows if r.get("ID", "").strip().isdigit()]
    launched = launch_names(log.read_text(errors="replace"))
    ids = (numbered(launched) if len(launched) == len(kernels)
           else [f"{i:03d}_{kernel.split('(')[0]}" for i, kernel in enumerate(kernels)])
    out.mkdir(parents=True, exist_ok=True)

    def one(index: int) -> None:
        page = subprocess.run(["ncu", "-i", str(report), "--page", "source", "--csv", "--print-source", "sass",
                               "--print-kernel-base", "mangled", "--launch-skip", str(index), "--launch-count", "1"],
                              capture_output=True, text=True)
        (out / f"{ids[index]}.csv").write_text(single_table(page.stdout) if page.returncode == 0
                                               else page.stdout + page.stderr)

    with ThreadPoolExecutor(max_workers=14) as pool:
        list(pool.map(one, range(len(ids))))


def read_page(path: Path) -> list[dict]:
    rows = list(csv.reader(open(path, newline="")))
    start = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    return [dict(zip(rows[start], r)) for r in rows[start + 1:] if len(r) == len(rows[start])]


def summary(pages: Path, out: Path) -> None:
    """One row per (page group: stage of the collection, configuration, repetition, LDGSTS pc) of the pages."""
    fields = ["group", "config", "rep", "pc", "source", "executed", "threads", "predicated_on", "wavefronts",
              "ideal", "per_execution", "l2_sectors", "l2_sectors_ideal", "tag_requests"]
    rows = []
    for page in sorted(pages.glob("*/*.csv")):
        group = page.parent.name
        config_name, _, rep = page.stem.rpartition("_r")
        if not rep.isdigit():
            config_name, rep = page.stem, ""
        body = read_page(page)
        base = int(body[0]["Address"], 16)
        for r in body:
            if "LDGSTS" not in r["Source"]:
                continue
            executed = int(r["Instructions Executed"] or 0)
            wavefronts = int(r["L1 Wavefronts Shared"] or 0)
            rows.append(dict(group=group, config=config_name, rep=rep, pc=hex(int(r["Address"], 16) - base),
                             source=" ".join(r["Source"].split()), executed=executed,
                             threads=r["Avg. Threads Executed"], predicated_on=r["Avg. Predicated-On Threads Executed"],
                             wavefronts=wavefronts, ideal=int(r["L1 Wavefronts Shared Ideal"] or 0),
                             per_execution=round(wavefronts / executed, 4) if executed else "",
                             l2_sectors=r["L2 Theoretical Sectors Global"],
                             l2_sectors_ideal=r["L2 Theoretical Sectors Global Ideal"],
                             tag_requests=r["L1 Tag Requests Global"]))
    with open(out, "w", newline="") as f:
        writer = csv.DictWriter(f, fields)
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    if sys.argv[1:2] == ["configs"]:
        write_configs(Path(sys.argv[2]), sys.argv[3:])
    elif sys.argv[1:2] == ["export"]:
        export(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
    elif sys.argv[1:2] == ["summary"]:
        summary(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        sys.exit(__doc__)
