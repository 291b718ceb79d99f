"""The single-warp shared-memory patterns measured into tests/data/hw/sm90_patterns_extra.csv.

Each pattern is one instruction kind (a kernel of ``patterns.cu``) and 32 per-lane
byte offsets (-1 = inactive lane). Kind codes 0-18 are those of
``../shared/hw/README.md``; 19-26 are new here (see docs/hardware.md). None of
these patterns is in ``../shared/hw/sm90_patterns.csv``; each probes a rule of
``../shared/reference/bank_rules.md`` §4.3 where that data set is silent.
"""

from __future__ import annotations

from dataclasses import dataclass

LANES = range(32)


@dataclass(frozen=True)
class Kind:
    code: int
    kernel: str        # extern "C" kernel in patterns.cu
    ptx: str           # the instruction, as in the README's kind table
    counter: str       # executed-instruction column used to normalise ("" = none measured)


KINDS = {k.code: k for k in (
    Kind(0, "p_lds8", "ld.shared.u8", "inst_ld"),
    Kind(1, "p_lds16", "ld.shared.u16", "inst_ld"),
    Kind(2, "p_lds32", "ld.shared.u32", "inst_ld"),
    Kind(3, "p_lds64", "ld.shared.v2.u32", "inst_ld"),
    Kind(4, "p_lds128", "ld.shared.v4.u32", "inst_ld"),
    Kind(5, "p_sts32", "st.shared.u32", "inst_st"),
    Kind(7, "p_sts128", "st.shared.v4.u32", "inst_st"),
    Kind(9, "p_ldsm2", "ldmatrix.sync.aligned.m8n8.x2.shared.b16", "inst_ldsm"),
    Kind(10, "p_ldsm4", "ldmatrix.sync.aligned.m8n8.x4.shared.b16", "inst_ldsm"),
    Kind(16, "p_cp4", "cp.async.ca.shared.global, 4 B", "inst_ldgsts"),
    Kind(17, "p_cp8", "cp.async.ca.shared.global, 8 B", "inst_ldgsts"),
    Kind(19, "p_stsm2", "stmatrix.sync.aligned.m8n8.x2.shared.b16", ""),
    Kind(20, "p_ldsm2t", "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16", "inst_ldsm"),
    Kind(21, "p_cp16ca", "cp.async.ca.shared.global, 16 B (LDGSTS.E.128, not BYPASS)", "inst_ldgsts"),
    Kind(22, "p_atom_add", "atom.shared.add.u32 (result used)", "inst_atom"),
    Kind(23, "p_red_add", "red.shared.add.u32", "inst_atom"),
    Kind(24, "p_sts16", "st.shared.u16", "inst_st"),
    Kind(25, "p_sts8", "st.shared.u8", "inst_st"),
    Kind(26, "p_atom_cas", "atom.shared.cas.b32", "inst_atom"),
)}


def _offsets(rule) -> list[int]:
    return [int(rule(lane)) for lane in LANES]


def _sw128(row: int, chunk: int) -> int:
    """Byte offset of 16-byte chunk `chunk` of 128-byte row `row` under the SW128 swizzle."""
    return row * 128 + ((chunk ^ row) & 7) * 16


