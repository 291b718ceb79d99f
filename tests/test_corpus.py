"""Every real PTX file of ../shared/corpus (and the compiled fixtures) parses, with sensible tables."""

from __future__ import annotations

import re
from functools import lru_cache

import pytest

from conftest import FIXTURES, SHARED, shared_path
from test_ptx_parse import same_as_grammar
from traceconf.ptx import parse_file

CORPUS_FILES = sorted(p.name for p in (SHARED / "corpus").glob("*.ptx")) or ["(corpus absent)"]
FIXTURE_FILES = sorted(str(p.relative_to(FIXTURES)) for p in FIXTURES.glob("**/*.ptx"))
#: The MANIFEST's "smem lines" regex (per line of the file).
SMEM_LINE = re.compile(r"ld\.shared|st\.shared|ldmatrix|cp\.async|atom\.shared|cvta\.shared")


def manifest_counts() -> dict[str, int]:
    text = shared_path("corpus", "MANIFEST.md").read_text()
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"^\| `([^`]+)` \|.*?\*\*smem lines: (\d+)\*\*", text, re.M)}


def check_both_paths(path):
    """The statement cache must not fall back, and must give exactly the whole-file Lark tables."""
    return same_as_grammar(path.read_bytes(), str(path))


@lru_cache(maxsize=None)
def corpus_module(name: str):
    """parse_file of a corpus file, once per test session (the modules are only read)."""
    return parse_file(shared_path("corpus", name))


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_corpus_file_parses_identically_with_and_without_the_cache(name):
    module = check_both_paths(shared_path("corpus", name))
    assert module.kernel_names()
    assert module.instructions.num_rows > 0


#: Fixture PTX the parser rejects today (strict xfails, the cause named; the fix flips them).
PARSE_GAPS = {"cub/cub_blocks.sm_90.ptx": "PTX `d|p` destination not parsed: CUB's inline-asm warp scans write "
                                          "`shfl.sync.up.b32 r0|p, ...` and the whole file is rejected (issue 21)"}


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=PARSE_GAPS[name]))
                                  if name in PARSE_GAPS else name for name in FIXTURE_FILES])
def test_compiled_fixture_parses_identically_with_and_without_the_cache(name):
    check_both_paths(FIXTURES / name)


def test_shared_instruction_counts_match_the_manifest():
    counts = manifest_counts()
    assert len(counts) == 24
    for name, expected in counts.items():
        module = corpus_module(name)
        instructions = sum(1 for text in module.instructions.column("text").to_pylist() if SMEM_LINE.search(text))
        headers = sum(1 for function in module.function_names() if SMEM_LINE.search(function))  # `.entry ldmatrix(`
        assert instructions + headers == expected, name


def test_volatile_shared_accesses_count_as_shared():
    module = corpus_module("histogram_sliced.ptx")
    shared = module.shared_instructions()
    volatile = [m for m in shared.column("modifiers").to_pylist() if "volatile" in m]
    assert len(volatile) == 72 and shared.num_rows == 367 + 72


def test_transpose_kernels_and_padded_tile():
    module = corpus_module("transposeNew.ptx")
    names = module.kernel_names()
    assert len(names) == 8 and names[0] == "_Z4copyPfS_iii"
    tile = module.kernel(next(n for n in names if "NoBankConflicts" in n))["shared"]
    assert [(v["bytes"], v["type"], v["scope"]) for v in tile] == [(4224, "b8", "function")]
    assert module.version == "2.1" and module.target == "sm_20" and module.address_size == 64


def test_reduction_has_132_kernels_on_extern_shared():
    module = corpus_module("reduction_kernel.ptx")
    assert len(module.kernel_names()) == 132
    doubles = [k for k in module.kernels.to_pylist() if any(v["name"] == "s_double" for v in k["shared"])]
    assert doubles and all(v["extern"] and v["bytes"] == 0 and v["align"] == 8
                           for k in doubles for v in k["shared"])
    assert module.shared_instructions().num_rows == 2139


def test_needle_two_dimensional_shared_arrays_and_func_declaration():
    module = corpus_module("needle_kernel.ptx")
    assert module.kernel_names() == ["_Z20needle_cuda_shared_1PiS_S_iiii", "_Z20needle_cuda_shared_2PiS_S_iiii"]
    assert "_Z7maximumiii" in module.function_names()
    shared = module.kernel("_Z20needle_cuda_shared_1PiS_S_iiii")["shared"]
    assert sorted(v["bytes"] for v in shared) == [16 * 16 * 4, 17 * 17 * 4]


def test_pointer_parameters_in_shared_space():
    module = corpus_module("ptr-declaration.ptx")
    params = module.kernel("matrixMul")["params"]
    assert [p["ptr_space"] for p in params] == ["global", "global", "global", "shared", "shared", None, None]
    assert all(p["align"] == 4 for p in params[:5])
    assert module.target == "sm_10"


def test_ptx_1_4_matrixmul():
    module = corpus_module("matrixMul_kernel.ptx")
    assert module.version == "1.4" and module.address_size == 32
    rows = module.instructions_of("matrixMul")
    assert rows[0]["source_file"] == "matrixMul_kernel.cu" and rows[0]["source_line"] == 68
    assert any(r["opcode"] == "mul24" for r in rows)


def test_zluda_ldmatrix_generic_and_non_canonical_modifier_order():
    plain = corpus_module("ldmatrix.ptx")
    ldmatrix = [r for r in plain.instructions_of("ldmatrix") if r["opcode"] == "ldmatrix"]
    assert [(r["state_space"], r["access_bytes"]) for r in ldmatrix] == [("generic", 16)]
    trans = corpus_module("ldmatrix_trans.ptx")
    row = next(r for r in trans.instructions_of("ldmatrix_trans") if r["opcode"] == "ldmatrix")
    assert row["modifiers"] == ["sync", "aligned", "x4", "trans", "m8n8", "shared", "b16"]
    assert row["operands"][1]["kind"] == "address" and row["operands"][1]["name"] == "values_s_addr"
    assert trans.kernel("ldmatrix_trans")["shared"][0]["bytes"] == 512


def test_cp_async_size_operand():
    module = corpus_module("cp_async.ptx")
    copy = next(r for r in module.instructions_of("cp_async") if r["modifiers"][:2] == ["async", "ca"])
    assert (copy["state_space"], copy["access_bytes"]) == ("shared", 16)
    assert [op["value"] for op in copy["operands"][2:]] == [16, 12]


def test_debug_build_resolves_file_declared_after_the_code():
    module = corpus_module("vector_add_scalar.debug.ptx")
    rows = module.instructions_of("vector_add_scalar")
    assert rows[0]["source_file"].endswith("vector_add_scalar.cu") and rows[0]["source_line"] == 4
    assert module.target == "sm_89"
    assert [r["labels"] for r in rows if r["labels"]][0] == ["$L__func_begin0"]
