"""The PTX ISA's own example instructions (tests/data/ptx_isa_examples.txt) parse, by the statement cache
and by the grammar alike, and real CUB code (nvcc's PTX of CUB block primitives) parses and is analysed."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import FIXTURES
from test_ptx_parse import HEADER, kernel, same_as_grammar
from traceconf.cli import app
from traceconf.ptx import parse_file

EXAMPLES = Path(__file__).parent / "data" / "ptx_isa_examples.txt"
CUB = FIXTURES / "cub" / "cub_parse.sm_90.ptx"


def _examples() -> dict[str, list[str]]:
    sections = defaultdict(list)
    for line in EXAMPLES.read_text().splitlines():
        if line and not line.startswith("#"):
            section, statement = line.split("\t")
            sections[section].append(statement)
    return dict(sections)


SECTIONS = _examples()


def test_the_table_holds_the_isa_examples():
    assert sum(map(len, SECTIONS.values())) >= 450 and len(SECTIONS) >= 100


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_isa_examples_parse_the_same_by_both_paths(section):
    # one statement per line, and all of the section's statements on one line inside a scope block (inline asm)
    statements = SECTIONS[section]
    for body in ("\n".join(statements), "{ " + " ".join(statements) + " }"):
        module = same_as_grammar(HEADER + kernel(body))
        rows = module.instructions_of("k")
        assert [row["text"] + ";" for row in rows] == statements


def test_value_and_predicate_destinations_and_other_operand_forms():
    body = "\n".join([
        "shfl.sync.up.b32 r0|p, %r1, 1, 0, -1;",
        "setp.lt.and.s32 %p1|_, %r1, 4, %p2;",
        "tex.3d.v4.s32.s32 {r1,r2,r3,r4}|p, [tex_a,{f1,f2,f3,f4}];",
        "mov.u32 ptr, A+20;",
        "cvta.shared::cta.u32 ptr, A - 4;",
        "mov.u32 ptr, A+-8;",
        "mov.u32 ptr, A[5];",
        "ld.global.f32 d, [ugbl].unified;",
        "vmad.s32.s32.u32.sat r0, r1.h10, r2.b3210, -r3;",
        "mov.u32 %r2, %dynamic_smem_size;",
        "ld.shared::cluster.v8.b32 {%r1, _, %r3, _, %r5, %r6, %r7, %r8}, [%r9+-16];",
    ])
    rows = same_as_grammar(HEADER + ".shared .b32 A[8];\n" + kernel(body)).instructions_of("k")
    operand = [row["operands"] for row in rows]
    assert operand[0][0]["kind"] == "vector" and operand[0][0]["elements"] == ["r0", "p"]
    assert operand[1][0]["elements"] == ["%p1", "_"]
    assert operand[2][0]["elements"] == ["r1", "r2", "r3", "r4", "p"] and operand[2][0]["text"] == "{r1,r2,r3,r4}|p"
    assert (operand[3][1]["kind"], operand[3][1]["name"], operand[3][1]["value"]) == ("symbol", "A", 20)
    assert (operand[4][1]["kind"], operand[4][1]["value"]) == ("symbol", -4)
    assert (operand[5][1]["kind"], operand[5][1]["value"]) == ("symbol", -8)
    operand, rows = operand[1:], rows[1:]
    assert (operand[5][1]["kind"], operand[5][1]["name"], operand[5][1]["value"]) == ("element", "A", 5)
    assert (operand[6][1]["kind"], operand[6][1]["name"]) == ("address", "ugbl")
    assert [op["name"] for op in operand[7][1:]] == ["r1.h10", "r2.b3210", "r3"] and operand[7][3]["kind"] == "neg"
    assert operand[8][1]["name"] == "%dynamic_smem_size"
    assert rows[9]["vector"] == 8 and rows[9]["access_bytes"] == 32 and operand[9][1]["value"] == -16


def test_scoped_registers_are_renamed_per_block_both_paths_alike():
    body = ("{ .reg .s32 r0; .reg .pred p; shfl.sync.up.b32 r0|p, %r1, 1, 0, -1; @p add.s32 r0, r0, %r1; "
            "mov.s32 %r2, r0; }\n"
            "{\n.reg .b32 %r1, t<2>;\nmov.u32 %r1, t1;\n{ .reg .b32 %r1; mov.u32 %r1, t0; }\nmov.u32 %r3, %r1;\n}\n"
            "mov.u32 %r4, %r1;")
    module = same_as_grammar(HEADER + kernel(".reg .b32 %r<5>;\n" + body))
    rows = module.instructions_of("k")
    names = [[op["name"] if op["kind"] != "vector" else op["elements"] for op in row["operands"]] for row in rows]
    assert names[0][0] == ["{1}r0", "{1}p"] and rows[1]["guard"] == "{1}p" and names[2] == ["%r2", "{1}r0"]
    assert names[3] == ["{2}%r1", "{2}t1"] and names[4] == ["{3}%r1", "{2}t0"] and names[5] == ["%r3", "{2}%r1"]
    assert names[6] == ["%r4", "%r1"]
    assert all(op["kind"] == "reg" for row in rows for op in row["operands"] if op["kind"] not in ("vector", "imm"))
    declared = [r["name"] for r in module.kernel("k")["registers"]]
    assert declared == ["%r", "{1}r0", "{1}p", "{2}%r1", "{2}t", "{3}%r1"]


def analyse_cub(*options: str) -> dict:
    result = CliRunner().invoke(app, ["analyze", str(CUB), "--level", "ptx", "-f", "json", *options])
    assert result.exit_code == 0, result.output
    return {r["kernel"]: r for r in json.loads(result.stdout)["results"]}


@pytest.mark.slow
def test_cub_block_primitives_parse_and_every_kernel_is_analysed():
    """nvcc -arch=sm_90 -ptx tests/fixtures/cub/cub_parse.cu (CUB of the CUDA 13 toolkit): its warp scans
    are inline PTX blocks with `d|p` destinations and scoped registers."""
    module = parse_file(CUB)
    kernels = [name for name in module.kernel_names() if "EmptyKernel" not in name]
    assert len(kernels) == 13
    text = CUB.read_text()
    assert "shfl.sync.up.b32 r0|p" in text and ".reg .pred p;" in text
    found = analyse_cub("--block", "128")
    found.update(analyse_cub("-k", "scan_raking_memoize_short", "--block", "96"))
    found.update(analyse_cub("-k", "reduce_commutative_odd", "--block", "100"))
    assert set(kernels) <= set(found)
    # without --data, the kernels whose shared addresses do not depend on the input are exact
    for name in ("scan_warp_scans", "scan_raking", "reduce_warp_reductions", "reduce_raking",
                 "load_store_transpose", "scan_raking_memoize_short", "reduce_commutative_odd",
                 "load_store_warp_transpose", "exchange_shuffle_discontinuity"):
        assert not found[name]["partial"] and found[name]["totals"]["st"]["executions"] > 0, name
    # the sorts and histograms address shared memory by the keys: unresolved with that reason
    for name in ("radix_sort", "histogram_atomic", "histogram_sort", "merge_sort_double"):
        assert found[name]["partial"]
        assert all("loaded from memory" in u["reason"] or "branch" in u["reason"] for u in found[name]["unresolved"])
