"""Nsight Compute's LDGSTS fill pass with few lanes active, on an H200 (tests/data/hw/ldgsts_zfill_guard,
docs/hardware.md "LDGSTS fill-pass minimal probes").

scripts/hw/ldgsts_zfill_guard.cu: four guarded copies (v0 plain, v1 src-size 8, v2 src-size register, v3
ignore-src) at 804 configurations of scripts/hw/ldgsts_zfill_guard.py (two to four active lanes, each reading a
line of its own, and twelve bank-row configurations as a cross-check), one launch each, the cross-check's two.
koenig's fill (traceconf's line-position rule) was committed before the run (predictions.csv); fill.csv holds
each copy's fill pass beside it.
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

from test_ldgsts_tables_support import assert_the_committed_csv_is_the_scripts, assert_the_run_is_the_committed_pages

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
    wavefronts; its ideal too, except where two active lanes write one destination (d3: the page's ideal counts
    the distinct destinations' bytes, 1 where the reference's 12 lanes give 2)."""
    v0 = {row["config"]: (int(row["v0_page"]), int(row["v0_ideal"])) for row in FILL if row["variant"] == "1"}
    for name, quarter in QUARTERS.items():
        wavefronts, ideal = ldgsts_zfill_guard.sources(quarter, 0)
        assert wavefronts == v0[name][0], name
        assert ideal == v0[name][1] or (name.startswith("d3__") and (ideal, v0[name][1]) == (2, 1)), name


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
