"""SIMT emulation of small PTX kernels: instruction glue, divergence, loops, calls, taint, scaling."""

from __future__ import annotations

import numpy as np
import pytest

from test_emulate_support import active, kernel_module, lanes_of, run, values
from traceconf.accesses import INACTIVE
from traceconf.emulate import Launch, emulate
from traceconf.emulate.launch import resolve_launch
from traceconf.errors import InputError

LANE = np.arange(32)


# --------------------------------------------------------------------------- instruction glue


def test_setp_with_bool_combination_and_selp():
    got = values("""
        mov.u32 %r1, %tid.x;
        setp.lt.u32 %p1, %r1, 16;
        setp.ge.and.s32 %p2|%p3, %r1, 8, %p1;
        selp.b32 %r2, 1, 0, %p2;
        selp.b32 %r3, 2, 0, %p3;
        add.s32 %r10, %r2, %r3;""")
    expected = np.where((LANE >= 8) & (LANE < 16), 1, np.where(LANE < 16, 2, 0))
    assert got.tolist() == expected.tolist()


def test_mov_pack_unpack_and_cvt_sign_extension():
    got = values("""
        mov.u32 %r1, %tid.x;
        neg.s32 %r2, %r1;
        cvt.u16.u32 %rs1, %r2;
        cvt.s32.s16 %r3, %rs1;
        mov.b64 %rd1, {%r1, %r3};
        mov.b64 {%r4, %r5}, %rd1;
        add.s32 %r6, %r4, %r5;
        add.s32 %r10, %r6, 100;""")
    assert got.tolist() == [100] * 32          # tid + (-tid) + 100


def test_shr_signed_and_mul_hi_through_registers():
    got = values("""
        mov.u32 %r1, %tid.x;
        sub.s32 %r2, 0, %r1;
        shr.s32 %r3, %r2, 1;
        mul.hi.s32 %r4, %r2, 65536;
        sub.s32 %r5, %r3, %r4;
        add.s32 %r10, %r5, 1000;""")
    expected = ((-LANE) >> 1) - ((-LANE * 65536) >> 32) + 1000
    assert got.tolist() == expected.tolist()


def test_shfl_modes_and_clamp():
    got = values("""
        mov.u32 %r1, %laneid;
        shfl.sync.up.b32 %r2|%p1, %r1, 3, 0, -1;
        shfl.sync.down.b32 %r3, %r1, 4, 0x1f, -1;
        shfl.sync.idx.b32 %r4, %r1, 5, 0x181f, -1;
        mul.lo.s32 %r5, %r2, 10000;
        mad.lo.s32 %r6, %r3, 100, %r5;
        add.s32 %r10, %r6, %r4;""")
    up = np.where(LANE >= 3, LANE - 3, LANE)
    down = np.where(LANE + 4 <= 31, LANE + 4, LANE)
    idx = (LANE & ~7) | 5                          # segments of 8 lanes (segmask 0x18)
    assert got.tolist() == (up * 10000 + down * 100 + idx).tolist()


def test_vote_ballot_match_redux_activemask():
    got = values("""
        mov.u32 %r1, %laneid;
        and.b32 %r2, %r1, 3;
        setp.eq.s32 %p1, %r2, 0;
        vote.sync.ballot.b32 %r3, %p1, -1;
        match.any.sync.b32 %r4, %r2, -1;
        redux.sync.max.u32 %r5, %r1, -1;
        activemask.b32 %r6;
        setp.eq.s32 %p2, %r3, 0x11111111;
        setp.eq.and.s32 %p3, %r6, -1, %p2;
        setp.eq.and.s32 %p4, %r5, 31, %p3;
        selp.b32 %r7, 1, 0, %p4;
        shr.u32 %r8, %r4, %r1;
        and.b32 %r9, %r8, 1;
        popc.b32 %r11, %r4;
        mad.lo.s32 %r10, %r7, 100, %r11;
        add.s32 %r10, %r10, %r9;""")
    assert got.tolist() == [100 + 8 + 1] * 32


def test_bfe_bfi_prmt_lop3_in_a_kernel():
    got = values("""
        mov.u32 %r1, %tid.x;
        bfe.u32 %r2, %r1, 1, 3;
        bfi.b32 %r3, %r2, 0, 4, 4;
        prmt.b32 %r4, %r3, 0, 0x4440;
        lop3.b32 %r10, %r4, 0xff, 0, 0xC0;""")
    assert got.tolist() == (((LANE >> 1) & 7) << 4).tolist()


# --------------------------------------------------------------------------- control flow


