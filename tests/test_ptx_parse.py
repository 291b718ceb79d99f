"""PTX grammar → KERNELS/INSTRUCTIONS: hand-written snippets for every construct.

The grammar is the definition: every snippet is parsed twice, by the
production path's statement cache (with its fallback to the grammar switched
off) and by the plain whole-file Lark parse (``parse_ptx_by_grammar``), and the
tables must be identical.  Hypothesis-generated operands, statements and bodies
check the same agreement, errors included.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from conftest import FIXTURES
from traceconf.errors import InputError
from traceconf.ptx import PtxModule, parse_file, parse_ptx
from traceconf.ptx import shapes
from traceconf.ptx.grammar import ptx_parser
from traceconf.ptx.parse import build_module, grammar_records, parse_ptx_by_grammar, prepare
from traceconf.ptx.records import Function, Variable
from traceconf.ptx.statements import Fallback, StatementCache
from traceconf.schemas import INSTRUCTIONS, KERNELS

HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"


def statement_cache_module(source: str | bytes, filename: str) -> PtxModule:
    """What :func:`parse_ptx` computes, its fallback to the grammar switched off (raises Fallback)."""
    return build_module(filename, *_statement_cache_records(prepare(source, filename), filename))


def _statement_cache_records(text: str, _filename: str) -> tuple:
    statements = StatementCache(ptx_parser())
    return statements.parse(text), statements.bodies


def canonical(records: list, bodies) -> list:
    """What the table builder gets from either reader: module-level records, each function body
    as its list of atoms (an instruction with its PTX line: the only atom whose line is used)."""
    atoms, lines, item_starts = bodies.expanded()
    out = []
    for record in records:
        if type(record) is Function and record.body is not None:
            span = slice(item_starts[record.body.start], item_starts[record.body.stop])
            record = record._replace(body=[
                (bodies.atoms[atom], line) if type(bodies.atoms[atom]) is tuple else
                bodies.atoms[atom]._replace(line=None) if type(bodies.atoms[atom]) is Variable else
                bodies.atoms[atom] for atom, line in zip(atoms[span].tolist(), lines[span].tolist())])
        out.append(record)
    return out


def same_as_grammar(source: str | bytes, filename: str = "t.ptx") -> PtxModule:
    """The statement cache's module; what it hands the table builder must be exactly what the
    whole-file grammar parse hands it (so the tables are identical too)."""
    text = prepare(source, filename)
    records, bodies = _statement_cache_records(text, filename)
    fast, reference = canonical(records, bodies), canonical(*grammar_records(text, filename))
    assert fast == reference or repr(fast) == repr(reference)     # repr: NaN operands compare equal
    return build_module(filename, records, bodies)


def parse(text: str, header: str = HEADER) -> PtxModule:
    return same_as_grammar(header + text)


def kernel(body: str, params: str = "", name: str = "k") -> str:
    return f".visible .entry {name}({params})\n{{\n{body}\n}}\n"


def only(module: PtxModule, name: str = "k") -> list[dict]:
    return module.instructions_of(name)


def test_tables_have_the_documented_schemas():
    module = parse(kernel("ret;"))
    assert module.instructions.schema.equals(INSTRUCTIONS)
    assert module.kernels.schema.equals(KERNELS)
    assert (module.version, module.target, module.address_size) == ("8.0", "sm_90", 64)
    assert module.kernel_names() == ["k"]


def test_address_size_defaults():
    assert parse(kernel("ret;"), ".version 2.1\n.target sm_20\n").address_size == 64
    old = parse(kernel("exit;"), ".version 1.4\n.target sm_10, map_f64_to_f32\n")
    assert old.address_size == 32 and old.target == "sm_10" and old.kernel("k")["address_size"] == 32


def test_parameters_pointer_attributes_and_arrays():
    module = parse(kernel("ret;", ".param .u64 .ptr .shared .align 4 a, .param .u64 .ptr.global.align 16 b, "
                                  ".param .u64 .ptr .align 8 c, .param .align 8 .b8 d[16], .param .f32 e"))
    params = module.kernel("k")["params"]
    assert [(p["name"], p["type"], p["bytes"], p["align"], p["ptr_space"], p["array"]) for p in params] == [
        ("a", "u64", 8, 4, "shared", None), ("b", "u64", 8, 16, "global", None),
        ("c", "u64", 8, 8, "generic", None), ("d", "b8", 16, 8, None, 16), ("e", "f32", 4, 4, None, None)]


def test_func_with_return_values_prototypes_and_calls():
    text = (".extern .func (.param .b32 r) proto(.param .b32 x);\n"
            ".visible .func (.param .b32 out) twice(.param .b32 in)\n{\n"
            ".reg .b32 %r<3>;\nld.param.b32 %r1, [in];\nadd.s32 %r2, %r1, %r1;\nst.param.b32 [out], %r2;\nret;\n}\n"
            + kernel(".reg .b32 %r<3>;\n{\n.param .b32 p0;\nst.param.b32 [p0], 1;\n.param .b32 r0;\n"
                     "call.uni (r0), twice, (p0);\nld.param.b32 %r1, [r0];\n}\n"
                     "call (r0), %rd1, (p0), proto_1;\ncall.uni twice, ();\nret;"))
    module = parse(text)
    assert module.function_names() == ["proto", "twice", "k"] and module.kernel_names() == ["k"]
    twice = module.kernel("twice")
    assert not twice["entry"] and twice["visibility"] == "visible"
    assert [r["name"] for r in twice["returns"]] == ["out"] and [p["name"] for p in twice["params"]] == ["in"]
    assert module.kernel("proto")["visibility"] == "extern" and module.instructions_of("proto") == []
    calls = [row for row in only(module) if row["opcode"] == "call"]
    assert [op["kind"] for op in calls[0]["operands"]] == ["vector", "symbol", "vector"]
    assert calls[0]["operands"][0]["elements"] == ["r0"] and calls[2]["operands"][1]["elements"] == []
    assert calls[0]["operands"][2]["text"] == "(p0)"


def test_registers_and_ranges():
    module = parse(kernel(".reg .pred %p<4>;\n.reg .b32 %r<12>, %t;\n.reg .v2.b16 h<2>;\n.reg .b64 %SP;\nret;"))
    registers = module.kernel("k")["registers"]
    assert registers == [{"name": "%p", "type": "pred", "count": 4}, {"name": "%r", "type": "b32", "count": 12},
                         {"name": "%t", "type": "b32", "count": 1}, {"name": "h", "type": "v2.b16", "count": 2},
                         {"name": "%SP", "type": "b64", "count": 1}]


def test_shared_variables_module_function_extern_multidimensional():
    text = (".shared .align 4 .b8 used[128];\n.shared .f32 unused[4];\n.extern .shared .align 16 .b8 dyn[];\n"
            ".global .u32 table[] = {1, 2, 3};\n.const .align 8 .f64 weights[2][3] = {{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}};\n"
            + kernel(".reg .b32 %r<4>;\n.shared .u32 grid[17][17];\n.shared .v4 .f32 quads[8];\n"
                     "mov.u32 %r1, used;\nld.shared.u32 %r2, [dyn+4];\nst.shared.u32 [grid], %r2;\nret;"))
    shared = parse(text).kernel("k")["shared"]
    assert [(v["name"], v["type"], v["bytes"], v["align"], v["extern"], v["scope"]) for v in shared] == [
        ("used", "b8", 128, 4, False, "module"), ("dyn", "b8", 0, 16, True, "module"),
        ("grid", "u32", 17 * 17 * 4, 4, False, "function"), ("quads", "v4.f32", 128, 16, False, "function")]


def test_loc_file_and_inlined_at_resolve_source_lines():
    body = (".loc 1 10 3\nmov.u32 %r1, %tid.x;\n.loc 2 77 3, function_name $L__info_string0, inlined_at 1 22 5\n"
            "ld.shared.u32 %r2, [%r1];\n.loc 1 12 0, function_name .debug_str+16\nret;")
    module = parse(kernel(body) + '.file 1 "/src/k.cu", 1719000000, 1234\n.file 2 "/usr/include/x.h"\n')
    rows = only(module)
    # code a toolkit header inlined is placed at its inlined_at call, the user's line (issue 24, item 11)
    assert [(r["source_file"], r["source_line"]) for r in rows] == [
        ("/src/k.cu", 10), ("/src/k.cu", 22), ("/src/k.cu", 12)]
    user = parse(kernel(body) + '.file 1 "/src/k.cu"\n.file 2 "/src/helpers.cu"\n')
    assert [r["source_line"] for r in only(user)] == [10, 77, 12]      # the user's own inlined helper stays


def test_source_location_does_not_leak_into_the_next_function():
    module = parse(kernel(".loc 1 5 0\nret;", name="a") + kernel("ret;", name="b") + '.file 1 "a.cu"\n')
    assert module.instructions_of("b")[0]["source_line"] is None


def test_performance_directives():
    header = ".visible .entry k() .maxntid 256, 1, 1 .minnctapersm 2 .maxnreg 64\n{\nret;\n}\n" \
             ".entry r() .reqntid 128 .noreturn .explicitcluster .reqnctapercluster 2, 1, 1\n{\nexit;\n}\n"
    module = parse(header)
    k, r = module.kernel("k"), module.kernel("r")
    assert (k["maxntid"], k["minnctapersm"], k["maxnreg"], k["reqntid"]) == ([256, 1, 1], 2, 64, None)
    assert r["reqntid"] == [128] and r["maxntid"] is None and r["visibility"] is None


def test_labels_guards_and_predicates():
    body = ("$L__BB0_1:\n@%p1 bra $L__BB0_2;\n@!%p1 bra.uni $L__BB0_1;\nloop: @p bra loop;\n"
            "$L__BB0_2:\n// a comment\n$L__tmp0:\n  setp.lt.s32 %p1|%p2, %r1, %r2;\nand.pred %p3, %p1, !%p2;\n"
            "$L__end:\n")
    module = parse(kernel(".reg .pred p;\n" + body))
    rows = only(module)
    assert [(r["labels"], r["guard"], r["guard_negated"]) for r in rows] == [
        (["$L__BB0_1"], "%p1", False), ([], "%p1", True), (["loop"], "p", False),
        (["$L__BB0_2", "$L__tmp0"], None, False), ([], None, False)]
    assert rows[0]["operands"][0]["kind"] == "label" and rows[2]["operands"][0]["kind"] == "label"
    assert rows[3]["operands"][0] == {"kind": "vector", "name": None, "value": None, "fvalue": None,
                                      "elements": ["%p1", "%p2"], "text": "%p1|%p2"}
    assert rows[4]["operands"][2]["kind"] == "pred_not" and rows[4]["operands"][2]["name"] == "%p2"


ADDRESSES = [
    ("[%rd1]", "%rd1", 0), ("[%rd1+16]", "%rd1", 16), ("[%rd26+-4]", "%rd26", -4), ("[%r1-8]", "%r1", -8),
    ("[ %r82 + 0 ]", "%r82", 0), ("[sym+8]", "sym", 8), ("[1024]", None, 1024), ("[sym]", "sym", 0),
    ("[%r1+0x10]", "%r1", 16),
]


@pytest.mark.parametrize("text,base,offset", ADDRESSES)
def test_address_operands(text, base, offset):
    module = parse(".shared .b32 sym[4];\n" + kernel(f"ld.shared.u32 %r1, {text};\nret;"))
    operand = only(module)[0]["operands"][1]
    assert (operand["kind"], operand["name"], operand["value"], operand["text"]) == ("address", base, offset, text)


IMMEDIATES = [("0x1F", 31), ("0X1fU", 31), ("017", 15), ("0b101", 5), ("42U", 42), ("-7", -7), ("0", 0),
              ("0xFFFFFFFFFFFFFFFF", -1), ("WARP_SZ", 32)]


@pytest.mark.parametrize("text,value", IMMEDIATES)
def test_integer_immediates(text, value):
    operand = only(parse(kernel(f"mov.u32 %r1, {text};\nret;")))[0]["operands"][1]
    assert (operand["kind"], operand["value"], operand["text"]) == ("imm", value, text)


@pytest.mark.parametrize("text,bits,value", [("0f3F800000", 0x3F800000, 1.0), ("0F40490FDB", 0x40490FDB, 3.1415927),
                                             ("0d3FF0000000000000", 0x3FF0000000000000, 1.0),
                                             ("-0f3F800000", 0xBF800000, -1.0), ("1.5", None, 1.5),
                                             ("2.5e3", None, 2500.0)])
def test_float_immediates(text, bits, value):
    operand = only(parse(kernel(f"mov.f32 %f1, {text};\nret;")))[0]["operands"][1]
    assert operand["kind"] == "float" and operand["value"] == bits and math.isclose(operand["fvalue"], value,
                                                                                       rel_tol=1e-7)


def test_vectors_sinks_and_special_registers():
    body = ("mov.u32 %r1, %tid.x;\nmov.u32 %r2, %ctaid.y;\nld.shared.v4.f32 {%f1, %f2, %f3, %f4}, [%r1];\n"
            "mov.b64 {_, %r3}, %rd1;\nmov.b32 { %r4 }, %r5;\nmbarrier.arrive.shared::cta.b64 _, [%r1];\n"
            "st.b16 [%rd1], x16_0.x;\nret;")
    module = parse(kernel(".reg .v2.b16 x16_<2>;\n" + body))
    rows = only(module)
    assert rows[0]["operands"][1]["name"] == "%tid.x" and rows[0]["operands"][1]["kind"] == "reg"
    assert rows[2]["operands"][0]["elements"] == ["%f1", "%f2", "%f3", "%f4"]
    assert rows[3]["operands"][0]["elements"] == ["_", "%r3"]
    assert rows[4]["operands"][0]["elements"] == ["%r4"] and rows[4]["operands"][0]["text"] == "{ %r4 }"
    assert rows[5]["operands"][0]["kind"] == "reg" and rows[5]["operands"][0]["name"] == "_"
    assert rows[6]["operands"][1]["kind"] == "reg" and rows[6]["operands"][1]["name"] == "x16_0.x"


MEMORY_OPS = [
    # text, opcode, modifiers, state_space, type, vector, access_bytes
    ("ld.volatile.shared::cta.v4.b32 {%r1, %r2, %r3, %r4}, [%r5];", "ld",
     ["volatile", "shared::cta", "v4", "b32"], "shared", "b32", 4, 16),
    ("st.shared::cluster.u64 [%r5], %rd1;", "st", ["shared::cluster", "u64"], "shared", "u64", 1, 8),
    ("ld.shared.v2.f64 {%fd1, %fd2}, [%r5];", "ld", ["shared", "v2", "f64"], "shared", "f64", 2, 16),
    ("st.shared.b128 [%r5], %rq1;", "st", ["shared", "b128"], "shared", "b128", 1, 16),
    ("ld.u8 %rs1, [%rd1];", "ld", ["u8"], "generic", "u8", 1, 1),
    ("ld.global.nc.L1::no_allocate.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1];", "ld",
     ["global", "nc", "L1::no_allocate", "v4", "f32"], "global", "f32", 4, 16),
    ("ld.param.u64 %rd1, [p];", "ld", ["param", "u64"], "param", "u64", 1, 8),
    ("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%r1, %r2, %r3, %r4}, [%r5];", "ldmatrix",
     ["sync", "aligned", "m8n8", "x4", "trans", "shared", "b16"], "shared", "b16", 1, 16),
    ("ldmatrix.sync.aligned.x4.trans.m8n8.shared.b16 {%r1, %r2, %r3, %r4}, [%r5];", "ldmatrix",
     ["sync", "aligned", "x4", "trans", "m8n8", "shared", "b16"], "shared", "b16", 1, 16),
    ("ldmatrix.sync.aligned.m8n8.x2.b16 {%r1, %r2}, [%rd1];", "ldmatrix",
     ["sync", "aligned", "m8n8", "x2", "b16"], "generic", "b16", 1, 16),
    ("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%r5], {%r1, %r2, %r3, %r4};", "stmatrix",
     ["sync", "aligned", "m8n8", "x4", "shared", "b16"], "shared", "b16", 1, 16),
    ("cp.async.cg.shared.global [%r1], [%rd1], 16;", "cp", ["async", "cg", "shared", "global"], "shared", None, 1, 16),
    ("cp.async.ca.shared.global [ %r82 + 0 ], [ %rd4 + 0 ], 0x4, %r34;", "cp",
     ["async", "ca", "shared", "global"], "shared", None, 1, 4),
    ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1], %r2, [%r3];", "cp",
     ["async", "bulk", "shared::cluster", "global", "mbarrier::complete_tx::bytes"], "shared", None, 1, 0),
    ("cp.async.bulk.global.shared::cta.bulk_group [%rd1], [%r1], 256;", "cp",
     ["async", "bulk", "global", "shared::cta", "bulk_group"], "shared", None, 1, 256),
    ("cp.async.commit_group;", "cp", ["async", "commit_group"], None, None, 1, 0),
    ("cp.async.wait_group 0;", "cp", ["async", "wait_group"], None, None, 1, 0),
    ("atom.shared.add.u32 %r1, [%r2], 1;", "atom", ["shared", "add", "u32"], "shared", "u32", 1, 4),
    ("red.shared.add.f64 [%r2], %fd1;", "red", ["shared", "add", "f64"], "shared", "f64", 1, 8),
    ("atom.global.cas.b64 %rd1, [%rd2], %rd3, %rd4;", "atom", ["global", "cas", "b64"], "global", "b64", 1, 8),
    ("mbarrier.init.shared::cta.b64 [%r1], 32;", "mbarrier", ["init", "shared::cta", "b64"], "shared", "b64", 1, 8),
    ("mbarrier.pending_count.b64 %r1, %rd1;", "mbarrier", ["pending_count", "b64"], None, "b64", 1, 0),
    ("cvta.to.shared.u64 %rd1, %rd2;", "cvta", ["to", "shared", "u64"], None, "u64", 1, 0),
    ("wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, p, 1, 1, 0, 1;",
     "wgmma", ["mma_async", "sync", "aligned", "m64n8k16", "f32", "bf16", "bf16"], None, "bf16", 1, 0),
    ("mul.wide.u32 %rd1, %r1, 4;", "mul", ["wide", "u32"], None, "u32", 1, 0),
    ("cvt.s32.u16 %r1, %rs1;", "cvt", ["s32", "u16"], None, "u16", 1, 0),
    ("bar.sync 0;", "bar", ["sync"], None, None, 1, 0),
]


@pytest.mark.parametrize("text,opcode,modifiers,space,type_,vector,nbytes", MEMORY_OPS)
def test_opcode_columns(text, opcode, modifiers, space, type_, vector, nbytes):
    row = only(parse(".shared .b32 p;\n" + kernel(".reg .pred p;\n" + text + "\nret;")))[0]
    assert (row["opcode"], row["modifiers"], row["state_space"], row["type"], row["vector"],
            row["access_bytes"]) == (opcode, modifiers, space, type_, vector, nbytes)
    assert row["text"] == text[:-1]


def test_shared_instructions_mark_generic_accesses():
    body = ("ld.shared.u32 %r1, [%r2];\nld.u32 %r1, [%rd1];\nld.global.u32 %r1, [%rd1];\n"
            "ldmatrix.sync.aligned.m8n8.x1.b16 {%r1}, [%rd1];\natom.add.u32 %r1, [%rd1], 1;\n"
            "cp.async.ca.shared.global [%r1], [%rd1], 4;\ncvta.shared.u64 %rd1, %rd2;\nret;")
    shared = parse(kernel(body)).shared_instructions().to_pylist()
    assert [(r["instruction"], r["state_space"]) for r in shared] == [
        (0, "shared"), (1, "generic"), (3, "generic"), (4, "generic"), (5, "shared")]


def test_names_resolve_to_registers_labels_and_symbols():
    body = (".reg .u32 tid, x<4>;\n.shared .u32 buf[4];\nmov.u32 tid, %tid.x;\nmov.u32 x3, buf;\n"
            "bra END;\nEND:\nmov.u32 x2, table;\nret;")
    rows = only(parse(".global .u32 table[4];\n" + kernel(body)))
    assert [[op["kind"] for op in r["operands"]] for r in rows] == [
        ["reg", "reg"], ["reg", "symbol"], ["label"], ["reg", "symbol"], []]


def test_same_name_is_a_register_in_one_function_and_a_symbol_in_another():
    text = ".global .u32 v;\n" + kernel(".reg .u32 v;\nmov.u32 v, 1;\nret;", name="a") + \
        kernel("mov.u32 %r1, v;\nmov.u32 v, 1;\nret;", name="b")
    module = parse(text)
    assert module.instructions_of("a")[0]["operands"][0]["kind"] == "reg"
    assert module.instructions_of("b")[1]["operands"][0]["kind"] == "symbol"


def test_scoping_blocks_inline_asm_and_multiline_statements():
    body = ("{ .reg .b64 %tmp;\n  cvta.to.shared.u64 %tmp, %rd1;\n  cvt.u32.u64 %r1, %tmp; }\n"
            "{\n.reg .pred p;\nsetp.ne.b32 p, %r1, 0;\n}\n"
            "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16\n  {%f1, %f2,\n   %f3, %f4},\n  %rd1, %rd2, 1, 1, 1;\n"
            "ret;")
    rows = only(parse(kernel(body)))
    assert [r["opcode"] for r in rows] == ["cvta", "cvt", "setp", "wgmma", "ret"]
    assert rows[2]["operands"][0]["kind"] == "reg"
    assert rows[3]["ptx_line"] == rows[2]["ptx_line"] + 2 and rows[3]["operands"][0]["elements"][3] == "%f4"
    assert rows[3]["text"].startswith("wgmma.mma_async") and "\n" in rows[3]["text"]


def test_comments_pragmas_sections_alias_callprototype_branchtargets():
    text = ("/* block\n comment */ .shared .b8 s[4]; // line\n.pragma \"nounroll\";\n"
            + kernel(".reg .b32 %r<3>;\n.pragma \"nounroll\";\nmov.u32 %r1, /* inline */ 2;\n"
                     "proto_1 : .callprototype (.param .b32 _) _ (.param .b64 _);\n"
                     "ts: .branchtargets L1, L2;\nbrx.idx %r1, ts;\nL1:\nL2:\nret;")
            + ".alias k2, k;\n.section .debug_info\n{\n.b32 332\n.b32 .debug_abbrev\n.b8 118,101,99\n"
              ".b64 $L__func_begin0\n$L__info_string0:\n.b8 0\n}\n.section .debug_macinfo { }\n")
    rows = only(parse(text))
    assert [r["opcode"] for r in rows] == ["mov", "brx", "ret"]
    assert rows[0]["text"] == "mov.u32 %r1,              2" and rows[0]["operands"][1]["value"] == 2
    assert rows[2]["labels"] == ["L1", "L2"] and rows[1]["operands"][1]["kind"] == "label"


def test_string_operands_and_texture_addresses():
    body = ('tex.2d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [tex0, {%r1, %r2}];\n'
            'suld.b.1d.v4.b32.trap {%r1, %r2, %r3, %r4}, [surf0, {%r5}];\nret;')
    rows = only(parse(".global .texref tex0;\n.global .surfref surf0;\n" + kernel(body)))
    address = rows[0]["operands"][1]
    assert (address["kind"], address["name"], address["elements"]) == ("address", "tex0", ["%r1", "%r2"])
    assert rows[0]["state_space"] is None


def test_cuobjdump_dump_with_two_modules():
    dump = ("\nFatbin elf code:\n================\narch = sm_90\ncode version = [1,7]\nhost = linux\n"
            "compile_size = 64bit\n\nFatbin ptx code:\n================\narch = sm_80\ncode version = [8,8]\n"
            "host = linux\ncompile_size = 64bit\ncompressed\nptxasOptions = \n\n"
            ".version 8.8\n.target sm_80\n.address_size 64\n" + kernel("ld.shared.u32 %r1, [%r2];\nret;")
            + "\nFatbin ptx code:\n================\narch = sm_90\ncode version = [8,8]\nhost = linux\n"
            "compile_size = 64bit\ncompressed\n\n.version 8.8\n.target sm_90\n.address_size 64\n"
            + kernel("st.shared.u32 [%r2], %r1;\nret;") + kernel("ret;", name="only90"))
    module = parse(dump, header="")
    assert module.kernel_names() == ["k", "k@sm_90", "only90"]
    assert [m.target for m in module.modules] == ["sm_80", "sm_90"]
    assert module.kernel("k@sm_90")["target"] == "sm_90" and module.target == "sm_80"
    assert module.instructions_of("k@sm_90")[0]["opcode"] == "st"
    assert module.instructions_of("k")[0]["ptx_line"] == 23


def test_function_defined_twice_is_an_error():
    with pytest.raises(InputError, match="defined twice"):
        parse_ptx(HEADER + kernel("ret;") + kernel("ret;"), "t.ptx")


def test_module_api_lookups():
    module = parse(kernel("mov.u32 %r1, 1;\nret;", name="a") + ".func f()\n{\nret;\n}\n")
    assert module.kernel_names() == ["a"] and module.function_names() == ["a", "f"]
    assert [r["instruction"] for r in module.instructions_of("a")] == [0, 1]
    assert module.kernel("f")["entry"] is False
    with pytest.raises(KeyError, match="no function 'zz'"):
        module.instructions_of("zz")
    with pytest.raises(KeyError):
        module.kernel("zz")


def test_nvcc_13_fixture():
    path = FIXTURES / "ptx" / "smem_kernels.ptx"
    module = parse_file(path)
    plain = parse_ptx_by_grammar(path.read_bytes(), str(path))
    assert module.instructions.equals(plain.instructions) and module.kernels.equals(plain.kernels)
    assert module.kernel_names() == ["_Z16transpose_paddedPfPKfi", "_Z10async_copyP6float4PKS_",
                                     "_Z11ldmatrix_x4Pj", "_Z9histogramPiPKii"]
    tile = module.kernel("_Z16transpose_paddedPfPKfi")["shared"]
    assert [(v["bytes"], v["scope"]) for v in tile] == [(4224, "function")]
    assert module.kernel("_Z10async_copyP6float4PKS_")["maxntid"] == [128, 1, 1]
    histogram = module.kernel("_Z9histogramPiPKii")["shared"]
    assert [(v["name"], v["extern"], v["bytes"]) for v in histogram] == [("dynamic", True, 0)]
    rows = module.shared_instructions().to_pylist()
    copy = next(r for r in rows if r["opcode"] == "cp")
    # inlined from cuda_pipeline_helpers.h:203 through the toolkit's own helpers: the user's call (issue 24, item 11)
    assert copy["access_bytes"] == 16 and copy["source_line"] == 16 and copy["source_file"].endswith("smem_kernels.cu")
    ldmatrix = next(r for r in rows if r["opcode"] == "ldmatrix")
    assert ldmatrix["source_file"].endswith("smem_kernels.cu") and ldmatrix["source_line"] == 29


# ---------------------------------------------------------------- the shape cache agrees with Lark

_registers = st.sampled_from(["%r1", "%rd12", "%tid.x", "%f3", "x16_0.x", "tid", "_", "$L__BB0_2", "WARP_SZ"])
_integers = st.one_of(st.integers(0, 2**40).map(str), st.integers(0, 2**32).map(hex),
                      st.integers(0, 255).map(lambda v: "0b" + bin(v)[2:]), st.integers(1, 511).map(oct).map(
                          lambda s: "0" + s[2:]))
_floats = st.one_of(st.integers(0, 2**32 - 1).map(lambda v: f"0f{v:08X}"), st.just("1.5"), st.just("2e3"))
_space = st.sampled_from(["", " ", "  ", "\t"])
#: Blanks Python's \s and str.strip() take but the grammar does not ignore: never accepted.
_foreign_blanks = st.sampled_from(["\u00a0", "\u2028", "\v", "\x85", "\u3000", "\x1f"])


@st.composite
def _operand(draw):
    kind = draw(st.integers(0, 5))
    s = draw(_space)
    if kind == 0:
        return draw(_registers)
    if kind == 1:
        return draw(st.sampled_from(["", "-", "- "])) + draw(st.one_of(_integers, _floats))
    if kind == 2:
        offset = draw(st.one_of(st.just(""), _integers.map(lambda v: draw(st.sampled_from(["+", "+-", "-"])) + s + v)))
        return f"[{s}{draw(_registers)}{s}{offset}{s}]"
    if kind == 3:
        return f"[{s}{draw(_integers)}{s}]"
    if kind == 4:
        elements = draw(st.lists(st.one_of(_registers, _integers), min_size=1, max_size=4))
        return "{" + s + ("," + s).join(elements) + s + "}"
    return f"!{draw(_registers)}"


@st.composite
def _operand_list(draw):
    text = ", ".join(draw(st.lists(_operand(), min_size=1, max_size=4)))
    if draw(st.integers(0, 5)) == 0:     # a blank the grammar does not know, anywhere
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(_foreign_blanks) + text[at:]
    return text


@settings(max_examples=200, deadline=None)
@given(_operand_list())
def test_shape_reader_matches_lark(text):
    reader = shapes.ShapeReader(ptx_parser())
    try:
        reference = ptx_parser().parse(text, start="operands")
    except Exception:   # noqa: BLE001 - an invalid operand list must be rejected by both
        with pytest.raises(shapes.NotParsed):
            reader.read_list(text)
        return
    assert repr(reader.read_list(text)) == repr(reference)


def test_grammar_is_found_in_the_source_tree_and_in_a_wheel():
    tomllib = pytest.importorskip("tomllib")   # Python >= 3.11

    from traceconf.ptx.grammar import GRAMMAR_CANDIDATES, grammar_path
    from conftest import REPO
    assert grammar_path() == REPO / "grammars" / "ptx.lark"
    wheel_location = REPO / "traceconf" / "grammars" / "ptx.lark"
    assert wheel_location in GRAMMAR_CANDIDATES and GRAMMAR_CANDIDATES.index(wheel_location) == 0
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert config["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]["grammars"] == "traceconf/grammars"


def test_cli_parse_json_table_and_outputs(tmp_path):
    import json

    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from traceconf.cli import app
    fixture = str(FIXTURES / "ptx" / "smem_kernels.ptx")
    runner = CliRunner()
    result = runner.invoke(app, ["parse", fixture, "--format", "json"])
    assert result.exit_code == 0, result.output
    kernels = json.loads(result.output)
    assert [k["kernel"] for k in kernels][:2] == ["_Z4bumpPi", "_Z16transpose_paddedPfPKfi"]
    transpose = kernels[1]["shared_instructions"]
    assert [(i["opcode"], i["ptx_line"], i["source_line"], i["access_bytes"]) for i in transpose] == [
        ("st.shared.f32", 74, 9, 4), ("ld.shared.f32", 81, 11, 4)]
    table = runner.invoke(app, ["parse", fixture, "-o", str(tmp_path / "i.parquet")], env={"COLUMNS": "250"})
    assert table.exit_code == 0 and "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in table.output
    assert "_ZZ16transpose_paddedPfPKfiE4tile (4224 B, align 4, function)" in table.output
    assert "[%r" in table.output, "address operands must survive rich markup"
    assert pq.read_table(tmp_path / "i.parquet").equals(parse_file(fixture).instructions)
    assert runner.invoke(app, ["parse", fixture, "-o", str(tmp_path / "i.csv")]).exit_code == 0
    csv = pa_csv.read_csv(tmp_path / "i.csv")
    assert csv.num_rows == parse_file(fixture).instructions.num_rows and "operands" in csv.column_names


def test_instruction_ids_are_module_wide_row_numbers():
    """Accesses made inside a called .func keep their own id, distinct from the caller's."""
    module = parse_file(str(FIXTURES / "cuda" / "strides.sm_90.ptx"))
    ids = module.instructions.column("instruction").to_pylist()
    assert ids == list(range(len(ids)))
    assert len(module.kernel_names()) > 1


