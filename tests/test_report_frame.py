"""The per-instruction results table, the JSON document, CSV text and result files."""

from __future__ import annotations

import io
import json

import duckdb
import pandas as pd
import polars as pl
import pyarrow.csv as pacsv
import pytest
from rich.console import Console

from test_report_support import LOADS, NEVER, SCALE, STORES, UNRESOLVED, transpose_analysis
from traceconf.errors import InputError
from traceconf.analyses.results import RESULT_ROWS, excess_by_kernel, results_table
from traceconf.report.hotspots import kernel_report, scale_note
from traceconf.report.writers import csv_text, json_document, write_results
from traceconf.schemas import KINDS

EXCESS_PER_LOAD = 8 * 31 * SCALE  # 8 warps, 32-way → 31 excess each, ×1024 CTAs


def test_results_table_lists_every_shared_instruction_with_counts():
    table = results_table([transpose_analysis()], ["sm_90"])
    assert table.schema == RESULT_ROWS
    rows = {r["instruction"]: r for r in table.to_pylist()}
    assert sorted(rows) == sorted([*STORES, *LOADS, NEVER, UNRESOLVED])
    assert rows[LOADS[0]]["excess_wavefronts"] == EXCESS_PER_LOAD
    assert rows[LOADS[0]]["max_ways"] == 32
    assert rows[STORES[0]]["wavefronts"] == rows[STORES[0]]["ideal_wavefronts"] == 8 * SCALE
    assert rows[NEVER]["executions"] == 0 and rows[NEVER]["resolved"] and rows[NEVER]["width_bits"] == 128
    assert not rows[UNRESOLVED]["resolved"]
    assert rows[UNRESOLVED]["unresolved_reason"] == "address depends on a global load"
    assert rows[LOADS[0]]["source"] == "transpose.cu:17"
    assert rows[NEVER]["source"] is None


def test_results_table_one_block_per_device_in_requested_order():
    table = results_table([transpose_analysis(devices=("sm_90", "sm_1x"))], ["sm_1x", "sm_90"])
    devices = table.column("device").to_pylist()
    assert devices == ["sm_1x"] * 10 + ["sm_90"] * 10


def test_excess_by_kernel_sums_per_device():
    table = results_table([transpose_analysis(), transpose_analysis("other", row_words=33)], ["sm_90"])
    assert excess_by_kernel(table) == [("transpose_unpadded", "sm_90", 4 * EXCESS_PER_LOAD),
                                       ("other", "sm_90", 0)]


def test_json_document_contract():
    document = json_document([transpose_analysis(devices=("sm_90", "sm_1x"))], ["sm_90", "sm_1x"])
    assert list(document) == ["results"]
    assert [(r["kernel"], r["device"]) for r in document["results"]] == [
        ("transpose_unpadded", "sm_90"), ("transpose_unpadded", "sm_1x")]
    result = document["results"][0]
    assert list(result) == ["kernel", "kernel_name", "device", "launch", "totals", "partial",
                            "unresolved_executions", "uncounted_instructions", "unresolved", "notes", "instructions"]
    assert result["kernel_name"] == "transpose_unpadded" and result["notes"] == transpose_analysis().notes
    assert result["partial"] is True and result["uncounted_instructions"] == 1
    assert list(result["totals"]) == list(KINDS)
    assert result["totals"]["ld"] == {"executions": 4 * 8 * SCALE, "wavefronts": 4 * 8 * 32 * SCALE,
                                      "ideal_wavefronts": 4 * 8 * SCALE, "excess_wavefronts": 4 * EXCESS_PER_LOAD}
    assert result["totals"]["atom"]["wavefronts"] == 0
    assert result["unresolved"] == [{"instruction": UNRESOLVED, "ptx": "st.shared.u32 [%r60], %r61",
                                     "reason": "address depends on a global load", "executions": 0,
                                     "counted": False}]
    first = result["instructions"][0]
    assert list(first) == ["instruction", "ptx", "kind", "width_bits", "pc", "ptx_line", "source", "executions",
                           "wavefronts", "ideal_wavefronts", "excess_wavefronts", "max_ways", "resolved",
                           "unresolved_reason", "model_note"]
    assert first["ptx"].startswith("st.shared.f32") and first["source"] == "transpose.cu:12"
    assert result["launch"]["scale"] == SCALE
    half_warps = document["results"][1]["totals"]["ld"]       # sm_1x: two 16-lane phases per warp execution
    assert half_warps["ideal_wavefronts"] == 2 * 4 * 8 * SCALE and half_warps["wavefronts"] == 4 * 8 * 32 * SCALE
    json.dumps(document)  # plain JSON types only


