"""Scalar reference: the rule files applied one warp at a time, with dicts and loops.

Written to be read next to ``../shared/reference/bank_rules.md`` (§1.1 for the
single-word broadcast, §4.3 for phases, pairing and matrices) and ``docs/rules.md``
(the file format), not to be fast.  It reads a rule set's merged TOML keys
(:attr:`traceconf.rules.RuleSet.data`) itself and never calls the grouping,
merging or serving code that :class:`~traceconf.rules.RuleSet` gives the engine, so a
mistake there cannot hide behind the same mistake here.  The vectorized engine
(:mod:`traceconf.engine`) must agree with it on every execution; the property
tests check that for every builtin rule set.
"""

from __future__ import annotations

from dataclasses import dataclass

from traceconf.rules import RuleSet

#: docs/rules.md: the kinds ``merge_stores = false`` stops merging (every write access counts).
_WRITES = ("st", "atom", "stmatrix", "cp_async")
#: docs/rules.md: ``[atomic_ops.OP]`` rules serve ``atom`` accesses, ``[copy_ops.OP]`` rules ``cp_async`` ones.
_OP_TABLE_OF_KIND = {"atom": "atomic_ops", "cp_async": "copy_ops"}


@dataclass(frozen=True)
class ExecutionCost:
    wavefronts: int
    ideal_wavefronts: int
    max_ways: int


