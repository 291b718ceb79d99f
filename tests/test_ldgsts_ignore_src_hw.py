"""Nsight Compute's LDGSTS.BYPASS counts with the ignore-src operand and `.ZFILL` on an H100
(tests/data/hw/ldgsts_ignore_src, docs/hardware.md "LDGSTS ignore-src probes").

One kernel (scripts/hw/ldgsts_ignore_src.cu) holds eleven forms of the same copy; 40 configurations (five
global/shared patterns times the lanes that read) were launched three times each.  What the committed pages
show: every count repeats, the seven ignore-src forms on P1-P6 agree whatever the polarity, the two on P0
count as if P0 were false, and every other row follows the fitted count of ``ldgsts_ignore_src.fitted``.
"""

from __future__ import annotations

import csv
import shutil
import sys
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

import pytest

from test_ldgsts_tables_support import (assert_counted_from_sources_as_the_page, first_launch, rebuilt_manifest,
                                        tool_on_probe)

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "hw" / "ldgsts_ignore_src"
sys.path.insert(0, str(REPO / "scripts" / "hw"))
import ldgsts_ignore_src  # noqa: E402  (the configurations the driver ran and the fitted count)

ROWS = list(csv.DictReader(open(DATA / "manifest.csv", newline="")))


def counts() -> dict[tuple[str, int], set]:
    out = defaultdict(set)
    for row in ROWS:
        out[row["config"], int(row["variant"])].add((int(row["wavefronts"]), int(row["ideal"])))
    return out


def test_the_manifest_is_the_summary_of_the_committed_pages(tmp_path):
    assert rebuilt_manifest(DATA, ldgsts_ignore_src.manifest, tmp_path) == (DATA / "manifest.csv").read_text()
    assert {(row["config"], row["rep"]) for row in ROWS} == {
        (name, str(rep)) for name, _ in ldgsts_ignore_src.configs() for rep in range(ldgsts_ignore_src.REPS)}


def test_every_launch_gives_the_same_count_and_polarity_and_register_do_not_matter_but_p0():
    by_copy = counts()
    assert all(len(values) == 1 for values in by_copy.values())
    forms = {row["variant"]: row["source"].split(", ")[-2] for row in ROWS
             if row["variant"] in ("1", "2", "3", "4", "6", "7", "8")}
    assert forms == {"1": "P1", "2": "!P2", "3": "P3", "4": "!P4", "6": "P6", "7": "!P5", "8": "P0"}
    for name, _ in ldgsts_ignore_src.configs():
        assert len({frozenset(by_copy[name, v]) for v in (1, 2, 3, 4, 6, 7, 9)}) == 1, name
        assert by_copy[name, 8] == {(4, 4)}      # `…, P0`: as if no lane read
        assert by_copy[name, 0] == {(0, 0)}      # `@P0`: as if no lane were on


def test_the_fitted_count_equals_every_ignore_src_and_zfill_row():
    """With the lane-mod-5 src-sizes at the hgemm pattern (30, where every quarter-warp's four reading runs
    would give 32): its second and fourth quarter-warps each hold a sector read in its first half only next to
    one read in its second half only, which share a fill wavefront (tests/test_ldgsts_zfill_sizes_hw.py)."""
    assert ldgsts_ignore_src.fit(DATA / "manifest.csv") == {(v, True): 120 for v in (1, 2, 3, 4, 5, 6, 7, 9, 10)}
    assert ldgsts_ignore_src.fitted("hgemm_k0", 5, ldgsts_ignore_src.SIZES["sizes_mixed"]) == (30, 8)


# --------------------------------------------------------------------------- the tool on the probe kernel

#: The ignore-src forms (variant numbers) whose predicate Nsight reads as the program set it (P1-P6), and the
#: one on P0, which it reads as false: no lane reads, whatever the program set; the guard ``@P0`` (v0), which it
#: also reads as false: no lane counted (0/0), whatever the program set.
READ_AS_SET, ON_P0, GUARD_P0 = (1, 2, 3, 4, 6, 7, 9), 8, 0


@lru_cache(maxsize=None)
def analysed(config: str) -> dict[int, dict]:
    """pc -> kernel-table row (of every instruction, run or not) of the probe launched at one configuration."""
    return tool_on_probe("ldgsts_ignore_src", dict(ldgsts_ignore_src.configs())[config])[1]


def page(config: str) -> dict[int, tuple[int, int, int]]:
    return first_launch(ROWS, config)


needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (CUDA toolkit)")


#: The forms the tool counts from the sources, zero-filling lanes and `.ZFILL` with the fill pass; the guard
#: `@P0` form (v0), whose lanes Nsight does not count (0/0), is checked on its own.
COUNTED = (*READ_AS_SET, 5, ON_P0, 10)


@needs_nvcc
@pytest.mark.parametrize("config", [name for name, _ in ldgsts_ignore_src.configs()])
def test_the_guard_on_p0_counts_nothing(config):
    rows, measured = analysed(config), page(config)
    pc, wavefronts, ideal = measured[GUARD_P0]
    assert (rows[pc]["wavefronts"], rows[pc]["ideal_wavefronts"]) == (wavefronts, ideal) == (0, 0)
    assert rows[pc]["resolved"]


@needs_nvcc
@pytest.mark.parametrize("config, variant", [(name, variant) for name, _ in ldgsts_ignore_src.configs()
                                             for variant in COUNTED])
def test_the_tool_counts_every_ignore_src_and_zfill_copy_as_the_page(config, variant):
    """Every lane reading: the count from the sources; some zero-filling (and `.ZFILL` always): the sources of
    the reading lanes plus the fill pass; none reading (or the operand on P0): the fill pass alone.  Each with
    the note of a count from the sources."""
    assert_counted_from_sources_as_the_page(analysed(config), page(config)[variant], variant)
