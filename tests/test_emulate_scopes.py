"""PTX constructs of inline asm and of the PTX ISA's operand forms, emulated: scoped `{ .reg ...; }` blocks
(a block's register shadows an outer one), `d|p` destinations with bare names (CUB's warp scan), lop3's
predicate output, bmsk, vmad's negated operand; what is not modelled is an unresolved access with its reason."""

from __future__ import annotations

import numpy as np
import pytest

from test_emulate_support import kernel_module, run, values

LANE = np.arange(32)


def test_a_scoped_register_shadows_the_outer_one_and_dies_with_its_block():
    got = values("""
        mov.u32 %r1, %laneid;
        mov.u32 %r5, 1000;
        { .reg .b32 %r5; .reg .pred p; mov.u32 %r5, 7; setp.lt.u32 p, %r1, 4; @p add.u32 %r1, %r1, %r5; }
        {
        .reg .b32 %r5;
        mov.u32 %r5, 0;
        { .reg .b32 %r5; mov.u32 %r5, 50; add.u32 %r1, %r1, %r5; }
        add.u32 %r1, %r1, %r5;
        }
        add.u32 %r10, %r1, %r5;""")
    assert got.tolist() == (LANE + np.where(LANE < 4, 7, 0) + 50 + 1000).tolist()


def test_cub_warp_scan_blocks_with_value_and_predicate_destinations():
    # CUB's inclusive warp scan: one inline asm block per step, each declaring its own r0 and p
    steps = "\n".join(
        f"{{ .reg .s32 r0; .reg .pred p; shfl.sync.up.b32 r0|p, %r{i}, {1 << (i - 1)}, 0, -1; "
        f"@p add.s32 r0, r0, %r{i}; mov.s32 %r{i + 1}, r0; }}" for i in range(1, 6))
    got = values("mov.u32 %r1, %laneid;\n" + steps + "\nshl.b32 %r10, %r6, 2;")
    assert got.tolist() == (np.cumsum(LANE) * 4).tolist()


def test_setp_and_lop3_with_two_destinations_and_sinks():
    got = values("""
        mov.u32 %r1, %laneid;
        { .reg .pred p, q; setp.lt.u32 p|q, %r1, 10; selp.u32 %r2, 1, 0, p; selp.u32 %r3, 2, 0, q; }
        and.b32 %r4, %r1, 1;
        setp.ne.u32 %p1, %r4, 0;
        lop3.and.b32 _|%p2, %r1, 3, 0, 0xC0, %p1;
        selp.u32 %r5, 4, 0, %p2;
        add.u32 %r6, %r2, %r3;
        add.u32 %r10, %r6, %r5;""")
    odd = LANE % 2 == 1
    expected = np.where(LANE < 10, 1, 2) + np.where(((LANE & 3) != 0) & odd, 4, 0)
    assert got.tolist() == expected.tolist()


def bmsk_reference(a: int, b: int, clamp: bool) -> int:
    """The PTX ISA's pseudocode of bmsk."""
    ones = 0xFFFF_FFFF
    a1, b1 = a & 31, b & 31
    mask0, total = (ones << a1) & ones, a1 + b1
    mask1 = (ones << total) & ones if total < 32 else 0
    overflow = total >= 32
    if clamp:
        if a >= 32:
            overflow, mask0 = True, 0
        overflow = overflow or b >= 32
    if overflow:
        mask1 = 0
    elif b1 == 0:
        mask1 = ones
    return mask0 & ~mask1 & ones


@pytest.mark.parametrize("mode", ["clamp", "wrap"])
def test_bmsk_against_the_isa_pseudocode(mode):
    # a and b over the interesting range (0..40) through the lane id: a = 3 * lane % 41, b = 40 - lane
    got = values(f"""
        mov.u32 %r1, %laneid;
        mul.lo.u32 %r2, %r1, 3;
        rem.u32 %r2, %r2, 41;
        sub.u32 %r3, 40, %r1;
        bmsk.{mode}.b32 %r10, %r2, %r3;""")
    assert got.tolist() == [bmsk_reference(3 * lane % 41, 40 - lane, mode == "clamp") for lane in range(32)]


def test_symbol_plus_offset_operands():
    got = values("""
        mov.u32 %r4, pad+8;
        mov.u32 %r5, pad;
        sub.u32 %r10, %r4, %r5;""")
    assert got.tolist() == [8] * 32


