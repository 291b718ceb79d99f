"""SASS control transfers to a register (BRX/BRXU jump tables, calls through function pointers) and local memory
(spills, a called function's saved registers): followed exactly where the binary tells the targets and values,
otherwise the counts are partial with the reason — never a wrong "exact" (issue 21).

The differential tests run one CUDA fixture (tests/fixtures/differential/control_flow.cu) in which each kernel pair
makes the same shared-memory stores, once with direct control flow and once through a jump table, a function
pointer or a local array: both must give the same counts, complete."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from traceconf import tools
from traceconf.cli import app
from traceconf.emulate import Launch
from traceconf.sass.emulate import emulate_sass
from traceconf.sass.listing import parse_text

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "differential" / "control_flow.sm_90.ptx"
needs_tools = pytest.mark.skipif(any(tools.locate(t) is None for t in ("ptxas", "nvdisasm", "cuobjdump")),
                                 reason="needs ptxas, nvdisasm and cuobjdump (CUDA toolkit or NVIDIA pip wheels)")
#: st wavefronts of the stores s[t], s[2t], s[32t], s[33t] (which = 0..3 of local_pointer's choices)
STRIDES = {1: 1, 2: 2, 32: 32, 33: 1}


def analyze(kernel: str, which: int) -> dict:
    result = CliRunner().invoke(app, ["analyze", str(FIXTURE), "--level", "sass", "--kernel", kernel, "--block", "32",
                                      "--param", f"{kernel}_param_1={which}", "-f", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["results"][0]


def counts(result: dict) -> dict:
    return {kind: (t["executions"], t["wavefronts"]) for kind, t in result["totals"].items() if t["executions"]}


@needs_tools
@pytest.mark.parametrize("which", range(4))
def test_a_jump_table_counts_as_direct_branches(which):
    """brx.idx compiles to BRXU on a uniform index: it used to fall through (1 wavefront, 'exact')."""
    direct, table = analyze("direct_branch", which), analyze("jump_table", which)
    assert not direct["partial"] and not table["partial"], table["unresolved"]
    assert counts(table) == counts(direct)
    assert counts(table)["st"] == (1, [32, 1, 2, 4][which])


@needs_tools
@pytest.mark.parametrize("which", range(2))
def test_a_call_through_a_function_pointer_counts_as_a_direct_call(which):
    """CALL.REL.NOINC R8 used to be a call to pc 0 (no shared access, 'exact'); the callee's saved registers
    (STL/LDL) used to come back unknown and left the load after the call unresolved."""
    direct, pointer = analyze("direct_call", which), analyze("pointer_call", which)
    assert not direct["partial"] and not pointer["partial"], pointer["unresolved"]
    assert counts(pointer) == counts(direct) == {"ld": (1, 1), "st": (1, 32 if which else 1)}


@needs_tools
@pytest.mark.parametrize("which", range(4))
def test_a_pointer_kept_in_local_memory_stays_a_shared_pointer(which):
    in_registers, in_local = analyze("register_pointer", which), analyze("local_pointer", which)
    assert not in_registers["partial"] and not in_local["partial"], in_local["unresolved"]
    assert counts(in_local) == counts(in_registers)
    assert counts(in_local)["st"] == (1, STRIDES[[1, 2, 32, 33][which]])


# ---------------------------------------------------------------------------------------------- listings

def listing(body: list[str]) -> str:
    lines = ["\tcode for sm_75", "\t\tFunction : k"]          # sm_75: no reserved shared window
    for index, text in enumerate(body + ["EXIT ;"]):
        lines.append(f"        /*{index * 16:04x}*/                   {text.rstrip(';')} ;")
    return "\n".join(lines) + "\n"


def run(body: list[str], constants: dict[int, bytes] | None = None, block=(32, 1, 1)):
    module = parse_text(listing(body), "t.sass")
    if constants is not None:
        module.constants = {"k": constants}
    return emulate_sass(module, "k", Launch(block=block, grid=(1, 1, 1)))


TID = "S2R R0, SR_TID.X"
#: BRXU through a table in constant bank 2: entry i holds the pc of case i (offsets from the function's start)
JUMP = [TID, "MOV R5, 0x4", "ULDC UR4, c[0x2][0x4]", "BRXU UR4 -0x40",
        "STS [R0.X4], RZ", "BRA 0x90", "IMAD.SHL.U32 R2, R0, 0x80, RZ", "STS [R2], RZ", "NOP"]
TABLE = (0x40).to_bytes(4, "little") + (0x60).to_bytes(4, "little")


def test_brxu_follows_the_jump_table_of_the_binary():
    result = run(JUMP, {2: TABLE})
    assert not result.unresolved and not result.notes
    assert (result.accesses.address[0] == np.arange(32) * 0x80).all()      # case 1: s[32 t]


def test_brxu_without_the_jump_table_is_partial_with_the_reason():
    """A listing carries no constant bank 2: the branch cannot be followed, and the counts say so."""
    result = run(JUMP)
    assert len(result.accesses.address) == 0
    reasons = {entry["reason"] for entry in result.unresolved}
    assert any("indirect branch (BRXU): the address in UR4 is not known" in reason for reason in reasons), reasons


def test_brx_per_thread_targets_diverge():
    """BRX on a per-thread register: each lane goes where its own entry points."""
    body = [TID, "LOP3.LUT R3, R0, 0x1, RZ, 0xc0, !PT", "LDC R4, c[0x2][R3.X4]", "BRX R4 -0x50",
            "STS [R0.X4], RZ", "BRA 0xa0", "IMAD.SHL.U32 R2, R0, 0x80, RZ", "STS [R2], RZ", "NOP", "NOP"]
    result = run(body, {2: (0x50).to_bytes(4, "little") + (0x70).to_bytes(4, "little")})
    assert not result.unresolved
    addresses = {int(i): a for i, a in zip(result.accesses.instruction, result.accesses.address)}
    assert sorted(addresses) == [4, 7]                     # both cases ran: even lanes case 0, odd ones case 1


def test_an_indirect_call_is_never_a_call_to_pc_0():
    body = [TID, "LDC.64 R8, c[0x2][0x8]", "MOV R20, 0x40", "CALL.REL.NOINC R8 `(k)", "STS [R0.X4], RZ", "EXIT",
            "IMAD.SHL.U32 R2, R0, 0x80, RZ", "STS [R2], RZ", "RET.REL.NODEC R20 `(k)"]
    followed = run(body, {2: bytes(8) + (0x60).to_bytes(8, "little")})
    assert not followed.unresolved
    assert [int(i) for i in followed.accesses.instruction] == [7, 4]
    unknown = run(body)
    assert any("indirect call: the address in R8 is not known" in entry["reason"] for entry in unknown.unresolved)
    assert len(unknown.accesses.address) == 0


def test_a_spilled_shared_pointer_comes_back_as_one():
    body = [TID, "LDC R1, c[0x0][0x28]", "S2R R5, SR_SWINHI", "IMAD.SHL.U32 R4, R0, 0x80, RZ", "IADD3 R1, R1, -0x8, RZ",
            "STL.64 [R1], R4", "MOV R4, RZ", "MOV R5, RZ", "LDL.64 R2, [R1]", "ST.E [R2.64], RZ"]
    result = run(body)
    assert not result.unresolved
    assert (result.accesses.address[0] == np.arange(32) * 0x80).all()


def test_sub_word_local_stores_and_signed_loads():
    body = [TID, "LDC R1, c[0x0][0x28]", "MOV R3, 0x12345678", "STL [R1], R3", "MOV R4, 0xff", "STL.U8 [R1+0x1], R4",
            "LDL.S8 R5, [R1+0x1]", "LDL R6, [R1]", "IADD3 R5, R5, 0x2, RZ", "STS [R5], RZ",
            "LOP3.LUT R6, R6, 0xffff, RZ, 0xc0, !PT", "STS [R6], RZ"]
    result = run(body)
    assert not result.unresolved
    assert (result.accesses.address[0] == 1).all()            # -1 + 2
    assert (result.accesses.address[1] == 0xFF78).all()       # byte 1 replaced


def test_a_generic_access_through_an_unknown_pointer_is_flagged_never_global():
    """A pointer loaded from global memory (or a word of local memory never stored) may point into shared memory:
    the access is unresolved with the reason, not silently taken as a global one."""
    body = [TID, "LDC R1, c[0x0][0x28]", "LDL.64 R2, [R1]", "ST.E [R2.64], RZ"]
    result = run(body)
    assert any("whether it is shared memory is unknown" in entry["reason"] for entry in result.unresolved)


def test_a_generic_access_through_a_pointer_parameter_without_a_value_is_global():
    """A pointer parameter is the host's pointer (a shared address exists only on the device): without a value
    it points to global memory, as the PTX level takes it, and the access is not an unresolved shared one
    (nvcc's PTX of ../shared/corpus/cp_async.ptx stores through ``ld.param`` pointers with generic ``st``)."""
    body = [TID, "LDC.64 R2, c[0x0][0x168]", "ST.E [R2.64], RZ", "STS [R0], RZ"]
    result = run(body)
    assert not result.unresolved
    assert len(result.accesses.address) == 1          # the STS; the generic store is global


SLOW_PATH = FIXTURE.with_name("slow_path.sm_90.ptx")
STRIDE_PARAM = {"divide_then_store": 3, "sqrt_then_store": 2, "store_only": 3}


@needs_tools
@pytest.mark.parametrize("kernel", ["divide_then_store", "sqrt_then_store"])
@pytest.mark.parametrize("stride", [1, 32])
def test_what_follows_a_slow_path_call_is_analysed(kernel, stride):
    """beta /= alpha (FCHK, then a CALL to the division slow path) used to stop the kernel at the SASS level
    ('not analysed past ... floating-point arithmetic', 0 wavefronts); the subroutine touches no shared memory,
    so whole warps skip it and what comes after is exact."""
    def run_kernel(name):
        result = CliRunner().invoke(app, ["analyze", str(SLOW_PATH), "--level", "sass", "--kernel", name,
                                          "--block", "32", "--param", f"{name}_param_{STRIDE_PARAM[name]}={stride}",
                                          "-f", "json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)["results"][0]
    followed, plain = run_kernel(kernel), run_kernel("store_only")
    assert not followed["partial"], followed["unresolved"]
    assert counts(followed) == counts(plain) == {"ld": (1, 1), "st": (1, stride)}


#: A branch on an unknown value around a call to a subroutine placed after the kernel's code (as ptxas places the
#: division slow path); the store after the rejoin point uses the thread index only.
AROUND_CALL = [TID, "ISETP.GT.AND P0, PT, R8, 0x1, PT", "@!P0 BRA 0x50", "MOV R6, 0x50",
               "CALL.REL.NOINC 0x90", "STS [R0.X4], RZ", "EXIT", "BRA 0x70", "NOP", "MOV R5, 0x7",
               "RET.REL.NODEC R6 0x0"]


def test_whole_warps_skip_a_slow_path_call():
    result = run(AROUND_CALL)                      # R8: never written, unknown in every lane
    assert not result.unresolved
    assert (result.accesses.address[0] == np.arange(32) * 4).all()


def test_a_warp_split_at_a_call_is_not_skipped():
    """Where some lanes of a warp know their way into the subroutine, skipping it for the others would run the
    code after the rejoin point twice: the branch stops instead, and the counts say so."""
    odd = ["LOP3.LUT P1, RZ, R0, 0x1, RZ, 0xc0, !PT", "SEL R8, R9, 0x5, P1"]   # unknown in odd lanes, 5 in even
    result = run([TID, *odd, "ISETP.GT.AND P0, PT, R8, 0x1, PT", "@!P0 BRA 0x70", "MOV R6, 0x70", "CALL.REL.NOINC 0xb0",
                  "STS [R0.X4], RZ", "EXIT", "BRA 0x90", "NOP", "MOV R5, 0x7", "RET.REL.NODEC R6 0x0"])
    assert len(result.accesses.address) == 0
    assert any("not analysed past" in entry["reason"] for entry in result.unresolved), result.unresolved


CUB = FIXTURE.with_name("cub_sort.sm_90.cubin")


@needs_tools
@pytest.mark.parametrize("kernel, dtype, low, high", [("radix_sort", np.int32, -1000, 1000),
                                                      ("histogram_sort", np.uint8, 0, 256)])
def test_cub_radix_sort_and_histogram_sort_are_complete_with_their_data(tmp_path, kernel, dtype, low, high):
    """BMSK/UBMSK (the radix digit mask) were not modelled: every access after them was unresolved."""
    data = tmp_path / "in.npy"
    np.save(data, np.random.default_rng(7).integers(low, high, 512).astype(dtype))
    result = CliRunner().invoke(app, ["analyze", str(CUB), "--kernel", kernel, "--block", "128",
                                      "--data", f"param_0={data}", "-f", "json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)["results"][0]
    assert not found["partial"], found["unresolved"][:3]
    assert counts(found)["st"][0] > 0 and counts(found)["ld"][0] > 0


REDUCE7 = FIXTURE.with_name("reduce7.sm_90.ptx")


@needs_tools
@pytest.mark.parametrize("kernel", ["_Z7reduce7IfLj256ELb1EEvPKT_PS0_j", "_Z7reduce7IiLj256ELb1EEvPKT_PS0_j"])
def test_reduce7_resolves_at_the_sass_level_as_at_the_ptx_level(kernel):
    """The final LDS was unresolved at the SASS level ('branch whose direction depends on floating-point
    arithmetic': the float steps of the u16 division helper) while the PTX level resolves it."""
    found = {}
    for level in ("ptx", "sass"):
        result = CliRunner().invoke(app, ["analyze", str(REDUCE7), "--level", level, "--kernel", kernel,
                                          "--block", "256", "--grid", "4", "--param", f"{kernel}_param_2=4096",
                                          "--dynamic-smem", "1024", "-f", "json"])
        assert result.exit_code == 0, result.output
        found[level] = json.loads(result.stdout)["results"][0]
        assert not found[level]["partial"], (level, found[level]["unresolved"])
    assert counts(found["sass"]) == counts(found["ptx"]) == {"ld": (4, 4), "st": (32, 32)}


def test_float_steps_on_known_values_are_evaluated_without_data():
    """ptxas's u16 division helper: 256 / 32 through I2FP, FMUL.RZ and F2I, from constants only."""
    helper = ["I2FP.F32.U32.RZ R5, 0x100", "FMUL.RZ R5, R5, 0.031250007450580596924", "F2I.U32.TRUNC.NTZ R5, R5"]
    result = run([TID, *helper, "IMAD R2, R0, R5, RZ", "STS [R2.X4], RZ"])
    assert not result.unresolved
    assert (result.accesses.address[0] == np.arange(32) * 8 * 4).all()
    unknown = run([TID, "I2FP.F32.U32.RZ R5, R9", "FMUL.RZ R5, R5, 0.5", "F2I.U32.TRUNC.NTZ R5, R5",
                   "STS [R5.X4], RZ"])                  # R9 never written: the float steps stay unknown
    assert any("floating-point arithmetic" in entry["reason"] for entry in unknown.unresolved), unknown.unresolved


def test_jmx_jumps_to_the_absolute_address_and_an_unknown_return_stops():
    jump = run([TID, "MOV R4, 0x40", "JMX R4", "STS [R0.X4], RZ", "IMAD.SHL.U32 R2, R0, 0x80, RZ", "STS [R2], RZ"])
    assert not jump.unresolved and [int(i) for i in jump.accesses.instruction] == [5]
    # the caller never set the return address R20: the subroutine's store counts, what follows the call does not
    ret = run([TID, "CALL.REL.NOINC 0x40", "STS [R0.X4+0x80], RZ", "EXIT", "STS [R0.X4], RZ", "RET.REL.NODEC R20 0x0"])
    assert any("return: the address in R20 is not known" in entry["reason"] for entry in ret.unresolved)
    assert [int(i) for i in ret.accesses.instruction] == [4]