_declaration = st.builds(
    "{}{}{}{} {}{}{};".format,
    st.sampled_from(["", ".extern ", ".visible ", ".weak .extern "]),
    st.sampled_from([".reg", ".shared", ".local", ".param", ".shared::cta", ".const", ".global"]),
    st.lists(st.sampled_from([" .align 4", " .align 16", " .v2", " .v4", " .b8", " .u32", " .f64", " .pred",
                              " .b128"]), max_size=3).map("".join),
    st.sampled_from([" ", "  ", "\t"]),
    st.sampled_from(["%r", "%rd", "tile", "_Z4tileE3buf", "$s", "%p"]),
    st.sampled_from(["", "<4>", " < 12 >", "<0x10>", "<09>"]),
    st.lists(st.sampled_from(["[32]", "[ 33 ]", "[]", "[0]", "[0x8]"]), max_size=2).map("".join))
_loc = st.builds("{} {} {} {}".format, st.just(".loc"), _integers, _integers, _integers)


@settings(max_examples=150, deadline=None)
@given(st.one_of(_declaration, _loc))
def test_statement_shapes_match_lark(text):
    """`.reg .b32 %r<9>;`-like declarations and `.loc f l c`: the shape or the grammar, same records."""
    _shapes_agree_with_lark(text, "body_items", shapes.ShapeReader(ptx_parser()).read_statement)


