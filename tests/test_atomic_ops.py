"""The operation of an access (atomics; the cp.async forms) travels from every producer to the rules: PTX
emulator, SASS opcode table and emulator, traces."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from test_emulate_support import kernel_module, run
from traceconf.accesses import from_table
from traceconf.emulate.allocation import stand_in
from traceconf.engine import count_wavefronts
from traceconf.errors import InputError
from traceconf.pipeline import run_trace
from traceconf.rules import load_rule_set
from traceconf.sass.opcodes import shared_op
from traceconf.schemas import OPS


@pytest.mark.parametrize("opcode, op", [
    ("ATOMS.POPC.INC.32", "popc_inc"), ("ATOMS.ADD", "add"), ("ATOMS.CAS", "cas"), ("ATOMS.CAS.64", "cas"),
    ("ATOMS.CAST.SPIN.64", "cas_spin"), ("ATOMS.EXCH.64", "exch"), ("ATOMS.MIN.S32", "min"), ("ATOMS.INC", "inc"),
    ("RED.E.ADD.STRONG.GPU", "add"), ("ATOM.E.OR", "or"), ("LDS.U.128", ""), ("STS", ""),
    ("LDGSTS.E.BYPASS.128", "bypass"), ("LDGSTS.E.BYPASS.128.ZFILL", "bypass_zfill"),
    ("LDGSTS.E.BYPASS.LTC128B.128", "bypass"), ("LDGSTS.E.128.ZFILL", ""), ("LDGSTS.E.64", ""),
])
def test_sass_opcodes_name_their_operation(opcode, op):
    assert shared_op(opcode).op == op


def _atomic(line: str, extra: str = "") -> str:
    return f"""
        mov.u32 %r1, %tid.x;
        shl.b32 %r2, %r1, 2;
        {line}
        {extra}
        ret;"""


@pytest.mark.parametrize("line, extra, op", [
    ("atom.shared.add.u32 %r3, [%r2], 1;", "", "popc_inc"),          # result never read: ATOMS.POPC.INC
    ("red.shared.add.u32 [%r2], 1;", "", "popc_inc"),
    ("atom.shared.add.u32 %r3, [%r2], 1;", "st.shared.u32 [%r2+512], %r3;", "add"),   # result read
    ("atom.shared.add.u32 %r3, [%r2], %r1;", "", "add"),
    ("atom.shared.cas.b32 %r3, [%r2], %r1, 7;", "", "cas"),
    ("atom.shared.exch.b32 %r3, [%r2], %r1;", "", "exch"),
    ("atom.shared.inc.u32 %r3, [%r2], 100;", "", "inc"),
    ("atom.shared.min.s32 %r3, [%r2], %r1;", "", "min"),
])
def test_the_emulator_records_the_operation_ptxas_emits(line, extra, op):
    result = run(kernel_module(_atomic(line, extra), shared=".shared .align 4 .b8 buf[1024];\n"))
    atomics = result.accesses.kind == 2
    assert [OPS[code] for code in result.accesses.op[atomics]] == [op]


def test_a_uniform_add_is_one_leader_atomic_a_per_lane_one_is_not():
    module = kernel_module("""
        mov.u32 %r1, %tid.x;
        mov.u32 %r2, buf;
        atom.shared.add.u32 %r3, [%r2], %r1;
        shl.b32 %r4, %r1, 2;
        atom.shared.add.u32 %r5, [%r4], %r1;
        st.shared.u32 [%r4+512], %r3;
        st.shared.u32 [%r4+640], %r5;
        ret;""", shared=".shared .align 4 .b8 buf[1024];\n")
    acc = run(module).accesses
    atomics = np.flatnonzero(acc.kind == 2)
    assert [int((acc.address[i] >= 0).sum()) for i in atomics] == [1, 32]
    assert acc.address[atomics[0], 31] == 0                      # lane 31 carries the warp's sum


def test_atomics_return_the_old_value_in_lane_order_and_update_shared_memory():
    module = kernel_module("""
        mov.u32 %r1, %tid.x;
        shl.b32 %r2, %r1, 2;
        st.shared.u32 [%r2], 0;
        bar.sync 0;
        and.b32 %r3, %r1, 3;
        shl.b32 %r4, %r3, 2;
        atom.shared.add.u32 %r5, [%r4], 1;
        shl.b32 %r6, %r5, 2;
        st.shared.u32 [%r6+256], %r1;
        ret;""", shared=".shared .align 4 .b8 buf[1024];\n")
    acc = run(module).accesses
    # lane t is the (t // 4)-th lane on word t % 4: the old value it gets is t // 4
    last = acc.address[-1]
    assert last.tolist() == (256 + 4 * (np.arange(32) // 4)).tolist()


def test_canonical_tables_carry_the_operation():
    rows = {"kernel": ["k"] * 2, "cta": [0, 0], "warp": [0, 0], "execution": [0, 1], "instruction": [1, 2],
            "lane": [0, 0], "address": [0, 0], "bytes": [4, 4], "kind": ["atom", "atom"], "matrices": [0, 0],
            "op": ["cas", None]}
    (acc,) = from_table(pa.table(rows))
    assert [OPS[c] for c in acc.op] == ["cas", ""]
    wavefronts, ideal, _ = count_wavefronts(acc, load_rule_set("sm_90"))
    assert wavefronts.tolist() == [2, 1] and ideal.tolist() == [2, 1]
    assert acc.to_table().column("op").to_pylist() == ["cas", ""]
    with pytest.raises(ValueError, match="unknown operation 'fetch'"):
        from_table(pa.table({**rows, "op": ["fetch", None]}))


@pytest.mark.parametrize("body, message", [
    ("[atomic_ops.swap]\npasses = 2\n", "unknown atomic operation 'swap'"),
    ("[atomic_ops.cas]\npasses = 0\n", "expected an integer from 1 to 8"),
    ("[atomic_ops.cas]\nmerge = true\n", "allowed keys are merge_same_word, passes, group_passes, plus_plain"),
    ("[copy_ops.cas]\npasses = 2\n", "unknown copy operation 'cas'"),
    ("[copy_ops.bypass]\ngroup_passes = \"rows\"\n", "expected one of banks, placements"),
    ("[copy_ops.bypass]\nplus_plain = 1\n", "plus_plain: expected true or false"),
    ("[copy_ops.bypass]\nsource_passes = \"rows\"\n", "source_passes: expected 'lines'"),
    ("[atomic_ops.cas]\nsource_passes = \"lines\"\n", "source_passes: expected 'lines' \\(copy operations only"),
    ("[copy_ops.bypass_zfill]\nsource_passes = \"\"\nsource_model_note = \"x\"\n",
     "source_model_note: needs source_passes"),
    ("[copy_ops.bypass]\nfill_passes = \"lines\"\n", "fill_passes: expected 'runs' \\(with source_passes"),
    ("[copy_ops.bypass]\nsource_passes = \"\"\nsource_model_note = \"\"\n", "fill_passes: expected 'runs' \\(with"),
    ("[copy_ops.bypass]\nfill_always = 1\n", "fill_always: expected true or false"),
    ("[copy_ops.bypass_zfill]\nfill_passes = \"\"\n", "fill_always: needs fill_passes"),
    ("[copy_ops.bypass]\nsource_passes = \"lines\"\nsource_model_note = 3\n", "source_model_note: expected one line"),
])
def test_bad_atomic_op_rules_are_one_clear_error(tmp_path, body, message):
    path = tmp_path / "bad.toml"
    path.write_text(f'alias_of = "sm_90"\nname = "bad"\ntitle = "t"\nevidence = "unverified"\n{body}')
    with pytest.raises(InputError, match=message):
        load_rule_set(str(path))


@pytest.mark.parametrize("opcode, op", [("ATOMS.POPC.INC.32 RZ, [R2], RZ", "popc_inc"),
                                        ("ATOMS.CAS R4, [R2], R4, R5", "cas"), ("ATOMS.EXCH.64 R4, [R2], R4", "exch"),
                                        ("ATOMS.ADD RZ, [R2], R0", "add")])
def test_the_sass_emulator_records_the_operation_of_the_opcode(opcode, op):
    from test_sass_emulate import run as run_sass
    result = run_sass(["S2R R0, SR_TID.X", "IMAD.SHL.U32 R2, R0, 0x8, RZ", opcode])
    assert [OPS[code] for code in result.accesses.op] == [op]


def _copy(line: str, setup: str = "") -> str:
    return _atomic(setup + "\n        " + line, "cp.async.wait_all;")


@pytest.mark.parametrize("line, setup, op", [
    ("cp.async.ca.shared.global [%r2], [%rd1], 16;", "", ""),
    ("cp.async.ca.shared.global [%r2], [%rd1], 16, %r5;", "ld.param.u32 %r5, [n];", ""),
    ("cp.async.cg.shared.global [%r2], [%rd1], 16;", "", "bypass"),
    ("cp.async.cg.shared.global [%r2], [%rd1], 16, 16;", "", "bypass"),
    ("cp.async.cg.shared.global [%r2], [%rd1], 16, 8;", "", "bypass_zfill"),
    # a register: ptxas keeps .ZFILL unless every write of it gives 0 or 16 (measured SASS: ldgsts.cu, Triton)
    ("cp.async.cg.shared.global [%r2], [%rd1], 16, %r5;", "ld.param.u32 %r5, [n];", "bypass_zfill"),
    ("cp.async.cg.shared.global [%r2], [%rd1], 16, %r5;", "mov.u32 %r5, 16;", "bypass"),
    ("cp.async.cg.shared.global [%r2], [%rd1], 16, %r5;", "setp.lt.u32 %p1, %r1, 9;\n selp.b32 %r5, 16, 0, %p1;",
     "bypass"),
    ("cp.async.cg.shared.global [%r2], [%rd1], 16, %r5;", "setp.lt.u32 %p1, %r1, 9;\n selp.b32 %r5, 16, 4, %p1;",
     "bypass_zfill"),
])
def test_the_emulator_records_the_cp_async_form_ptxas_emits(line, setup, op):
    shift = "shl.b32 %r2, %r1, 4;"         # 16 bytes per lane, replacing the 4 of _atomic
    module = kernel_module(_copy(line, "mov.u64 %rd1, 0;\n " + shift + "\n " + setup),
                           params=".param .u32 n", shared=".shared .align 16 .b8 buf[1024];\n")
    result = run(module, params={"n": 16})
    copies = result.accesses.kind == 5
    assert [OPS[code] for code in result.accesses.op[copies]] == [op]


@pytest.mark.parametrize("line, setup, base", [
    ("cp.async.cg.shared.global [%r2], [%rd2], 16;", "mov.u64 %rd1, 4096;", 4096),
    # no --param for p: an offset from its stand-in, taken at cudaMalloc's alignment (traceconf.emulate.allocation)
    ("cp.async.cg.shared.global [%r2], [%rd2], 16;", "ld.param.u64 %rd1, [p];", stand_in(0)),
    # a src-size operand: the lanes that read (here all, 16 bytes) are counted from their sources too
    ("cp.async.cg.shared.global [%r2], [%rd2], 16, %r5;", "mov.u64 %rd1, 4096;\n mov.u32 %r5, 16;", 4096),
])
def test_the_emulator_records_a_copys_global_sources_where_known(line, setup, base):
    """ACCESSES ``source``: each lane's global source (here base + 32 * lane) where the pointer is known."""
    body = _copy(line, setup + "\n shl.b32 %r2, %r1, 4;\n mul.wide.u32 %rd3, %r1, 32;\n add.u64 %rd2, %rd1, %rd3;")
    module = kernel_module(body, params=".param .u64 p", shared=".shared .align 16 .b8 buf[1024];\n")
    accesses = run(module).accesses
    copies = accesses.kind == 5
    known = base is not None
    expected = [base + 32 * lane for lane in range(32)] if known else None
    assert (accesses.source[copies][0].tolist() if accesses.source is not None else None) == \
        (expected if known else (None if accesses.source is None else [-1] * 32))
    if known:           # 32-byte source stride, 16-byte destination stride: every lane its own key (4 from the
        assert count_wavefronts(accesses, load_rule_set("sm_90"))[0][copies].tolist() == [32]   # shared addresses)


