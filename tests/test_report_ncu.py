"""compare-ncu: reading Nsight Compute Source-page CSVs and lining them up with the prediction."""

from __future__ import annotations

import csv
import io
import json

import pytest
from typer.testing import CliRunner

from conftest import FIXTURES, REPO
from test_report_support import transpose_analysis
from traceconf.cli import app
from traceconf.errors import InputError
from traceconf.analyses.results import kernel_table
from traceconf.analyses.ncu import compare, opcode_kind, pair_kernels, read_source_csv

NCU = FIXTURES / "ncu"


@pytest.mark.parametrize("sass, kind", [("LDS.U.128 R12, [R2]", "ld"), ("@!P0 STS [R5], R7", "st"),
                                        ("LDSM.16.M88.4 R4, [R2]", "ldmatrix"), ("ATOMS.ADD R1, [R2], R3", "atom"),
                                        ("LDGSTS.E.BYPASS.128 [R1], desc[UR4][R2.64]", "cp_async"),
                                        ("FFMA R1, R2, R3, R1", None)])
def test_opcode_kind(sass, kind):
    assert opcode_kind(sass) == kind


def test_read_sass_csv():
    (kernel,) = read_source_csv(NCU / "mult_gpu_sass.csv")
    assert kernel.name.startswith("void mult_gpu<float>")
    assert [(r.address, r.kind, r.wavefronts, r.ideal_wavefronts, r.excess_wavefronts) for r in kernel.sass] == [
        (0x270, None, 0, 0, 0), (0x278, "ld", 64, 64, 0), (0x280, "st", 48, 32, 16), (0x288, None, 0, 0, 0)]
    assert kernel.cuda == []


def test_cuda_view_compared_per_line():
    measured = read_source_csv(NCU / "transpose_cuda.csv")
    assert [m.name.split("(")[0] for m in measured] == ["transpose_unpadded", "transpose_padded"]
    analyses = {"transpose_unpadded": transpose_analysis(),
                "transpose_padded": transpose_analysis("transpose_padded", row_words=33)}
    pairs = pair_kernels(measured, list(analyses), "r.csv")
    assert [(m.name.split("(")[0], k) for m, k in pairs] == [("transpose_unpadded", "transpose_unpadded"),
                                                             ("transpose_padded", "transpose_padded")]
    result = compare(pairs[0][0], "transpose_unpadded", kernel_table(analyses["transpose_unpadded"], "sm_90"))
    assert result.totals["measured"] == result.totals["predicted"] == {
        "wavefronts": 1_081_344, "ideal_wavefronts": 65_536, "excess_wavefronts": 1_015_808}
    assert [(row["line"], row["measured"]["excess_wavefronts"], row["predicted"]["excess_wavefronts"])
            for row in result.by_line] == [(12, 0, 0), (17, 1_015_808, 1_015_808)]
    assert "tile[threadIdx.x]" in result.by_line[1]["source"]


def test_unmatched_kernel_is_an_input_error():
    with pytest.raises(InputError, match="no kernel of the report matches other"):
        pair_kernels(read_source_csv(NCU / "transpose_cuda.csv"), ["other"], "r.csv")


@pytest.mark.parametrize("text, message, line", [
    ("a,b,c\n1,2,3\n", "no Source-page header", 1),
    ('"#","Address","Source","L1 Wavefronts Shared"\n"1","0x10","LDS R1, [R2]","x"\n', "is not a number", 2),
])
def test_bad_csv_is_located(tmp_path, text, message, line):
    path = tmp_path / "r.csv"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as info:
        read_source_csv(path)
    assert info.value.file == str(path) and info.value.line == line


def test_compare_ncu_cli_on_a_trace():
    from conftest import shared_path
    trace = shared_path("traces", "microgpusim-matrixmul", "kernelslist.g")
    result = CliRunner().invoke(app, ["compare-ncu", str(NCU / "mult_gpu_sass.csv"), str(trace), "--format", "json"])
    assert result.exit_code == 0, result.output
    (comparison,) = json.loads(result.stdout)["comparisons"]
    assert comparison["totals"]["measured"] == {"wavefronts": 112, "ideal_wavefronts": 96, "excess_wavefronts": 16}
    assert {k["kind"] for k in comparison["by_kind"]} == {"ld", "st"}


