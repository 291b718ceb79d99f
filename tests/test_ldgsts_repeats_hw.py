"""Repeated sources of the LDGSTS.BYPASS probes (issue 21; tests/data/hw/ldgsts_probe/repeats, docs/hardware.md
"Repeated sources").

The same kernel and cubin as tests/test_ldgsts_probe_hw.py, two H100 calls, every configuration launched twice.
The first (``ldgsts_probe.repeat_configs``, 180, groups ``rep_p*``) starts from one warp copying chunk ``l`` to
place ``l`` (4 wavefronts) and gives a few lanes another lane's chunk: every ordered pair of quarter-warp 0, pairs
of quarter-warp 2, readers from another quarter-warp, two first readers of one wavefront, chains of three and four
readers, dropped and guarded-off readers, reversed destinations, and 60 seeded permutations.  It showed the rule
sm_90 had (the k-th reader from the lowest lane per destination row and chunk XOR mod 4: 111 of 180; 465 of the
466 old rows, 227 of the fitting group's 243) numbering a repeated chunk's readers the wrong way: the page has 7
where a *higher* lane re-reads a lane's chunk into a place of the same parity of its row (2, 4 or 6 chunks over),
6 where a lower lane does or the parity differs.  Numbered from the highest lane per (chunk, destination row,
destination chunk parity), the rule fits all 180, the 466 old rows but the one ``.ZFILL`` row and all 243 of the
fitting group.  The second call (``ldgsts_probe.check_configs``, 153, groups ``chk_p*``) was drawn after that and
predicted before it ran: 153 of 153 (the rule before: 87).
"""

from __future__ import annotations

import csv

import pytest

from test_ldgsts_probe_hw import (PROBE, assert_the_same_sass_ran_and_every_count_repeats,
                                  assert_the_tool_gives_the_page, first_launches, ldgsts_probe, needs_sass,
                                  reference_per_launch)

REPEATS = PROBE / "repeats"
MANIFEST = list(csv.DictReader(open(REPEATS / "manifest.csv", newline="")))
MEASURED = first_launches(MANIFEST)
SETS = {"--repeats": ("rep", ldgsts_probe.repeat_configs()), "--check": ("chk", ldgsts_probe.check_configs())}
CONFIGS = {c["name"]: c for _, configs in SETS.values() for c in configs}


def test_the_manifest_is_the_pages_summary_and_the_inputs_the_configurations(tmp_path):
    ldgsts_probe.summary(REPEATS / "pages", tmp_path / "manifest.csv")
    assert list(csv.DictReader(open(tmp_path / "manifest.csv", newline=""))) == MANIFEST
    for option, (prefix, configs) in SETS.items():
        assert {r["config"] for r in MANIFEST if r["group"].startswith(prefix)} == {c["name"] for c in configs}
        for part in range(4):
            ldgsts_probe.write_configs(tmp_path / "p.txt", [option, "--part", f"{part}/4"])
            assert (tmp_path / "p.txt").read_text() == (REPEATS / f"configs_{prefix}_p{part}.txt").read_text()
    assert (len(SETS["--repeats"][1]), len(SETS["--check"][1]), len(CONFIGS)) == (180, 153, 333)


def test_the_same_sass_ran_and_every_count_repeats():
    assert_the_same_sass_ran_and_every_count_repeats(REPEATS, MANIFEST)


def test_a_higher_lane_re_reading_a_chunk_at_the_same_parity_costs_one_more():
    """Quarter-warp 0, lane ``o`` reading lane ``l``'s chunk (the other lanes their own): the page has 7 per warp
    where o > l and their places differ by 2, 4 or 6 chunks, 6 otherwise; the XOR mod 4 the rule keyed before
    does not decide it (o = l + 4, the same XOR, gives 7 one way and 6 the other)."""
    pairs = {(first, second): MEASURED[f"rep_pair_{first}_{second}"][0x620][1]
             for first in range(8) for second in range(8) if first != second}
    assert pairs == {(first, second): 7 if second > first and (first ^ second) % 2 == 0 else 6
                     for first, second in pairs}
    assert all(reference_per_launch(CONFIGS[f"rep_pair_{first}_{second}"]) == count
               for (first, second), count in pairs.items())


def test_the_rule_from_the_sources_against_every_page():
    """sm_90's count from the sources (docs/rules.md) equals the page in all 333 configurations."""
    misses = {name: reference_per_launch(config) - MEASURED[name][0x620][1] for name, config in CONFIGS.items()}
    assert {name: delta for name, delta in misses.items() if delta} == {}


@needs_sass
@pytest.mark.parametrize("config", list(CONFIGS))
def test_the_tool_gives_the_page_of_every_configuration(config):
    """The probe cubin analysed as a user would, its tables and source pointer given: the read-back LDS and the
    guarded copy equal the page (wavefronts and ideal)."""
    assert_the_tool_gives_the_page(config, MEASURED[config])
