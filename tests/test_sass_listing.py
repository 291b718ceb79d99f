"""SASS listings → SASS_INSTRUCTIONS / SASS_KERNELS: every listing shape, the grammar, line info, errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from lark import Lark

from traceconf.errors import InputError
from traceconf.sass.binary import elf_facts
from traceconf.sass.listing import looks_like_sass, params_read, parse_file, parse_text
from traceconf.schemas import SASS_INSTRUCTIONS, SASS_KERNELS
from traceconf.traces.detect import detect_format

REPO = Path(__file__).resolve().parents[1]
HW_SASS = REPO / "tests" / "data" / "hw" / "sass"
SASS = REPO / "tests" / "data" / "sass"
LISTINGS = sorted(HW_SASS.glob("*.sass")) + sorted(SASS.glob("*.sass"))


@pytest.fixture(scope="module")
def grammar():
    return Lark((REPO / "grammars" / "sass.lark").read_text(), parser="lalr", start="line")


def _operands_of(tree) -> int:
    operands = next((c for c in tree.children if getattr(c, "data", None) == "operands"), None)
    if operands is None:
        return 0
    if getattr(operands.children[0], "data", None) == "return_target":
        return 1
    return len(operands.children)


@pytest.mark.parametrize("path", LISTINGS, ids=lambda p: p.name)
def test_tokenizer_agrees_with_the_grammar_on_every_instruction(path, grammar):
    lines = path.read_text().splitlines()
    module = parse_file(path)
    assert module.instructions.schema.equals(SASS_INSTRUCTIONS)
    assert module.kernels.schema.equals(SASS_KERNELS)
    rows = module.instructions.to_pylist()
    assert rows, path
    for row in rows:
        tree = grammar.parse(lines[row["line"] - 1].strip())
        opcode = next(str(c) for c in tree.children if getattr(c, "type", None) == "OPCODE")
        assert opcode == ".".join([row["opcode"], *row["modifiers"]])
        guard = next((c for c in tree.children if getattr(c, "data", None) == "guard"), None)
        assert (guard is not None) == (row["guard"] is not None)
        if guard is not None:
            assert str(guard.children[-1]) == row["guard"]
            assert (len(guard.children) == 2) == row["guard_negated"]
        assert _operands_of(tree) == len(row["operands"]), row["text"]


def test_cuobjdump_listing_kernels_pcs_and_operands():
    module = parse_file(HW_SASS / "matmul.sass")
    assert module.arch == "sm_90"
    assert module.kernel_names() == ["_Z12matmul_tiledILi32EEvPKfS1_Pfi", "_Z12matmul_tiledILi16EEvPKfS1_Pfi"]
    rows = module.instructions_of("_Z12matmul_tiledILi32EEvPKfS1_Pfi")
    assert [r["pc"] for r in rows[:3]] == [0x0, 0x10, 0x20]
    guarded = next(r for r in rows if r["pc"] == 0xE0)
    assert (guarded["opcode"], guarded["guard"], guarded["guard_negated"], guarded["operands"]) == \
        ("BRA", "P0", True, ["0x770"])
    lds = [r for r in rows if r["opcode"] == "LDS"]
    assert any(r["modifiers"] == ["128"] for r in lds)
    reuse = next(r for r in rows if r["pc"] == 0x110)
    assert reuse["operands"] == ["R7", "R7", "R0", "R5"] and ".reuse" in reuse["text"]


def test_nvdisasm_line_info_gives_cuda_and_ptx_lines_and_labels():
    module = parse_file(SASS / "matmul.sm_90.nvdisasm.sass")
    rows = module.instructions_of("_Z12matmul_tiledILi32EEvPKfS1_Pfi")
    first = rows[0]
    assert (first["source_file"], first["source_line"], first["ptx_line"]) == ("matmul.cu", 6, 179)
    ptx = (REPO / "tests" / "fixtures" / "cuda" / "matmul.sm_90.ptx").read_text().splitlines()
    lds128 = next(r for r in rows if r["opcode"] == "LDS" and r["modifiers"] == ["128"])
    assert "ld.shared.f32" in ptx[lds128["ptx_line"] - 1]       # the embedded PTX is the file ptxas read
    assert any(r["labels"] for r in rows)
    branch = next(r for r in rows if r["opcode"] == "BRA" and r["guard"])
    assert branch["operands"][0].startswith("`(.L_x_")


def test_nvdisasm_inline_info_keeps_the_innermost_location():
    module = parse_file(SASS / "scan.sm_90.nvdisasm-gi.sass")
    rows = module.instructions.to_pylist()
    assert {r["source_file"] for r in rows} == {"scan.cu"}
    assert 11 in {r["source_line"] for r in rows}          # "line 11 inlined at ... line 20"


def test_listing_without_line_info_has_null_sources():
    rows = parse_file(SASS / "strides.sm_90.nolineinfo.sass").instructions.to_pylist()
    assert rows and all(r["source_line"] is None and r["ptx_line"] is None for r in rows)


def test_nvdisasm_json_gives_the_same_instructions_as_the_text_listing():
    from_json = parse_file(SASS / "transpose.sm_90.json")
    from_text = parse_file(SASS / "transpose.sm_90.nvdisasm.sass")
    assert from_json.arch == "sm_90"
    assert from_json.kernel_names() == from_text.kernel_names()
    for name in from_json.kernel_names():
        text_rows = from_text.instructions_of(name)
        # the text names branch targets by label, the JSON by pc
        label_pc = {f"`({label})": hex(r["pc"]) for r in text_rows for label in r["labels"]}
        a = [(r["pc"], r["opcode"], r["modifiers"], r["operands"], r["guard"], r["guard_negated"])
             for r in from_json.instructions_of(name)]
        b = [(r["pc"], r["opcode"], r["modifiers"], [label_pc.get(o, o) for o in r["operands"]], r["guard"],
              r["guard_negated"]) for r in text_rows]
        assert a == b


def test_params_of_a_bare_listing_are_the_parameter_words_it_reads():
    module = parse_file(HW_SASS / "matmul.sass")
    params = module.kernel("_Z12matmul_tiledILi32EEvPKfS1_Pfi")["params"]
    assert params == [{"name": "param@0x0", "offset": 0, "bytes": 8}, {"name": "param@0x8", "offset": 8, "bytes": 8},
                      {"name": "param@0x10", "offset": 16, "bytes": 8},
                      {"name": "param@0x18", "offset": 24, "bytes": 4}]
    assert params_read([], "sm_90") == []


def test_elf_facts_from_cuobjdump_elf_text():
    elf = """
  16   5800   2400  0  4                       NOBITS       43    0       14 .nv.shared._Z1kPfi