def execution_cost(rules: RuleSet, kind: str, nbytes: int, matrices: int, addresses: list[int],
                   op: str = "", sources: list[int] | None = None, sizes: list[int] | None = None) -> ExecutionCost:
    """Cost of one warp-level execution; ``addresses[lane]`` is a byte address or -1 (inactive); ``op``
    the operation of an ``atom`` or ``cp_async`` (its merging, passes and servings may differ:
    ``[atomic_ops]``, ``[copy_ops]``); ``sources[lane]`` a copy's global source address or -1 (unknown);
    ``sizes[lane]`` the bytes the lane copies from it (its src-size; 0: it zero-fills) or -1 (all, or unknown)."""
    data = rules.data
    lane_address = {lane: a for lane, a in enumerate(addresses) if a != -1}
    op_rule = data.get(_OP_TABLE_OF_KIND.get(kind, ""), {}).get(op, {}) if op else {}
    if op_rule.get("source_passes") == "lines" and nbytes == 16 and lane_address:
        fills = op_rule.get("fill_passes") == "runs"
        size = {lane: -1 if sizes is None else sizes[lane] for lane in lane_address}
        reading = {lane: a for lane, a in lane_address.items() if not (fills and size[lane] == 0)}
        if all(sources is not None and sources[lane] >= 0 for lane in reading):
            # the lowest lane writing a destination decides it: nothing is read into one that lane zero-fills
            # (docs/hardware.md, held-out probes)
            lowest: dict[int, int] = {}
            for lane in sorted(lane_address):
                lowest.setdefault(lane_address[lane], lane)
            sourced = {lane: a for lane, a in reading.items() if lowest[a] == lane}
            cost = _from_sources(data, sourced, sources) if sourced else ExecutionCost(0, 0, 0)
            if fills and (op_rule.get("fill_always") or any(0 <= n < 16 for n in size.values())):
                return _with_fill_pass(data, cost, lane_address, reading, sources)
            return cost

    # Accesses wider than split_bytes are separate requests of split_bytes each (CC 1.x: 32-bit requests).
    width = min(nbytes, data.get("split_bytes", 16))
    requests = nbytes // width

    matrix = data.get("matrix")
    is_matrix = matrix is not None and kind in matrix["kinds"]
    extra = 0
    if is_matrix:
        # One group per 8x8 matrix: lanes 8j..8j+7 supply its row addresses.
        per = matrix["lanes"]
        groups = [list(range(j * per, (j + 1) * per)) for j in range(matrices)]
    else:
        entry = _lane_group_entry(data, kind, width)
        groups = _groups(entry, data["warp_size"])
        extra = entry.get("extra_wavefronts", 0)
        pairing = data.get("pairing")
        if (pairing is not None and kind in pairing["kinds"] and width >= pairing["min_bytes"]
                and _paired(lane_address, pairing["partners"])):
            f = pairing["factor"]
            groups = [sum(groups[k:k + f], []) for k in range(0, len(groups), f)]

    merge = op_rule.get("merge_same_word")
    if merge is None:
        merge = data.get("merge_same_word", {}).get(kind, not (kind in _WRITES and not data.get("merge_stores", True)))
    servings = [op_rule.get("group_passes", "banks")] + (["banks"] if op_rule.get("plus_plain") else [])

    # docs/rules.md step 6: with ideal = "bytes" (not for matrices) an execution's ideal is the wavefronts
    # its active lanes' bytes fill, never more than it took.
    fill_bytes = data["banks"] * data["bank_bytes"] if data.get("ideal") == "bytes" and not is_matrix else 0
    wavefronts = ideal = max_ways = 0
    # A ZFILL copy is served twice: its placements, then as a plain copy.
    for serving in servings:
        for request in range(requests):
            taken = groups_active = 0
            for group in groups:
                accesses = {lane: lane_address[lane] - lane_address[lane] % width + request * width
                            for lane in group if lane in lane_address}
                if not accesses:
                    continue
                if serving == "placements":
                    passes = _placement_passes(data, accesses, group, width)
                elif serving == "one":          # a spin CAS: a conflict-free subset per pass, the rest retry
                    passes = 1
                elif data.get("broadcast", "multicast") == "single_word":
                    passes = _single_word_steps(data, accesses)
                else:
                    passes = _multicast_passes(data, accesses, width, merge=merge)
                passes += extra
                taken += passes
                groups_active += 1
                max_ways = max(max_ways, passes)
            wavefronts += taken
            if fill_bytes:
                ideal += min(taken, -(-len(lane_address) * width // fill_bytes))
            else:
                ideal += groups_active
    repeat = op_rule.get("passes", 1)
    return ExecutionCost(wavefronts * repeat, ideal * repeat, max_ways)


def _from_sources(data: dict, lane_address: dict[int, int], sources: list[int]) -> ExecutionCost:
    """docs/rules.md "Copies from their sources" (16-byte copies, ``source_passes = "lines"``), lane by lane."""
    written: set[int] = set()
    kept = []
    for lane in sorted(lane_address):
        if lane_address[lane] not in written:    # else a destination a lower lane writes: dropped
            written.add(lane_address[lane])
            kept.append(lane)
    # requests numbered from the highest lane: (source chunk, destination row, destination chunk parity) -> readers
    readers: dict[tuple, int] = {}
    lanes = {}                                   # kept lane -> (request, source chunk, destination chunk)
    for lane in reversed(kept):
        chunk, place = sources[lane] // 16, lane_address[lane] // 16
        reader = (chunk, lane_address[lane] // data["row_bytes"], place % 2)
        lanes[lane] = (readers.get(reader, 0), chunk, place)
        readers[reader] = readers.get(reader, 0) + 1
    groups: dict[tuple, set] = {}
    for lane, (request, chunk, place) in lanes.items():
        paired = (request, chunk ^ 1, place ^ 1) in lanes.values()
        group = (request, sources[lane] // 128, lane_address[lane] // data["row_bytes"])
        groups.setdefault(group, set()).add(((chunk ^ place) % 4, "paired" if paired else chunk % 2))
    wavefronts = sum(len(keys) for keys in groups.values())
    ideal = min(wavefronts, -(-len(set(lane_address.values())) * 16 // (data["banks"] * data["bank_bytes"])))
    return ExecutionCost(wavefronts, ideal, max(len(keys) for keys in groups.values()))


def _with_fill_pass(data: dict, cost: ExecutionCost, lane_address: dict[int, int], reading: dict[int, int],
                    sources: list[int]) -> ExecutionCost:
    """docs/rules.md "Copies from their sources", the fill pass: per quarter-warp (the lanes whose 16 bytes
    fill one wavefront) with an active lane, the most lanes one lane waits with (itself, the active lanes
    writing its 16-byte unit of the bank row, in any row, and for a reading lane the reading lanes whose sources
    lie at its 16-byte position of their 128-byte lines); and the ideal wavefronts of a 16-byte store from every
    active lane (one lane's bytes apiece, a destination two lanes write counted twice)."""
    row_bytes = data["banks"] * data["bank_bytes"]
    quarter = row_bytes // 16
    wavefronts, max_ways = cost.wavefronts, cost.max_ways

    def waits_with(lane: int, other: int) -> bool:
        at_position = lane in reading and other in reading and sources[other] % 128 // 16 == sources[lane] % 128 // 16
        at_unit = lane_address[lane] % row_bytes // 16 == lane_address[other] % row_bytes // 16
        return other == lane or at_position or at_unit

    for first in range(0, data["warp_size"], quarter):
        lanes = [lane for lane in range(first, first + quarter) if lane in lane_address]
        if lanes:
            runs = max(sum(waits_with(lane, other) for other in lanes) for lane in lanes)
            wavefronts, max_ways = wavefronts + runs, max(max_ways, runs)
    return ExecutionCost(wavefronts, cost.ideal_wavefronts + -(-len(lane_address) * 16 // row_bytes), max_ways)


def _lane_group_entry(data: dict, kind: str, width: int) -> dict:
    """The first ``[[lane_groups]]`` table that lists the width and (when it lists kinds) the kind."""
    for entry in data["lane_groups"]:
        if width in entry["bytes"] and ("kinds" not in entry or kind in entry["kinds"]):
            return entry
    raise ValueError(f"rule set {data['name']!r} has no lane group for {width}-byte {kind} accesses")


def _groups(entry: dict, warp_size: int) -> list[list[int]]:
    if "groups" in entry:
        return [list(group) for group in entry["groups"]]
    return [list(range(start, start + entry["lanes"])) for start in range(0, warp_size, entry["lanes"])]


def _paired(lane_address: dict[int, int], partners) -> bool:
    """bank_rules.md §4.3 rule 3: warp-wide, lane n and n^x agree or one of them is inactive."""
    def ok(x):
        return all(lane ^ x not in lane_address or lane_address[lane ^ x] == a for lane, a in lane_address.items())
    return any(ok(x) for x in partners)


def _multicast_passes(data: dict, accesses: dict[int, int], width: int, merge: bool) -> int:
    """Busiest bank's count of distinct bank rows (same row = multicast / merged write; ``merge`` false:
    every lane's access counts on its own, e.g. shared atomics on sm_90)."""
    bank_bytes, banks, row_bytes = data["bank_bytes"], data["banks"], data["row_bytes"]
    rows_of_bank: dict[int, set] = {}
    for lane, address in accesses.items():
        # The pieces of a ``width``-byte access at ``address`` are the bank words it overlaps, and only
        # those: a 1- or 2-byte access touches one word whatever its offset inside it (sm_90 measured).
        for word in range(address // bank_bytes, (address + width - 1) // bank_bytes + 1):
            rows_of_bank.setdefault(word % banks, set()).add(
                word * bank_bytes // row_bytes if merge else (word * bank_bytes // row_bytes, lane, word))
    return max(len(rows) for rows in rows_of_bank.values())


def _placement_passes(data: dict, accesses: dict[int, int], group: list[int], width: int) -> int:
    """Distinct placements (row, chunk XOR position) of the group's distinct destinations, each written by
    its lowest lane; ``chunk`` is the ``width``-byte unit of the destination in its row, ``position`` the
    writing lane's place in the group (sm_90 cp.async.cg, docs/rules.md)."""
    row_bytes = data["row_bytes"]
    writer: dict[int, int] = {}
    for lane in sorted(accesses):
        writer.setdefault(accesses[lane], lane)
    return len({(address // row_bytes, address % row_bytes // width ^ group.index(lane))
                for address, lane in writer.items()})


def _single_word_steps(data: dict, accesses: dict[int, int]) -> int:
    """CC 1.x guide procedure (§1.1) with the stated choices: broadcast the word most lanes want (lowest
    word on ties), serve every lane of that word and the lowest remaining lane of each other bank."""
    bank_bytes, banks = data["bank_bytes"], data["banks"]
    remaining = {lane: address // bank_bytes for lane, address in accesses.items()}
    steps = 0
    while remaining:
        steps += 1
        lanes_of_word: dict[int, list[int]] = {}
        for lane, word in remaining.items():
            lanes_of_word.setdefault(word, []).append(lane)
        broadcast = max(lanes_of_word, key=lambda w: (len(lanes_of_word[w]), -w))
        served = set(lanes_of_word[broadcast])
        banks_served = {broadcast % banks}
        for lane in sorted(remaining):
            bank = remaining[lane] % banks
            if bank not in banks_served:
                banks_served.add(bank)
                served.add(lane)
        for lane in served:
            del remaining[lane]
    return steps