def test_divergent_branch_reconverges_after_the_if():
    module = kernel_module("""
        mov.u32 %r1, %tid.x;
        shl.b32 %r2, %r1, 2;
        setp.lt.u32 %p1, %r1, 8;
        @%p1 bra SMALL;
        st.shared.u32 [%r2+128], %r1;
        bra.uni JOIN;
    SMALL:
        st.shared.u32 [%r2], %r1;
    JOIN:
        st.shared.u32 [%r2+256], %r1;
        ret;""", shared=".shared .align 4 .b8 buf[512];\n")
    result = run(module)
    big, small, join = (lanes_of(result, t, module) for t in ("[%r2+128]", "[%r2]", "[%r2+256]"))
    assert len(big) == len(small) == len(join) == 1
    assert active(small[0]).sum() == 8 and active(big[0]).sum() == 24
    assert join[0].tolist() == (256 + 4 * LANE).tolist()        # one execution, whole warp again
    assert small[0][:8].tolist() == (4 * LANE[:8]).tolist() and small[0][8] == INACTIVE


def test_loop_trip_count_from_a_parameter_and_ntid():
    module = kernel_module("""
        ld.param.u32 %r1, [k_param_0];
        mov.u32 %r2, %tid.x;
        mov.u32 %r3, %ntid.x;
        mov.u32 %r4, 0;
    LOOP:
        mad.lo.s32 %r5, %r4, %r3, %r2;
        shl.b32 %r6, %r5, 2;
        st.shared.u32 [%r6], %r4;
        add.s32 %r4, %r4, 1;
        setp.lt.u32 %p1, %r4, %r1;
        @%p1 bra LOOP;
        ret;""", params=".param .u32 k_param_0", shared=".shared .align 4 .b8 buf[4096];\n")
    result = run(module, block=(64, 1, 1), params={"k_param_0": 5})
    assert len(result.accesses) == 5 * 2
    last = result.accesses.address[-1]
    assert last.tolist() == (4 * (4 * 64 + 32 + LANE)).tolist()
    with pytest.raises(InputError, match=r"k_param_0.*--param 0=VALUE"):
        run(module, block=(64, 1, 1))


def test_runaway_loop_is_stopped_with_its_line():
    module = kernel_module("""
    SPIN:
        st.shared.u32 [buf], 1;
        bra.uni SPIN;""", shared=".shared .align 4 .b8 buf[4];\n")
    with pytest.raises(InputError, match="max_steps=1000.*looping at PTX line") as error:
        run(module, max_steps=1000)
    assert error.value.line is not None


def test_missing_block_size_names_the_option():
    module = kernel_module("ret;")
    with pytest.raises(InputError, match="--block"):
        run(module, block=None)


def test_barrier_waits_for_every_warp_and_exit_threads_do_not_block():
    module = kernel_module("""
        mov.u32 %r1, %tid.x;
        shl.b32 %r2, %r1, 2;
        setp.ge.u32 %p1, %r1, 48;
        @%p1 ret;
        st.shared.u32 [%r2], %r1;
        bar.sync 0;
        st.shared.u32 [%r2+512], %r1;
        ret;""", shared=".shared .align 4 .b8 buf[1024];\n")
    result = run(module, block=(64, 1, 1))
    first, second = lanes_of(result, "[%r2]", module), lanes_of(result, "[%r2+512]", module)
    assert len(first) == len(second) == 2
    assert active(second[1]).sum() == 16                      # warp 1 lost lanes 48..63 at the ret
    order = result.accesses.instruction.tolist()
    assert order[:2] == [order[0]] * 2                         # both warps store before either passes the barrier


def test_warp_size_64_groups_two_nvidia_warps():
    module = kernel_module("""
        mov.u32 %r1, %tid.x;
        shl.b32 %r2, %r1, 2;
        st.shared.u32 [%r2], %r1;
        ret;""", shared=".shared .align 4 .b8 buf[1024];\n")
    result = run(module, block=(128, 1, 1), warp_size=64)
    assert result.accesses.address.shape == (2, 64)
    assert result.accesses.address[1].tolist() == (4 * (64 + np.arange(64))).tolist()


# --------------------------------------------------------------------------- taint


def test_data_dependent_branch_is_explored_soundly_and_the_rest_counted():
    module = kernel_module("""
        ld.param.u64 %rd1, [k_param_0];
        mov.u32 %r1, %tid.x;
        shl.b32 %r2, %r1, 2;
        st.shared.u32 [%r2], %r1;
        ld.global.u32 %r3, [%rd1];
        setp.eq.s32 %p1, %r3, 0;
        @%p1 bra SKIP;
        st.shared.u32 [%r2+128], %r1;
    SKIP:
        st.shared.u32 [%r2+256], %r1;
        ret;""", params=".param .u64 k_param_0", shared=".shared .align 4 .b8 buf[512];\n")
    result = run(module)
    # the stores before the branch and after it rejoins are counted exactly (every lane, known addresses)
    assert len(result.accesses) == 2
    assert result.accesses.address[1].tolist() == (256 + 4 * np.arange(32)).tolist()
    # the store under the branch: which lanes run it is unknown
    (entry,) = result.unresolved
    assert entry["ptx"].split()[-2] == "[%r2+128]," and entry["uncounted"]
    assert "branch at PTX line" in entry["reason"] and "loaded from memory" in entry["reason"]


