"""Scalar reference: the rule sets applied one warp at a time, with dicts and loops.

Written to be read next to ``../shared/reference/bank_rules.md`` (§1.1 for the
single-word broadcast, §4.3 for phases, pairing and matrices), not to be fast.
The vectorized engine (:mod:`traceconf.engine`) must agree with it on every
execution; the property tests check that for every builtin rule set.
"""

from __future__ import annotations

from dataclasses import dataclass

from traceconf.rules import RuleSet


@dataclass(frozen=True)
class ExecutionCost:
    wavefronts: int
    ideal_wavefronts: int
    max_ways: int


def execution_cost(rules: RuleSet, kind: str, nbytes: int, matrices: int, addresses: list[int],
                   op: str = "") -> ExecutionCost:
    """Cost of one warp-level execution; ``addresses[lane]`` is a byte address or -1 (inactive); ``op``
    the operation of an ``atom`` or ``cp_async`` (its merging, passes and servings may differ:
    ``[atomic_ops]``, ``[copy_ops]``)."""
    lane_address = {lane: a for lane, a in enumerate(addresses) if a != -1}

    # Accesses wider than split_bytes are separate requests of split_bytes each (CC 1.x: 32-bit requests).
    width = min(nbytes, rules.split_bytes)
    requests = nbytes // width

    if rules.matrix is not None and kind in rules.matrix.kinds:
        # One group per 8x8 matrix: lanes 8j..8j+7 supply its row addresses.
        per = rules.matrix.lanes
        groups = [list(range(j * per, (j + 1) * per)) for j in range(matrices)]
        extra = 0
    else:
        rule = rules.lane_group_rule(kind, width)
        groups = [list(g) for g in rule.groups]
        extra = rule.extra_wavefronts
        pairing = rules.pairing
        if pairing is not None and pairing.applies(kind, width) and _paired(lane_address, pairing.partners):
            f = pairing.factor
            groups = [sum(groups[k:k + f], []) for k in range(0, len(groups), f)]

    wavefronts = ideal = max_ways = 0
    # A ZFILL copy is served twice: its placements, then as a plain copy (rules.op_rule(...).servings).
    for serving in rules.op_rule(kind, op).servings:
        for request in range(requests):
            for group in groups:
                accesses = {lane: lane_address[lane] - lane_address[lane] % width + request * width
                            for lane in group if lane in lane_address}
                if not accesses:
                    continue
                if serving == "placements":
                    passes = _placement_passes(rules, accesses, group, width)
                elif rules.broadcast == "single_word":
                    passes = _single_word_steps(rules, accesses)
                else:
                    passes = _multicast_passes(rules, accesses, width, merge=rules.merges(kind, op))
                passes += extra
                wavefronts += passes
                ideal += 1
                max_ways = max(max_ways, passes)
    repeat = rules.passes(kind, op)
    return ExecutionCost(wavefronts * repeat, ideal * repeat, max_ways)


def _paired(lane_address: dict[int, int], partners) -> bool:
    """bank_rules.md §4.3 rule 3: warp-wide, lane n and n^x agree or one of them is inactive."""
    def ok(x):
        return all(lane ^ x not in lane_address or lane_address[lane ^ x] == a for lane, a in lane_address.items())
    return any(ok(x) for x in partners)


def _multicast_passes(rules: RuleSet, accesses: dict[int, int], width: int, merge: bool) -> int:
    """Busiest bank's count of distinct bank rows (same row = multicast / merged write; ``merge`` false:
    every lane's access counts on its own, e.g. shared atomics on sm_90)."""
    rows_of_bank: dict[int, set] = {}
    for lane, address in accesses.items():
        # The pieces of a ``width``-byte access at ``address`` are the bank words it overlaps, and only
        # those: a 1- or 2-byte access touches one word whatever its offset inside it (sm_90 measured).
        for word in range(address // rules.bank_bytes, (address + width - 1) // rules.bank_bytes + 1):
            bank = word % rules.banks
            row = word * rules.bank_bytes // rules.row_bytes
            rows_of_bank.setdefault(bank, set()).add(row if merge else (row, lane, word))
    return max(len(rows) for rows in rows_of_bank.values())


def _placement_passes(rules: RuleSet, accesses: dict[int, int], group: list[int], width: int) -> int:
    """Distinct placements (row, chunk XOR position) of the group's distinct destinations, each written by
    its lowest lane; ``chunk`` is the ``width``-byte unit of the destination in its row, ``position`` the
    writing lane's place in the group (sm_90 cp.async.cg, docs/rules.md)."""
    writer: dict[int, int] = {}
    for lane in sorted(accesses):
        writer.setdefault(accesses[lane], lane)
    return len({(address // rules.row_bytes, address % rules.row_bytes // width ^ group.index(lane))
                for address, lane in writer.items()})


def _single_word_steps(rules: RuleSet, accesses: dict[int, int]) -> int:
    """CC 1.x guide procedure (§1.1) with the stated choices: broadcast the word most lanes want (lowest
    word on ties), serve every lane of that word and the lowest remaining lane of each other bank."""
    remaining = {lane: address // rules.bank_bytes for lane, address in accesses.items()}
    steps = 0
    while remaining:
        steps += 1
        lanes_of_word: dict[int, list[int]] = {}
        for lane, word in remaining.items():
            lanes_of_word.setdefault(word, []).append(lane)
        broadcast = max(lanes_of_word, key=lambda w: (len(lanes_of_word[w]), -w))
        served = set(lanes_of_word[broadcast])
        banks_served = {broadcast % rules.banks}
        for lane in sorted(remaining):
            bank = remaining[lane] % rules.banks
            if bank not in banks_served:
                banks_served.add(bank)
                served.add(lane)
        for lane in served:
            del remaining[lane]
    return steps
