"""The vectorized engine: API, tables, errors, and engine == scalar reference for every rule set."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traceconf import engine
from traceconf.accesses import WarpAccesses
from traceconf.engine import analyze, combine, count_wavefronts, instruction_results, summarize
from traceconf.errors import InputError
from traceconf.reference import execution_cost
from traceconf.rules import builtin_names, load_rule_set
from traceconf.kinds import OPS_OF_KIND
from traceconf.schemas import EXECUTIONS, INSTRUCTION_RESULTS, KIND_CODES, OP_CODES


def accesses_of(rows: list[tuple], warp_size: int = 32, kernel: str = "k") -> WarpAccesses:
    """WarpAccesses from ``(kind, bytes, matrices, addresses)`` tuples, one execution each.

    Instruction ids are the row numbers; ``addresses`` may be shorter than the warp (rest inactive).
    """
    n = len(rows)
    address = np.full((n, warp_size), -1, dtype=np.int64)
    source = np.full((n, warp_size), -1, dtype=np.int64) if any(len(r) > 5 for r in rows) else None
    size = np.full((n, warp_size), -1, dtype=np.int16) if any(len(r) > 6 and r[6] for r in rows) else None
    for i, row in enumerate(rows):
        address[i, :len(row[3])] = row[3]
        if len(row) > 5:                 # a copy's per-lane global sources
            source[i, :len(row[5])] = row[5]
        if len(row) > 6 and row[6]:      # and the bytes each lane copies from them (src-size)
            size[i, :len(row[6])] = row[6]
    return WarpAccesses(kernel, np.zeros(n, np.int64), np.arange(n, dtype=np.int32) % 4, np.arange(n) * 7 + 3,
                        np.arange(n, dtype=np.int32), np.array([KIND_CODES[r[0]] for r in rows], np.int8),
                        np.array([r[1] for r in rows], np.int16), np.array([r[2] for r in rows], np.int8),
                        address, np.array([OP_CODES[r[4] if len(r) > 4 else ""] for r in rows], np.int8), source,
                        size)


def costs(rules, rows, warp_size=None):
    """[(wavefronts, ideal, max_ways)] per row through the vectorized engine."""
    w, i, m = count_wavefronts(accesses_of(rows, warp_size or rules.warp_size), rules)
    return list(zip(w.tolist(), i.tolist(), m.tolist()))


SM90 = load_rule_set("sm_90")
LANES = list(range(32))


# ---------------------------------------------------------------------------
# Engine == reference, every builtin rule set (hypothesis)
# ---------------------------------------------------------------------------

@st.composite
def execution(draw, rules):
    """One random execution the rule set supports: kind, width, mask, and a conflict-prone address pattern."""
    kinds = [k for k in KIND_CODES if rules.supports(k)]
    kind = draw(st.sampled_from(kinds))
    w = rules.warp_size
    if rules.matrix is not None and kind in rules.matrix.kinds:
        nbytes = rules.matrix.row_bytes
        matrices = draw(st.sampled_from([m for m in (1, 2, 4) if m * rules.matrix.lanes <= w]))
    else:
        nbytes = draw(st.sampled_from([b for b in (1, 2, 4, 8, 16) if any(
            r.matches(kind, min(b, rules.split_bytes)) for r in rules.lane_groups)]))
        matrices = 0
    style = draw(st.sampled_from(["random", "strided", "paired", "broadcast", "swizzled"]))
    span = draw(st.sampled_from([64, 256, 1024, 8192]))
    if style == "random":
        lanes = draw(st.lists(st.integers(0, span // nbytes - 1), min_size=w, max_size=w))
        address = [x * nbytes for x in lanes]
    elif style == "strided":
        stride = draw(st.integers(0, 33)) * nbytes
        base = draw(st.integers(0, 64)) * nbytes
        address = [base + stride * lane for lane in range(w)]
    elif style == "paired":      # lanes n and n^x share an address, sometimes with one broken pair
        x = draw(st.sampled_from([1, 2, 3, 4]))
        lanes = draw(st.lists(st.integers(0, span // nbytes - 1), min_size=w, max_size=w))
        address = [lanes[min(n, n ^ x)] * nbytes for n in range(w)]
        if draw(st.booleans()):
            address[draw(st.integers(0, w - 1))] += nbytes
    elif style == "swizzled":    # lanes permuted (an XOR swizzle, or any permutation) inside rows
        base = draw(st.integers(0, 64)) * nbytes
        if draw(st.booleans()):
            x = draw(st.integers(0, w - 1))
            order = [lane ^ x for lane in range(w)]
        else:
            order = draw(st.permutations(range(w)))
        address = [base + nbytes * order[lane] for lane in range(w)]
    else:
        address = [draw(st.sampled_from([0, 128, 4 * nbytes]))] * w
    mask = draw(st.sampled_from(["all", "random", "even", "odd", "low", "none"]))
    if mask == "random":
        active = draw(st.lists(st.booleans(), min_size=w, max_size=w))
    else:
        active = [{"all": True, "even": n % 2 == 0, "odd": n % 2 == 1, "low": n < w // 4, "none": False}[mask]
                  for n in range(w)]
    if kind in ("ldmatrix", "stmatrix"):
        active = [True] * w        # .sync.aligned: every lane executes
    return kind, nbytes, matrices, [a if on else -1 for a, on in zip(address, active)]


@st.composite
def execution_with_op(draw, rules):
    """An execution as above carrying a random operation of its kind (its [atomic_ops] / [copy_ops] rule may
    apply: CAS served twice, POPC.INC merging, cp.async.cg placements and ZFILL's second serving)."""
    kind, nbytes, matrices, address = draw(execution(rules))
    return kind, nbytes, matrices, address, draw(st.sampled_from(("",) + OPS_OF_KIND.get(kind, ())))


@st.composite
def copy_with_sources(draw, rules):
    """A 16-byte cp.async.cg with per-lane global sources: lines and chunks drawn from a few lines (runs,
    pairs of lanes per line, rotations, repeats, a few chunks each read by several lanes), some lanes' sources
    unknown now and then; and the bytes each
    lane copies: none given, an ignore-src mask (16 or 0: every lane, none, some), or any src-size, a lane's
    unknown now and then."""
    _, _, _, address = draw(execution(rules).filter(lambda row: row[:2] == ("cp_async", 16)))
    style = draw(st.sampled_from(["run", "lines", "random", "repeated", "same"]))
    offset = draw(st.integers(0, 15)) * 16
    per_line = draw(st.sampled_from([1, 2, 4, 8]))
    if style == "run":
        sources = [offset + 16 * lane for lane in LANES]
    elif style == "lines":
        sources = [1024 * (lane // per_line) + offset % 128 + 16 * (lane % per_line) for lane in LANES]
    elif style == "random":
        sources = [16 * c for c in draw(st.lists(st.integers(0, 63), min_size=32, max_size=32))]
    elif style == "repeated":    # ldgsts_probe repeat_configs: 32 chunks into a permutation of 32 places, each
        order = draw(st.permutations(range(32)))          # lane reading its place's chunk but a few reading the
        address = [16 * place for place in order]         # chunk of another place of their row
        sources = list(address)
        for lane, place in draw(st.lists(st.tuples(st.integers(0, 31), st.integers(0, 7)), min_size=1, max_size=6)):
            sources[lane] = 16 * (order[lane] // 8 * 8 + place)
    else:
        sources = [offset] * 32
    if draw(st.integers(0, 7)) == 0:
        sources[draw(st.integers(0, 31))] = -1
    sizes = draw(st.sampled_from([None, "ignore_src", "src_size"]))
    if sizes is not None:
        mask = draw(st.sampled_from(["all", "none", "random", "low"]))
        reads = [{"all": True, "none": False, "low": lane < 8}.get(mask) for lane in LANES] if mask != "random" \
            else draw(st.lists(st.booleans(), min_size=32, max_size=32))
        sizes = [16 * r for r in reads] if sizes == "ignore_src" else \
            [4 * draw(st.integers(1, 4)) if r else 0 for r in reads]
        if draw(st.booleans()):                  # the emulator's: no source where the lane zero-fills
            sources = [s if n else -1 for s, n in zip(sources, sizes)]
        if draw(st.integers(0, 7)) == 0:
            sizes[draw(st.integers(0, 31))] = -1
    return "cp_async", 16, 0, address, draw(st.sampled_from(["bypass", "bypass_zfill", ""])), sources, sizes


def test_engine_matches_reference_for_copies_from_their_sources():
    """sm_90's ``source_passes = "lines"``: engine == reference with the sources, mixed with other accesses
    (which keep their rules) and repeated at bank-row shifts (the memo must not merge copies whose sources
    differ)."""
    rules = SM90

    @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(st.lists(st.one_of(copy_with_sources(rules), execution_with_op(rules)), min_size=1, max_size=10),
           st.lists(st.integers(0, 64), min_size=1, max_size=3))
    def check(rows, shifts):
        rows = [row[:3] + ([a if a == -1 else a + s * 128 for a in row[3]],) + row[4:] for s in shifts for row in rows]
        expected = [execution_cost(rules, *row) for row in rows]
        assert costs(rules, rows) == [(c.wavefronts, c.ideal_wavefronts, c.max_ways) for c in expected]

    check()


def test_engine_matches_reference_for_copies_some_lanes_of_which_zero_fill():
    """The fill pass (``fill_passes``) one copy at a time: engine == reference wherever lanes read or zero-fill
    (runs reading at each 16-byte position of their source lines counted apart)."""
    rules = SM90

    @settings(max_examples=150, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(copy_with_sources(rules))
    def check(row):
        expected = execution_cost(rules, *row)
        assert costs(rules, [row]) == [(expected.wavefronts, expected.ideal_wavefronts, expected.max_ways)]

    check()


def test_copies_are_counted_from_their_sources_where_every_lane_is_known():
    """The same 512 contiguous destinations: 4 from one aligned run, 16 from one line per pair of lanes
    (hgemm), 32 from one line per lane; a lane of unknown source (or no sources): the shared-address count."""
    run = [16 * lane for lane in LANES]
    pairs = [8192 * (lane // 2) + 16 * (lane % 2) for lane in LANES]
    lines = [1024 * lane for lane in LANES]
    unknown = lines[:31] + [-1]
    rows = [("cp_async", 16, 0, run, "bypass", sources) for sources in (run, pairs, lines, unknown)]
    assert [w for w, _, _ in costs(SM90, rows)] == [4, 16, 32, 4]
    assert [w for w, _, _ in costs(SM90, [row[:5] for row in rows])] == [4, 4, 4, 4]
    # sm_80 names no source rule: the sources change nothing there
    sm80 = load_rule_set("sm_80")
    assert costs(sm80, rows) == costs(sm80, [row[:5] for row in rows])


def test_copies_some_lanes_of_which_zero_fill_add_the_fill_pass():
    """The ldgsts_ignore_src pages at their base pattern (512 contiguous bytes from one aligned run): every lane
    reading 4/4; none 4/4 (the fill pass alone); even lanes 8/6, lanes 0-15 6/6, all but lane 0 9/8 (the reading
    lanes' count plus one run per quarter-warp); .ZFILL 8/8 whatever its src-sizes.  A zero-filling lane needs
    no source; a lane of unknown src-size and source (or reading from an unknown source): the shared-address
    count."""
    run = [16 * lane for lane in LANES]
    masks = {"all": [16] * 32, "none": [0] * 32, "even": [16 * (lane % 2 == 0) for lane in LANES],
             "low16": [16 * (lane < 16) for lane in LANES], "notlane0": [16 * (lane > 0) for lane in LANES]}
    rows = [("cp_async", 16, 0, run, "bypass", [s if n else -1 for s, n in zip(run, sizes)], sizes)
            for sizes in masks.values()]
    assert [(w, i) for w, i, _ in costs(SM90, rows)] == [(4, 4), (4, 4), (8, 6), (6, 6), (9, 8)]
    zfill = [("cp_async", 16, 0, run, "bypass_zfill", run, sizes) for sizes in ([16] * 32, [8] * 32, None)]
    assert [(w, i) for w, i, _ in costs(SM90, zfill)] == [(8, 8), (8, 8), (8, 8)]
    # hgemm's sources (a line per pair of lanes): in each quarter-warp a sector read in its first half only
    # beside one read in its second half only share a fill wavefront; two read in their first halves do not
    # (tests/test_ldgsts_zfill_sizes_hw.py)
    pairs = [8192 * (lane // 2) + 16 * (lane % 2) for lane in LANES]
    halves = [("cp_async", 16, 0, run, op, pairs, quarter * 4) for op in ("bypass", "bypass_zfill")
              for quarter in ([16, 0, 0, 16] + [16] * 4, [16, 0, 16, 0] + [16] * 4, [16, 0, 0, 16] * 2)]
    assert [(w, i) for w, i, _ in costs(SM90, halves)] == [(28, 7), (32, 7), (24, 6)] * 2
    assert [(c.wavefronts, c.ideal_wavefronts) for c in (execution_cost(SM90, *row) for row in halves)] == \
        [(28, 7), (32, 7), (24, 6)] * 2
    # what decides is the 16-byte position of the source in its line, not its sector half: lane pairs 0 and 1
    # of each quarter-warp reading 16 bytes on (chunks 1 and 2), pairs 1 and 3 with their destinations swapped;
    # lanes reading chunks 2 and 0 (both first halves) share a fill wavefront, four reading chunk 1 do not
    # (tests/test_ldgsts_zfill_halves_hw.py, mixed__source4 and mixed__source3)
    shifted = [8192 * (lane // 2) + 16 * (lane % 2 + (lane // 2 % 4 < 2)) for lane in LANES]
    swapped = [16 * (lane - lane % 2 + (lane % 2 ^ (lane // 2 % 4 in (1, 3)))) for lane in LANES]
    positions = [("cp_async", 16, 0, swapped, "bypass_zfill", shifted, quarter * 4)
                 for quarter in ([0, 16, 0, 16, 16, 0, 16, 0], [16, 0, 16, 0, 0, 16, 0, 16])]
    assert [(w, i) for w, i, _ in costs(SM90, positions)] == [(24, 6), (32, 6)]
    assert [(c.wavefronts, c.ideal_wavefronts) for c in (execution_cost(SM90, *row) for row in positions)] == \
        [(24, 6), (32, 6)]
    # a quarter-warp over two bank rows (rows2_row1_three_p1 of tests/test_ldgsts_zfill_rows_hw.py): lanes 4-6
    # read at line position 1 and write row 1 at units lanes 0-2 write in row 0; lane 0 waits with the three
    # others at position 0 and lane 4 at its unit: a fill pass of 5 a quarter-warp (6 where lane 7, zero-filling
    # in the first copy, reads 8 bytes at position 0 in the second), where the most lanes at one position give 4
    # (5)
    quarter = [(0, 0, 0, 16), (0, 0, 2, 16), (0, 0, 4, 16), (0, 0, 6, 16), (1, 1, 0, 16), (1, 1, 2, 16),
               (1, 1, 4, 16), (0, 1, 1, 0)]
    own_lines = [8192 * lane + 16 * quarter[lane % 8][0] for lane in LANES]
    two_rows = [128 * (4 * (lane // 8) + quarter[lane % 8][1]) + 16 * quarter[lane % 8][2] for lane in LANES]
    three_p1 = [("cp_async", 16, 0, two_rows, "bypass_zfill", own_lines, sizes)
                for sizes in ([quarter[lane % 8][3] for lane in LANES], [8] * 32)]
    assert [(w, i) for w, i, _ in costs(SM90, three_p1)] == [(48, 8), (56, 8)]
    assert [(c.wavefronts, c.ideal_wavefronts) for c in (execution_cost(SM90, *row) for row in three_p1)] == \
        [(48, 8), (56, 8)]
    # three lanes writing one destination (tests/test_ldgsts_zfill_dups_hw.py, g3): each waits with the other two
    # in the fill pass, zero-filling or not; the lowest decides whether the destination is read into (one more)
    one_place = [0, 0, 0] + [-1] * 29
    shared = [("cp_async", 16, 0, one_place, "bypass_zfill", [8192 * lane for lane in LANES], sizes + [0] * 29)
              for sizes in ([0, 0, 0], [16, 0, 0], [0, 16, 16], [4, 16, 0])]
    assert [(w, i) for w, i, _ in costs(SM90, shared)] == [(3, 1), (4, 2), (3, 1), (4, 2)]
    assert [(c.wavefronts, c.ideal_wavefronts) for c in (execution_cost(SM90, *row) for row in shared)] == \
        [(3, 1), (4, 2), (3, 1), (4, 2)]
    unknown = [("cp_async", 16, 0, run, "bypass", rows[2][5], masks["even"][:31] + [-1]),
               ("cp_async", 16, 0, run, "bypass", [-1] + run[1:], masks["even"])]
    assert costs(SM90, unknown) == costs(SM90, [row[:4] + ("bypass",) for row in unknown])


@pytest.mark.parametrize("name", builtin_names())
def test_engine_matches_reference(name):
    rules = load_rule_set(name)

    @settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(execution_with_op(rules), min_size=1, max_size=12))
    def check(rows):
        expected = [execution_cost(rules, *row) for row in rows]
        assert costs(rules, rows) == [(c.wavefronts, c.ideal_wavefronts, c.max_ways) for c in expected]

    check()


@pytest.mark.parametrize("name", ["sm_90", "sm_50", "gcn"])
def test_engine_matches_reference_per_operation(name):
    rules = load_rule_set(name)

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(execution_with_op(rules), min_size=1, max_size=12))
    def check(rows):
        expected = [execution_cost(rules, *row) for row in rows]
        assert costs(rules, rows) == [(c.wavefronts, c.ideal_wavefronts, c.max_ways) for c in expected]

    check()


def test_chunk_boundaries_do_not_change_results(monkeypatch):
    rng = np.random.default_rng(7)
    rows = [("ld", b, 0, list(rng.integers(0, 64, 32) * b)) for b in (4, 8, 16) for _ in range(40)]
    whole = costs(SM90, rows)
    monkeypatch.setattr(engine, "CHUNK_KEYS", 64)
    assert costs(SM90, rows) == whole
    assert costs(load_rule_set("sm_1x"), rows) == [
        tuple(execution_cost(load_rule_set("sm_1x"), *row).__dict__.values()) for row in rows]


def test_addresses_beyond_31_bits_use_wide_keys():
    base = 3 << 40
    rows = [("ld", 4, 0, [base + 128 * lane for lane in LANES]), ("ld", 4, 0, [base + 4 * lane for lane in LANES]),
            ("ld", 4, 0, [base, base + (1 << 35)] * 16)]
    assert costs(SM90, rows) == [(32, 1, 32), (1, 1, 1), (2, 1, 2)]


# ---------------------------------------------------------------------------
# Hand-checked cases of the rules the hardware data do not cover
# ---------------------------------------------------------------------------

def test_kepler_row_rule_and_bank_modes():
    four, eight = load_rule_set("sm_3x"), load_rule_set("sm_3x_8byte")
    words_i_and_i_plus_32 = [4 * lane if lane < 16 else 4 * (lane + 16) for lane in LANES]   # words 0-15, 32-47
    assert costs(four, [("ld", 4, 0, words_i_and_i_plus_32)]) == [(1, 1, 1)]
    assert costs(four, [("ld", 4, 0, [0, 256] * 16)]) == [(2, 1, 2)]       # words 0 and 64: two bank rows

    def stride(words):
        return [("ld", 4, 0, [4 * words * lane for lane in LANES])]
    # 8-byte mode: 32-bit words 2k and 2k+1 share a bank word (multicast), so even strides halve and odd
    # strides meet 8-byte words of two different 256-B rows in one bank.
    assert (costs(four, stride(2)), costs(eight, stride(2))) == ([(1, 1, 1)], [(1, 1, 1)])
    assert (costs(four, stride(3)), costs(eight, stride(3))) == ([(1, 1, 1)], [(2, 1, 2)])
    assert (costs(four, stride(6)), costs(eight, stride(6))) == ([(2, 1, 2)], [(1, 1, 1)])
    assert costs(four, [("ld", 8, 0, [8 * lane for lane in LANES])]) == [(1, 1, 1)]     # 256 B in one pass
    assert costs(four, [("ld", 16, 0, [16 * lane for lane in LANES])]) == [(2, 2, 1)]   # half-warp choice


def test_fermi_128_bit_ways_follow_the_guide():
    fermi = load_rule_set("sm_2x")
    contiguous = [16 * lane for lane in LANES]
    assert costs(fermi, [("ld", 16, 0, contiguous)]) == [(8, 4, 2)]     # "majority ... 2-way"
    two_per_bank = [32 * lane for lane in LANES]                         # 2 lanes per bank in each quarter
    assert costs(fermi, [("ld", 16, 0, two_per_bank)]) == [(12, 4, 3)]  # ways = 1 + 2
    assert costs(fermi, [("ld", 8, 0, [8 * lane for lane in LANES])]) == [(2, 2, 1)]


def test_amd_swizzled_b128_reads_and_contiguous_writes():
    cdna3 = load_rule_set("cdna3")
    # Each 4-lane block takes 16-B chunks 0-3 of its own 128-B row, or chunks 4-7 when lane bit 4 is set:
    # conflict-free for the swizzled read phases {0-3, 20-23}, ..., 2-way for contiguous write phases {0-7}, ...
    address = [128 * (lane // 4) + 16 * (lane % 4 + 4 * (lane >> 4 & 1)) for lane in range(64)]
    assert costs(cdna3, [("ld", 16, 0, address), ("st", 16, 0, address)]) == [(8, 8, 1), (16, 8, 2)]
    assert costs(load_rule_set("rdna4"), [("ld", 16, 0, address[:32])]) == [(8, 4, 2)]   # contiguous reads


def test_store_merging_off_counts_same_address_writes(tmp_path):
    gpu = tmp_path / "intel_like.toml"
    gpu.write_text('alias_of = "sm_90"\nname = "intel_like"\ntitle = "test"\nevidence = "unverified"\n'
                   "merge_stores = false\n")
    rules = load_rule_set(str(gpu))
    same = [0] * 32
    assert costs(rules, [("st", 4, 0, same), ("ld", 4, 0, same), ("atom", 4, 0, [0, 4] * 16)]) == [
        (32, 1, 32), (1, 1, 1), (16, 1, 16)]


#: Executions from the committed H100 Source pages (tests/data/hw/source_sm90) whose ideal is not the number of
#: active lane groups: (kind, bytes, matrices, addresses, op) -> (wavefronts, ideal) under sm_90.
_HALVES = [k for k in range(32) if k % 16 >= 14]                            # lanes 14, 15, 30, 31
NSIGHT_IDEAL_CASES = [
    # atom64_add_used pc 0x320: LDS.64 at a 256-byte stride, 2 lanes in each half-warp: 4 wavefronts, ideal 1
    (("ld", 8, 0, [256 * lane if lane in _HALVES else -1 for lane in range(32)]), (4, 1)),
    # ldgsts_multistage_matmul pc 0x610: LDS.128, lanes 8q..8q+7 on row q (paired, yet banks 0-3 of 2 rows in
    # each paired half): 4 wavefronts, ideal 4
    (("ld", 16, 0, [128 * (lane // 8) for lane in range(32)]), (4, 4)),
    # the paired LDS.128 that does not conflict (vec_unrolled_dot): 2 wavefronts, ideal 2
    (("ld", 16, 0, [0] * 32), (2, 2)),
    # atom64_*_used ATOMS.CAST.SPIN.64 at stride 32: 18 lanes still spinning, in both halves: 4 and 4 ...
    (("atom", 8, 0, [256 * lane if lane % 16 >= 7 else -1 for lane in range(32)], "cas_spin"), (4, 4)),
    # ... 14 lanes, in both halves: 4 wavefronts, ideal 2 (Nsight: 2 x ceil(14 x 8 / 128))
    (("atom", 8, 0, [256 * lane if lane % 16 >= 9 else -1 for lane in range(32)], "cas_spin"), (4, 2)),
]


@pytest.mark.parametrize("row, expected", NSIGHT_IDEAL_CASES)
def test_sm90_ideal_is_the_wavefronts_the_active_bytes_fill(row, expected):
    rules = load_rule_set("sm_90")
    (wavefronts, ideal, _), = costs(rules, [row])
    reference = execution_cost(rules, row[0], row[1], row[2], row[3], *row[4:])
    assert (wavefronts, ideal) == (reference.wavefronts, reference.ideal_wavefronts) == expected
    assert load_rule_set("sm_80").ideal == "groups"      # inferred rule sets keep one ideal per active group


def test_matrix_lanes_beyond_the_matrices_are_ignored():
    rows = [("ldmatrix", 16, 1, [16 * r for r in range(8)] + [128 * r for r in range(24)]),
            ("ldmatrix", 16, 2, [128 * r for r in range(16)] + [0] * 16)]
    assert costs(SM90, rows) == [(1, 1, 1), (16, 2, 8)]


# ---------------------------------------------------------------------------
# Tables and errors
# ---------------------------------------------------------------------------

def test_analyze_table_schema_order_and_columns():
    rows = [("st", 4, 0, [128 * lane for lane in LANES]), ("ld", 16, 0, [0] * 8),
            ("ld", 4, 0, [4 * lane for lane in LANES])]
    acc = accesses_of(rows)
    table = analyze(acc, SM90)
    assert table.schema == EXECUTIONS
    assert table.column("execution").to_pylist() == acc.execution.tolist()
    assert table.column("kind").to_pylist() == ["st", "ld", "ld"]
    assert table.column("active_lanes").to_pylist() == [32, 8, 32]
    assert table.column("wavefronts").to_pylist() == [32, 1, 1]
    assert table.column("ideal_wavefronts").to_pylist() == [1, 1, 1]
    assert table.column("excess_wavefronts").to_pylist() == [31, 0, 0]
    assert table.column("max_ways").to_pylist() == [32, 1, 1]
    assert set(table.column("device").to_pylist()) == {"sm_90"}


def test_analyze_accepts_the_long_accesses_table():
    rows = [("ld", 8, 0, [8 * lane for lane in LANES]), ("ldmatrix", 16, 4, [128 * lane for lane in LANES]),
            ("cp_async", 16, 0, [16 * lane for lane in range(8)])]
    acc = accesses_of(rows)
    assert analyze(acc.to_table(), SM90).equals(analyze(acc, SM90))


def test_empty_input():
    table = analyze(WarpAccesses.empty("k"), SM90)
    assert table.num_rows == 0 and table.schema == EXECUTIONS
    assert summarize(table).num_rows == 0
    assert combine([]).schema == INSTRUCTION_RESULTS


def test_warp_size_mismatch_is_a_clear_error():
    with pytest.raises(InputError, match="64 lanes per warp but rule set 'sm_90' expects 32"):
        analyze(accesses_of([("ld", 4, 0, [0] * 64)], warp_size=64), SM90)
    long = accesses_of([("ld", 4, 0, list(range(0, 256, 4)))], warp_size=64).to_table()
    with pytest.raises(InputError, match="32-lane warps"):
        analyze(long, SM90)


@pytest.mark.parametrize("row, message", [
    (("ld", 12, 0, [0]), "12-byte ld accesses are not supported"),
    (("ldmatrix", 16, 1, [0] * 32), "no rule for ldmatrix"),
    (("ld", 4, 0, [-8]), "negative address"),
])
def test_bad_executions_name_the_execution(row, message):
    with pytest.raises(InputError, match=message):
        analyze(accesses_of([("ld", 4, 0, [0]), row]), load_rule_set("sm_70"))


def test_ldmatrix_with_too_many_matrices():
    with pytest.raises(InputError, match="at most 4 matrices"):
        analyze(accesses_of([("ldmatrix", 16, 8, [0] * 32)]), SM90)


def test_summarize_groups_scales_and_combines():
    rows = ([("ld", 4, 0, [128 * lane for lane in LANES])] * 3 + [("ld", 4, 0, [4 * lane for lane in LANES])] * 2)
    acc = accesses_of(rows)
    acc.instruction[:] = [5, 5, 5, 9, 9]
    executions = analyze(acc, SM90)
    results = summarize(executions, scale=10)
    assert results.schema == INSTRUCTION_RESULTS
    assert results.to_pylist() == [
        dict(device="sm_90", kernel="k", instruction=5, kind="ld", bytes=4, executions=30, wavefronts=960,
             ideal_wavefronts=30, excess_wavefronts=930, max_ways=32),
        dict(device="sm_90", kernel="k", instruction=9, kind="ld", bytes=4, executions=20, wavefronts=20,
             ideal_wavefronts=20, excess_wavefronts=0, max_ways=1)]
    parts = [summarize(executions.slice(0, 2), 10), summarize(executions.slice(2), 10)]
    assert combine(parts).equals(results)
    with pytest.raises(ValueError):
        summarize(executions, scale=0)


@pytest.mark.parametrize("name", ["sm_90", "sm_1x", "cdna4"])
def test_instruction_results_are_the_summary_of_the_executions(name):
    """``instruction_results`` adds the counts up per (instruction, kind, bytes) itself: the very table
    ``summarize(analyze(...))`` gives, for executions of a few instructions in any order and any scale."""
    rules = load_rule_set(name)

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(execution_with_op(rules), min_size=1, max_size=12), st.data(), st.integers(1, 1 << 40))
    def check(rows, data, scale):
        acc = accesses_of(rows, rules.warp_size)
        acc.instruction[:] = data.draw(st.lists(st.integers(0, 3), min_size=len(rows), max_size=len(rows)))
        assert instruction_results(acc, rules, scale).equals(summarize(analyze(acc, rules), scale))
        table = acc.to_table()
        assert instruction_results(table, rules, scale).equals(summarize(analyze(table, rules), scale))

    check()
    with pytest.raises(ValueError):
        instruction_results(accesses_of([("ld", 4, 0, LANES)], rules.warp_size), rules, 0)


def test_combine_keeps_devices_apart():
    acc = accesses_of([("ld", 4, 0, [8 * lane for lane in LANES])])
    a, b = summarize(analyze(acc, SM90)), summarize(analyze(acc, load_rule_set("sm_2x")))
    merged = combine([a, b, a])
    assert merged.column("device").to_pylist() == ["sm_2x", "sm_90"]
    assert merged.column("executions").to_pylist() == [1, 2]
    assert merged.column("wavefronts").to_pylist() == [2, 4]


def test_result_tables_feed_pandas_and_polars():
    table = summarize(analyze(accesses_of([("ld", 4, 0, [4 * lane for lane in LANES])]), SM90))
    assert table.to_pandas().loc[0, "wavefronts"] == 1
    polars = pytest.importorskip("polars")
    assert polars.from_arrow(table)["executions"].to_list() == [1]


# ---------------------------------------------------------------------------
# Shift invariance and the pattern memo
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", builtin_names())
def test_costs_are_invariant_under_a_shift_by_whole_bank_rows(name):
    """docs/rules.md "Shift invariance": the property the memo relies on, checked on the reference."""
    rules = load_rule_set(name)

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(execution_with_op(rules), st.integers(1, 1 << 20))
    def check(row, rows_up):
        kind, nbytes, matrices, address, op = row
        shifted = [a if a == -1 else a + rows_up * rules.row_bytes for a in address]
        assert execution_cost(rules, kind, nbytes, matrices, shifted, op) == execution_cost(rules, *row)

    check()


@pytest.mark.parametrize("name", ["sm_90", "sm_1x", "sm_3x", "cdna4", "terascale"])
def test_memo_gives_the_results_of_the_full_rules(name, monkeypatch):
    rules = load_rule_set(name)
    monkeypatch.setattr(engine, "MEMO_MAX_UNIQUE", 1.0)        # always take the memo path here

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(execution_with_op(rules), min_size=1, max_size=6),
           st.lists(st.integers(0, 1 << 16), min_size=1, max_size=24), st.integers(0, 5))
    def check(rows, shifts, row_offset):
        # Each pattern repeated at several bank-row shifts, plus shifts off the row grid (not the same pattern).
        repeated = [(kind, b, m, [a if a == -1 else a + s * rules.row_bytes + row_offset * 4 * (s % 2) * b
                                  for a in address], op)
                    for s in shifts for (kind, b, m, address, op) in rows]
        acc = accesses_of(repeated, rules.warp_size)
        memo = count_wavefronts(acc, rules, memoise=True)
        full = count_wavefronts(acc, rules, memoise=False)
        assert all(np.array_equal(a, b) for a, b in zip(memo, full))
        assert analyze(acc, rules, memoise=True).equals(analyze(acc, rules, memoise=False))

    check()


def test_memo_gives_the_full_results_for_addresses_past_two_to_the_31(monkeypatch):
    """Addresses below 2**31 are hashed and checked in 32 bits, others in 64: both give the full rules' results."""
    monkeypatch.setattr(engine, "MEMO_MAX_UNIQUE", 1.0)
    rng = np.random.default_rng(6)
    for high in (0, 1 << 31, 1 << 40):
        rows = [("ld", 4, 0, [high + int(base) + int(step) * lane if keep else -1
                              for lane, keep in zip(LANES, rng.random(32) < 0.8)])
                for base in rng.integers(0, 1 << 12, 40) * 128 for step in (4, 8, 132)]
        acc = accesses_of(rows)
        memo, full = count_wavefronts(acc, SM90, memoise=True), count_wavefronts(acc, SM90, memoise=False)
        assert all(np.array_equal(a, b) for a, b in zip(memo, full))


def test_active_lanes_are_counted_per_row_as_count_nonzero():
    rng = np.random.default_rng(7)
    for lanes in (1, 8, 12, 16, 32, 64, 248, 256):
        mask = rng.random((200, lanes)) < rng.random((200, 1))
        assert np.array_equal(engine._row_counts(mask), np.count_nonzero(mask, axis=1))
        assert np.array_equal(engine._row_counts(mask[:, ::2]), np.count_nonzero(mask[:, ::2], axis=1))
        assert np.array_equal(engine._row_counts(np.ones((3, lanes), bool)), [lanes] * 3)


def test_memo_survives_hash_collisions(monkeypatch):
    """With every lane multiplier 0 all patterns of a class hash alike: the exact check must split them."""
    monkeypatch.setattr(engine, "_LANE_MULTIPLIERS", np.zeros(64, dtype=np.uint64))
    monkeypatch.setattr(engine, "MEMO_CHUNK_ROWS", 3)
    monkeypatch.setattr(engine, "MEMO_MAX_UNIQUE", 1.0)
    rows = [("ld", 4, 0, [128 * lane for lane in LANES]), ("ld", 4, 0, [4 * lane for lane in LANES]),
            ("ld", 4, 0, [4096 + 128 * lane for lane in LANES]), ("ld", 4, 0, [-1] * 31 + [0]),
            ("st", 4, 0, [0] * 32), ("ld", 4, 0, [0] * 32)]
    assert costs(SM90, rows) == [(32, 1, 32), (1, 1, 1), (32, 1, 32), (1, 1, 1), (1, 1, 1), (1, 1, 1)]


def test_the_reference_reads_the_rule_data_not_the_engines_rule_methods():
    """The reference must not share the engine's grouping code (a bug there would pass both): in
    traceconf/reference.py the rule set is only ever read as ``rules.data``, and nothing of traceconf
    but the RuleSet type is imported."""
    import ast
    from pathlib import Path

    import traceconf.reference as reference

    tree = ast.parse(Path(reference.__file__).read_text(encoding="utf-8"))
    used = {node.attr for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "rules"}
    assert used == {"data"}
    imported = {(node.module, alias.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for alias in node.names if (node.module or "").startswith("traceconf")}
    assert imported == {("traceconf.rules", "RuleSet")}
