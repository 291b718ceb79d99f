"""wmma.load / wmma.store from shared memory at the PTX level: counted as ptxas lowers them (LDSM, LDS/STS,
generic LD/ST; traceconf/ptx/wmma_lowering.json), so the PTX level agrees with the SASS level kind by kind on
every shape, layout and type (tests/fixtures/wmma), with a note that the SASS level is authoritative."""

from __future__ import annotations

import importlib.util
import json

import pytest
from typer.testing import CliRunner

from conftest import FIXTURES, REPO
from test_emulate_support import kernel_module, lanes_of, parse_path, run
from traceconf import tools
from traceconf.cli import app
from traceconf.ptx.wmma import WMMA_NOTE, fragment_registers, lowering, lowering_table, wmma_access

SHAPES = FIXTURES / "wmma" / "wmma_shapes.sm_90.ptx"
GEMM = FIXTURES / "wmma" / "wmma_tiled.sm_90.ptx"
needs_tools = pytest.mark.skipif(tools.locate("ptxas") is None or tools.locate("nvdisasm") is None,
                                 reason="needs ptxas and nvdisasm (CUDA toolkit or NVIDIA pip wheels)")


def analyse(path, level: str, *options: str) -> dict:
    result = CliRunner().invoke(app, ["analyze", str(path), "--level", level, "-f", "json", *options])
    assert result.exit_code == 0, result.output
    return {r["kernel"]: r for r in json.loads(result.stdout)["results"]}


def totals(result: dict) -> dict:
    return {kind: (t["executions"], t["wavefronts"], t["ideal_wavefronts"])
            for kind, t in result["totals"].items() if t["executions"]}


@pytest.mark.slow
@needs_tools
@pytest.mark.parametrize("ldm", [32, 40])
def test_every_shape_layout_and_type_counts_as_the_sass_level(ldm):
    options = ("--block", "32", "--param", f"4={ldm}")
    ptx, sass = analyse(SHAPES, "ptx", *options), analyse(SHAPES, "sass", *options)
    assert len(ptx) == 21
    for kernel, result in ptx.items():
        assert not result["partial"] and not sass[kernel]["partial"], kernel
        assert totals(result) == totals(sass[kernel]), kernel


def test_each_wmma_instruction_says_the_sass_level_is_authoritative():
    result = run(parse_path(SHAPES), "h16_rr_f32", params={"h16_rr_f32_param_4": 40})
    notes = [note for note in result.notes if WMMA_NOTE in note]
    assert [note.split(" (")[0] for note in notes] == ["PTX line 140", "PTX line 142", "PTX line 144", "PTX line 146"]


@pytest.mark.slow
@needs_tools
def test_tiled_gemms_count_as_the_sass_level_and_a_float_division_changes_nothing_at_the_ptx_level():
    # n = k = 64 (4 k-steps of half and bf16, 8 of tf32), alpha = beta = 1.0f
    options = ("--block", "128", "--param", "4=64", "--param", "5=64", "--param", "6=0x3f800000",
               "--param", "7=0x3f800000")
    ptx, sass = analyse(GEMM, "ptx", *options), analyse(GEMM, "sass", *options)
    for kernel in ("gemm_half", "gemm_bf16", "gemm_tf32"):
        assert not ptx[kernel]["partial"] and not sass[kernel]["partial"]
        assert totals(ptx[kernel]) == totals(sass[kernel]), kernel
        assert totals(ptx[kernel + "_div"]) == totals(ptx[kernel]) and not ptx[kernel + "_div"]["partial"]
    # the half GEMM's A and B fragments are one LDSM.x4 each, as ptxas emits them
    assert totals(ptx["gemm_half"])["ldmatrix"][0] == 4 * 4 * 4      # 4 warps x 4 k-steps x (2 A + 2 B)


def test_the_lowering_table_covers_every_wmma_instruction_of_the_isa():
    spec = importlib.util.spec_from_file_location("wmma_lowering", REPO / "scripts" / "wmma_lowering.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    configurations = set(script.configurations())      # accumulators are shared by several A/B types
    assert len(configurations) == 114
    table = lowering_table()
    for matrix, layout, shape, type_ in configurations:
        for space in ("shared", "generic"):
            accesses = lowering(matrix, layout, shape, type_, space)
            assert accesses, (matrix, layout, shape, type_, space)
            assert all(a["kind"] in (("st",) if matrix == "d" else ("ld", "ldmatrix")) for a in accesses)
    assert len(table) == 2 * len(configurations)


@pytest.mark.parametrize("modifiers, expected", [
    (["load", "a", "sync", "aligned", "row", "m16n16k16", "shared", "f16"], ("a", "row", "m16n16k16", "f16", "shared")),
    (["load", "c", "sync", "aligned", "col", "m8n8k4", "f64"], ("c", "col", "m8n8k4", "f64", "generic")),
    (["store", "d", "sync", "aligned", "row", "m16n16k8", "shared::cta", "f32"],
     ("d", "row", "m16n16k8", "f32", "shared")),
    (["load", "b", "sync", "aligned", "col", "m8n8k128", "global", "b1"], None),
    (["mma", "sync", "aligned", "row", "row", "m16n16k16", "f32", "f32"], None),
])
def test_wmma_instructions_are_read_from_their_modifiers(modifiers, expected):
    assert wmma_access("wmma", modifiers) == expected


def test_fragment_registers_follow_the_isa():
    assert fragment_registers("a", "m32n8k16", "f16") == 8 and fragment_registers("c", "m16n16k16", "f16") == 4
    assert fragment_registers("a", "m8n32k16", "bf16") == 2 and fragment_registers("b", "m8n32k16", "s8") == 4
    assert fragment_registers("c", "m8n8k4", "f64") == 2 and fragment_registers("a", "m8n8k128", "b1") == 1


def test_lane_addresses_of_a_row_major_f16_a_fragment_and_the_default_stride():
    # wmma.load.a row-major f16 m16n16k16 in shared memory is one LDSM.16.M88.4: lane l gives the address of
    # row l % 16, column (l / 16) * 8; without a stride operand the row is the matrix's 16 elements
    module = kernel_module("""
        mov.u32 %r1, tile;
        wmma.load.a.sync.aligned.row.m16n16k16.shared.f16 {%r2, %r3, %r4, %r5, %r6, %r7, %r8, %r9}, [%r1], 24;
        wmma.load.a.sync.aligned.row.m16n16k16.shared.f16 {%r2, %r3, %r4, %r5, %r6, %r7, %r8, %r9}, [%r1];
        wmma.load.a.sync.aligned.row.m16n16k16.global.f16 {%r2, %r3, %r4, %r5, %r6, %r7, %r8, %r9}, [%rd1];
        ret;""", shared=".shared .align 256 .b8 tile[2048];\n")
    result = run(module)
    lane = __import__("numpy").arange(32)
    strided = lanes_of(result, "[%r1], 24", module)
    packed = lanes_of(result, "%r9}, [%r1]", module)[1:]
    assert strided.tolist() == [((lane % 16) * 48 + (lane // 16) * 16).tolist()]
    assert packed.tolist() == [((lane % 16) * 32 + (lane // 16) * 16).tolist()]
    assert result.accesses.kind.tolist() == [3, 3] and result.accesses.matrices.tolist() == [4, 4]
    assert len(result.accesses) == 2          # the global load makes no shared access