def _shapes_agree_with_lark(text: str, start: str, read) -> None:
    """``read`` gives the records the grammar gives from ``start``, or rejects what the grammar rejects."""
    try:
        reference = ptx_parser().parse(text, start=start)
    except Exception:   # noqa: BLE001 - an invalid statement must be rejected by both
        with pytest.raises(shapes.NotParsed):
            read(text)
        return
    assert repr(read(text)) == repr(reference)


_module_statement = st.one_of(
    st.builds("{}{}{}{}{}".format, st.just(".file"), st.sampled_from([" ", "\t", "  "]), _integers,
              st.sampled_from([' "a.cu"', '\t"/tmp/x y.cu"', ' "<command-line>"', ' "a\\"b"', ' "', " a.cu"]),
              st.sampled_from(["", ", 1700000000, 1234", ",12", ", 0x10 , 5", ",", ", x"])),
    st.builds("{} {}".format, st.sampled_from([".version", ".version\t"]),
              st.sampled_from(["2.1", "8.5", "10.0", "1", "8.x", "9.10"])),
    st.builds("{} {}".format, st.just(".target"),
              st.sampled_from(["sm_90", "sm_90a", "sm_10, map_f64_to_f32", "sm_20 ,texmode_independent", "sm_89, debug",
                               "SM_90", "sm_90,", "sm-90"])),
    st.builds("{} {}".format, st.just(".address_size"), st.sampled_from(["64", "32", "0x40", "0777", "16", "64U"])),
    _declaration.filter(lambda text: ".reg" not in text))


