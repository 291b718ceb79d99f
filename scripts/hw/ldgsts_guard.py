#!/usr/bin/env python3
"""Configurations of the LDGSTS guard probes (ldgsts_guard.cu) and their manifest.

    python3 scripts/hw/ldgsts_guard.py configs OUT.txt           # the driver's input
    python3 scripts/hw/ldgsts_guard.py manifest SUMMARY OUT.csv  # the summary's rows with each copy's form

Every configuration is one global/shared pattern of the ignore-src probes (ldgsts_ignore_src.py) times one
choice of the lanes that copy (the guard holds there) times one choice of the lanes alive (the others return
before the copies).  The pages are exported and summarised by ldgsts_probe.py and trimmed by
ldgsts_ignore_src.py (scripts/hw/collect_ldgsts_tables.sh ldgsts_guard).
"""

from __future__ import annotations

from pathlib import Path

from ldgsts_ignore_src import LANES, annotated, command_line, patterns

REPS = 2

#: Variant -> SASS form as compiled by nvcc 13.0 for sm_90; each variant's destination is 4096 B past the
#: previous one's, which names its pc in the SASS.
VARIANTS = {0: "@!P0 LDGSTS.E.BYPASS.128 (guard on P0, negated)", 1: "@P1 LDGSTS.E.BYPASS.128 (guard on P1)"}

#: Lanes whose guard holds (they copy), per set.
COPYING = {
    "all": [True] * 32,
    "none": [False] * 32,
    "first8": [l < 8 for l in LANES],            # the cp.async matmul's 8 lanes of 32
    "even": [l % 2 == 0 for l in LANES],
    "notlane0": [l > 0 for l in LANES],
}
#: Lanes that reach the copies, per set (the others return first).
ALIVE = {"all": [True] * 32, "low16": [l < 16 for l in LANES]}


def guards(copying: list[bool]) -> list[int]:
    """Per lane: bit 0 clear where v0 (`@!P0`) copies, bit 1 set where v1 (`@P1`) copies."""
    return [(0 if copy else 1) | (2 if copy else 0) for copy in copying]


def configs() -> list[tuple[str, list[int]]]:
    out = []
    for pattern, (gofs, sofs) in patterns().items():
        for copy_name, copying in COPYING.items():
            for alive_name, alive in ALIVE.items():
                tables = gofs + sofs + guards(copying) + [int(a) for a in alive]
                out.append((f"{pattern}__{copy_name}__{alive_name}", tables))
    return out


def manifest(summary: Path, out: Path) -> None:
    """The summary's rows (one per launch and LDGSTS pc) with the variant, its form, the lanes copying and alive."""
    def describe(row: dict, variant: int) -> dict:
        pattern, copying, alive = row["config"].split("__")
        return dict(form=VARIANTS[variant], pattern=pattern, copying=copying, alive=alive)
    annotated(summary, out, ["form", "pattern", "copying", "alive"], describe)


if __name__ == "__main__":
    command_line(__doc__, configs, REPS, manifest)
