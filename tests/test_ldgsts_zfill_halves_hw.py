"""Nsight Compute's LDGSTS fill pass where a source's 32-byte sector half, its destination's and its lane's
parity disagree, on an H100 (tests/data/hw/ldgsts_zfill_halves, docs/hardware.md "LDGSTS fill-pass halves
probes").

The ignore-src probe kernel (scripts/hw/ldgsts_ignore_src.cu) at 113 configurations (scripts/hw/ldgsts_zfill_halves.py:
lane pairs with sources shifted 16 bytes and destinations swapped, a run per lane with unevenly split halves,
random mixes), each launched twice; the `.ZFILL` register copy (v5) reads where its src-size is non-zero, the
immediate-8 one (v10) everywhere, the other forms everywhere.  Each hypothesis's counts were committed before the
run (predictions.csv); none of the three fits, the 16-byte position of the source in its 128-byte line does but
at the six copies of one configuration family, whose quarter-warps take two store passes; the rule found on the
bank-row probes (tests/test_ldgsts_zfill_rows_hw.py), traceconf's, fits those too.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

from test_ldgsts_tables_support import (assert_counted_from_sources_as_the_page,
                                        assert_the_committed_csv_is_the_scripts, assert_the_run_is_the_committed_pages,
                                        first_launch, ignore_src_probe, needs_nvcc)

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "hw" / "ldgsts_zfill_halves"
sys.path.insert(0, str(REPO / "scripts" / "hw"))
import ldgsts_zfill_halves  # noqa: E402  (the configurations the driver ran, the hypotheses)

ROWS = list(csv.DictReader(open(DATA / "manifest.csv", newline="")))
CONFIGS = dict(ldgsts_zfill_halves.configs())
FILL_COPIES = (ldgsts_zfill_halves.ZFILL, ldgsts_zfill_halves.IMMEDIATE)
#: The configurations whose fill pass is one wavefront a quarter-warp above the line-position rule's (a run per
#: lane, five reading at line position 0 and three at 1, seven destinations in one half: two store passes).
TWO_STORE_PASSES = {"own_s5_d7__all15", "own_s5_d7__low6", "own_s5_d7__even"}


def test_the_manifest_is_the_summary_of_the_committed_pages_and_every_launch_repeats(tmp_path):
    assert_the_run_is_the_committed_pages(DATA, ldgsts_zfill_halves, ROWS, CONFIGS, tmp_path)


def test_the_predictions_committed_before_the_run_are_the_scripts():
    assert_the_committed_csv_is_the_scripts(ldgsts_zfill_halves.predictions(), DATA / "predictions.csv")


def test_no_predicted_half_fits_and_the_line_position_fits_all_but_one_family():
    """Rows of the 226 fill-pass copies each hypothesis's count equals: the source sector's half (traceconf's
    rule before) 76, the destination's 43, the lane's parity 56, no split 49; the source's 16-byte position in
    its line every row but the six of TWO_STORE_PASSES."""
    misses = ldgsts_zfill_halves.fit(DATA / "manifest.csv")
    assert {h: 2 * len(CONFIGS) - len(m) for h, m in misses.items() if h != "line_position"} == {
        "source": 76, "destination": 43, "parity": 56, "none": 49}
    assert set(misses["line_position"]) == {f"{c}/v{v}" for c in TWO_STORE_PASSES for v in FILL_COPIES}


# --------------------------------------------------------------------------- the tool on the probe kernel



def analysed(config: str) -> dict[int, dict]:
    return ignore_src_probe(tuple(CONFIGS[config]))


@needs_nvcc
@pytest.mark.parametrize("config", list(CONFIGS))
def test_the_tool_counts_every_copy_as_the_page(config):
    """Every form but the P0 ones (v0, v8): the 16/0 forms by the sources rule alone (every lane reads), v5 and
    v10 with the fill pass (TWO_STORE_PASSES's too)."""
    measured = first_launch(ROWS, config)
    for variant in (1, 2, 3, 4, 6, 7, 9, *FILL_COPIES):
        assert_counted_from_sources_as_the_page(analysed(config), measured[variant], variant)


def test_a_launch_line_nsight_cut_is_joined_with_its_rest():
    """This run's log: Nsight's output cut `LAUNCH random__47 1` after `ran`; its rest came 44 lines later."""
    import ldgsts_probe

    log = "LAUNCH random__47 0\nLAUNCH ran==PROF== Profiling - 182\n==PROF== Profiling - 183\ndom__47 1\nLAUNCH x 0\n"
    assert ldgsts_probe.launch_names(log) == ["random__47", "random__47", "x"]
    assert ldgsts_probe.launch_names("LAUNCH a ==PROF== p\n1\nLAUNCH b 0==PROF== q\n") == ["a", "b"]