@settings(max_examples=150, deadline=None)
@given(_module_statement)
def test_module_statement_shapes_match_lark(text):
    """`.file 1 "a.cu"`, `.version`, `.target`, `.address_size` and module variables: the shape or the grammar,
    the same records; a statement the grammar rejects is rejected by the shapes too."""
    _shapes_agree_with_lark(text, "start", shapes.ShapeReader(ptx_parser()).read_module_statement)


def test_the_terminals_kept_are_those_of_the_grammar_parsed(tmp_path, monkeypatch):
    """The cache folder's terminal regexes are keyed by the grammar's text: a changed grammar gets its own, the
    same grammar reads them back without building a parser."""
    import tempfile

    from traceconf.ptx.grammar import PtxParser, grammar_path
    monkeypatch.setenv("TRACECONF_CACHE", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))       # Lark's own cache of the changed grammar
    grammar = grammar_path().read_text()
    first = PtxParser(grammar).terminals
    changed = grammar.replace("VECTOR: /\\.v(?:2|4|8)(", "VECTOR: /\\.v(?:2|4|8|16)(")
    assert changed != grammar
    assert PtxParser(changed).terminals == {**first, "VECTOR": first["VECTOR"].replace("|8)", "|8|16)")}
    assert len(list((tmp_path / "grammar").iterdir())) == 2
    again = PtxParser(grammar)
    assert again.terminals == first and "lark" not in vars(again)

