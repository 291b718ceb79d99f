"""engine.lane_wavefronts: the lanes of every counted wavefront, for every builtin rule set (hypothesis).

The assignment is checked against the count (its wavefronts are exactly the counted ones), against the
rules (each wavefront's lanes are conflict-free by the scalar reference's own definition of a pass) and
against the accesses (every active lane's every bank word is served once per request).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_engine import accesses_of, copy_with_sources, execution
from traceconf import engine, reference
from traceconf.engine import count_wavefronts, lane_wavefronts
from traceconf.rules import builtin_names, load_rule_set

SM90 = load_rule_set("sm_90")
LANES = list(range(32))


def expected_groups(rules, kind, nbytes, matrices, address) -> list[set[int]]:
    """The lane groups the rules prescribe for this execution (after pairing), built independently."""
    width = min(nbytes, rules.split_bytes)
    if rules.matrix is not None and kind in rules.matrix.kinds:
        per = rules.matrix.lanes
        return [set(range(j * per, (j + 1) * per)) for j in range(matrices)]
    groups = [set(g) for g in rules.lane_group_rule(kind, width).groups]
    active = {lane: a for lane, a in enumerate(address) if a != -1}
    pairing = rules.pairing
    if pairing is not None and pairing.applies(kind, width) and reference._paired(active, pairing.partners):
        groups = [set().union(*groups[k:k + pairing.factor]) for k in range(0, len(groups), pairing.factor)]
    return groups


def one_pass(rules, kind, width, accesses: dict[int, int]) -> bool:
    """Can the rules serve these lane accesses (lane → aligned byte address) in a single pass?"""
    if rules.broadcast == "single_word":
        return reference._single_word_steps(rules.data, accesses) == 1
    return reference._multicast_passes(rules.data, accesses, width, merge=rules.merges(kind)) == 1


def check_assignment(rules, rows):
    acc = accesses_of(rows, rules.warp_size)
    served = lane_wavefronts(acc, rules)
    counted = count_wavefronts(acc, rules, memoise=False)
    assert [a.tolist() for a in counted] == [served.wavefronts.tolist(), served.ideal_wavefronts.tolist(),
                                             served.max_ways.tolist()]
    for i, (kind, nbytes, matrices, address) in enumerate(rows):
        cost = reference.execution_cost(rules, kind, nbytes, matrices, address)
        width = min(nbytes, rules.split_bytes)
        mine = served.row == i
        lane, request, group = served.lane[mine], served.request[mine], served.group[mine]
        wave, word, bank = served.wavefront[mine], served.word[mine], served.bank[mine]
        waves = served.wavefront_row == i
        # The wavefronts are the counted ones, numbered 0..count-1; the lanes only ever name them.
        assert served.wavefront_index[waves].tolist() == list(range(cost.wavefronts))
        assert set(wave.tolist()) == set(served.wavefront_index[waves & ~served.wavefront_extra].tolist())
        per_group = {}
        for q, g, extra in zip(served.wavefront_request[waves], served.wavefront_group[waves],
                               served.wavefront_extra[waves]):
            per_group.setdefault((int(q), int(g)), []).append(bool(extra))
        if rules.ideal == "groups" or kind in ("ldmatrix", "stmatrix"):
            assert len(per_group) == cost.ideal_wavefronts
        else:       # ideal = "bytes": per request, the wavefronts the active bytes fill, at most those taken
            active = sum(1 for a in address if a != -1)
            fill = -(-active * width // (rules.banks * rules.bank_bytes))
            taken = Counter(int(q) for q in served.wavefront_request[waves])
            assert cost.ideal_wavefronts == sum(min(n, fill) for n in taken.values())
        assert max((len(v) for v in per_group.values()), default=0) == cost.max_ways
        # Every active lane's every bank word, in every request, is served exactly once.
        expected = sorted((lane_, r, w) for lane_, a in enumerate(address) if a != -1
                          if not (kind in ("ldmatrix", "stmatrix") and lane_ >= matrices * rules.matrix.lanes)
                          for r in range(nbytes // width)
                          for w in range((a - a % width + r * width) // rules.bank_bytes,
                                         (a - a % width + r * width + width - 1) // rules.bank_bytes + 1))
        assert sorted(zip(lane.tolist(), request.tolist(), word.tolist())) == expected
        assert (bank == word % rules.banks).all()
        groups = expected_groups(rules, kind, nbytes, matrices, address)
        for k in np.unique(wave).tolist():
            here = wave == k
            (q,), (g,) = np.unique(request[here]), np.unique(group[here])
            record = np.nonzero(waves & (served.wavefront_index == k))[0][0]
            assert (served.wavefront_request[record], served.wavefront_group[record]) == (q, g)
            lanes_here = set(lane[here].tolist())
            assert lanes_here <= groups[g]
            accesses = {n: address[n] - address[n] % width + int(q) * width for n in lanes_here}
            assert one_pass(rules, kind, width, accesses), (k, accesses)


def test_copies_from_their_sources_are_assigned_as_counted():
    """sm_90 copies counted from their sources: the assignment gives the count, every active lane's bank
    words once, and each wavefront's lanes one request and one (source line, destination row) group."""
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(st.lists(copy_with_sources(SM90), min_size=1, max_size=4))
    def check(rows):
        acc = accesses_of(rows)
        served = lane_wavefronts(acc, SM90)
        assert [a.tolist() for a in count_wavefronts(acc, SM90, memoise=False)] == \
            [served.wavefronts.tolist(), served.ideal_wavefronts.tolist(), served.max_ways.tolist()]
        counted = engine._counted_from_sources(acc, SM90)
        for i, (_, _, _, address, op, sources, sizes) in enumerate(rows):
            cost = reference.execution_cost(SM90, "cp_async", 16, 0, address, op, sources, sizes)
            waves = served.wavefront_row == i
            assert served.wavefront_index[waves].tolist() == list(range(cost.wavefronts))
            if not counted[i]:
                continue                             # counted from the shared addresses (the test below)
            reading = [lane for lane, a in enumerate(address) if a != -1 and (sizes is None or sizes[lane] != 0)]
            # the reading lanes no lower active lane shares a destination with (reading or zero-filling)
            sourcing = {lane for lane in reading if address.index(address[lane]) == lane}
            mine = served.row == i
            assert sorted(zip(served.lane[mine].tolist(), served.word[mine].tolist())) == \
                sorted((lane, a // 4 + w) for lane, a in enumerate(address) if a != -1 for w in range(4))
            per_group = Counter(zip(served.wavefront_request[waves].tolist(), served.wavefront_group[waves].tolist()))
            assert max(per_group.values(), default=0) == cost.max_ways
            for k in range(cost.wavefronts):
                here = mine & (served.wavefront == k)
                lanes = set(served.lane[here].tolist())
                record = np.flatnonzero(waves & (served.wavefront_index == k))[0]
                assert {(int(q), int(g)) for q, g in zip(served.request[here], served.group[here])} == \
                    ({(int(served.wavefront_request[record]), int(served.wavefront_group[record]))} if lanes else set())
                assert served.wavefront_extra[record] == (not lanes)     # a fill pass's wavefront may serve none
                writers = lanes & sourcing
                assert len({(sources[lane] // 128, address[lane] // 128) for lane in writers}) <= 1
                if not writers:                      # a fill pass's wavefront: one quarter-warp's lanes
                    assert len({lane // 8 for lane in lanes}) <= 1

    check()


@pytest.mark.parametrize("name", builtin_names())
def test_assignment_is_the_count_and_each_wavefront_is_conflict_free(name):
    rules = load_rule_set(name)

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(execution(rules), min_size=1, max_size=5))
    def check(rows):
        check_assignment(rules, rows)

    check()


def test_hand_checked_cases():
    # Column walk: lane l in pass l.  Paired 128-bit broadcast: two half-warp groups, one pass each.
    # ldmatrix.x2 of 128-B rows: 8 passes per matrix, lanes past the matrices never served.
    rows = [("ld", 4, 0, [128 * lane for lane in LANES]), ("ld", 16, 0, [0] * 32),
            ("ldmatrix", 16, 2, [128 * lane for lane in LANES]), ("atom", 4, 0, [0] * 32)]
    served = lane_wavefronts(accesses_of(rows), SM90)
    column = served.row == 0
    assert served.wavefront[column].tolist() == LANES and served.lane[column].tolist() == LANES
    pair = served.row == 1
    assert served.wavefronts[1] == 2 and set(served.group[pair].tolist()) == {0, 1}
    assert sorted(set(served.lane[pair & (served.group == 0)].tolist())) == list(range(16))
    matrix = served.row == 2
    assert served.wavefronts[2] == 16 and served.lane[matrix].max() == 15
    assert set(served.wavefront[matrix & (served.lane == 9)].tolist()) == {9}   # its 4 words, one pass
    atom = served.row == 3                  # sm_90 atomics do not merge: every lane its own pass
    assert served.wavefronts[3] == 32 and sorted(served.wavefront[atom].tolist()) == LANES
    empty = lane_wavefronts(accesses_of([]), SM90)
    assert len(empty.lane) == len(empty.wavefront_row) == len(empty.wavefronts) == 0


def test_chunks_and_many_executions_keep_rows_apart(monkeypatch):
    from traceconf import engine
    rng = np.random.default_rng(3)
    rows = [("ld", int(b), 0, (rng.integers(0, 64, 32) * b).tolist()) for b in rng.choice([4, 8, 16], 60)]
    whole = lane_wavefronts(accesses_of(rows), SM90)
    monkeypatch.setattr(engine, "CHUNK_KEYS", 64)
    chunked = lane_wavefronts(accesses_of(rows), SM90)
    for field in ("row", "lane", "request", "group", "wavefront", "word", "wavefront_row", "wavefront_index",
                  "wavefronts"):
        assert np.array_equal(getattr(whole, field), getattr(chunked, field))
