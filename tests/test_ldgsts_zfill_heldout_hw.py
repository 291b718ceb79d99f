"""Nsight Compute's LDGSTS copies at held-out configurations, on an H200 (tests/data/hw/ldgsts_zfill_heldout,
docs/hardware.md "LDGSTS fill-pass held-out probes").

scripts/hw/ldgsts_zfill_guard.cu's four copies (v0 plain, v1 src-size 8, v2 src-size register, v3 ignore-src) at
300 whole 32-lane tables of scripts/hw/ldgsts_zfill_heldout.py (seeded random, one launch each), none of them seen
by the fill-pass rule.  traceconf's counts were committed before the run (predictions.csv, commit 0b60902); the
pages give 1,060 of the 1,200 copies and miss 140 (mismatches.csv), every one of them a v2 or v3 copy where a
reading lane writes the destination a lower active lane zero-fills: the page is under traceconf's count there, as
if that reading lane's source were not read.  traceconf has counted so since (engine ``_source_counts``,
reference ``execution_cost``): the tool now gives every copy; the tests keep the predictions and their misses as
committed.
"""

from __future__ import annotations

import csv
import sys
from collections import Counter
from pathlib import Path

from test_ldgsts_tables_support import (assert_the_committed_csv_is_the_scripts, assert_the_run_is_the_committed_pages,
                                        needs_nvcc)

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "hw" / "ldgsts_zfill_heldout"
sys.path.insert(0, str(REPO / "scripts" / "hw"))
import ldgsts_zfill_heldout  # noqa: E402  (the configurations the driver ran, the tool's counts)
from ldgsts_ignore_src import write_configs  # noqa: E402



def committed(data: Path) -> tuple[list[dict], ...]:
    """A held-out round's committed manifest, predictions (made before the run) and mismatches rows (none where
    the round has no mismatches.csv: every copy as predicted)."""
    return tuple(list(csv.DictReader(open(data / name, newline=""))) if (data / name).exists() else []
                 for name in ("manifest.csv", "predictions.csv", "mismatches.csv"))


ROWS, PREDICTED, MISSED = committed(DATA)
TABLES = dict(ldgsts_zfill_heldout.tables())


def counts(rows: list[dict]) -> dict[tuple[str, str], tuple[int, int]]:
    """(config, variant) -> (wavefronts, ideal) of manifest or prediction rows."""
    return {(row["config"], row["variant"]): (int(row["wavefronts"]), int(row["ideal"])) for row in rows}


def assert_every_page_is_a_predicted_copy_at_its_pc(rows: list[dict], predicted: list[dict]):
    """The pages' (configuration, variant, pc) are the predictions' (the copies' pcs of the committed SASS), every
    prediction resolved."""
    assert {(row["config"], row["variant"], int(row["pc"], 16)) for row in rows} == {
        (row["config"], row["variant"], int(row["pc"], 16)) for row in predicted}
    assert all(row["resolved"] == "True" for row in predicted)


def copies_as_predicted(script, rows: list[dict], predicted: list[dict], missed: list[dict]) -> Counter:
    """Per (family, variant) the copies whose page (wavefronts and ideal) is the prediction, after checking that
    the others are exactly mismatches.csv's."""
    page, before = counts(rows), counts(predicted)
    assert {key for key in before if page[key] != before[key]} == {(row["config"], row["variant"]) for row in missed}
    return Counter((script.family(name), variant) for name, variant in before if page[name, variant] == before[
        name, variant])


def assert_the_round_is_its_committed_run(script, data: Path, rows: list[dict], folder: Path):
    """A round's manifest is the summary of its committed pages, one launch each, and its configs.txt the
    script's configurations."""
    (folder / "run").mkdir()
    assert_the_run_is_the_committed_pages(data, script, rows, dict(script.configs()), folder / "run")
    write_configs(folder / "configs.txt", script.configs(), script.REPS)
    assert (folder / "configs.txt").read_text() == (data / "configs.txt").read_text()


def test_the_round_is_its_committed_run(tmp_path):
    assert_the_round_is_its_committed_run(ldgsts_zfill_heldout, DATA, ROWS, tmp_path)
    assert Counter(ldgsts_zfill_heldout.family(name) for name in TABLES) == {
        "full__alike": 60, "full__own": 60, "part": 60, "lines": 60, "swz": 60}


def test_every_page_is_a_predicted_copy_at_its_pc():
    assert_every_page_is_a_predicted_copy_at_its_pc(ROWS, PREDICTED)


@needs_nvcc
@needs_nvcc
def test_the_tool_counts_every_copy_as_the_page():
    """traceconf analysing the driver's kernel with each configuration's tables as --data (what predictions.csv
    recorded before the run, under the rule then): every copy of every configuration as its page, wavefronts and
    ideal, resolved, since a reading lane no longer reads into a destination a lower lane zero-fills."""
    assert_the_tool_counts_every_copy_as_the_page(ldgsts_zfill_heldout.predictions(), ROWS, 1200)