_blank = st.sampled_from(["", " ", "\t", "\n", "  \n\t"])
_parameter = st.builds(
    "{}{}{}{}{}".format,
    st.sampled_from([".param", ".reg", ".param ", ".shared", ".param::entry", ".local"]),
    st.lists(st.sampled_from([" .align 8", " .align 3", " .align 0x10", " .v2", " .v4", " .b8", " .u64", " .f16x2",
                              " .ptr .global .align 16", " .ptr .align 4", " .ptr.shared.align 8", " .ptr .local",
                              ".u32"]), max_size=3).map("".join),
    st.sampled_from([" p", " %ra", " k_param_0", "\n\tx.x", " $p", "p", " 1p"]),
    st.lists(st.sampled_from(["[16]", " [ 2 ]", "[]", "[0x8]", "[09]"]), max_size=2).map("".join),
    _blank)
_header = st.builds(
    "{}{}{}{}{}{}{}{{{}}}".format,
    st.sampled_from(["", ".visible ", ".weak ", ".extern .visible\n", ".visible.", "  "]),
    st.sampled_from([".entry", ".func", ".func (.param .b32 r)", ".entry .attribute(.managed)"]),
    st.sampled_from([" k", " _Z3fooPf", "\n$k", "k"]),
    st.one_of(st.just(""), st.lists(_parameter, max_size=3).map(lambda ps: "(" + ",".join(ps) + ")"),
              st.just("(.param .u64 a,)")),
    st.lists(st.sampled_from([" .maxntid 256, 1, 1", " .reqntid 32", " .noreturn", " .maxnreg 0x20", "\n.minnctapersm",
                              " .maxntid 1 2", " .pragma \"nounroll\";", " .maxnreg 99999999999"]),
             max_size=2).map("".join),
    _blank, st.sampled_from(["", " ", "\n"]), _blank)


