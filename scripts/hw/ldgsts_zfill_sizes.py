#!/usr/bin/env python3
"""Configurations of the LDGSTS `.ZFILL` src-size probes (the ignore-src kernel, ldgsts_ignore_src.cu) and
their manifest.

    python3 scripts/hw/ldgsts_zfill_sizes.py configs OUT.txt         # the driver's input
    python3 scripts/hw/ldgsts_zfill_sizes.py manifest SUMMARY OUT.csv  # the summary's rows with each copy's form

The ignore-src probes' lane-mod-5 src-sizes (16, 12, 8, 4, 0) give 30 wavefronts at the hgemm pattern where
src-sizes of 0 and 16 alone, or 8 in every lane, follow the sources rule with the fill pass.  These
configurations take the `.ZFILL` register variant's (v5) src-sizes apart: every lane reading the same partial
size, one partial or zero-filling lane per quarter-warp, the halves of a 32-byte source sector read or not (a
pair of lanes at the hgemm pattern), and each quarter-warp of the lane-mod-5 set alone (repeated in the four
quarter-warps), at four of the ignore-src patterns; every other variant reads in every lane.  Collected with
``KERNEL=ldgsts_ignore_src scripts/hw/collect_ldgsts_tables.sh ldgsts_zfill_sizes``; the pages are exported and
summarised by ldgsts_probe.py and trimmed by ldgsts_ignore_src.py.
"""

from __future__ import annotations

from pathlib import Path

from ldgsts_ignore_src import READS, SIZES, VARIANTS, annotated, command_line, flags, patterns

REPS = 2
PATTERNS = ("base", "hgemm_k0", "triton_a_h0", "src_rot1")

#: src-size of the .ZFILL variant per lane of a quarter-warp, the same in each of the four.
QUARTER_SIZES = {
    "all12": [12] * 8, "all4": [4] * 8, "all15": [15] * 8, "all1": [1] * 8,
    # one lane of eight partial or zero-filling, the first or the second of a 32-byte sector
    "lane0_12": [12] + [16] * 7, "lane0_4": [4] + [16] * 7, "lane0_0": [0] + [16] * 7,
    "lane1_12": [16, 12] + [16] * 6, "lane1_4": [16, 4] + [16] * 6, "lane1_0": [16, 0] + [16] * 6,
    # a sector's halves: the first read in part, the second not; the second in part, the first not; both in part
    "pair_4_0": [4, 0] + [16] * 6, "pair_0_4": [0, 4] + [16] * 6, "pair_8_4": [8, 4] + [16] * 6,
    # a sector of which only the first half is read next to one of which only the second is
    "halves_16_0_0_16": [16, 0, 0, 16] + [16] * 4, "halves_4_0_0_16": [4, 0, 0, 16] + [16] * 4,
    "halves_4_0_0_4": [4, 0, 0, 4] + [16] * 4, "halves_apart": [16, 0] + [16] * 4 + [0, 16],
    "halves_twice": [16, 0, 0, 16, 16, 0, 0, 16],
    # two sectors read in the same half only
    "first_halves": [16, 0, 16, 0] + [16] * 4, "second_halves": [0, 16, 0, 16] + [16] * 4,
    # the lane-mod-5 set's quarter-warps, each alone
    **{f"mod5_q{q}": SIZES["sizes_mixed"][8 * q:8 * q + 8] for q in range(4)},
}
#: src-sizes of whole warps: the lane-mod-5 set (again) and turned by k lanes.
WARP_SIZES = {f"mod5_rot{k}": [(16, 12, 8, 4, 0)[(lane + k) % 5] for lane in range(32)] for k in range(5)}


def sizes_of(name: str) -> list[int]:
    """The `.ZFILL` variant's src-size per lane of a set."""
    return WARP_SIZES[name] if name in WARP_SIZES else QUARTER_SIZES[name] * 4


def configs() -> list[tuple[str, list[int]]]:
    out = []
    for pattern in PATTERNS:
        gofs, sofs = patterns()[pattern]
        for name in (*QUARTER_SIZES, *WARP_SIZES):
            out.append((f"{pattern}__{name}", gofs + sofs + flags(READS["all"]) + sizes_of(name)))
    return out


def manifest(summary: Path, out: Path) -> None:
    """The summary's rows (one per launch and LDGSTS pc) with the variant, its form and its src-sizes."""
    def describe(row: dict, variant: int) -> dict:
        pattern, _, sizes = row["config"].partition("__")
        src_size = {5: " ".join(map(str, sizes_of(sizes))), 10: "8 (immediate)"}.get(
            variant, "16/0" if variant else "guard")
        return dict(form=VARIANTS[variant][0], pattern=pattern, sizes=sizes, src_size=src_size)
    annotated(summary, out, ["form", "pattern", "sizes", "src_size"], describe)


if __name__ == "__main__":
    command_line(__doc__, configs, REPS, manifest)
