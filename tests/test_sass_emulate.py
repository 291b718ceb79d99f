"""SASS semantics, one instruction family at a time: the value a sequence computes is stored with
``STS [Rx]`` and read back as the recorded shared address of every lane (sm_75: no reserved window)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceconf.emulate import Launch
from traceconf.emulate.launch import resolve_launch
from traceconf.errors import InputError
from traceconf.sass.emulate import emulate_sass
from traceconf.sass.listing import parse_text

MASK = 0xFFFF_FFFF


def listing(body: list[str], arch: str = "sm_75", kernel: str = "k") -> str:
    lines = [f"\tcode for {arch}", f"\t\tFunction : {kernel}"]
    for index, text in enumerate(body + ["EXIT ;"]):
        text = text if text.rstrip().endswith(";") else text + " ;"
        lines.append(f"        /*{index * 16:04x}*/                   {text}")
    return "\n".join(lines) + "\n"


def run(body: list[str], block=(32, 1, 1), grid=(1, 1, 1), params=None, arch="sm_75"):
    module = parse_text(listing(body, arch), "t.sass")
    return emulate_sass(module, "k", resolve_launch(Launch(block=block, grid=grid, params=params or {}),
                                                    module.kernel("k")))


def stored(body: list[str], register: str = "R2", **kwargs) -> np.ndarray:
    """The per-lane value of ``register`` after ``body`` (as the address of a STS)."""
    result = run(body + [f"STS [{register}], RZ"], **kwargs)
    assert not result.unresolved, result.unresolved
    return result.accesses.address[0]


TID = "S2R R0, SR_TID.X"
LANES = np.arange(32)


def test_shf_right_high_shifts_the_high_word_whatever_the_low_word_holds():
    """SHF.R.U32.HI (the high word shifted alone): bits 32.. of (hi:lo) >> s, an all-ones low word included,
    per-lane amounts, and an amount past 32 taken as 32 (nothing left)."""
    hi_lo = [TID, "SHF.L.U32 R4, R0, 0x10, RZ", "IADD3 R5, RZ, -0x1, RZ"]
    assert (stored(hi_lo + ["SHF.R.U32.HI R2, R5, 0x10, R4"]) == LANES).all()
    assert (stored(hi_lo + ["SHF.R.U32.HI R2, R5, R0, R4"]) == (LANES << 16) >> LANES).all()
    assert (stored(hi_lo + ["SHF.R.U32.HI R2, R5, 0x28, R4"]) == 0).all()
    assert (stored(hi_lo + ["SHF.R.W.U32.HI R2, R5, 0x24, R4"]) == (LANES << 16) >> 4).all()     # .W: mod 32


def test_sels_by_one_predicate_each_choose_as_it_says():
    """SELs by one predicate array (a swap: its mask made once, then met again) each take their first source
    where it holds and their second elsewhere, negated too."""
    setup = [TID, "LOP3.LUT R3, R0, 0x5, RZ, 0xc0, !PT", "ISETP.NE.AND P0, PT, R3, RZ, PT", "IADD3 R4, R0, 0x40, RZ"]
    holds = (LANES & 5) != 0
    swap = setup + ["SEL R5, R0, R4, P0", "SEL R2, R4, R0, P0", "SEL R6, R4, R0, !P0"]
    assert (stored(swap, "R5") == np.where(holds, LANES, LANES + 0x40)).all()
    assert (stored(swap, "R2") == np.where(holds, LANES + 0x40, LANES)).all()
    assert (stored(swap, "R6") == np.where(holds, LANES, LANES + 0x40)).all()


def test_iadd3_low_word_wraps_with_registers_and_constants_alike():
    """IADD3 without carries, summed in place into the first sum made: three registers, wrapping past 2**32, and
    constants alone."""
    assert (stored([TID, "MOV R4, 0xfffffff0", "IADD3 R5, R0, R0, RZ", "IADD3 R2, R4, R0, R5"])
            == (0xFFFFFFF0 + 3 * LANES) & MASK).all()
    assert (stored([TID, "IADD3 R2, R0, 0x10, R0"]) == 2 * LANES + 0x10).all()
    assert (stored(["IADD3 R2, RZ, 0x10, 0x8"]) == 0x18).all()


def test_s2r_mov_and_imad():
    assert (stored([TID, "IMAD R2, R0, 0x4, 0x100"]) == LANES * 4 + 0x100).all()
    assert (stored([TID, "MOV R3, 0x7", "IMAD.MOV.U32 R2, RZ, RZ, R3"]) == 7).all()
    assert (stored([TID, "IMAD.SHL.U32 R2, R0, 0x8, RZ"]) == LANES * 8).all()


def test_imad_wide_writes_a_pair_and_hi_adds_the_pair():
    # 0xffffffff * 2 + 6 = 0x2_0000_0004: low word 4, high word 2
    values = stored([TID, "MOV R4, 0x6", "MOV R5, RZ", "MOV R6, 0xffffffff",
                     "IMAD.WIDE.U32 R2, R6, 0x2, R4", "IMAD R2, R3, 0x100, R2"])
    assert (values == 0x204).all()
    # IMAD.HI.U32 d, a, b, c = high word of a*b + {c+1:c}
    values = stored([TID, "MOV R6, 0x80000000", "MOV R4, RZ", "MOV R5, 0x3", "IMAD.HI.U32 R2, R6, 0x4, R4"])
    assert (values == 2 + 3).all()


def test_iadd3_carry_chain_adds_64_bit_values():
    # (0xffffffff + tid) as 64 bits: low = tid - 1 (mod 2**32), carry into the high word
    values = stored([TID, "MOV R4, 0xffffffff", "IADD3 R6, P0, R4, R0, RZ", "IADD3.X R7, RZ, RZ, RZ, P0, !PT",
                     "IMAD R2, R7, 0x1000, R6"], register="R2")
    expected = np.where(LANES == 0, 0xFFFFFFFF, 0x1000 + LANES - 1) & MASK
    assert (values.astype(np.int64) & MASK == expected).all()
    assert (stored([TID, "IADD3 R2, -R0, 0x40, RZ"]) == 0x40 - LANES).all()


def test_lea_and_lea_hi():
    assert (stored([TID, "LEA R2, R0, 0x100, 0x3"]) == (LANES << 3) + 0x100).all()
    # LEA.HI.SX32 d, a, b, 0x1b = b + (sign-extended a >> 5): a rounding-toward-zero divide helper
    values = stored([TID, "IADD3 R4, R0, -0x10, RZ", "LEA.HI.SX32 R2, R4, 0x40, 0x1b"])
    expected = 0x40 + ((LANES - 16) >> 5)
    assert (values == expected).all()


def test_shf_funnel_shifts():
    assert (stored([TID, "SHF.L.U32 R2, R0, 0x4, RZ"]) == LANES << 4).all()
    assert (stored([TID, "IMAD.SHL.U32 R4, R0, 0x100, RZ", "SHF.R.U32.HI R2, RZ, 0x4, R4"]) == LANES << 4).all()
    assert (stored([TID, "IADD3 R4, R0, -0x10, RZ", "SHF.R.S32.HI R2, RZ, 0x1, R4", "LOP3.LUT R2, R2, 0xff, RZ, 0xc0, !PT"])
            == (((LANES - 16) >> 1) & 0xFF)).all()


@pytest.mark.parametrize("lut, function", [(0xC0, lambda a, b, c: a & b), (0xFC, lambda a, b, c: a | b),
                                           (0x3C, lambda a, b, c: a ^ b), (0x96, lambda a, b, c: a ^ b ^ c),
                                           (0xE8, lambda a, b, c: (a & b) | (a & c) | (b & c))])
def test_lop3_truth_tables(lut, function):
    values = stored([TID, "MOV R5, 0x35", "MOV R6, 0xf0", f"LOP3.LUT R2, R0, R5, R6, {lut:#x}, !PT",
                     "LOP3.LUT R2, R2, 0xff, RZ, 0xc0, !PT"])
    assert (values == (function(LANES, 0x35, 0xF0) & 0xFF)).all()


def test_isetp_sel_and_predicate_guards():
    values = stored([TID, "ISETP.GE.AND P0, PT, R0, 0x10, PT", "SEL R2, RZ, 0x40, P0"])
    assert (values == np.where(LANES >= 16, 0, 0x40)).all()
    values = stored([TID, "ISETP.GE.U32.AND P0, PT, R0, 0x10, PT", "MOV R2, 0x8", "@!P0 MOV R2, 0x4"])
    assert (values == np.where(LANES >= 16, 8, 4)).all()
    # 64-bit compare: high words equal, low words decide
    values = stored([TID, "MOV R5, 0x1", "ISETP.GE.U32.AND P0, PT, R0, 0x8, PT",
                     "ISETP.GE.U32.AND.EX P0, PT, R5, 0x1, PT, P0", "SEL R2, RZ, 0x4, P0"])
    assert (values == np.where(LANES >= 8, 0, 4)).all()
    values = stored([TID, "ISETP.NE.AND P0, PT, R0, RZ, PT", "ISETP.LT.AND P1, PT, R0, 0x4, PT",
                     "PLOP3.LUT P0, PT, P0, P1, PT, 0x80, 0x0", "SEL R2, 0x4, RZ, P0"])
    assert (values == np.where((LANES != 0) & (LANES < 4), 4, 0)).all()


def test_min_max_popc_flo_brev_prmt():
    assert (stored([TID, "VIMNMX R2, R0, 0x7, PT"]) == np.minimum(LANES, 7)).all()
    assert (stored([TID, "IMNMX R2, R0, 0x7, !PT"]) == np.maximum(LANES, 7)).all()
    # VIADDMNMX (sm_90 loop bounds): min/max of a + b and c
    assert (stored([TID, "VIADDMNMX R2, R0, 0x3, 0x10, PT"]) == np.minimum(LANES + 3, 16)).all()
    assert (stored([TID, "VIADDMNMX R2, R0, -0x2, RZ, !PT"]) == np.maximum(LANES - 2, 0)).all()
    assert (stored([TID, "POPC R2, R0"]) == [bin(x).count("1") for x in LANES]).all()
    assert (stored([TID, "IADD3 R4, R0, 0x1, RZ", "FLO.U32 R2, R4"]) == [int(x).bit_length() - 1 for x in LANES + 1]).all()
    assert (stored([TID, "BREV R4, R0", "SHF.R.U32.HI R2, RZ, 0x1b, R4"]) ==
            [int(f"{x:05b}"[::-1], 2) for x in LANES]).all()
    # PRMT: byte 0 of R0 into byte 1
    assert (stored([TID, "PRMT R2, R0, 0x7707, RZ"]) == LANES << 8).all()


@pytest.mark.parametrize("divisor", [1, 3, 7, 32, 1000, 0x7FFFFFFF])
@pytest.mark.parametrize("convert", ["I2F.U32.RP", "I2F.RP"])
def test_the_integer_division_idiom_is_exact(divisor, convert):
    """ptxas's unsigned divide (float reciprocal estimate, then integer corrections); Triton's kernels convert
    the (positive) divisor as S32, I2F's default source type (``I2F.RP R0, R9``)."""
    body = [TID, "IMAD R8, R0, 0x2717, 0x11", f"MOV R10, {divisor:#x}",
            f"{convert} R6, R10", "IMAD.MOV R9, RZ, RZ, -R10", "MUFU.RCP R6, R6",
            "IADD3 R2, R6, 0xffffffe, RZ", "F2I.FTZ.U32.TRUNC.NTZ R3, R2", "HFMA2.MMA R2, -RZ, RZ, 0, 0",
            "IMAD R9, R9, R3, RZ", "IMAD.HI.U32 R3, R3, R9, R2", "IMAD.HI.U32 R3, R3, R8, RZ",
            "IMAD.MOV R4, RZ, RZ, -R3", "IMAD R4, R10, R4, R8", "ISETP.GE.U32.AND P1, PT, R4, R10, PT",
            "@P1 IADD3 R4, -R10, R4, RZ", "@P1 IADD3 R3, R3, 0x1, RZ", "ISETP.GE.U32.AND P1, PT, R4, R10, PT",
            "@P1 IADD3 R3, R3, 0x1, RZ", "IMAD.MOV.U32 R2, RZ, RZ, R3"]
    dividend = LANES * 0x2717 + 0x11
    assert (stored(body) == dividend // divisor).all()


def test_warp_shuffle_vote_and_match():
    assert (stored([TID, "SHFL.BFLY PT, R2, R0, 0x1, 0x1f"]) == LANES ^ 1).all()
    assert (stored([TID, "SHFL.DOWN PT, R2, R0, 0x4, 0x1f"]) == np.where(LANES + 4 < 32, LANES + 4, LANES)).all()
    assert (stored([TID, "ISETP.LT.AND P0, PT, R0, 0x3, PT", "VOTE.ANY R2, PT, P0"]) == 0b111).all()
    assert (stored([TID, "LOP3.LUT R4, R0, 0x1, RZ, 0xc0, !PT", "MATCH.ANY R2, R4",
                    "LOP3.LUT R2, R2, 0xf, RZ, 0xc0, !PT"]) == np.where(LANES % 2, 0b1010, 0b0101)).all()


@pytest.mark.parametrize("redux, expected", [
    ("REDUX.SUM UR6, R0", sum(range(32))), ("REDUX.MAX.S32 UR6, R4", 30), ("REDUX.MIN.S32 UR6, R4", -31),
    ("REDUX UR6, R5", 0x10), ("REDUX.OR UR6, R0", 31), ("REDUX.XOR UR6, R0", 0),
])
def test_warp_reductions_give_every_lane_the_result(redux, expected):
    # R4 = lane or -lane (odd lanes negative), R5 = lane | 0x10
    body = [TID, "LOP3.LUT R6, R0, 0x1, RZ, 0xc0, !PT", "ISETP.NE.AND P0, PT, R6, RZ, PT",
            "IADD3 R4, -R0, RZ, RZ", "SEL R4, R4, R0, P0", "LOP3.LUT R5, R0, 0x10, RZ, 0xfc, !PT", redux,
            "MOV R2, UR6", "IADD3 R2, R2, 0x100, RZ"]
    assert (stored(body) == (expected + 0x100) & MASK).all()


def test_constant_bank_launch_dimensions_and_parameters():
    params = {"param@0x8": 0x30}
    values = stored(["LDC R4, c[0x0][0x0]", "LDC R5, c[0x0][0xc]", "LDC R6, c[0x0][0x168]",
                     "IMAD R2, R4, 0x100, R5", "IADD3 R2, R2, R6, RZ"], block=(64, 1, 1), grid=(5, 1, 1),
                    params=params)
    assert (values == 64 * 0x100 + 5 + 0x30).all()


def test_missing_parameter_is_a_clear_error():
    with pytest.raises(InputError, match=r"needs parameter param@0x8; pass --param param@0x8=VALUE"):
        run(["LDC R6, c[0x0][0x168]", "STS [R6], RZ"])


def test_sm90_shared_window_and_reserved_kilobyte():
    values = stored(["S2R R0, SR_TID.X", "S2UR UR4, SR_CgaCtaId", "UMOV UR5, 0x400", "ULEA UR5, UR4, UR5, 0x18",
                     "LEA R2, R0, UR5, 0x2"], arch="sm_90")
    assert (values == LANES * 4).all()


def test_divergent_branches_reconverge_and_count_each_side():
    result = run([TID, "ISETP.GE.AND P0, PT, R0, 0x10, PT", "BSSY B0, 0x70", "@P0 BRA 0x60",
                  "STS [R0.X4], RZ", "BRA 0x70", "STS [R0.X4+0x80], RZ", "BSYNC B0", "STS [R0.X4+0x100], RZ"])
    acc = result.accesses
    by_instruction = {int(i): acc.address[acc.instruction == i] for i in np.unique(acc.instruction)}
    first, second, after = (by_instruction[k] for k in sorted(by_instruction))
    assert (first[0] == np.where(LANES < 16, LANES * 4, -1)).all()
    assert (second[0] == np.where(LANES >= 16, LANES * 4 + 0x80, -1)).all()
    assert len(after) == 1 and (after[0] == LANES * 4 + 0x100).all()     # once, the whole warp


def test_loaded_values_make_addresses_unresolved_with_the_reason():
    result = run([TID, "LDG.E R2, desc[UR4][R4.64]", "STS [R2], RZ"])
    assert [u["reason"] for u in result.unresolved] == ["address depends on data loaded from memory"]


def test_a_branch_on_loaded_data_is_explored_and_what_follows_stays_exact():
    # the store under the branch is unresolved (its lanes are unknown), R5 written there is unknown afterwards,
    # the store after the reconvergence point at a thread-only address is counted for every lane
    body = [TID, "LDG.E R2, desc[UR4][R4.64]", "ISETP.GE.AND P0, PT, R2, 0x10, PT", "IMAD.SHL.U32 R3, R0, 0x4, RZ",
            "MOV R5, R3", "@P0 BRA 0x90", "IADD3 R5, R3, 0x80, RZ", "STS [R3+0x100], RZ", "NOP",
            "STS [R3], RZ", "STS [R5+0x200], RZ"]
    result = run(body)
    assert [u["ptx"] for u in result.unresolved] == ["STS [R3+0x100], RZ", "STS [R5+0x200], RZ"], result.unresolved
    assert len(result.accesses) == 1 and result.accesses.address[0].tolist() == (4 * LANES).tolist()


def test_unknown_opcode_is_a_note_and_taints_never_crashes():
    result = run([TID, "FROBNICATE.X R2, R0, 0x1", "STS [R2], RZ", "STS [R0.X4], RZ"])
    assert "SASS opcode FROBNICATE.X is not modelled: its results are treated as unknown" in result.notes
    assert [u["reason"] for u in result.unresolved] == ["address depends on a value the emulator does not model"]
    assert len(result.accesses) == 1     # the other access is still analysed


def test_indirect_branch_stops_with_a_reason_and_ctaid_dependence_runs_every_cta():
    result = run([TID, "BRX R4 -0x10", "STS [R0.X4], RZ"])
    assert result.unresolved and "indirect branch" in result.unresolved[0]["reason"]
    result = run(["S2R R0, SR_TID.X", "S2R R1, SR_CTAID.X", "IMAD R2, R1, 0x80, RZ", "STS [R2], RZ"], grid=(4, 1, 1))
    assert result.scale == 1 and result.analysed_ctas == [0, 1, 2, 3]
    assert sorted(set(result.accesses.address[:, 0].tolist())) == [0, 0x80, 0x100, 0x180]


def test_calls_return_through_the_register_the_caller_set():
    result = run([TID, "MOV R4, 0x30", "CALL.REL.NOINC 0x50", "STS [R0.X4+0x200], RZ", "EXIT",
                  "STS [R0.X4], RZ", "RET.REL.NODEC R4 0x0"])
    acc = result.accesses
    assert sorted(int(a) for a in acc.address[:, 0]) == [0, 0x200]


def test_barriers_park_until_every_warp_arrives():
    result = run([TID, "STS [R0.X4], RZ", "BAR.SYNC.DEFER_BLOCKING 0x0", "STS [R0.X4+0x400], RZ"], block=(64, 1, 1))
    acc = result.accesses
    # both warps store before either passes the barrier
    assert acc.instruction.tolist() == [1, 1, 3, 3]


@pytest.mark.parametrize("multiplier", [3, 0x1234, 0xFFFF_FFFF, 0x8000_0001, 0x10001])
def test_the_sm5x_xmad_multiply_sequence_is_a_32_bit_multiply(multiplier):
    """ptxas for sm_5x/6x multiplies with XMAD / XMAD.MRG / XMAD.PSL.CBCC (no IMAD)."""
    body = [TID, "IMAD R0, R0, 0x9e3779b1, 0x7f", f"MOV R5, {multiplier:#x}",
            "XMAD R2, R0, R5, RZ", "XMAD.MRG R3, R0, R5.H1, RZ", "XMAD.PSL.CBCC R2, R0.H1, R3.H1, R2",
            "LOP3.LUT R2, R2, 0xfffff, RZ, 0xc0, !PT"]
    tid = (LANES * 0x9E3779B1 + 0x7F) & MASK
    assert (stored(body, arch="sm_52") == (tid * multiplier) & 0xFFFFF).all()


def test_sgxt_sign_and_zero_extends_the_low_bits():
    # tid | 0x10 has bit 4 set: as a 5-bit field it is negative
    values = stored([TID, "LOP3.LUT R4, R0, 0x10, RZ, 0xfc, !PT", "SGXT R5, R4, 0x5", "SGXT.U32 R6, R4, 0x3",
                     "IADD3 R2, R5, 0x40, R6"])
    field = (LANES | 0x10) & 0x1F
    assert (values == field - 32 + 0x40 + (field & 7)).all()


def test_sm5x_ssy_sync_reconverge_at_the_pushed_point():
    """sm_5x/6x: SYNC jumps to the point its enclosing SSY pushed (falling through would run the else side)."""
    result = run([TID, "ISETP.GE.AND P0, PT, R0, 0x10, PT", "SSY 0x80", "@P0 BRA 0x60", "STS [R0.X4], RZ",
                  "SYNC", "STS [R0.X4+0x80], RZ", "SYNC", "STS [R0.X4+0x100], RZ"], arch="sm_52")
    acc = result.accesses
    rows = {int(i): acc.address[acc.instruction == i] for i in np.unique(acc.instruction)}
    first, second, after = (rows[k] for k in sorted(rows))
    assert len(first) == len(second) == len(after) == 1
    assert (first[0] == np.where(LANES < 16, LANES * 4, -1)).all()
    assert (second[0] == np.where(LANES >= 16, LANES * 4 + 0x80, -1)).all()
    assert (after[0] == LANES * 4 + 0x100).all()


def test_branch_with_a_predicate_operand_is_conditional():
    result = run([TID, "ISETP.GE.AND P1, PT, R0, 0x10, PT", "BRA.U !P1, 0x40", "STS [R0.X4], RZ",
                  "STS [R0.X4+0x80], RZ"])
    acc = result.accesses
    rows = {int(i): acc.address[acc.instruction == i] for i in np.unique(acc.instruction)}
    first, second = (rows[k] for k in sorted(rows))
    assert (first[0] == np.where(LANES >= 16, LANES * 4, -1)).all()
    assert (second[0] == LANES * 4 + 0x80).all()


def test_a_runaway_loop_stops_at_the_step_limit_naming_the_sass_pc():
    module = parse_text(listing([TID, "STS [R0.X4], RZ", "BRA 0x10"]), "t.sass")
    with pytest.raises(InputError, match=r"exceeded max_steps=50 .* looping at SASS 0x00"):
        emulate_sass(module, "k", resolve_launch(Launch(block=(32, 1, 1), max_steps=50), module.kernel("k")))


# --------------------------------------------------------------------------- shared memory's contents (CAS loops)

#: ptxas's loop for a 64-bit shared atomicAdd(&cell[0], t + 1) (atomics2.cu): LDS.64 the old value, add,
#: ATOMS.CAST.SPIN.64 (Rd = 1 where it stored), retry the lanes that did not; then read the cell back.
CAS_LOOP = [TID, "STS.64 [RZ], RZ", "BAR.SYNC 0x0", "IADD3 R6, R0, 0x1, RZ", "MOV R7, RZ",
            "LDS.64 R4, [RZ]",                                                   # pc 0x50: the loop
            "IADD3 R8, P0, R4, R6, RZ", "IADD3.X R9, R5, R7, RZ, P0, !PT", "ATOMS.CAST.SPIN.64 R8, [RZ], R4, R8",
            "ISETP.EQ.U32.AND P0, PT, R8, 0x1, PT", "ISETP.EQ.U32.AND.EX P0, PT, R9, RZ, PT, P0", "@!P0 BRA 0x50",
            "LDS.64 R10, [RZ]", "STS [R10], RZ"]


def _with_shared_memory(body: list[str], size: int = 4096, **launch):
    import pyarrow as pa
    module = parse_text(listing(body), "t.sass")
    column = module.kernels.schema.get_field_index("shared_bytes")
    module.kernels = module.kernels.set_column(column, "shared_bytes", pa.array([size], pa.int64()))
    launch = Launch(**{"block": (32, 1, 1), "grid": (1, 1, 1), "params": {}, **launch})
    return emulate_sass(module, "k", resolve_launch(launch, module.kernel("k")))


def test_a_cas_retry_loop_runs_as_often_as_the_lanes_collide():
    """One word: per pass the lowest lane of each half-warp's bank serves, lane 0 then 16 of the first pass
    compare, and only lane 0's word is still the expected one: 32 passes, 4 wavefronts while both halves have
    lanes left, 2 after (96, the Source page of atom64_add); the cell ends at the sum of t + 1."""
    result = _with_shared_memory(CAS_LOOP)
    assert not result.unresolved, result.unresolved
    acc = result.accesses
    spin = acc.instruction == 8
    assert spin.sum() == 32
    executing = (acc.address[spin] >= 0).sum(axis=1)
    assert executing.tolist() == list(range(32, 0, -1))        # every lane still spinning is recorded (cas_spin)
    from traceconf.engine import count_wavefronts
    from traceconf.rules import load_rule_set
    wavefronts, ideal, _ = count_wavefronts(acc.take(np.flatnonzero(spin)), load_rule_set("sm_90"))
    # lanes 0..15 win in turn, one per pass, while lane 16 is served beside them: 4 wavefronts (2 per active
    # half-warp, CAS served twice) for 16 passes, 2 after; ideal 2 x ceil(8 x lanes / 128), as on the page
    assert (wavefronts.sum(), ideal.sum()) == (96, 96)
    assert acc.address[-1].tolist() == [sum(range(1, 33))] * 32


def test_shared_values_are_kept_only_where_a_shared_read_decides_a_branch():
    from traceconf.sass.dataflow import shared_values_matter

    def matters(body, branches=None):
        rows = parse_text(listing(body), "t.sass").instructions_of("k")
        following = [[i + 1] if i + 1 < len(rows) else [] for i in range(len(rows))]
        return shared_values_matter(rows, [(branches or {}).get(i, step) for i, step in enumerate(following)])
    assert matters(CAS_LOOP, {11: [5, 12]})                     # @!P0 BRA 0x50: back to the LDS.64 or on
    # ctaid_row (tests/fixtures/scale): the loaded R7 only goes to global memory; R7 was an address before
    assert not matters([TID, "LEA R7, R0, RZ, 0x2", "STS [R7], R0", "BAR.SYNC 0x0", "LDS R7, [R7]",
                        "STG.E desc[UR6][R2.64], R7"])
    # an address computed from a shared read is not followed: reported unresolved, as without kept values
    assert _with_shared_memory([TID, "SHF.L.U32 R2, R0, 0x2, RZ", "STS [R2], R2", "LDS R3, [R2]",
                                "STS [R3+0x100], RZ"]).unresolved
    # a bare listing has no shared size: the loop's branch stays unknown, reported, never guessed
    assert run(CAS_LOOP).unresolved


def test_kept_shared_values_round_trip_sign_extended_and_wide():
    """Where values are kept, LDS.S8 sign-extends what STS.U8 stored and LDS.128 returns STS.128's four
    registers: each branch to the EXIT at 0x100 is decided by them, and both fall through to the marker."""
    body = [TID, "MOV R5, 0xff", "MOV R8, 0x1", "MOV R9, 0x2", "MOV R10, 0x3", "MOV R11, 0x4",
            "IMAD.SHL.U32 R2, R0, 0x10, RZ",
            "STS.U8 [R2], R5", "LDS.S8 R3, [R2]", "ISETP.GE.AND P0, PT, R3, RZ, PT", "@P0 BRA 0x100",
            "STS.128 [R2+0x200], R8", "LDS.128 R12, [R2+0x200]", "ISETP.NE.AND P1, PT, R15, 0x4, PT",
            "@P1 BRA 0x100", "STS [R2+0x800], RZ"]
    result = _with_shared_memory(body, 8192)
    assert not result.unresolved, result.unresolved
    assert result.accesses.address[-1].tolist() == (0x800 + 16 * np.arange(32)).tolist()


# --------------------------------------------------------------------------- --data: global memory's contents

def _buffer(values, dtype):
    from traceconf.emulate.data import DataBuffer
    return DataBuffer(np.asarray(values, dtype=dtype), f"test buffer ({np.dtype(dtype).name})")


#: sm_75 parameters start at c[0x0][0x160]: param@0x0 and param@0x8 are the kernel's two pointers.
POINTERS = ["LDC.64 R4, c[0x0][0x160]", "LDC.64 R20, c[0x0][0x168]"]


def _addresses(result) -> list[list[int]]:
    assert not result.unresolved, result.unresolved
    return [row.tolist() for row in result.accesses.address]


def test_global_loads_read_the_data_buffers_sign_extended_and_wide():
    """LDG of every width reads the --data buffer the pointer parameter (c[0x0][0x160]) points to: .S16
    sign-extends, .U8 zero-extends, .64/.128 fill their pair/quad; each value is then a shared address."""
    words = np.arange(4 * 32, dtype=np.uint32) * 3
    body = [TID, *POINTERS,
            "IMAD.WIDE R2, R0, 0x2, R4", "LDG.E.S16 R6, desc[UR4][R2.64]", "IADD3 R6, R6, 0x100, RZ", "STS [R6], RZ",
            "IADD3 R2, P0, R0, R20, RZ", "LEA.HI.X.SX32 R3, R0, R21, 0x1, P0", "LDG.E.U8 R7, [R2.64]", "STS [R7], RZ",
            "IMAD.WIDE R2, R0, 0x8, R4", "LDG.E.64 R8, [R2.64+0x200]", "STS [R9], RZ",
            "IMAD.WIDE R2, R0, 0x10, R4", "LDG.E.128 R12, [R2.64+0x200]", "STS [R15], RZ"]
    data = np.concatenate([(-np.arange(32)).astype(np.int16).view(np.uint8), np.zeros(0x200 - 64, np.uint8),
                           words.view(np.uint8)])
    result = _with_shared_memory(body, data={"0": _buffer(data, np.uint8),
                                             "1": _buffer(0xF0 + np.arange(32) % 16, np.uint8)})
    lanes = np.arange(32)
    assert _addresses(result) == [(0x100 - lanes).tolist(), (0xF0 + lanes % 16).tolist(),
                                  words[2 * lanes + 1].tolist(), words[4 * lanes + 3].tolist()]
    assert any("param@0x0 = test buffer" in note for note in result.notes)


def test_global_stores_and_atomics_write_back_and_return_the_old_value():
    """STG stores what LDG reads back; ATOMG returns the old value, lanes in order (ADD: 16 + lane); CAS swaps
    for the first lane only (its ``[R4]`` is the pair: .E addressing); REDG adds; ATOMS does the same in
    shared memory, POPC.INC adding one per lane."""
    body = [TID, *POINTERS, "IMAD.WIDE R2, R0, 0x4, R4", "IADD3 R6, R0, 0x10, RZ", "STG.E [R2.64], R6",
            "LDG.E R7, [R2.64]", "STS [R7], RZ",                                              # t + 16
            "MOV R8, 0x1", "ATOMG.E.ADD.STRONG.GPU PT, R9, [R4.64], R8", "STS [R9], RZ",        # 16 + t
            "MOV R12, 0x11", "IADD3 R13, R0, 0x64, RZ", "IADD3 R4, R4, 0x4, RZ",
            "ATOMG.E.CAS.STRONG.GPU PT, R11, [R4], R12, R13", "STS [R11], RZ",                 # 17, then 100
            "REDG.E.ADD.STRONG.GPU [R2.64+0x80], R0", "LDG.E R10, [R2.64+0x80]", "STS [R10], RZ",   # 0 + t
            "STS [RZ], RZ", "ATOMS.ADD R14, [RZ], R8", "IMAD.SHL.U32 R14, R14, 0x4, RZ", "STS [R14+0x200], RZ",
            "ATOMS.POPC.INC.32 RZ, [RZ]", "LDS R15, [RZ]", "STS [R15+0x400], RZ"]
    result = _with_shared_memory(body, data={"0": _buffer(np.zeros(64), np.uint32)})
    lanes = np.arange(32)
    addresses = [row for row in _addresses(result) if row != [0] * 32]
    assert addresses == [(lanes + 16).tolist(), (lanes + 16).tolist(), [17] + [100] * 31, lanes.tolist(),
                         (0x200 + 4 * lanes).tolist(), [0x400 + 64] * 32]


def test_reads_without_data_stay_unknown_naming_the_parameter():
    """param@0x8 has no --data: what is read through it stays unknown, the reason and a note name it."""
    body = [TID, *POINTERS, "IMAD.WIDE R2, R0, 0x4, R20", "LDG.E R6, [R2.64]", "STS [R6], RZ"]
    result = _with_shared_memory(body, data={"0": _buffer(np.zeros(32), np.uint32)})
    (entry,) = result.unresolved
    assert "param@0x8, which has no --data" in entry["reason"]
    assert any(note.startswith("SASS 0x0040 (LDG.E R6, [R2.64]) reads global memory through parameter param@0x8")
               for note in result.notes), result.notes
    # a pointer given a value but no buffer: outside every --data buffer
    result = _with_shared_memory(body, data={"0": _buffer(np.zeros(32), np.uint32)}, params={"1": 1 << 20})
    assert any("reads global memory outside every --data buffer" in note for note in result.notes), result.notes
    assert result.unresolved


def test_without_any_data_the_reason_names_the_pointer_read_through():
    result = run([TID, *POINTERS, "IMAD.WIDE R2, R0, 0x4, R20", "LDG.E R6, [R2.64]", "STS [R6], RZ"])
    (entry,) = result.unresolved
    assert "the kernel reads global memory through param@0x8, which has no --data" in entry["reason"]


def test_f32_arithmetic_on_data_is_exact_as_the_ptx_levels():
    """With --data, FFMA / FMUL / FADD (sign modifiers on the bit pattern) / FMNMX / FSETP give the IEEE results
    (traceconf.emulate.floatops): their bit patterns, shifted down, are shared addresses; a compare guards a
    store.  Without data the same arithmetic stays unknown."""
    x = (1.5 * np.arange(32) - 7).astype(np.float32)
    body = [TID, *POINTERS, "IMAD.WIDE R2, R0, 0x4, R4", "LDG.E R6, [R2.64]",
            "FFMA R7, R6, 2, 0.25", "SHF.R.U32.HI R8, RZ, 0x14, R7", "STS [R8], RZ",
            "FADD R9, -|R6|, 0.5", "SHF.R.U32.HI R10, RZ, 0x14, R9", "STS [R10], RZ",
            "FMNMX R11, R6, 20, PT", "FMUL R11, R11, 0x40000000", "SHF.R.U32.HI R12, RZ, 0x14, R11", "STS [R12], RZ",
            "FSETP.GT.AND P0, PT, R6, 10, PT", "IMAD.SHL.U32 R13, R0, 0x4, RZ", "@P0 STS [R13], RZ"]

    def top(values):
        return (np.asarray(values, dtype=np.float32).view(np.uint32) >> 20).tolist()
    result = _with_shared_memory(body, data={"0": _buffer(x, np.float32)})
    assert _addresses(result) == [top(x * np.float32(2) + np.float32(0.25)), top(np.float32(0.5) - np.abs(x)),
                                  top(np.minimum(x, np.float32(20)) * np.float32(2)),
                                  np.where(x > 10, 4 * np.arange(32), -1).tolist()]
    assert _with_shared_memory(body).unresolved


def test_a_store_under_an_unknown_predicate_may_have_happened():
    """``@P0 STS`` with P0 from a load without data: unresolved, and the word it may have written is unknown
    to the LDS after it, whichever way the emulated predicate came out (either polarity)."""
    for guard in ("@P0", "@!P0"):
        body = [TID, *POINTERS, "IMAD.SHL.U32 R2, R0, 0x4, RZ", "STS [R2], R0", "LDG.E R3, [R4.64]",
                "ISETP.EQ.U32.AND P0, PT, R3, 0x7, PT", "MOV R5, 0x64", f"{guard} STS [R2], R5", "LDS R6, [R2]",
                "STS [R6+0x200], RZ"]
        result = _with_shared_memory(body, data={"1": _buffer(np.zeros(1), np.uint32)})
        assert sorted(u["ptx"] for u in result.unresolved) == sorted([f"{guard} STS [R2], R5", "STS [R6+0x200], RZ"])


def _branch_on(setup: list[str], condition: str) -> list[dict]:
    """Unresolved entries when ``condition`` (writing P0) decides whether a STS runs, after ``setup``."""
    skip = len(setup) + 4           # index of the instruction after the guarded STS
    return _with_shared_memory(setup + [condition, f"@P0 BRA {skip * 16:#x}", "STS [R0.X4], RZ", "NOP"]).unresolved


def test_a_wide_shared_load_keeps_a_taint_per_register():
    """CUB's block scan over 3 warps: LDS.128 reads 4 warp totals, 3 of them written; the 4th (never written,
    unknown) must not make the other three unknown (it did, per 64-bit piece: cub_radix_sort_pairs_f32)."""
    setup = [TID, "MOV R2, 0x10", "MOV R3, 0x20", "MOV R8, 0x30", "STS [RZ], R2", "STS [0x4], R3", "STS [0x8], R8",
             "BAR.SYNC 0x0", "LDS.128 R4, [RZ]"]
    assert not _branch_on(setup, "ISETP.NE.AND P0, PT, R6, 0x30, PT")
    assert _branch_on(setup, "ISETP.NE.AND P0, PT, R7, 0x30, PT")        # the word nothing wrote


@pytest.mark.parametrize("index_test, combine, decided", [
    ("ISETP.GE.AND P1, PT, R0, 0x40, PT", "AND", True),     # index test false: AND decided
    ("ISETP.LT.AND P1, PT, R0, 0x40, PT", "OR", True),      # index test true: OR decided
    ("ISETP.LT.AND P1, PT, R0, 0x40, PT", "AND", False),    # true AND unknown: unknown
])
def test_a_comparison_of_an_unknown_key_decided_by_a_known_index_test(index_test, combine, decided):
    """CUB's merge loads the key past its list's end (a padding word nothing wrote) and compares it, but the
    index test it is combined with decides the step: ISETP.LT.AND/OR with a known deciding predicate."""
    setup = [TID, "MOV R3, 0x5", "LDS R7, [0x40]", index_test]
    unresolved = _branch_on(setup, f"ISETP.LT.{combine} P0, PT, R7, R3, P1")
    assert (not unresolved) == decided, unresolved


@settings(max_examples=30, deadline=None)
@given(st.integers(0, MASK), st.integers(0, MASK), st.integers(0, MASK), st.integers(0, 31))
def test_imad_lea_iadd3_without_carries_keep_the_low_word_of_the_exact_result(a, b, c, shift):
    """IMAD, LEA and IADD3 with no carry in or out compute the low word at once (no masks per operand): it is
    the exact result's, signed or unsigned, negated operands included."""
    setup = [TID, f"MOV R4, {a:#x}", f"MOV R5, {b:#x}", f"MOV R6, {c:#x}", "IMAD R7, R0, 0x10, R4"]
    lanes = (a + LANES * 16) & MASK

    def low(values):
        return [value & MASK for value in values]
    assert stored(setup + ["IMAD R2, R7, R5, R6"]).tolist() == low(x * b + c for x in lanes.tolist())
    assert stored(setup + ["IMAD.U32 R2, R7, R5, -R6"]).tolist() == low(x * b - c for x in lanes.tolist())
    assert stored(setup + [f"LEA R2, R7, R6, {shift:#x}"]).tolist() == low((x << shift) + c for x in lanes.tolist())
    assert stored(setup + ["IADD3 R2, R7, -R5, R6"]).tolist() == low(x - b + c for x in lanes.tolist())


@settings(max_examples=25, deadline=None)
@given(st.integers(0, MASK), st.sampled_from([0, 1, 0x8000_0000, MASK]))
def test_isetp_equality_reads_the_words_as_they_are(a, delta):
    """ISETP.EQ/NE compare the 32-bit words (signed or unsigned alike): equal where the words are."""
    b = (a + delta) & MASK
    setup = [TID, f"MOV R4, {a:#x}", f"MOV R5, {b:#x}"]
    for compare, expected in (("EQ", a == b), ("NE", a != b)):
        got = stored(setup + [f"ISETP.{compare}.AND P0, PT, R4, R5, PT", "SEL R2, RZ, 0x1, !P0"])
        assert (got == int(expected)).all()