def test_real_ncu_reports_parse():
    reports = sorted((REPO / "tests" / "data" / "hw" / "source_sm90").glob("*.csv"))
    assert len(reports) >= 60
    for report in reports:
        kernels = read_source_csv(report)
        assert any(row.wavefronts for k in kernels for row in k.sass + k.cuda), report.name


def test_real_ncu_report_matches_the_prediction_for_float4_column():
    """H100 source page of wide.cu's float4_column (one CTA of 64 threads): LDS.128 column walk, 56 excess."""
    report = REPO / "tests" / "data" / "hw" / "source_sm90" / "float4_column.csv"
    ptx = FIXTURES / "cuda" / "wide.sm_90.ptx"
    result = CliRunner().invoke(app, ["compare-ncu", str(report), str(ptx), "-k", "_Z13float4_columnPK6float4PS_",
                                      "--block", "64", "--format", "json"])
    assert result.exit_code == 0, result.output
    (comparison,) = json.loads(result.stdout)["comparisons"]
    expected = {"wavefronts": 72, "ideal_wavefronts": 16, "excess_wavefronts": 56}
    assert comparison["totals"]["measured"] == comparison["totals"]["predicted"] == expected
    by_kind = {k["kind"]: k for k in comparison["by_kind"]}
    assert by_kind["ld"]["measured"]["excess_wavefronts"] == by_kind["ld"]["predicted"]["excess_wavefronts"] == 56


def _compare_cli(*args):
    return CliRunner().invoke(app, ["compare-ncu", *map(str, args)])


TRANSPOSE_PTX = REPO / "tests" / "fixtures" / "emulate" / "transpose.ptx"


def test_compare_ncu_cuda_only_report_table_keeps_brackets_and_marks_kinds_unmeasured():
    result = _compare_cli(NCU / "transpose_cuda.csv", TRANSPOSE_PTX, "-k", "transpose_unpadded",
                          "--block", "32,8", "--grid", "32,32")
    assert result.exit_code == 0, result.output
    assert "tile[threadIdx.y + j][threadIdx.x]" in result.stdout          # no rich markup eaten
    kind_rows = [line for line in result.stdout.splitlines() if line.startswith(("│ld ", "│st "))]
    assert kind_rows and all("–" in line and " 0 " not in line.split("│")[2] for line in kind_rows)
    assert "no SASS rows" in result.stdout


def test_compare_ncu_csv_output():
    result = _compare_cli(NCU / "transpose_cuda.csv", TRANSPOSE_PTX, "-k", "transpose_unpadded",
                          "--block", "32,8", "--grid", "32,32", "-f", "csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    kernel = next(r for r in rows if r["level"] == "kernel")
    assert kernel["measured_wavefronts"] == kernel["predicted_wavefronts"] == "1081344"
    line = next(r for r in rows if r["level"] == "line" and r["key"] == "17")
    assert line["measured_excess_wavefronts"] == line["predicted_excess_wavefronts"] == "1015808"
    assert all(r["measured_wavefronts"] == "" for r in rows if r["level"] == "kind")


def test_compare_ncu_says_when_line_numbers_come_from_another_build(tmp_path):
    shifted = tmp_path / "shifted.csv"
    text = (NCU / "transpose_cuda.csv").read_text()
    shifted.write_text(text.replace('"12","        tile', '"13","        tile').replace('"17","        odata',
                                                                                        '"19","        odata'))
    result = _compare_cli(shifted, TRANSPOSE_PTX, "-k", "transpose_unpadded", "--block", "32,8", "--grid", "32,32",
                          "-f", "json")
    (comparison,) = json.loads(result.stdout)["comparisons"]
    assert any("another build" in note for note in comparison["notes"])