def test_unmodelled_constructs_are_per_instruction_notes_not_failures():
    # the address of A[5] (an element of an array, whose size the declaration gives), a texture fetch with
    # its predicate (a load from memory), vmad with a negated operand: the emulator does not model their values,
    # so the accesses they feed are unresolved with a reason and the rest is counted
    module = kernel_module("""
        mov.u32 %r1, %laneid;
        shl.b32 %r2, %r1, 2;
        mov.u32 %r3, tile[5];
        add.u32 %r4, %r3, %r2;
        st.shared.u32 [%r4], %r1;
        tex.2d.v4.s32.s32 {%r5, %r6, %r7, %r8}|%p1, [texture0, {%r1, %r1}];
        add.u32 %r9, %r2, %r5;
        st.shared.u32 [%r9], %r1;
        vmad.u32.u32.u32 %r11, %r1, %r1, -%r1;
        add.u32 %r12, %r2, %r11;
        st.shared.u32 [%r12], %r1;
        st.shared.u32 [%r2], %r1;
        ret;""", shared=".shared .align 4 .b8 tile[512];\n", extra=".global .texref texture0;\n")
    result = run(module)
    unresolved = {u["ptx"]: u["reason"] for u in result.unresolved}
    assert sorted(unresolved) == ["st.shared.u32 [%r12], %r1", "st.shared.u32 [%r4], %r1", "st.shared.u32 [%r9], %r1"]
    assert unresolved["st.shared.u32 [%r4], %r1"] == unresolved["st.shared.u32 [%r12], %r1"] == \
        "address depends on a value the emulator does not model"
    assert unresolved["st.shared.u32 [%r9], %r1"] == "address depends on data loaded from memory"   # the texel
    assert len(set(result.accesses.instruction.tolist())) == 1     # st.shared.u32 [%r2] is counted


def test_shared_memory_size_special_registers():
    got = values("""
        mov.u32 %r1, %dynamic_smem_size;
        mov.u32 %r2, %total_smem_size;
        sub.u32 %r3, %r2, %r1;
        mad.lo.u32 %r10, %r1, 16, %r3;""", dynamic_smem=64)
    assert got.tolist() == [64 * 16 + 4] * 32      # 64 dynamic bytes, 4 static (the kernel's `pad`)


def szext_reference(a: int, b: int, clamp: bool, signed: bool) -> int:
    """The PTX ISA's pseudocode of szext."""
    b1 = b & 31
    too_large = b >= 32 and clamp
    mask = 0 if too_large else (0xFFFF_FFFF << b1) & 0xFFFF_FFFF
    sign = 0 if (b1 == 0 or too_large or not signed) else (a >> ((b1 - 1) & 31)) & 1
    return (a & ~mask & 0xFFFF_FFFF) | (mask if sign else 0)


@pytest.mark.parametrize("mode", ["clamp", "wrap"])
@pytest.mark.parametrize("type_", ["u32", "s32"])
def test_szext_against_the_isa_pseudocode(mode, type_):
    # a = 0x9e3779b9 * lane (bits of every kind), b = 40 - lane (0..40)
    got = values(f"""
        mov.u32 %r1, %laneid;
        mul.lo.u32 %r2, %r1, 0x9e3779b9;
        sub.u32 %r3, 40, %r1;
        szext.{mode}.{type_} %r10, %r2, %r3;""")
    expected = [szext_reference(0x9E3779B9 * lane & 0xFFFF_FFFF, 40 - lane, mode == "clamp", type_ == "s32")
                for lane in range(32)]
    assert got.tolist() == expected


def test_isspacep_tells_a_shared_window_address_from_a_global_one():
    # lanes 0-7 hold a generic address of shared `pad`, the others the global pointer parameter
    module = kernel_module("""
        mov.u32 %r1, %laneid;
        mov.u64 %rd1, pad;
        cvta.shared.u64 %rd2, %rd1;
        ld.param.u64 %rd3, [k_param_0];
        setp.lt.u32 %p1, %r1, 8;
        selp.b64 %rd4, %rd2, %rd3, %p1;
        isspacep.shared::cta %p2, %rd4;
        isspacep.global %p3, %rd4;
        selp.u32 %r2, 4, 0, %p2;
        selp.u32 %r3, 8, 0, %p3;
        add.u32 %r4, %r2, %r3;
        st.shared.u32 [%r4], %r1;
        ret;""", params=".param .u64 k_param_0", shared=".shared .align 4 .b8 pad[16];\n")
    result = run(module, params={"k_param_0": 1 << 40})
    assert result.accesses.address.tolist() == [[4] * 8 + [8] * 24]


def test_a_parameter_reached_through_a_register_is_unmodelled_however_the_register_is_spelt():
    """``q`` is a register by its declaration, as ``%rd1`` is (PTX registers need no %): a load from the parameter
    space through either is not modelled (it was read back from a symbol named ``q``)."""
    module = kernel_module("""
        .reg .b64 q;
        .param .b32 buf;
        mov.u64 q, buf;
        mov.u64 %rd1, buf;
        st.param.u32 [q], 5;
        st.param.u32 [%rd1], 7;
        st.param.u32 [buf+4], 3;
        ld.param.u32 %r1, [q];
        ld.param.u32 %r2, [%rd1];
        ld.param.u32 %r3, [buf+4];
        shl.b32 %r4, %r1, 2;
        st.shared.u32 [%r4], 0;
        shl.b32 %r5, %r2, 2;
        st.shared.u32 [%r5], 0;
        shl.b32 %r6, %r3, 2;
        st.shared.u32 [%r6], 0;
        ret;""", shared=".shared .align 4 .b8 pad[64];\n")
    result = run(module)
    assert {u["ptx"]: u["reason"] for u in result.unresolved} == {
        "st.shared.u32 [%r4], 0": "address depends on a value the emulator does not model",
        "st.shared.u32 [%r5], 0": "address depends on a value the emulator does not model"}
    assert set(result.accesses.address[result.accesses.instruction == result.accesses.instruction.max()]
               .reshape(-1).tolist()) == {12}      # through the symbol: the value stored there
