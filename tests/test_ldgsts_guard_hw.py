"""Nsight Compute's LDGSTS.BYPASS count under a guard on P0 (tests/data/hw/ldgsts_guard, docs/hardware.md
"LDGSTS guard probes"): Nsight reads P0 as false for LDGSTS, so ``@!P0 LDGSTS`` counts every lane that reached
the copy, the ones the guard turns off included, at the addresses their registers hold, where the kernel wrote
them (scripts/hw/ldgsts_guard.cu computes them before the copy in every lane).  A guard on another register
(``@P1``) counts the lanes it keeps.  50 configurations (five global/shared patterns, five choices of the lanes
that copy, every lane or lanes 0-15 alive) launched twice each on an H200; the tool predicts every page.
"""

from __future__ import annotations

import csv
import shutil
import sys
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

import pytest

from test_ldgsts_tables_support import rebuilt_manifest, tool_on_probe

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "hw" / "ldgsts_guard"
sys.path.insert(0, str(REPO / "scripts" / "hw"))
import ldgsts_guard  # noqa: E402  (the configurations the driver ran)

ROWS = list(csv.DictReader(open(DATA / "manifest.csv", newline="")))
NEGATED_P0, GUARD_P1 = 0, 1


def test_the_manifest_is_the_summary_of_the_committed_pages(tmp_path):
    assert rebuilt_manifest(DATA, ldgsts_guard.manifest, tmp_path) == (DATA / "manifest.csv").read_text()
    assert {(row["config"], row["rep"]) for row in ROWS} == {
        (name, str(rep)) for name, _ in ldgsts_guard.configs() for rep in range(ldgsts_guard.REPS)}
    assert {row["variant"]: row["source"].split()[0] for row in ROWS} == {"0": "@!P0", "1": "@P1"}


def page(config: str) -> dict[int, tuple[int, int, int, int]]:
    """variant -> (pc, wavefronts, ideal, predicated-on threads) of the configuration, the same in each launch."""
    found = defaultdict(set)
    for row in ROWS:
        if row["config"] == config:
            found[int(row["variant"])].add((int(row["pc"], 16), int(row["wavefronts"]), int(row["ideal"]),
                                            int(row["predicated_on"])))
    assert all(len(values) == 1 for values in found.values()), found
    return {variant: next(iter(values)) for variant, values in found.items()}


def test_not_p0_counts_the_alive_lanes_whatever_the_guard_holds():
    """`@!P0`: the same count whichever lanes the guard keeps (none, 8, 16, 31, 32), the count of the `@P1` copy
    where every alive lane copies: what Nsight counts follows the lanes alive, not the guard."""
    for name, _ in ldgsts_guard.configs():
        pattern, copying, alive = name.split("__")
        counted = page(name)[NEGATED_P0][1:3]
        assert counted == page(f"{pattern}__all__{alive}")[GUARD_P1][1:3], name
        assert page(name)[NEGATED_P0][3] == sum(c and a for c, a in zip(ldgsts_guard.COPYING[copying],
                                                                          ldgsts_guard.ALIVE[alive])), name


@lru_cache(maxsize=None)
def analysed(config: str) -> dict[int, dict]:
    """pc -> kernel-table row (of every instruction, run or not) of the probe launched at one configuration."""
    analysis, rows = tool_on_probe("ldgsts_guard", dict(ldgsts_guard.configs())[config])
    assert not analysis.unresolved, analysis.unresolved
    return rows


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (CUDA toolkit)")
@pytest.mark.parametrize("config", [name for name, _ in ldgsts_guard.configs()])
def test_the_tool_counts_both_guards_as_the_page(config):
    rows = analysed(config)
    for variant, (pc, wavefronts, ideal, _) in page(config).items():
        assert (rows[pc]["wavefronts"], rows[pc]["ideal_wavefronts"]) == (wavefronts, ideal), variant
        assert rows[pc]["text"].startswith(("@!P0 ", "@P1 ")[variant]), rows[pc]["text"]
