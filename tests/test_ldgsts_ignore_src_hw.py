"""Nsight Compute's LDGSTS.BYPASS counts with the ignore-src operand and `.ZFILL` on an H100
(tests/data/hw/ldgsts_ignore_src, docs/hardware.md "LDGSTS ignore-src probes").

One kernel (scripts/hw/ldgsts_ignore_src.cu) holds eleven forms of the same copy; 40 configurations (five
global/shared patterns times the lanes that read) were launched three times each.  What the committed pages
show: every count repeats, the seven ignore-src forms on P1-P6 agree whatever the polarity, the two on P0
count as if P0 were false, and the rest follow the fitted count of ``ldgsts_ignore_src.fitted``.
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


def test_the_fitted_count_equals_all_ignore_src_rows_and_all_but_one_zfill_set():
    fit = ldgsts_ignore_src.fit(DATA / "manifest.csv")
    assert fit == {**{(v, True): 120 for v in (1, 2, 3, 4, 6, 7, 9, 10)}, (5, True): 114, (5, False): 6}
    misses = {row["config"] for row in ROWS if row["variant"] == "5" and ldgsts_ignore_src.fitted(
        row["pattern"], ldgsts_ignore_src.lanes_reading(5, row["config"].partition("__")[2]), True)
        != (int(row["wavefronts"]), int(row["ideal"]))}
    assert misses == {"base__sizes_mixed", "hgemm_k0__sizes_mixed"}


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
    """variant -> (pc, wavefronts, ideal) of the configuration's first launch."""
    return {int(r["variant"]): (int(r["pc"], 16), int(r["wavefronts"]), int(r["ideal"])) for r in ROWS
            if r["config"] == config and r["rep"] == "0"}


needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (CUDA toolkit)")


@needs_nvcc
@pytest.mark.parametrize("config", [name for name, _ in ldgsts_ignore_src.configs()
                                    if name.endswith(("__all", "__none"))])
def test_the_tool_counts_the_ignore_src_copies_where_every_lane_or_none_reads(config):
    """Every lane reading: the count from the sources; none (or the operand on P0): the shared-address one;
    the guard on P0: nothing."""
    rows, measured = analysed(config), page(config)
    for variant in (*READ_AS_SET, ON_P0, GUARD_P0):
        pc, wavefronts, ideal = measured[variant]
        assert (rows[pc]["wavefronts"], rows[pc]["ideal_wavefronts"]) == (wavefronts, ideal), variant


@needs_nvcc
@pytest.mark.parametrize("config", [name for name, _ in ldgsts_ignore_src.configs()
                                    if name.split("__")[1] in ("even", "low16", "first8", "notlane0")])
def test_where_some_lanes_zero_fill_the_copies_carry_the_note_and_p0_is_exact(config):
    """Some lanes zero-filling: the shared-address count, marked (the fill pass is not modelled); P0's exact."""
    rows, measured = analysed(config), page(config)
    for variant in (ON_P0, GUARD_P0):
        pc, wavefronts, ideal = measured[variant]
        assert (rows[pc]["wavefronts"], rows[pc]["ideal_wavefronts"]) == (wavefronts, ideal), variant
        assert rows[pc]["resolved"], variant
    for variant in READ_AS_SET:
        assert rows[measured[variant][0]]["model_note"].startswith("Nsight's Source page counts"), variant
