"""Nsight Compute's LDGSTS fill pass where a quarter-warp's destinations lie in more than one bank row, on an
H100 (tests/data/hw/ldgsts_zfill_rows, docs/hardware.md "LDGSTS fill-pass bank-row probes").

The ignore-src probe kernel (scripts/hw/ldgsts_ignore_src.cu) at 91 configurations (scripts/hw/ldgsts_zfill_rows.py:
a run per lane, each quarter-warp's sources at chosen 16-byte positions of their lines and its destinations at
chosen bank rows and units: pairs of reading lanes, own_s5_d7 and its neighbours, three and four rows, one to
four store passes, random), each launched twice; the `.ZFILL` register copy (v5) reads where its src-size is
non-zero, the immediate-8 one (v10) everywhere, the other forms everywhere.  Three candidates' counts were
committed before the run (predictions.csv); none fits, nor do the three derived after it (fit.csv).  A session
later the rule was found (ldgsts_zfill_rows.waits, traceconf's engine and reference): a reading lane waits with
the reading lanes at its line position and the active lanes writing its 16-byte unit in another bank row; the
fill pass is the most lanes one reading lane waits with.  It fits every row, and the tool gives every page.
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
DATA = REPO / "tests" / "data" / "hw" / "ldgsts_zfill_rows"
sys.path.insert(0, str(REPO / "scripts" / "hw"))
import ldgsts_zfill_rows  # noqa: E402  (the configurations the driver ran, the candidates)

ROWS = list(csv.DictReader(open(DATA / "manifest.csv", newline="")))
CONFIGS = dict(ldgsts_zfill_rows.configs())
TABLES = {name: (gofs, sofs, sizes) for name, gofs, sofs, sizes in ldgsts_zfill_rows.tables()}
FILL_COPIES = (ldgsts_zfill_rows.ZFILL, ldgsts_zfill_rows.IMMEDIATE)


def test_the_manifest_is_the_summary_of_the_committed_pages_and_every_launch_repeats(tmp_path):
    assert_the_run_is_the_committed_pages(DATA, ldgsts_zfill_rows, ROWS, CONFIGS, tmp_path)


def test_the_predictions_committed_before_the_run_are_the_scripts():
    assert_the_committed_csv_is_the_scripts(ldgsts_zfill_rows.predictions(), DATA / "predictions.csv")


def test_the_fit_table_is_the_scripts():
    assert_the_committed_csv_is_the_scripts(ldgsts_zfill_rows.fit_table(DATA / "manifest.csv"), DATA / "fit.csv")


def test_only_the_rule_found_a_session_after_the_run_fits_every_row():
    """Rows of the 167 fill-pass copies each candidate's count equals: the line-position rule (traceconf's
    before) 90, the per-row sum 93, rows_mixed 114 (predicted); one more per store pass past the first 139, the
    runs summed per store pass 110, per position over the passes plus one per later pass reading elsewhere 145
    (found after the run); the lanes a reading lane waits with (found a session later, traceconf's rule) 167."""
    total, misses = ldgsts_zfill_rows.fit(DATA / "manifest.csv")
    assert total == 167
    assert {c: total - len(m) for c, m in misses.items()} == {
        "current": 90, "row_sum": 93, "rows_mixed": 114, "pass_extra": 139, "pass_sum": 110, "pass_positions": 145,
        "waits": 167}


def test_the_line_position_rule_is_the_found_one_where_a_quarter_warp_takes_one_store_pass():
    """Where every quarter-warp's 16-byte stores take one pass the line-position rule (traceconf's before), the
    found rule and the page agree; where they take several the line-position rule never counts more."""
    for row in ldgsts_zfill_rows.fit_table(DATA / "manifest.csv"):
        gofs, sofs, _ = TABLES[row["config"]]
        passes = ldgsts_zfill_rows._store_passes({lane: (gofs[lane], sofs[lane]) for lane in range(8)})
        assert row["current"] <= row["page"]
        if passes == 1:
            assert row["current"] == row["waits"] == row["page"], row


# --------------------------------------------------------------------------- the tool on the probe kernel



def analysed(config: str) -> dict[int, dict]:
    return ignore_src_probe(tuple(CONFIGS[config]))


@needs_nvcc
@pytest.mark.parametrize("config", list(CONFIGS))
def test_the_tool_counts_every_copy_as_the_page(config):
    """Every form but the P0 ones (v0, v8): the 16/0 forms by the sources rule alone (every lane reads), v5 and
    v10 with the fill pass, whose quarter-warps take one to four store passes here."""
    measured = first_launch(ROWS, config)
    for variant in (1, 2, 3, 4, 6, 7, 9, *FILL_COPIES):
        assert_counted_from_sources_as_the_page(analysed(config), measured[variant], variant)