@settings(max_examples=300, deadline=None)
@given(_header)
def test_function_header_shapes_match_lark(text):
    """A function header with its empty body (what the statement cache hands on): the shape or the grammar, the
    same records (the Function's line too); one the grammar rejects is rejected by the shapes too."""
    _shapes_agree_with_lark(text, "start", shapes.ShapeReader(ptx_parser()).read_header)


def test_the_header_shape_reads_the_common_headers_itself(monkeypatch):
    reader = shapes.ShapeReader(ptx_parser())
    monkeypatch.setattr(reader, "_lark", lambda text, start: pytest.fail(f"the grammar parsed {text!r}"))
    for text in [".visible .entry k(\n\t.param .u64 k_param_0,\n\t.param .u32 k_param_1\n)\n{}", ".entry k{}",
                 ".func f(.param .align 8 .b8 p[16], .param .u64 .ptr .global .align 16 q) .maxntid 256, 1, 1 {}"]:
        assert repr(reader.read_header(text)) == repr(ptx_parser().parse(text, start="start"))


# Generated bodies: drawn from one hypothesis-seeded Random each (hypothesis' own per-draw
# strategies cost ~3 ms per body, more than the two parses they check).
_REGISTERS = ["%r1", "%rd12", "%tid.x", "%f3", "x16_0.x", "tid", "_", "$L__BB0_2", "WARP_SZ", "sym"]
_OPCODES = ["ld.shared.u32", "st.shared.v2.f32", "mov.u32", "add.s32", "bra.uni", "ret", "cp.async.ca.shared.global",
            "setp.lt.s32", "ldmatrix.sync.aligned.m8n8.x4.shared.b16", "lds.u32", "mbarrier.init.shared::cta.b64"]