@pytest.mark.parametrize("index_test, combination, decided", [
    ("setp.ge.s32 %p1, %r1, 64;", "setp.lt.and.s32 %p2, %r3, 5, %p1;", True),   # false AND unknown
    ("setp.lt.s32 %p1, %r1, 64;", "setp.lt.or.s32 %p2, %r3, 5, %p1;", True),    # unknown OR true
    ("setp.ge.s32 %p1, %r1, 64;", "setp.lt.s32 %p4, %r3, 5;\n        and.pred %p2, %p4, %p1;", True),
    ("setp.lt.s32 %p1, %r1, 64;", "setp.lt.s32 %p4, %r3, 5;\n        or.pred %p2, %p1, %p4;", True),
    ("setp.lt.s32 %p1, %r1, 64;", "setp.lt.and.s32 %p2, %r3, 5, %p1;", False),  # true AND unknown
])
def test_a_known_index_test_decides_a_comparison_of_an_unknown_key(index_test, combination, decided):
    """CUB's merge compares a key loaded past its list's end where its index test has decided the step: the
    combination is known (both levels: tests/test_sass_emulate.py for ISETP)."""
    module = kernel_module(f"""
        ld.param.u64 %rd1, [k_param_0];
        mov.u32 %r1, %tid.x;
        shl.b32 %r2, %r1, 2;
        ld.global.u32 %r3, [%rd1];
        {index_test}
        {combination}
        @%p2 bra SKIP;
        st.shared.u32 [%r2], %r1;
    SKIP:
        ret;""", params=".param .u64 k_param_0", shared=".shared .align 4 .b8 buf[512];\n")
    assert (not run(module).unresolved) == decided


def test_registers_written_under_an_unknown_branch_are_unknown_after_it():
    module = kernel_module("""
        ld.param.u64 %rd1, [k_param_0];
        mov.u32 %r1, %tid.x;
        shl.b32 %r2, %r1, 2;
        ld.global.u32 %r3, [%rd1];
        setp.eq.s32 %p1, %r3, 0;
        @%p1 bra SKIP;
        add.s32 %r2, %r2, 128;
    SKIP:
        st.shared.u32 [%r2], %r1;
        st.shared.u32 [%r2+256], %r1;
        shl.b32 %r4, %r1, 3;
        st.shared.u32 [%r4], %r1;
        ret;""", params=".param .u64 k_param_0", shared=".shared .align 4 .b8 buf[1024];\n")
    result = run(module)
    assert len(result.accesses) == 1 and result.accesses.address[0].tolist() == (8 * np.arange(32)).tolist()
    assert {u["ptx"].split()[-2] for u in result.unresolved} == {"[%r2],", "[%r2+256],"}
    assert all(u["executions"] == 1 and "branch whose direction is unknown" in u["reason"]
               for u in result.unresolved)


def test_approximate_float_address_is_unresolved_and_the_rest_analysed():
    got_module = kernel_module("""
        mov.u32 %r1, %tid.x;
        cvt.rn.f32.u32 %f1, %r1;
        ex2.approx.f32 %f2, %f1;
        cvt.rzi.u32.f32 %r2, %f2;
        st.shared.u32 [%r2], %r1;
        shl.b32 %r3, %r1, 2;
        st.shared.u32 [%r3], %r1;
        ret;""", shared=".shared .align 4 .b8 buf[512];\n")
    result = run(got_module)
    assert len(result.accesses) == 1
    assert result.unresolved[0]["reason"] == "address depends on floating-point arithmetic"


def test_exact_float_arithmetic_gives_addresses():
    # (tid + 0.5) * 3.0, fma with 0.25, rounded down: floor(3 tid + 1.75) = 3 tid + 1 words
    module = kernel_module("""
        mov.u32 %r1, %tid.x;
        cvt.rn.f32.u32 %f1, %r1;
        add.rn.f32 %f2, %f1, 0f3F000000;
        fma.rn.f32 %f3, %f2, 0f40400000, 0f3E800000;
        cvt.rmi.s32.f32 %r2, %f3;
        setp.gtu.f32 %p1, %f3, 0f42C80000;
        shl.b32 %r3, %r2, 2;
        @!%p1 st.shared.u32 [%r3], %r1;
        ret;""", shared=".shared .align 4 .b8 buf[1024];\n")
    result = run(module)
    assert not result.unresolved
    lanes = np.arange(32)
    active = 3 * (lanes + 0.5) + 0.25 <= 100.0
    assert result.accesses.address[0].tolist() == np.where(active, 4 * (3 * lanes + 1), -1).tolist()