def test_the_sass_emulator_records_an_ldgsts_global_sources():
    from test_sass_emulate import run as run_sass
    lines = ["S2R R0, SR_TID.X", "IMAD.SHL.U32 R2, R0, 0x10, RZ", "IMAD.WIDE.U32 R4, R0, 0x10, RZ"]
    plain = run_sass(lines + ["LDGSTS.E.BYPASS.128 [R2], desc[UR6][R4.64]"]).accesses
    assert plain.source[0].tolist() == [16 * lane for lane in range(32)] and plain.src_size is None
    # the ignore-src operand: sources only where the lane reads as Nsight reads it (true; P0 taken as false),
    # src-size 16 there and 0 where it zero-fills
    odd = ["LOP3.LUT R6, R0, 0x1, RZ, 0xc0, !PT", "ISETP.NE.U32.AND P1, PT, R6, RZ, PT"]
    for operand, reading in (("P0", []), ("!P0", range(32)), ("P1", range(1, 32, 2)), ("!P1", range(0, 32, 2))):
        ignore_src = run_sass(lines + odd + [f"LDGSTS.E.BYPASS.128 [R2], desc[UR6][R4.64], {operand}"]).accesses
        assert ignore_src.source[0].tolist() == [16 * lane if lane in reading else -1 for lane in range(32)], operand
        assert ignore_src.src_size[0].tolist() == [16 if lane in reading else 0 for lane in range(32)], operand
    # .ZFILL: the zero-filled bytes in the address's low bits (src-size 8 here), P0 taken as true
    for operand, reading in (("", range(32)), (", P0", range(32)), (", !P0", []), (", P1", range(1, 32, 2))):
        zfill = run_sass(lines + odd + [f"LDGSTS.E.BYPASS.128.ZFILL [R2], desc[UR6][R4.64+0x8]{operand}"]).accesses
        assert zfill.source[0].tolist() == [16 * lane if lane in reading else -1 for lane in range(32)], operand
        assert zfill.src_size[0].tolist() == [8 if lane in reading else 0 for lane in range(32)], operand