_LABELS = ["$L__BB0_1", "$L__BB0_2", "loop", "%tmp"]
_FOREIGN_BLANKS = ["\u00a0", "\u2028", "\v", "\x85", "\u3000", "\x1f"]


def _random_integer(r) -> str:
    value = r.randrange(1 << r.choice([3, 8, 33, 41, 64]))
    return r.choice([str(value), hex(value), "0b" + bin(value)[2:], "0" + oct(value)[2:], "09", f"{value}U"])


def _random_operand(r) -> str:
    s = r.choice(["", " ", "  ", "\t"])
    kind = r.randrange(7)
    if kind == 0:
        return r.choice(_REGISTERS)
    if kind == 1:
        number = r.choice([_random_integer(r), f"0f{r.randrange(1 << 32):08X}", "1.5", "2e3", "0d3FF0000000000000"])
        return r.choice(["", "-", "- "]) + number
    if kind == 2:
        offset = r.choice(["", f"{r.choice(['+', '+-', '-'])}{s}{_random_integer(r)}"])
        return f"[{s}{r.choice(_REGISTERS)}{s}{offset}{s}]"
    if kind == 3:
        return f"[{s}{_random_integer(r)}{s}]"
    if kind == 4:
        elements = [r.choice([r.choice(_REGISTERS), _random_integer(r)]) for _ in range(r.randrange(5))]
        return "{" + s + ("," + s).join(elements) + s + "}"
    if kind == 5:
        return f"!{r.choice(_REGISTERS)}"
    return r.choice(["%p1|%p2", '"str"', "(%r1, %r2)", "[tex0, {%r1, %r2}]", "[%r1+]", ""])


