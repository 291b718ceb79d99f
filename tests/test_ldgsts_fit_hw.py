"""The fitting group of the LDGSTS.BYPASS probes (issue 21; tests/data/hw/ldgsts_probe/fit, docs/hardware.md
"LDGSTS.BYPASS probes").

The same kernel and cubin as tests/test_ldgsts_probe_hw.py, 243 more configurations of the guarded copy
(``ldgsts_probe.fit_configs``), each launched twice in one H100 call: 120 seeded random permutations of 32
chunks like ``random_perm*``, then permutations that isolate one factor (within quarter-warps, of whole
quarter-warps, of whole sectors, within sectors, quarter-warps' sector sets across lines, any), each on the
source side, the destination side and both, the reversed orders, and random guard subsets.  sm_90's rule from
the sources fits all 243 since it numbers a repeated chunk's readers from the highest lane per destination row
and destination chunk parity (tests/test_ldgsts_repeats_hw.py); 227 when they were numbered from the lowest per
row and chunk XOR mod 4, 201 per row alone, 88 before it keyed unpaired chunks by their source half and numbered
requests per destination row.  A miss would be recorded below, its tool run a strict xfail.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import pytest

from test_ldgsts_probe_hw import (PROBE, assert_the_same_sass_ran_and_every_count_repeats,
                                  assert_the_tool_gives_the_page, first_launches, ldgsts_probe, needs_sass,
                                  reference_per_launch)

FIT = PROBE / "fit"
MANIFEST = list(csv.DictReader(open(FIT / "manifest.csv", newline="")))
CONFIGS = {c["name"]: c for c in ldgsts_probe.fit_configs()}

#: Configuration -> sm_90's count from the sources less the page's (per warp), where they differ.
SOURCE_RULE_MISSES: dict[str, int] = {}

#: Per family (the name less its seed): configurations, and how many sm_90's rule fits.
FAMILY_FITS = {
    "fit_perm": (120, 120), "fit_guard": (24, 24), "fit_any": (15, 15), "fit_inquarter": (15, 15),
    "fit_sectorsets": (15, 15), "fit_quarters": (15, 15), "fit_sectors": (15, 15), "fit_insector": (15, 15),
    "fit_reversed": (9, 9)}


def family(name: str) -> str:
    return next(f for f in FAMILY_FITS if name.startswith(f))


MEASURED = first_launches(MANIFEST)


def test_the_manifest_is_the_pages_summary_and_the_inputs_the_configurations(tmp_path):
    ldgsts_probe.summary(FIT / "pages", tmp_path / "manifest.csv")
    assert list(csv.DictReader(open(tmp_path / "manifest.csv", newline=""))) == MANIFEST
    assert {r["config"] for r in MANIFEST} == set(CONFIGS) and len(CONFIGS) == 243
    assert not set(CONFIGS) & {c["name"] for c in ldgsts_probe.configs()}
    for part in range(4):
        ldgsts_probe.write_configs(tmp_path / "p.txt", ["--fit", "--part", f"{part}/4"])
        assert (tmp_path / "p.txt").read_text() == (FIT / f"configs_fit_p{part}.txt").read_text()


def test_the_same_sass_ran_and_every_count_repeats():
    """The device's SASS of the probe is the committed one (pcs 0x430, 0x620, 0x660 unchanged), and both launches
    of every configuration give the same executions, wavefronts and ideal per pc."""
    assert_the_same_sass_ran_and_every_count_repeats(FIT, MANIFEST)


def test_the_rule_from_the_sources_against_every_page():
    """sm_90's count from the sources (docs/rules.md) per configuration, against the page: the misses as
    recorded (none), per family as docs/hardware.md tabulates (every structured family, chunks moved within a
    quarter-warp's one line and one row included, and all 120 random permutations)."""
    misses = {}
    for name, config in CONFIGS.items():
        got = reference_per_launch(config) - MEASURED[name][0x620][1]
        if got:
            misses[name] = got
    assert misses == SOURCE_RULE_MISSES
    fits = Counter(family(name) for name in CONFIGS if name not in misses)
    assert {f: (sum(1 for name in CONFIGS if family(name) == f), fits[f]) for f in FAMILY_FITS} == FAMILY_FITS


@needs_sass
@pytest.mark.parametrize("config", [pytest.param(name, marks=[pytest.mark.xfail(
    strict=True, reason=f"sm_90's rule from the sources gives {SOURCE_RULE_MISSES[name]:+d} per warp against "
                        "the page")] if name in SOURCE_RULE_MISSES else []) for name in CONFIGS])
def test_the_tool_gives_the_page_of_every_configuration(config):
    """The probe cubin analysed as a user would, its tables and source pointer given: the read-back LDS and the
    guarded copy equal the page wherever the rule fits."""
    assert_the_tool_gives_the_page(config, MEASURED[config])
