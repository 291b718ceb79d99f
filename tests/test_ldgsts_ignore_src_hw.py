"""Nsight Compute's LDGSTS.BYPASS counts with the ignore-src operand and `.ZFILL` on an H100
(tests/data/hw/ldgsts_ignore_src, docs/hardware.md "LDGSTS ignore-src probes").

One kernel (scripts/hw/ldgsts_ignore_src.cu) holds eleven forms of the same copy; 40 configurations (five
global/shared patterns times the lanes that read) were launched three times each.  What the committed pages
show: every count repeats, the seven ignore-src forms on P1-P6 agree whatever the polarity, the two on P0
count as if P0 were false, and the rest follow the fitted count of ``ldgsts_ignore_src.fitted``.
"""

from __future__ import annotations

import csv
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "hw" / "ldgsts_ignore_src"
sys.path.insert(0, str(REPO / "scripts" / "hw"))
import ldgsts_ignore_src  # noqa: E402  (the configurations the driver ran and the fitted count)
import ldgsts_probe  # noqa: E402  (the page summary)

ROWS = list(csv.DictReader(open(DATA / "manifest.csv", newline="")))


def counts() -> dict[tuple[str, int], set]:
    out = defaultdict(set)
    for row in ROWS:
        out[row["config"], int(row["variant"])].add((int(row["wavefronts"]), int(row["ideal"])))
    return out


def test_the_manifest_is_the_summary_of_the_committed_pages(tmp_path):
    (tmp_path / "pages").mkdir()
    (tmp_path / "pages" / "probe").symlink_to(DATA / "pages")
    ldgsts_probe.summary(tmp_path / "pages", tmp_path / "summary.csv")
    ldgsts_ignore_src.manifest(tmp_path / "summary.csv", tmp_path / "manifest.csv")
    assert (tmp_path / "manifest.csv").read_text() == (DATA / "manifest.csv").read_text()
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