#: (case, kind code, offsets, what it probes)
PATTERNS: list[tuple[str, int, list[int], str]] = [
    # LDS.64 / LDS.128 pairing with partial activity
    ("lds64_pair1_lo24active", 3, _offsets(lambda l: 8 * (l // 2) if l < 24 else -1),
     "Tn==Tn^1 with lanes 24-31 inactive: pairing holds across a partly active half"),
    ("lds64_pair1_onelane_off", 3, _offsets(lambda l: -1 if l == 5 else 8 * (l // 2)),
     "Tn==Tn^1 with one lane of one pair inactive (its partner alone)"),
    ("lds64_pair1_conf_partial", 3, _offsets(lambda l: 8 * (l // 2) if l < 16 else (128 if l < 18 else -1)),
     "paired, lanes 16/17 read word 32 (bank 0, row 1) against lanes 0/1: 2-way inside the one paired phase"),
    ("lds128_pair2_lo16active", 4, _offsets(lambda l: 16 * ((l // 4) * 2 + l % 2) if l < 16 else -1),
     "Tn==Tn^2, lanes 16-31 inactive: one 16-lane phase if paired, two quarters if not"),
    ("lds128_pair1_lo8active", 4, _offsets(lambda l: 16 * (l // 2) if l < 8 else -1),
     "Tn==Tn^1, only lanes 0-7 active"),
    # sub-word loads and stores
    ("lds16_samebank_pairs", 1, _offsets(lambda l: 128 * (l // 2) + 2 * (l % 2)),
     "LDS.U16: lanes 2k, 2k+1 read the two halves of one word; 16 words in bank 0"),
    ("lds16_stride66", 1, _offsets(lambda l: 66 * l), "LDS.U16 at a 66-byte stride (half-word granular banks)"),
    ("lds8_stride33", 0, _offsets(lambda l: 33 * l), "LDS.U8 at a 33-byte stride"),
    ("sts16_samebank_pairs", 24, _offsets(lambda l: 128 * (l // 2) + 2 * (l % 2)),
     "STS.U16 into both halves of 16 words of bank 0: are sub-word stores to one word merged?"),
    ("sts16_lin", 24, _offsets(lambda l: 2 * l), "STS.U16 to 64 consecutive bytes"),
    ("sts8_lin", 25, _offsets(lambda l: l), "STS.U8 to 32 consecutive bytes (8 words)"),
    ("sts8_bankconf", 25, _offsets(lambda l: 128 * l + (l % 4)),
     "STS.U8, each lane a different byte of bank 0 in a different row: 32-way"),
    # 128-bit stores and loads
    ("sts128_quarter_4way", 7, _offsets(lambda l: 16 * (l % 2) + 128 * ((l % 8) // 2)),
     "STS.128, each quarter writes chunks 0-1 of 4 rows: 4-way per quarter"),
    ("lds128_sw128_column", 4, _offsets(lambda l: _sw128(l % 8, l // 8)),
     "LDS.128, quarter q reads chunk q of 8 SW128-swizzled 128-B rows: conflict-free"),
    ("lds32_two_lanes_samebank", 2, _offsets(lambda l: {0: 0, 31: 128}.get(l, -1)),
     "LDS.32, only lanes 0 and 31 active, same bank, different rows"),
    ("sts32_two_lanes_samebank", 5, _offsets(lambda l: {0: 0, 31: 128}.get(l, -1)),
     "STS.32, only lanes 0 and 31 active, same bank, different rows"),
    # ldmatrix / stmatrix .x2 and swizzled .x4
    ("ldsm2_s64", 9, _offsets(lambda l: 64 * (l % 16)), "ldmatrix.x2, rows 64 B apart: 4 rows per bank group"),
    ("ldsm2t_s64", 20, _offsets(lambda l: 64 * (l % 16)), "ldmatrix.x2.trans, rows 64 B apart"),
    ("ldsm2t_lin", 20, _offsets(lambda l: 16 * (l % 16)), "ldmatrix.x2.trans, contiguous rows"),
    ("ldsm4_sw128", 10, _offsets(lambda l: _sw128(l % 8, l // 8)),
     "ldmatrix.x4, matrix j = chunk j of 8 SW128-swizzled rows: conflict-free"),
    ("stsm2_lin", 19, _offsets(lambda l: 16 * (l % 16)), "stmatrix.x2, contiguous rows"),
    ("stsm2_s64", 19, _offsets(lambda l: 64 * (l % 16)), "stmatrix.x2, rows 64 B apart"),
    # cp.async.ca
    ("cp8_4way", 17, _offsets(lambda l: 8 * (l % 4) + 128 * ((l // 4) % 4)),
     "cp.async.ca 8 B, each half-warp writes words 0-7 of 4 rows: 4-way"),
    ("cp4_2rows", 16, _offsets(lambda l: 4 * (l % 16) + 128 * (l // 16)),
     "cp.async.ca 4 B, 16 banks in each of 2 rows: 2-way"),
    ("cp16ca_lin", 21, _offsets(lambda l: 16 * l), "cp.async.ca 16 B (not .cg), contiguous destinations"),
    ("cp16ca_stride8", 21, _offsets(lambda l: 128 * l), "cp.async.ca 16 B, destinations 128 B apart"),
    # shared atomics: which counters see ATOMS?
    ("atom_add_lin", 22, _offsets(lambda l: 4 * l), "atom.shared.add, 32 banks"),
    ("atom_add_same", 22, _offsets(lambda l: 0), "atom.shared.add, every lane on one word"),
    ("atom_add_2way", 22, _offsets(lambda l: 4 * (l % 16) + 128 * (l // 16)), "atom.shared.add, 2 rows x 16 banks"),
    ("atom_add_stride32w", 22, _offsets(lambda l: 128 * l), "atom.shared.add, one bank, 32 words"),
    ("red_add_lin", 23, _offsets(lambda l: 4 * l), "red.shared.add, 32 banks"),
    ("red_add_stride32w", 23, _offsets(lambda l: 128 * l), "red.shared.add, one bank, 32 words"),
    ("atom_cas_lin", 26, _offsets(lambda l: 4 * l), "atom.shared.cas, 32 banks"),
]
