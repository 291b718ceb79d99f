"""Nsight Compute's LDGSTS copies at the third round of held-out configurations, on an H200
(tests/data/hw/ldgsts_zfill_heldout3, docs/hardware.md "LDGSTS fill-pass held-out probes, third round").

scripts/hw/ldgsts_zfill_guard.cu's four copies (v0 plain, v1 src-size 8, v2 src-size register, v3 ignore-src) at
210 whole 32-lane tables of scripts/hw/ldgsts_zfill_heldout3.py (the second round's six families at new seeds, 35
each), none seen by the fill-pass rule as amended on the duplicate-destination probes (every active lane waits in
the fill pass with the lanes writing its 16-byte unit, zero-filling ones too).  traceconf's counts were committed
before the run (predictions.csv, commit 3fbe5e4): the pages give every one of the 840 copies.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from test_ldgsts_tables_support import needs_nvcc
from test_ldgsts_zfill_heldout_hw import (assert_every_page_is_a_predicted_copy_at_its_pc,
                                         assert_the_round_is_its_committed_run,
                                         assert_the_tool_counts_every_copy_as_the_page, committed, copies_as_predicted)

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "hw" / "ldgsts_zfill_heldout3"
sys.path.insert(0, str(REPO / "scripts" / "hw"))
import ldgsts_zfill_heldout  # noqa: E402  (the earlier rounds' configurations)
import ldgsts_zfill_heldout3  # noqa: E402  (the configurations the driver ran, the tool's counts)

ROWS, PREDICTED, MISSED = committed(DATA)
TABLES = dict(ldgsts_zfill_heldout3.tables())
FAMILIES = ("full__alike", "full__own", "part", "lines", "swz", "dup")


def test_the_round_is_its_committed_run_and_new(tmp_path):
    assert_the_round_is_its_committed_run(ldgsts_zfill_heldout3, DATA, ROWS, tmp_path)
    assert Counter(ldgsts_zfill_heldout3.family(name) for name in TABLES) == dict.fromkeys(FAMILIES, 35)
    earlier = [t for families in (ldgsts_zfill_heldout.FAMILIES, ldgsts_zfill_heldout.SECOND_ROUND)
               for _, t in ldgsts_zfill_heldout.tables(families)]
    assert not any(t in earlier for t in TABLES.values())


def test_every_page_is_a_predicted_copy_at_its_pc():
    assert_every_page_is_a_predicted_copy_at_its_pc(ROWS, PREDICTED)


def test_every_copy_is_the_prediction_committed_before_the_run():
    """All 840 copies (every family, every copy) as predicted: the script finds no mismatch (no mismatches.csv)."""
    assert ldgsts_zfill_heldout3.mismatches(DATA / "manifest.csv", DATA / "predictions.csv") == [] == MISSED
    assert copies_as_predicted(ldgsts_zfill_heldout3, ROWS, PREDICTED, MISSED) == {
        (family, variant): 35 for family in FAMILIES for variant in "0123"}


@needs_nvcc
def test_the_tool_counts_every_copy_as_the_page():
    """traceconf analysing the driver's kernel with each configuration's tables as --data gives every page."""
    assert_the_tool_counts_every_copy_as_the_page(ldgsts_zfill_heldout3.predictions(), ROWS, 840)