def assert_the_tool_counts_every_copy_as_the_page(now: list[dict], rows: list[dict], copies: int):
    """``now`` (a script's predictions() under today's rule) gives every page of ``rows``, resolved."""
    assert len(now) == copies and all(row["resolved"] for row in now)
    assert {(row["config"], str(row["variant"])): (row["wavefronts"], row["ideal"]) for row in now} == counts(rows)


def test_the_mismatches_are_the_scripts():
    assert_the_committed_csv_is_the_scripts(
        ldgsts_zfill_heldout.mismatches(DATA / "manifest.csv", DATA / "predictions.csv"), DATA / "mismatches.csv")


def test_every_copy_is_the_prediction_but_the_pinned_mismatches():
    """Per family and copy, the configurations whose page (wavefronts and ideal) is the prediction: v0, v1 and
    every swz copy all; the rest of v2 and v3 as pinned; the page is never over the prediction (wavefronts 1 to 4
    under, ideal 0 or 1), and a configuration's v2 and v3 miss together."""
    missed = {(row["config"], row["variant"]) for row in MISSED}
    equal = copies_as_predicted(ldgsts_zfill_heldout, ROWS, PREDICTED, MISSED)
    full = {(family, variant): 60 for family in ("full__alike", "full__own", "part", "lines", "swz")
            for variant in "0123"}
    assert equal == full | {("full__alike", "2"): 57, ("full__alike", "3"): 57, ("full__own", "2"): 47,
                            ("full__own", "3"): 47, ("part", "2"): 41, ("part", "3"): 41, ("lines", "2"): 25,
                            ("lines", "3"): 25}
    assert Counter((int(row["over_wavefronts"]), int(row["over_ideal"])) for row in MISSED) == {
        (1, 0): 98, (1, 1): 18, (2, 0): 12, (4, 0): 6, (2, 1): 2, (4, 1): 2, (3, 1): 2}
    assert {(name, "2") in missed for name, _ in missed} == {(name, "3") in missed for name, _ in missed} == {True}


def test_every_mismatch_has_a_reading_lane_over_a_lower_zero_filling_lane():
    """A mismatch is a v2 or v3 copy where a reading lane writes the destination a lower active lane zero-fills
    (mismatches.csv's pairs); 20 of the 460 v2/v3 copies the page equals have such a pair too (dropping it leaves
    the sources part's count as it is, below), and 78 others a zero-filling lane at another's destination, none lower
    than a reading one."""
    missed = {(row["config"], int(row["variant"])) for row in MISSED}
    paired = {(name, variant) for name, t in TABLES.items() for variant in (0, 1, 2, 3)
              if ldgsts_zfill_heldout.under_lower_zero_fill(t, variant)}
    assert missed <= paired and len(missed) == 140 and len(paired - missed) == 20
    assert {variant for _, variant in paired} == {2, 3}
    shared = [(name, variant) for name, t in TABLES.items() for variant in (2, 3) if (name, variant) not in paired
              and any(not read and t[2][lane] and t[1].count(t[1][lane]) > 1
                      for lane, read in enumerate(ldgsts_zfill_heldout.reading(t, variant)))]
    assert len(shared) == 78


def _sources(t: list[list[int]], lanes: list[bool]) -> tuple[int, int]:
    """(wavefronts, ideal) of the sources part over ``lanes`` (traceconf's reference, as a guarded plain copy)."""
    from traceconf.reference import execution_cost
    from traceconf.rules import load_rule_set

    destinations = [t[1][lane] if lanes[lane] else -1 for lane in range(32)]
    cost = execution_cost(load_rule_set("sm_90"), "cp_async", 16, 0, destinations, "bypass", t[0], [16] * 32)
    return cost.wavefronts, cost.ideal_wavefronts


def test_the_pages_drop_the_reading_lanes_over_a_lower_zero_filling_lane_from_the_sources_part():
    """Observed after the run, and traceconf's rule since: the prediction less the sources part over the reading lanes,
    plus the sources part over them without those a lower zero-filling lane shares a destination with, is every
    v2 and v3 page (wavefronts and ideal), the 140 missed among them."""
    page, predicted = counts(ROWS), counts(PREDICTED)
    for name, t in TABLES.items():
        for variant in (2, 3):
            reads = ldgsts_zfill_heldout.reading(t, variant)
            dropped = {lane for lane, _ in ldgsts_zfill_heldout.under_lower_zero_fill(t, variant)}
            before = _sources(t, reads)
            after = _sources(t, [read and lane not in dropped for lane, read in enumerate(reads)])
            assert page[name, str(variant)] == tuple(
                count - old + new for count, old, new in zip(predicted[name, str(variant)], before, after)), name