def test_cta_dependent_address_analyses_every_cta_or_a_stated_sample():
    module = kernel_module("""
        mov.u32 %r1, %tid.x;
        mov.u32 %r2, %ctaid.x;
        and.b32 %r3, %r2, 3;
        shl.b32 %r4, %r3, 7;
        mad.lo.s32 %r5, %r1, 4, %r4;
        st.shared.u32 [%r5], %r1;
        ret;""", shared=".shared .align 4 .b8 buf[512];\n")
    full = run(module, grid=(8, 1, 1))
    assert full.scale == 1 and full.analysed_ctas == list(range(8))
    per_cta = full.accesses.address[np.argsort(full.accesses.cta)]
    assert [row[0] // 128 for row in per_cta] == [c % 4 for c in range(8)]
    assert full.cta_dependence
    seen = []
    sample = emulate(module, "k", resolve_launch(Launch(block=(32, 1, 1), grid=(8, 1, 1), ctas=3), module.kernel("k")),
                     progress=lambda done, total: seen.append((done, total)))
    assert sample.scale is None and sample.sampled == (3, 8) and len(sample.accesses) == 3
    assert sample.analysed_ctas == [0, 4, 7] and seen[-1] == (3, 3)


def test_cta_independent_kernel_scales_one_cta_exactly():
    module = kernel_module("""
        mov.u32 %r1, %tid.x;
        mov.u32 %r2, %ctaid.x;
        shl.b32 %r3, %r1, 2;
        st.shared.u32 [%r3], %r2;
        ret;""", shared=".shared .align 4 .b8 buf[512];\n")
    result = run(module, grid=(4, 3, 2), block=(64, 1, 1))
    assert result.scale == 24 and result.analysed_ctas == [0] and len(result.accesses) == 2
    # the value stored depends on the CTA, the address does not: counts are exact per CTA
    assert not result.cta_dependence


BRANCH_TABLE_BODY = """
        mov.u32 %r1, %tid.x;
        mov.u32 %r9, 0;
        {jump}
    L0:
        shl.b32 %r2, %r1, 7;
        st.shared.u32 [%r2], %r1;
        bra.uni DONE;
    L1:
        shl.b32 %r2, %r1, 2;
        st.shared.u32 [%r2], %r1;
    DONE:
        ret;"""


def test_an_indexed_branch_is_never_taken_as_a_jump_to_its_table():
    """``brx.idx`` through a ``.branchtargets`` table (issue 21): the branch is not followed, so the counts are
    partial with the reason, never the table label's fall-through reported as exact; the same kernel with a
    direct branch counts the 32-way store."""
    shared = ".shared .align 4 .b8 buf[4096];\n"
    direct = run(kernel_module(BRANCH_TABLE_BODY.format(jump="bra.uni L0;"), shared=shared))
    assert len(direct.accesses) == 1 and not direct.unresolved
    indexed = kernel_module(BRANCH_TABLE_BODY.format(jump="ts: .branchtargets L0, L1;\n        brx.idx %r9, ts;"),
                            shared=shared)
    result = run(indexed)
    assert len(result.accesses) == 0
    assert any("indirect branch (brx.idx)" in note for note in result.notes + [u["reason"] for u in result.unresolved])


def test_registers_named_without_a_percent_sign_are_followed_through_shared_memory():
    # PTX registers need no "%": a value loaded from shared memory into q1 decides the next store's address, so
    # shared contents must be kept for it (they were not while "which names are registers" read the "%")
    module = kernel_module("""
        .reg .b32 q<4>;
        mov.u32 %r1, %tid.x;
        shl.b32 %r2, %r1, 2;
        mov.u32 %r3, tab;
        add.u32 %r4, %r3, %r2;
        mul.lo.u32 %r5, %r1, 128;
        st.shared.u32 [%r4], %r5;
        bar.sync 0;
        ld.shared.u32 q1, [%r4];
        mov.u32 %r6, data;
        add.u32 %r7, %r6, q1;
        st.shared.u32 [%r7], %r1;
        ret;""", shared=".shared .align 4 .b32 tab[32];\n.shared .align 4 .b32 data[1024];\n")
    stored = lanes_of(run(module), "[%r7]", module)
    assert stored.shape == (1, 32) and (stored[0] - stored[0][0]).tolist() == (LANE * 128).tolist()
