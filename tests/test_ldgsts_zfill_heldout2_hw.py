"""Nsight Compute's LDGSTS copies at the second round of held-out configurations, on an H200
(tests/data/hw/ldgsts_zfill_heldout2, docs/hardware.md "LDGSTS fill-pass held-out probes, second round").

scripts/hw/ldgsts_zfill_guard.cu's four copies (v0 plain, v1 src-size 8, v2 src-size register, v3 ignore-src) at
260 whole 32-lane tables of scripts/hw/ldgsts_zfill_heldout2.py (the first round's five families at new seeds, 40
each, and ``dup``, 60 with pairs and triples of lanes writing one destination), none seen by the amended rule (a
reading lane reads nothing into a destination a lower lane zero-fills).  traceconf's counts were committed before
the run (predictions.csv, commit ffa3e03): the pages give 1,028 of the 1,040 copies; the 12 missed
(mismatches.csv) are the v2 and v3 copies of six ``dup`` configurations, the page 1 or 2 wavefronts over the
prediction, ideal alike; the duplicate-destination probes found why (a zero-filling lane waits in the fill pass
with the lanes writing its unit too), and the tool gives every copy since.  The tests keep the predictions and
their misses as committed.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from test_ldgsts_tables_support import assert_the_committed_csv_is_the_scripts, needs_nvcc
from test_ldgsts_zfill_heldout_hw import (assert_every_page_is_a_predicted_copy_at_its_pc,
                                         assert_the_round_is_its_committed_run,
                                         assert_the_tool_counts_every_copy_as_the_page, committed, copies_as_predicted)

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "hw" / "ldgsts_zfill_heldout2"
sys.path.insert(0, str(REPO / "scripts" / "hw"))
import ldgsts_zfill_heldout  # noqa: E402  (reading, the first round's configurations)
import ldgsts_zfill_heldout2  # noqa: E402  (the configurations the driver ran, the tool's counts)

ROWS, PREDICTED, MISSED = committed(DATA)
TABLES = dict(ldgsts_zfill_heldout2.tables())
FAMILIES = ("full__alike", "full__own", "part", "lines", "swz", "dup")


def test_the_round_is_its_committed_run_and_new(tmp_path):
    assert_the_round_is_its_committed_run(ldgsts_zfill_heldout2, DATA, ROWS, tmp_path)
    assert Counter(ldgsts_zfill_heldout2.family(name) for name in TABLES) == dict(zip(FAMILIES, [40] * 5 + [60]))
    first_round = [t for _, t in ldgsts_zfill_heldout.tables()]
    assert not any(t in first_round for t in TABLES.values())


def test_dup_shares_destinations_in_every_order_of_reading_and_zero_filling():
    """In ``dup``'s v2 copies, two active lanes of a quarter-warp writing one destination, in each of the four
    (lower lane, higher lane) combinations of reading and zero-filling, and three or more lanes at a destination."""
    pairs, crowds = Counter(), Counter()
    for name, t in TABLES.items():
        if name.startswith("dup__"):
            reads, active, sofs = ldgsts_zfill_heldout.reading(t, 2), t[2], t[1]
            on = [lane for lane in range(32) if active[lane]]
            pairs.update((reads[low], reads[high]) for low in on for high in on if low < high and sofs[low] == sofs[
                high])
            crowds.update(len([lane for lane in on if sofs[lane] == s]) for s in {sofs[lane] for lane in on})
    assert all(pairs[combination] >= 100 for combination in [(a, b) for a in (0, 1) for b in (0, 1)])
    assert crowds[3] >= 100


def test_every_page_is_a_predicted_copy_at_its_pc():
    assert_every_page_is_a_predicted_copy_at_its_pc(ROWS, PREDICTED)


def test_the_mismatches_are_the_scripts():
    assert_the_committed_csv_is_the_scripts(
        ldgsts_zfill_heldout2.mismatches(DATA / "manifest.csv", DATA / "predictions.csv"), DATA / "mismatches.csv")


def test_every_copy_is_the_prediction_but_six_dup_configurations_v2_and_v3():
    """Per family and copy, the configurations whose page (wavefronts and ideal) is the prediction made before the
    run: all but v2 and v3 of dup 002, 024, 025, 044, 048 and 059, where the page is 1 or 2 wavefronts over the
    prediction and the ideal is the prediction's; each has a reading lane over a lower zero-filling lane."""
    equal = copies_as_predicted(ldgsts_zfill_heldout2, ROWS, PREDICTED, MISSED)
    full = {(family, variant): 60 if family == "dup" else 40 for family in FAMILIES for variant in "0123"}
    assert equal == full | {("dup", "2"): 54, ("dup", "3"): 54}
    assert {(row["config"], row["variant"]) for row in MISSED} == {
        (f"dup__{k:03d}", variant) for k in (2, 24, 25, 44, 48, 59) for variant in "23"}
    assert Counter((int(row["over_wavefronts"]), int(row["over_ideal"])) for row in MISSED) == {(-1, 0): 6, (-2, 0): 6}
    assert all(row["reader_and_lower_zero_fill"] for row in MISSED)


@needs_nvcc
def test_the_tool_counts_every_copy_as_the_page():
    """traceconf analysing the driver's kernel with each configuration's tables as --data: every copy as its page,
    the 12 predicted before the run among them, since every active lane of a quarter-warp, zero-filling ones too,
    waits in the fill pass with the lanes writing its 16-byte unit (the duplicate-destination probes,
    tests/test_ldgsts_zfill_dups_hw.py)."""
    assert_the_tool_counts_every_copy_as_the_page(ldgsts_zfill_heldout2.predictions(), ROWS, 1040)