#: P0 holds in lanes 8-31 (lanes 0-7 pass ``@!P0``, as in the cp.async matmul's ``t4x < BLOCK_SIZE``)
HIGH_LANES = ["S2R R0, SR_TID.X", "ISETP.GT.AND P0, PT, R0, 0x7, PT", "ISETP.GT.AND P1, PT, R0, 0x7, PT"]
ADDRESSES = ["IMAD.SHL.U32 R2, R0, 0x10, RZ", "IMAD.WIDE.U32 R4, R0, 0x10, RZ"]
COPY = "LDGSTS.E.BYPASS.128 [R2], desc[UR6][R4.64]"


def test_nsight_counts_every_lane_of_a_copy_under_not_p0_with_its_registers():
    """``@!P0 LDGSTS``: Nsight reads P0 as false there, so it counts every lane that reached the copy, the 24 the
    guard turns off included, at the addresses their registers hold; another guard register keeps its lanes."""
    from test_sass_emulate import run as run_sass
    lanes = list(range(32))
    for guard, counted in (("@!P0", lanes), ("@!P1", lanes[:8])):
        result = run_sass(HIGH_LANES + ADDRESSES + [f"{guard} {COPY}"])
        assert not result.unresolved, result.unresolved
        (address,), (source,) = result.accesses.address.tolist(), result.accesses.source.tolist()
        assert address == [16 * lane if lane in counted else -1 for lane in lanes], guard
        assert source == [16 * lane if lane in counted else -1 for lane in lanes], guard
        # 32 lanes: 32 contiguous 16-byte chunks from 4 lines, 4 wavefronts (ideal 4); 8 lanes: 1 (ideal 1)
        wavefronts, ideal, _ = count_wavefronts(result.accesses, load_rule_set("sm_90"))
        assert (wavefronts.tolist(), ideal.tolist()) == (([4], [4]) if guard == "@!P0" else ([1], [1]))