.nv.info._Z1kPfi
\t<0x2>
\tAttribute:\tEIATTR_KPARAM_INFO
\tFormat:\tEIFMT_SVAL
\tValue:\tIndex : 0x0\tOrdinal : 0x1\tOffset  : 0x8\tSize    : 0x4
\t<0x3>
\tAttribute:\tEIATTR_KPARAM_INFO
\tFormat:\tEIFMT_SVAL
\tValue:\tIndex : 0x0\tOrdinal : 0x0\tOffset  : 0x0\tSize    : 0x8
\t<0x4>
\tAttribute:\tEIATTR_PARAM_CBANK
\tFormat:\tEIFMT_SVAL
\tValue:\t0x11 0xc0210 
"""
    facts = elf_facts(elf)
    assert facts.shared_bytes == {"_Z1kPfi": 0x2400}
    assert facts.params["_Z1kPfi"] == [{"name": "param_0", "offset": 0, "bytes": 8},
                                       {"name": "param_1", "offset": 8, "bytes": 4}]
    assert facts.param_base == {"_Z1kPfi": 0x210}


@pytest.mark.parametrize("path", [HW_SASS / "transpose.sass", SASS / "transpose.sm_90.nvdisasm.sass",
                                  SASS / "transpose.sm_90.json"], ids=lambda p: p.name)
def test_listings_are_detected_by_content(path, tmp_path):
    renamed = tmp_path / "listing.txt"
    renamed.write_bytes(path.read_bytes())
    assert detect_format(renamed) == "sass"
    assert looks_like_sass(path.read_bytes()[:4096])


@pytest.mark.parametrize("name", ["transpose.sm_90.cubin", "matmul.sm_90.cubin"])
def test_cuda_binaries_are_detected_by_content(name, tmp_path):
    renamed = tmp_path / "blob.bin"
    renamed.write_bytes((SASS / name).read_bytes())
    assert detect_format(renamed) == "cuda_binary"


def test_ptx_is_still_ptx():
    assert detect_format(REPO / "tests" / "fixtures" / "cuda" / "matmul.sm_90.ptx") == "ptx"


def test_a_malformed_instruction_is_an_error_at_its_line_and_column():
    text = ("\tcode for sm_90\n\t\tFunction : k\n"
            "        /*0000*/                   LDC R1, c[0x0][0x28] ;\n"
            "        /*0010*/                   S2R R0, SR_TID.X\n")
    with pytest.raises(InputError) as caught:
        parse_text(text, "k.sass")
    error = caught.value
    assert (error.file, error.line, error.column) == ("k.sass", 4, 36)
    assert "';'" in error.message


def test_instructions_outside_a_function_and_empty_listings_are_errors():
    with pytest.raises(InputError, match="outside any function"):
        parse_text("        /*0000*/                   EXIT ;\n", "x.sass")
    with pytest.raises(InputError, match="no SASS instruction"):
        parse_text("\tcode for sm_90\n", "x.sass")
