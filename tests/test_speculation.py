"""Memory contents needed per region (traceconf.emulate.speculation): assumed from the probe, checked at every
access, and the output always the full emulation's.

Each kernel of tests/fixtures/emulate/regions.cu breaks one thing a wrong split of memory would get wrong: one
array's contents feeding another's addresses, a store through a pointer given the input's address (aliasing
--data), an index that leaves its region after the probe, and a store through an unknown pointer after it.  Every launch runs sliced and fully emulated
(tests/test_slice.py's comparison), at both levels; the tests also say which assumption held or broke, and
that without the checks the two outputs differ (the comparison would catch a wrong split).
"""

from __future__ import annotations

import types

import numpy as np
import pytest

from test_slice import FIXTURES, analyse, assert_same, needs_sass, request
from traceconf.emulate import memory as ptx_memory, slice as slicing, speculation
from traceconf.emulate.contents import GLOBAL_BASE
from traceconf.emulate.speculation import Region, SpeculationFailed, check_inside, probe_hulls, regions_of

REGIONS = FIXTURES / "emulate" / "regions.ptx"
LEVELS = ["ptx", pytest.param("sass", marks=needs_sass)]


@pytest.fixture
def watched(monkeypatch):
    """What the speculation of each launch did: the plans it made and the assumptions that broke."""
    seen = {"failed": [], "plans": []}
    plan, failed = speculation.Speculation.plan, speculation.Speculation.failed

    def planned(self):
        made = plan(self)
        seen["plans"].append(made)
        return made
    monkeypatch.setattr(speculation.Speculation, "plan", planned)
    monkeypatch.setattr(speculation.Speculation, "failed", lambda self, part: (seen["failed"].append(part),
                                                                             failed(self, part)))
    return seen


def _skipped(seen) -> bool:
    """Whether some machine left some contents work undone."""
    return any(plan is not None and plan.contents and any(c is not None and c.skip for c in plan.contents)
               for plan in seen["plans"])


def test_overlapping_ranges_are_one_region_and_touching_ones_two():
    assert regions_of({3: (0, 64), 5: (32, 128), 7: (128, 256), 9: (300, 304)}) == [
        Region(0, 128, frozenset({3, 5})), Region(128, 256, frozenset({7})), Region(300, 304, frozenset({9}))]


def test_the_probe_bounds_each_instruction_by_the_bytes_its_lanes_touched():
    rows = np.array([[8, -1, 16], [-1, -1, -1]])
    log = [(None, 40, 0, 4, 0, rows), (None, 40, 0, 4, 0, np.array([[100, 4, -1]])), (None, 41, 0, 8, 0, rows)]
    assert probe_hulls(log, {40: [2], 41: [3, 9]}) == {2: (4, 104), 3: (8, 24), 9: (8, 24)}
    assert probe_hulls([(None, 40, 0, 16, 1, rows)], {40: [2]}) is None       # matrix rows: bytes not bounded


def test_a_region_nobody_reads_keeps_no_contents_and_its_stores_stay_in_it():
    """Two arrays: A's load decides something, B's only moves data.  Per space, B's store and its value run;
    per region (from a probe that saw A at bytes 0..255 and B at 256..511) they do not, and A's load and B's
    store are bounded to their regions."""
    E = slicing.Effect
    effects = [E(defs=frozenset({"v"})), E(defs=frozenset({"w"})),
               E(values=frozenset({"v"}), places=frozenset({"a"}), writes=frozenset({"shared"}), seed=True),
               E(values=frozenset({"w"}), places=frozenset({"b"}), writes=frozenset({"shared"}), seed=True),
               E(defs=frozenset({"x"}), places=frozenset({"a"}), reads=frozenset({"shared"}), loaded=True, seed=True),
               E(defs=frozenset({"y"}), places=frozenset({"b"}), reads=frozenset({"shared"}), loaded=True, seed=True),
               E(places=frozenset({"x"}), seed=True)]
    edges = [[i + 1] for i in range(len(effects))]
    modelled = frozenset({"shared"})
    coarse = slicing.dependence(effects, edges, modelled)
    assert coarse.kept[1]                                   # B's value is computed per space
    chosen = speculation.Speculation(effects, lambda e, m: slicing.dependence(e, edges, m), modelled, coarse,
                                     list(range(len(effects))))
    rows = {2: np.arange(64) * 4, 3: 256 + np.arange(64) * 4, 4: np.arange(64) * 4, 5: 256 + np.arange(64) * 4}
    probe = types.SimpleNamespace(log=[(None, pc, 0, 4, 0, at.reshape(2, 32)) for pc, at in rows.items()],
                                  consulted={2, 3, 4, 5})
    chosen.learn(probe)
    plan = chosen.plan()
    assert not plan.kept[1] and plan.kept[0]
    assert plan.contents[2] == speculation.Contents(skip=False)
    assert plan.contents[3] == speculation.Contents(skip=True, bounds=(256, 512))
    assert plan.contents[4] == speculation.Contents(skip=False, bounds=(0, 256))
    assert plan.contents[5] == speculation.Contents(skip=True)
    chosen.failed("shared")
    assert chosen.plan() == coarse.plan