def _random_instruction(r) -> str:
    operands = ", ".join(_random_operand(r) for _ in range(r.randrange(4)))
    label = r.choice(["", "", f"{r.choice(_LABELS)}: "])
    guard = r.choice(["", "", "@%p1 ", "@!%p1 ", "@p\t"])
    end = r.choice([";", ";", ";", " ;", ";  ", "", ";\t}"])   # no ';', a stray '}'
    return label + guard + r.choice(_OPCODES) + (" " + operands if operands else "") + end


def _random_line(r, declarations: list, locs: list) -> str:
    kind = r.randrange(10)
    if kind == 0:
        return r.choice(_LABELS) + r.choice([":", " :", ": "])
    if kind == 1:
        return r.choice(locs)
    if kind == 2:
        return r.choice(declarations)
    if kind == 3:
        return r.choice(["{", "}", "", "  ", "{ ", "}\t"])
    if kind == 4:                   # a scope block, its first statement maybe on the '{' line
        return r.choice(["{\n", "{ ", "{\t"]) + _random_instruction(r) + r.choice(["\n}", " }"])
    return _random_instruction(r)


def _read(read_records, source: str) -> list:
    return canonical(*read_records(prepare(source, "t.ptx"), "t.ptx"))


@settings(max_examples=100, deadline=None)
@given(st.randoms(use_true_random=False), st.lists(_declaration, min_size=1, max_size=2),
       st.lists(_loc, min_size=1, max_size=2))
def test_statement_cache_matches_the_grammar_on_generated_bodies(r, declarations, locs):
    """Generated bodies (valid or not): the statement cache gives the grammar's records (what the
    table builder turns into tables), or hands the file to the grammar (Fallback) and parse_ptx
    then reports the grammar's error."""
    body = "\n".join(_random_line(r, declarations, locs) for _ in range(r.randrange(8)))
    if r.random() < 0.2:                # a statement spread over two lines
        body = body.replace(", ", ",\n  ", 1)
    if r.random() < 0.15:               # a blank that only Python takes for one
        at = r.randrange(len(body) + 1)
        body = body[:at] + r.choice(_FOREIGN_BLANKS) + body[at:]
    source = HEADER + ".shared .b32 sym[4];\n" + kernel(".reg .pred p;\n" + body)
    try:
        reference = _read(grammar_records, source)
    except InputError as error:
        with pytest.raises(Fallback):
            _read(_statement_cache_records, source)
        with pytest.raises(InputError) as production:
            parse_ptx(source, "t.ptx")
        assert str(production.value) == str(error)
        return
    try:
        fast = _read(_statement_cache_records, source)
    except Fallback:        # layouts the statement cache leaves to the grammar: parse_ptx is the grammar's
        return
    assert fast == reference or repr(fast) == repr(reference)     # repr: NaN operands compare equal


def test_blanks_the_grammar_does_not_know_are_fine_inside_strings():
    """The statement cache hands such a file to the grammar, which reads it."""
    source = HEADER + '.file 1 "dir\u00a0name/k.cu"\n' + kernel(".loc 1 3 0\nret;")
    with pytest.raises(Fallback):
        statement_cache_module(source, "t.ptx")
    module = parse_ptx(source, "t.ptx")
    assert module.instructions_of("k")[0]["source_file"] == "dir\u00a0name/k.cu"
    assert module.instructions.equals(parse_ptx_by_grammar(source, "t.ptx").instructions)


def _module_state() -> dict:
    """repr of every module-level set, list and dict of traceconf.ptx."""
    import sys
    state = {}
    for name, module in sorted(sys.modules.items()):
        if name.startswith("traceconf.ptx"):
            for attribute, value in vars(module).items():
                if isinstance(value, (set, list, dict)) and not attribute.startswith("__"):
                    state[f"{name}.{attribute}"] = repr(value)
    return state


def test_parsing_writes_no_module_level_state():
    before = _module_state()
    assert before, "traceconf.ptx has module-level tables to watch"
    parse_file(FIXTURES / "ptx" / "smem_kernels.ptx")
    parse(kernel(".loc 1 2 3\n.reg .b32 %r<4>;\nld.shared.u32 %r1, [%r2+4];\nret;"))
    with pytest.raises(InputError):
        parse_ptx(HEADER + kernel("ld.shared.u32 %r1, [%r2+];"), "t.ptx")
    assert _module_state() == before
    assert ptx_parser().transformer.source == ""    # the shared parser keeps no text between parses


def test_abi_directives_of_ptx_8_5_on_functions_and_call_prototypes():
    """PTX ISA 8.5+: `.abi_preserve N` / `.abi_preserve_control N` after a function's or a call prototype's
    parameters (a public parser's sample file failed with "expected ';' after declaration")."""
    module = same_as_grammar(
        ".version 9.0\n.target sm_90\n.address_size 64\n"
        ".visible .func (.param .b32 r) f(.param .b32 x) .abi_preserve 8 .abi_preserve_control 4\n{\nret;\n}\n"
        ".visible .entry k() .abi_preserve 2\n{\n.reg .b32 %r<2>;\n"
        "entry_proto: .callprototype _ (.param .u32 p) .abi_preserve 4 .abi_preserve_control 2;\n"
        "proto2: .callprototype (.param .b32 _) _ (.param .b32 p) .abi_preserve 4;\nret;\n}\n")
    assert module.kernel_names() == ["k"] and "f" in module.function_names()
    assert [r["opcode"] for r in module.instructions_of("k")] == ["ret"]