def test_nsight_counts_no_lane_of_a_copy_under_p0():
    from test_sass_emulate import run as run_sass
    result = run_sass(HIGH_LANES + ADDRESSES + [f"@P0 {COPY}", f"@P1 {COPY}"])
    assert not result.unresolved, result.unresolved
    assert result.accesses.instruction.tolist() == [6] and (result.accesses.address[0] >= 0).sum() == 24


@pytest.mark.parametrize("setup, state", [
    # the addresses computed under the guard (the cp.async matmul): never written in the lanes it turns off
    ([f"@!P0 {line}" for line in ADDRESSES], "the kernel never wrote there: what the page counts is not a function "
                                              "of the program"),
    # the shared destination known everywhere, the global source only where the guard holds
    (ADDRESSES[:1] + [f"@!P0 {ADDRESSES[1]}"], "the kernel never wrote there"),
    # written everywhere, from memory in the lanes the guard turns off
    (ADDRESSES + ["LDC.64 R6, c[0x0][0x160]", "@P0 LDG.E R2, [R6.64]"], "hold values that depend on data loaded "
                                                                         "from memory"),
])
def test_a_copy_under_not_p0_whose_turned_off_lanes_hold_unknown_addresses_is_unresolved(setup, state):
    """What Nsight counts there depends on registers the program leaves unknown: unresolved, never a guess."""
    from test_sass_emulate import run as run_sass
    result = run_sass(HIGH_LANES + setup + [f"@!P0 {COPY}"])
    assert result.accesses.kind.size == 0
    (entry,) = result.unresolved
    assert entry["reason"].startswith("Nsight counts the 24 lanes the guard @!P0 turns off (it reads P0 as false "
                                      f"for LDGSTS), whose address registers {state}"), entry["reason"]
    assert entry["executions"] == 1