def test_an_access_is_checked_only_on_its_running_threads():
    offsets = np.array([0, 4, 5000, 8])
    check_inside((0, 16), offsets, 4, lambda: np.array([0, 1, 3]))        # a thread not running holds anything
    with pytest.raises(SpeculationFailed):
        check_inside((0, 16), offsets, 4, lambda: None)
    with pytest.raises(SpeculationFailed):
        check_inside((0, 8), offsets, 4, lambda: np.array([0, 1, 3]))     # 8..11 lies past the region


@pytest.mark.parametrize("level", LEVELS)
def test_an_array_whose_contents_feed_another_s_addresses_keeps_them(level, watched):
    """index[] decides value[]'s addresses (kept, the counts exact); value[]'s contents only move: not kept."""
    launch = request((256, 1, 1), (3, 1, 1), data={"0": "random:uint32:768"})
    (analysis,) = assert_same(REGIONS, launch, level, ["^indirect$"])
    assert not analysis["unresolved"]
    assert _skipped(watched) and not watched["failed"]


@pytest.mark.parametrize("level", LEVELS)
def test_a_store_through_a_pointer_given_the_input_s_address_breaks_the_assumption(level, watched):
    """out = in (--param): the stores left undone would have changed what the next CTA reads; the check sees it
    and the batch runs again with the stores' values.  With its own buffer the stores stay undone."""
    data = {"0": f"random:uint32:{64 * 4 + 64}"}
    aliased = request((64, 1, 1), (4, 1, 1), params={"1": GLOBAL_BASE}, data=data)
    assert_same(REGIONS, aliased, level, ["^forward$"])
    assert "global" in watched["failed"]
    watched["failed"].clear()
    assert_same(REGIONS, request((64, 1, 1), (4, 1, 1), data=data), level, ["^forward$"])
    assert not watched["failed"]


@pytest.mark.parametrize("level", LEVELS)
def test_an_index_leaving_its_region_breaks_the_assumption(level, watched):
    """From the second CTA on the decisive reads run into the half whose stores were left undone: the check
    sees it, and the batch runs again keeping every shared store's value."""
    launch = request((64, 1, 1), (3, 1, 1), data={"0": "random:uint32:384"})
    assert_same(REGIONS, launch, level, ["^straying$"])
    assert watched["failed"] == ["shared"]


@pytest.mark.parametrize("level", LEVELS)
def test_a_store_through_an_unknown_pointer_breaks_the_assumption(level, watched):
    """The second CTA stores through a pointer nothing gives: the buffers become unknown to the CTAs after it (in
    launch order); the store left undone would have hidden that, so the check stops it."""
    launch = request((32, 1, 1), (4, 1, 1), data={"0": "random:uint32:128"})
    (analysis,) = assert_same(REGIONS, launch, level, ["^wild$"])
    assert analysis["unresolved"] and "global" in watched["failed"]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("kernel, launch, check", [
    ("straying", request((64, 1, 1), (3, 1, 1), data={"0": "random:uint32:384"}), "check_inside"),
    ("forward", request((64, 1, 1), (4, 1, 1), params={"1": GLOBAL_BASE}, data={"0": "random:uint32:320"}),
     "check_nothing_stored"),
    ("wild", request((32, 1, 1), (4, 1, 1), data={"0": "random:uint32:128"}), "check_nothing_stored")])
def test_without_the_checks_the_outputs_differ(kernel, launch, check, level, monkeypatch):
    """The comparison is not vacuous: with a check that never fails, the wrong assumption changes the report."""
    import traceconf.emulate.simt as simt
    import traceconf.sass.memory as sass_memory
    full = analyse(REGIONS, launch, level, [f"^{kernel}$"], full=True)
    # where each check is called: the machine's for both levels' shared bounds, each level's for global stores
    callers = {"check_inside": (simt,), "check_nothing_stored": (ptx_memory, sass_memory)}
    for module in callers[check]:
        monkeypatch.setattr(module, check, lambda *args: None)
    assert analyse(REGIONS, launch, level, [f"^{kernel}$"]) != full
