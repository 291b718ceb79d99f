"""--suggest: padding / swizzle what-ifs re-counted by the engine over every access to the variable."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
from rich.console import Console

from test_report_support import LOADS, STORES, transpose_analysis
from traceconf.accesses import WarpAccesses
from traceconf.pipeline import KernelAnalysis
from traceconf.analyses.suggest import suggestions
from traceconf.report.suggest import render_suggestions
from traceconf.analyses.suggest import (pad, row_candidates, suggest_for,
                                      swizzle, variable_of, Variable)
from traceconf.rules import load_rule_set
from traceconf.schemas import INSTRUCTION_INFO, INSTRUCTION_RESULTS, KIND_CODES

SM90 = load_rule_set("sm_90")
TILE = [{"name": "_ZZ18transpose_unpaddedE4tile", "offset": 0, "bytes": 4096, "align": 4, "extern": False}]


def with_layout(analysis: KernelAnalysis, layout=TILE) -> KernelAnalysis:
    analysis.shared_layout = layout
    return analysis


def test_variable_and_row_inferred_from_addresses():
    analysis = with_layout(transpose_analysis(), TILE + [{"name": "other", "offset": 4096, "bytes": 64}])
    column_walk = np.arange(32)[None, :] * 128
    assert variable_of(analysis, column_walk) == Variable("tile", 0, 4096)
    assert row_candidates(column_walk, 4, 4) == [128]
    assert row_candidates(np.arange(32)[None, :] * 4, 4, 4) == []  # contiguous: no row to pad


def test_pad_and_swizzle_transform_only_the_variable():
    address = np.array([[0, 128, 256, 5000]])
    mask = address < 4096
    tile = Variable("tile", 0, 4096)
    assert pad(address, mask, tile, 128, 4).tolist() == [[0, 132, 264, 5000]]
    assert swizzle(address + 4 * 0, mask, tile, 128, 4).tolist() == [[0, 132, 264, 5000]]
    assert swizzle(np.array([[128 + 4]]), np.array([[True]]), tile, 128, 4).tolist() == [[128 + 0]]


def test_transpose_pad_fixes_the_loads_and_keeps_the_stores():
    suggestion = suggest_for(with_layout(transpose_analysis()), LOADS[0], SM90)
    assert suggestion.headline() == "pad tile row 32→33 words: 32-way → 1-way"
    assert set(suggestion.best.per_instruction) == set(STORES) | set(LOADS)  # every instruction on tile
    for ident in STORES:
        assert suggestion.best.per_instruction[ident] == suggestion.baseline.per_instruction[ident]
    assert suggestion.best.wavefronts == 8 * 8 * 1024
    assert suggestion.baseline.wavefronts == (4 * 8 + 4 * 8 * 32) * 1024


def test_a_store_that_the_pad_breaks_is_shown():
    """Stores 33 words apart are conflict-free now and conflict once the rows are padded to 33 words."""
    lane = np.arange(32)
    rows = [(LOADS[0], "ld", lane * 128), (STORES[0], "st", lane * 132 % 4096)]
    n = len(rows)
    acc = WarpAccesses("k", np.zeros(n, np.int64), np.zeros(n, np.int32), np.arange(n, dtype=np.int64),
                       np.array([r[0] for r in rows], np.int32), np.array([KIND_CODES[r[1]] for r in rows], np.int8),
                       np.full(n, 4, np.int16), np.zeros(n, np.int8), np.stack([r[2] for r in rows]))
    info = pa.Table.from_pylist([{"kernel": "k", "instruction": LOADS[0], "text": "ld.shared.f32", "kind": "ld",
                                  "bytes": 4, "ptx_line": 20},
                                 {"kernel": "k", "instruction": STORES[0], "text": "st.shared.f32", "kind": "st",
                                  "bytes": 4, "ptx_line": 10}], schema=INSTRUCTION_INFO)
    results = pa.Table.from_pylist([{"device": "sm_90", "kernel": "k", "instruction": LOADS[0], "kind": "ld",
                                     "bytes": 4, "executions": 1, "wavefronts": 32, "ideal_wavefronts": 1,
                                     "excess_wavefronts": 31, "max_ways": 32}], schema=INSTRUCTION_RESULTS)
    analysis = KernelAnalysis("k", "k.ptx", "ptx", {"scale": 1}, results, info, accesses={32: acc},
                              shared_layout=TILE)
    suggestion = suggest_for(analysis, LOADS[0], SM90)
    assert suggestion.best.per_instruction[LOADS[0]] == (1, 1)
    assert suggestion.baseline.per_instruction[STORES[0]] == (1, 1)
    assert suggestion.best.per_instruction[STORES[0]][0] > 1
    assert suggestion.regressions() == [STORES[0]]
    console = Console(width=200, file=io.StringIO(), record=True)
    render_suggestions(analysis, SM90.name, suggestions(analysis, SM90, 1), console)
    assert "makes 1 other instruction(s) slower: L10 st.shared.f32" in console.export_text()


def test_ldmatrix_rows_padded_by_whole_16_byte_rows():
    rows = np.arange(32) * 128
    acc = WarpAccesses("k", np.zeros(1, np.int64), np.zeros(1, np.int32), np.zeros(1, np.int64),
                       np.array([7], np.int32), np.array([KIND_CODES["ldmatrix"]], np.int8),
                       np.array([16], np.int16), np.array([4], np.int8), rows[None, :])
    analysis = KernelAnalysis("k", "k.ptx", "ptx", {}, INSTRUCTION_RESULTS.empty_table(),
                              INSTRUCTION_INFO.empty_table(), accesses={32: acc},
                              shared_layout=[{"name": "smem", "offset": 0, "bytes": 8192}])
    suggestion = suggest_for(analysis, 7, SM90)
    assert suggestion.headline() == "pad smem row 32→36 words: 8-way → 1-way"


def test_no_addresses_no_suggestion():
    analysis = transpose_analysis()
    analysis.accesses = {}
    assert suggest_for(analysis, LOADS[0], SM90) is None


def test_render_lists_before_and_after_per_instruction():
    console = Console(width=200, file=io.StringIO(), record=True)
    render_suggestions(with_layout(transpose_analysis()), SM90.name, suggestions(with_layout(transpose_analysis()), SM90, 2), console)
    text = console.export_text()
    assert "[30] L110 ld.shared.f32 %f2, [%r30]: pad tile row 32→33 words: 32-way → 1-way" in text
    assert "all accesses to tile" in text and "1,081,344" in text and "65,536" in text
    assert "(same change as above)" in text
    clean = Console(width=200, file=io.StringIO(), record=True)
    render_suggestions(transpose_analysis(row_words=33), SM90.name, suggestions(transpose_analysis(row_words=33), SM90, 2), clean)
    assert "no bank conflicts: nothing to suggest" in clean.export_text()


def test_the_declaration_to_edit_without_a_layout_is_the_one_tile_the_line_indexes():
    from conftest import FIXTURES
    from traceconf.analyses.suggest import declaration

    transpose = str(FIXTURES / "emulate" / "transpose.ptx")
    assert declaration("transpose.cu", 17, transpose, None) == (8, "__shared__ float tile[TILE_DIM][TILE_DIM];")
    assert declaration("transpose.cu", 31, transpose, None) == (22, "__shared__ float tile[TILE_DIM][TILE_DIM + 1];")
    assert declaration("transpose.cu", 17, transpose, "tile") == declaration("transpose.cu", 17, transpose, None)
    # As[ty][k] * Bs[k][tx]: two tiles on the line, so no single declaration to name
    assert declaration("matmul.cu", 15, str(FIXTURES / "emulate" / "matmul.ptx"), None) is None
    assert declaration("missing.cu", 15, transpose, None) is None


def test_the_printed_suggestion_names_the_declaration_to_edit():
    from typer.testing import CliRunner

    from conftest import FIXTURES
    from traceconf.cli import app

    result = CliRunner().invoke(app, ["analyze", str(FIXTURES / "emulate" / "transpose.ptx"), "-k",
                                      "transpose_unpadded", "--block", "32,8", "--grid", "32,32", "--suggest",
                                      "--level", "ptx"])
    assert result.exit_code == 0, result.output
    assert "pad tile row 32→33 words: 32-way → 1-way\n    declaration to edit: transpose.cu:8 __shared__ float " \
           "tile[TILE_DIM][TILE_DIM];" in result.stdout


def test_a_strided_reduction_on_a_one_dimensional_array_gets_an_index_rewrite_not_a_pad():
    """cuda-samples-shaped reduce1 (``index = 2 * s * tid; sdata[index] += sdata[index + s]`` on
    ``extern __shared__ float sdata[]``): padding a "row" of a 1-D array is not the fix, sequential addressing
    is (issue 24, item 13); its what-if count is the engine's, over every access of the array."""
    from pathlib import Path

    from typer.testing import CliRunner

    from traceconf.cli import app

    cubin = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "samples20" / "samples20.sm_90.cubin"
    result = CliRunner().invoke(app, ["analyze", str(cubin), "-k", "reduce1", "--block", "256", "--grid", "16",
                                      "--dynamic-smem", "1024", "-p", "2=4096", "--suggest"])
    assert result.exit_code == 0, result.output
    advice = result.output[result.output.index("suggestions for reduce1"):]
    assert "index rewrite: sdata is one-dimensional, so no pad applies" in " ".join(advice.split())
    assert "8-way → 1-way" in advice and " row " not in advice and "swizzle" not in advice
