"""Nsight Compute's LDGSTS `.ZFILL` counts by src-size on an H100 (tests/data/hw/ldgsts_zfill_sizes,
docs/hardware.md "LDGSTS .ZFILL src-size probes").

The ignore-src probe kernel (scripts/hw/ldgsts_ignore_src.cu) at 116 configurations of its `.ZFILL` register
copy's src-sizes (scripts/hw/ldgsts_zfill_sizes.py: four patterns times 29 sets), each launched twice.  What
the committed pages show: every count repeats; the copies every lane reads in count as on the ignore-src pages
(measured in another session); a partial src-size (1 to 15 bytes) counts as a whole chunk read; and the fill
pass of a quarter-warp counts its reading runs apart per half of their 32-byte source sectors: a sector read in
its first half only and one read in its second half only share a fill wavefront (the hgemm pattern, a line per
pair of lanes), which is what the ignore-src pages' lane-mod-5 set shows at 30.
"""

from __future__ import annotations

import csv
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from test_ldgsts_tables_support import (assert_counted_from_sources_as_the_page, first_launch, ignore_src_probe,
                                        needs_nvcc, rebuilt_manifest)

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "hw" / "ldgsts_zfill_sizes"
sys.path.insert(0, str(REPO / "scripts" / "hw"))
import ldgsts_ignore_src  # noqa: E402  (the kernel's forms and the fitted count)
import ldgsts_zfill_sizes  # noqa: E402  (the configurations the driver ran)

ROWS = list(csv.DictReader(open(DATA / "manifest.csv", newline="")))
CONFIGS = dict(ldgsts_zfill_sizes.configs())
ZFILL = 5       # the src-size register form; every other form reads in every lane here


def counts(rows: list[dict]) -> dict[tuple[str, int], set]:
    out = defaultdict(set)
    for row in rows:
        out[row["config"], int(row["variant"])].add((int(row["wavefronts"]), int(row["ideal"])))
    return out


BY_COPY = counts(ROWS)
IGNORE_SRC = counts(csv.DictReader(open(DATA.parent / "ldgsts_ignore_src" / "manifest.csv", newline="")))


def zfill(pattern: str, sizes: str) -> tuple[int, int]:
    (count,) = BY_COPY[f"{pattern}__{sizes}", ZFILL]
    return count


def test_the_manifest_is_the_summary_of_the_committed_pages(tmp_path):
    assert rebuilt_manifest(DATA, ldgsts_zfill_sizes.manifest, tmp_path) == (DATA / "manifest.csv").read_text()
    assert {(row["config"], row["rep"]) for row in ROWS} == {
        (name, str(rep)) for name in CONFIGS for rep in range(ldgsts_zfill_sizes.REPS)}


def test_every_launch_repeats_and_the_copies_every_lane_reads_count_as_on_the_ignore_src_pages():
    assert all(len(values) == 1 for values in BY_COPY.values())
    for (config, variant), values in BY_COPY.items():
        if variant != ZFILL:
            assert values == IGNORE_SRC[config.partition("__")[0] + "__all", variant], (config, variant)


@pytest.mark.parametrize("pattern", ldgsts_zfill_sizes.PATTERNS)
def test_a_partial_src_size_counts_as_a_whole_chunk_read(pattern):
    """Every lane reading 1, 4, 12 or 15 bytes, one lane of eight reading 4 or 12, both lanes of a sector in
    part: as every lane reading 16 on the ignore-src pages; a lane reading 4 beside one zero-filling: as 16
    beside it."""
    assert {zfill(pattern, sizes) for sizes in ("all12", "all4", "all15", "all1", "lane0_12", "lane0_4", "lane1_12",
                                                  "lane1_4", "pair_8_4")} == IGNORE_SRC[f"{pattern}__all", ZFILL]
    assert zfill(pattern, "pair_4_0") == zfill(pattern, "lane1_0")
    assert zfill(pattern, "pair_0_4") == zfill(pattern, "lane0_0")
    assert zfill(pattern, "halves_4_0_0_16") == zfill(pattern, "halves_4_0_0_4") == zfill(pattern, "halves_16_0_0_16")


def test_sectors_read_in_one_half_share_the_fill_pass_with_those_read_in_the_other():
    """hgemm_k0 (a line per pair of lanes): every quarter-warp's four sectors read cost 4 and their fill pass 4,
    32 per warp, with a sector read in its first half only (its second lane zero-filling), in its second half only,
    two in their first halves or two in their second; one fewer per quarter-warp with a first-half-only sector
    beside a second-half-only one, adjacent or not (28), two fewer with two of each (24)."""
    assert {zfill("hgemm_k0", sizes)[0] for sizes in ("all12", "lane0_0", "lane1_0", "first_halves",
                                                      "second_halves")} == {32}
    assert {zfill("hgemm_k0", sizes) for sizes in ("halves_16_0_0_16", "halves_apart")} == {(28, 7)}
    assert zfill("hgemm_k0", "halves_twice") == (24, 6)
    # the lane-mod-5 set's quarter-warps: the second and fourth hold such a couple
    assert [zfill("hgemm_k0", f"mod5_q{q}")[0] for q in range(4)] == [32, 28, 32, 28]
    assert zfill("hgemm_k0", "mod5_rot0") == (30, 8)


def test_the_fitted_count_equals_every_row():
    def sizes(variant: int, name: str) -> list[int]:
        return ldgsts_zfill_sizes.sizes_of(name) if variant == ZFILL else ldgsts_ignore_src.src_sizes(variant, "all")

    fit = ldgsts_ignore_src.fit(DATA / "manifest.csv", sizes)
    assert fit == {(v, True): len(CONFIGS) * ldgsts_zfill_sizes.REPS for v in (1, 2, 3, 4, 5, 6, 7, 9, 10)}


# --------------------------------------------------------------------------- the tool on the probe kernel



def analysed(config: str) -> dict[int, dict]:
    return ignore_src_probe(tuple(CONFIGS[config]))


@needs_nvcc
@pytest.mark.parametrize("config", list(CONFIGS))
def test_the_tool_counts_every_zfill_copy_as_the_page(config):
    """The `.ZFILL` register copy (v5) and the immediate-8 one (v10): the sources of the reading lanes plus the
    fill pass, with the note of a count from the sources."""
    for variant in (ZFILL, 10):
        assert_counted_from_sources_as_the_page(analysed(config), first_launch(ROWS, config)[variant], variant)