def test_a_copy_under_p0_still_writes_shared_memory_where_the_guard_holds():
    """Only the count follows Nsight's reading: ``@P0 LDGSTS`` overwrites its destination where P0 holds (what it
    copies is unknown), so a branch on the word read back is unknown there and decided elsewhere."""
    from test_sass_emulate import _with_shared_memory
    for threshold, unresolved in (("0x7", True), ("0x40", False)):
        body = ["S2R R0, SR_TID.X", f"ISETP.GT.AND P0, PT, R0, {threshold}, PT", *ADDRESSES, "STS [R2], RZ",
                f"@P0 {COPY}", "LDS R3, [R2]", "ISETP.NE.AND P1, PT, R3, RZ, PT", "@P1 BRA 0xa0",
                "STS [R2+0x800], RZ"]
        result = _with_shared_memory(body, 8192)
        assert bool(result.unresolved) == unresolved, threshold
        assert result.accesses.kind.tolist().count(5) == 0


def test_canonical_tables_carry_the_sources():
    rows = {"kernel": ["k"] * 3, "cta": [0] * 3, "warp": [0] * 3, "execution": [0, 0, 1], "instruction": [1, 1, 2],
            "lane": [0, 1, 0], "address": [0, 16, 0], "bytes": [16, 16, 4], "kind": ["cp_async", "cp_async", "ld"],
            "matrices": [0] * 3, "op": ["bypass", "bypass", None], "source": [1024, 0, None]}
    (acc,) = from_table(pa.table(rows))
    assert acc.source[:, :2].tolist() == [[1024, 0], [-1, -1]]
    assert acc.to_table().column("source").to_pylist() == [1024, 0, None]
    # two lines, one lane each, into one bank row: 2 from the sources (1 from the shared addresses)
    assert count_wavefronts(acc, load_rule_set("sm_90"))[0].tolist() == [2, 1]
    (without,) = from_table(pa.table({k: v for k, v in rows.items() if k != "source"}))
    assert without.source is None and count_wavefronts(without, load_rule_set("sm_90"))[0].tolist() == [1, 1]
    # src_size: lane 1 zero-fills (no source needed), lane 0 reads; one line, one quarter-warp: 1 + its fill pass
    (filled,) = from_table(pa.table({**rows, "source": [1024, None, None], "src_size": pa.array([16, 0, None],
                                                                                              pa.int16())}))
    assert filled.src_size[:, :2].tolist() == [[16, 0], [-1, -1]]
    assert filled.to_table().column("src_size").to_pylist() == [16, 0, None]
    assert count_wavefronts(filled, load_rule_set("sm_90"))[0].tolist() == [2, 1]
    with pytest.raises(ValueError, match="a negative src-size"):
        from_table(pa.table({**rows, "src_size": pa.array([16, -2, None], pa.int16())}))


def test_a_canonical_csv_carries_the_sources_and_src_sizes(tmp_path):
    """A copy where odd lanes zero-fill (src_size 0, no source) and even lanes read 16 bytes from one aligned run:
    the sources of the reading lanes (4, every pair of lanes split) plus one fill run per quarter-warp."""
    header = "kernel,cta,warp,execution,instruction,lane,address,bytes,kind,op,source,src_size"
    rows = [f"k,0,0,0,1,{lane},{16 * lane},16,cp_async,bypass,{16 * lane if lane % 2 == 0 else ''},{16 * (lane % 2 == 0)}"
            for lane in range(32)]
    path = tmp_path / "copies.csv"
    path.write_text("\n".join([header] + rows) + "\n")
    [analysis], failures = run_trace(path, None, [load_rule_set("sm_90")])
    assert not failures
    assert [(r["wavefronts"], r["ideal_wavefronts"]) for r in analysis.results.to_pylist()] == [(8, 6)]


def test_an_accelsim_trace_carries_the_copy_form(tmp_path):
    base = 0x7F0000000000
    lines = ["-kernel name = k", "-grid dim = (1,1,1)", "-block dim = (32,1,1)", f"-shmem base_addr = 0x{base:x}",
             "-accelsim tracer version = 4", "", "#BEGIN_TB", "thread block = 0,0,0", "warp = 0", "insts = 2",
             f"0000 ffffffff 0 LDGSTS.E.BYPASS.128 2 R2 R4 16 1 0x{base:x} 32",
             f"0010 ffffffff 0 LDGSTS.E.BYPASS.128.ZFILL 2 R2 R4 16 1 0x{base:x} 16", "#END_TB"]
    path = tmp_path / "kernel-1.traceg"
    path.write_text("\n".join(lines) + "\n")
    [analysis], failures = run_trace(path, None, [load_rule_set("sm_90")])
    assert not failures
    # 32-byte stride: 8 placements per quarter-warp; contiguous: 1 each, plus the STS.128 count of the fill
    assert [r["wavefronts"] for r in analysis.results.to_pylist()] == [32, 8]