def test_csv_text_round_trips():
    table = results_table([transpose_analysis()], ["sm_90"])
    back = pacsv.read_csv(io.BytesIO(csv_text(table).encode()))
    assert back.num_rows == table.num_rows
    assert back.column("excess_wavefronts").to_pylist() == table.column("excess_wavefronts").to_pylist()


def test_parquet_opens_in_pandas_polars_and_duckdb(tmp_path):
    path = tmp_path / "results.parquet"
    write_results(results_table([transpose_analysis()], ["sm_90"]), path)
    frame = pd.read_parquet(path)
    assert frame.loc[frame.instruction == LOADS[0], "max_ways"].item() == 32
    assert pl.read_parquet(path).filter(pl.col("kind") == "ld")["excess_wavefronts"].sum() == 4 * EXCESS_PER_LOAD
    query = f"select sum(excess_wavefronts) from read_parquet('{path}') where resolved"
    total = duckdb.connect().execute(query).fetchall()[0][0]
    assert total == 4 * EXCESS_PER_LOAD


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_other_result_file_formats(tmp_path, suffix):
    path = tmp_path / f"results{suffix}"
    write_results(results_table([transpose_analysis()], ["sm_90"]), path)
    frame = pd.read_csv(path) if suffix == ".csv" else pd.read_json(path)
    assert int(frame.excess_wavefronts.sum()) == 4 * EXCESS_PER_LOAD


def test_unknown_result_extension_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="use one of .parquet, .csv, .json"):
        write_results(results_table([transpose_analysis()], ["sm_90"]), tmp_path / "results.xlsx")


def _text(renderable, width=220) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def test_hotspot_report_ranks_by_excess_and_reads_source(tmp_path):
    (tmp_path / "transpose.cu").write_text("\n" * 16 + "    out = tile[threadIdx.x][threadIdx.y + j];\n")
    analysis = transpose_analysis(input_path=str(tmp_path / "t.ptx"))
    text = _text(kernel_report(analysis, ["sm_90"], top=3))
    body = text.splitlines()
    first_row = next(i for i, line in enumerate(body) if line.lstrip("│ ").startswith("1 "))
    assert "transpose.cu:17" in body[first_row] and "L110" in body[first_row]
    assert "out = tile[threadIdx.x][threadIdx.y + j];" in body[first_row + 1]
    assert "253,952" in body[first_row] and "25%" in body[first_row] and "32-way" in body[first_row]
    assert "1 CTA analysed, ×1024 exact" in text
    assert "7 more instruction(s)" in text
    assert "address depends on a global load" in text


def test_hotspot_report_side_by_side_devices():
    text = _text(kernel_report(transpose_analysis(devices=("sm_90", "sm_1x")), ["sm_90", "sm_1x"], None))
    header = next(line for line in text.splitlines() if line.startswith("┃") and "sm_90" in line)
    assert header.count("sm_90") == 3 and header.count("sm_1x") == 3  # wavefronts, excess, max per device
    assert "253,952" in text and "(25%)" in text and "unresolved" in text
    # sm_1x's half-warps: the load has 16-way phases and 245,760 excess, in the sm_1x columns only
    load = next(line for line in text.splitlines() if "ld.shared" in line and "253,952" in line)
    assert load.index("253,952") < load.index("245,760") and "32-way" in load and "16-way" in load


@pytest.mark.parametrize("launch, note", [
    ({"analysed_ctas": 1, "scale": 1024}, "1 CTA analysed, ×1024 exact"),
    ({"analysed_ctas": 4, "scale": 1}, "4 CTAs analysed, exact"),
    ({"sampled_ctas": [8, 4096]}, "8 of 4096 CTAs sampled: counts cover the sampled CTAs only"),
    ({}, "recorded trace: counts as recorded"),
])
def test_scale_note(launch, note):
    assert scale_note(launch) == note
