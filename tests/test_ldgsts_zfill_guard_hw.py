"""Nsight Compute's LDGSTS fill pass with few lanes active, on an H200 (tests/data/hw/ldgsts_zfill_guard,
docs/hardware.md "LDGSTS fill-pass minimal probes").

scripts/hw/ldgsts_zfill_guard.cu: four guarded copies (v0 plain, v1 src-size 8, v2 src-size register, v3
ignore-src) at 804 configurations of scripts/hw/ldgsts_zfill_guard.py (two to four active lanes, each reading a
line of its own, and twelve bank-row configurations as a cross-check), one launch each, the cross-check's two.
koenig's fill (traceconf's line-position rule then) was committed before the run (predictions.csv), and so was the
lead's rule found on the bank-row pages (predictions_waits.csv: ldgsts_zfill_rows.waits); fill.csv holds each
copy's fill pass beside both.  The found rule predicted every configuration whose active lanes write distinct
destinations; where two write one, they wait for each other too (amended after the run), and the tool gives
every page.
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

import pytest

from test_ldgsts_tables_support import (assert_the_committed_csv_is_the_scripts, assert_the_run_is_the_committed_pages,
                                        first_launch, needs_nvcc, tool_on_probe)

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "hw" / "ldgsts_zfill_guard"
sys.path.insert(0, str(REPO / "scripts" / "hw"))
import ldgsts_zfill_guard  # noqa: E402  (the configurations the driver ran, koenig's fill)
from ldgsts_ignore_src import write_configs  # noqa: E402

ROWS = list(csv.DictReader(open(DATA / "manifest.csv", newline="")))
QUARTERS = dict(ldgsts_zfill_guard.quarters())
FILL = list(csv.DictReader(open(DATA / "fill.csv", newline="")))


def test_the_manifest_is_the_summary_of_the_committed_pages_and_every_launch_repeats(tmp_path):
    assert_the_run_is_the_committed_pages(DATA, ldgsts_zfill_guard, ROWS, dict(ldgsts_zfill_guard.configs()),
                                          tmp_path, ldgsts_zfill_guard.launches)


def test_the_committed_configurations_are_the_scripts(tmp_path):
    write_configs(tmp_path / "configs.txt", ldgsts_zfill_guard.configs(), ldgsts_zfill_guard.launches)
    assert (tmp_path / "configs.txt").read_text() == (DATA / "configs.txt").read_text()


def test_the_predictions_committed_before_the_run_are_the_scripts():
    assert_the_committed_csv_is_the_scripts(ldgsts_zfill_guard.predictions(), DATA / "predictions.csv")


def test_the_fill_table_is_the_scripts():
    assert_the_committed_csv_is_the_scripts(ldgsts_zfill_guard.fill_table(DATA / "manifest.csv"), DATA / "fill.csv")


def test_no_guard_or_ignore_src_operand_is_p0():
    """Nsight reads P0 as false for LDGSTS: the committed SASS (and Nsight's own listing on every page) guards
    each copy with another predicate, and the ignore-src and src-size operands are others too."""
    sass = [line for line in (DATA / "ldgsts_zfill_guard.sass").read_text().splitlines() if "LDGSTS" in line]
    listed = {row["source"] for row in ROWS}
    assert len(sass) == 4 and len(listed) == 4
    for line in sass + sorted(listed):
        assert re.search(r"@!?P[1-6] +LDGSTS", line), line
        assert not re.search(r"\bP0\b", line), line


def test_the_cross_check_counts_as_the_bank_row_pages():
    """The twelve ldgsts_zfill_rows configurations (every lane active): v0 as the old ignore-src kernel's 16/0
    copies (v1), v1 as its immediate-8 copy (v10), v2 as its src-size register copy (v5), both launches."""
    old = {(row["config"], int(row["variant"]), row["rep"]): (row["wavefronts"], row["ideal"])
           for row in csv.DictReader(open(REPO / "tests" / "data" / "hw" / "ldgsts_zfill_rows" / "manifest.csv"))}
    compared = 0
    for row in ROWS:
        family, _, name = row["config"].partition("__")
        old_variant = {0: 1, 1: 10, 2: 5}.get(int(row["variant"]))
        if family == "x8" and old_variant is not None:
            assert (row["wavefronts"], row["ideal"]) == old[name, old_variant, row["rep"]], row["config"]
            compared += 1
    assert compared == 12 * 3 * 2


def test_the_plain_copy_is_traceconfs_sources_rule():
    """Every configuration's v0: traceconf's reference (the sources rule over the active lanes) gives its
    wavefronts and its ideal (the distinct destinations' bytes: 1 per warp where two of three lanes write one)."""
    v0 = {row["config"]: (int(row["v0_page"]), int(row["v0_ideal"])) for row in FILL if row["variant"] == "1"}
    for name, quarter in QUARTERS.items():
        assert ldgsts_zfill_guard.sources(quarter, 0) == v0[name], name


def test_the_copies_fill_passes():
    """The four quarter-warps are alike (a whole fill pass each); the src-size 8 and register copies count alike
    where every active lane reads; the ignore-src copy adds no fill pass where no active lane zero-fills (lanes
    the guard turns off do not count as zero-filling) and counts as the register copy where one does."""
    by = {(row["config"], row["variant"]): row for row in FILL}
    for name, quarter in QUARTERS.items():
        assert all(by[name, v]["fill"].lstrip("-").isdigit() for v in "123")
        if all(reads for *_, reads in quarter.values()):
            assert (by[name, "1"]["page"], by[name, "1"]["ideal"]) == (by[name, "2"]["page"], by[name, "2"]["ideal"])
            assert (by[name, "3"]["page"], by[name, "3"]["ideal"]) == (by[name, "3"]["v0_page"],
                                                                       by[name, "3"]["v0_ideal"])
        else:
            assert (by[name, "2"]["page"], by[name, "2"]["ideal"]) == (by[name, "3"]["page"], by[name, "3"]["ideal"])


def test_koenigs_fill_per_family():
    """Rows (configuration, copy) whose fill pass per quarter-warp koenig's equals; it is never over the page,
    under by one (by two at one cross-check row per copy), and exact wherever the destinations take one store
    pass and no two lanes share one."""
    assert {f"{family} v{variant}": equal for (family, variant), (equal, _) in
            ldgsts_zfill_guard.fit(DATA / "manifest.csv").items()} == {
        "x8 v1": 5, "x8 v2": 6, "x8 v3": 8, "e2 v1": 48, "e2 v2": 48, "e2 v3": 48,
        "e3 v1": 96, "e3 v2": 96, "e3 v3": 192, "s3 v1": 50, "s3 v2": 50, "s3 v3": 60,
        "r4 v1": 102, "r4 v2": 102, "r4 v3": 260, "z3 v1": 35, "z3 v2": 53, "z3 v3": 53,
        "d2 v1": 0, "d2 v2": 0, "d2 v3": 8, "d3 v1": 0, "d3 v2": 0, "d3 v3": 144}
    for row in FILL:
        over = int(row["fill"]) - int(row["koenig_fill"])
        assert over in ((0, 1, 2) if row["family"] == "x8" else (0, 1)), row
        if row["passes"] == "1" and row["family"] not in ("d2", "d3"):
            assert over == 0, row


def test_the_rule_predicted_before_the_run_fits_every_configuration_of_distinct_destinations():
    """The lead's rule as committed before the data came back (predictions_waits.csv, the script's): all 2,412 rows
    but 208 fill copies (v1, v2) of d2 and d3, where two active lanes write one destination and the page is one
    wavefront a quarter-warp over (every d2 row, 96 of 144 d3 rows a copy); amended (a lane waits with the lanes
    writing its very destination too), every row of every family."""
    assert_the_committed_csv_is_the_scripts(ldgsts_zfill_guard.predictions_waits(), DATA / "predictions_waits.csv")
    predicted = {(row["config"], row["variant"]): int(row["waits_fill"])
                 for row in csv.DictReader(open(DATA / "predictions_waits.csv", newline=""))}
    missed = [row for row in FILL if int(row["fill"]) != predicted[row["config"], row["variant"]]]
    assert len(FILL) == 2412 and len(missed) == 208
    assert {(row["family"], row["variant"]) for row in missed} == {("d2", "1"), ("d2", "2"), ("d3", "1"), ("d3", "2")}
    assert all(int(row["fill"]) == predicted[row["config"], row["variant"]] + 1 for row in missed)
    assert all(equal == total for equal, total in ldgsts_zfill_guard.fit(DATA / "manifest.csv", "waits").values())


@needs_nvcc
@pytest.mark.parametrize("family", sorted({name.partition("__")[0] for name in QUARTERS}))
def test_the_tool_counts_every_copy_as_the_page(family):
    """The driver's kernel analysed with each configuration's tables as --data: every copy's wavefronts and ideal
    as its page, resolved (the guarded plain copy and the ignore-src one without a zero-filling lane from their
    sources, the others with the fill pass)."""
    for name, quarter in QUARTERS.items():
        if name.startswith(f"{family}__"):
            rows = tool_on_probe("ldgsts_zfill_guard", sum(ldgsts_zfill_guard.tables(quarter), []))[1]
            for variant, (pc, wavefronts, ideal) in first_launch(ROWS, name).items():
                assert (rows[pc]["wavefronts"], rows[pc]["ideal_wavefronts"], rows[pc]["resolved"]) == (
                    wavefronts, ideal, True), (name, variant)
