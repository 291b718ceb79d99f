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
from traceconf.analyses.ncu import MeasuredKernel, compare, opcode_kind, read_counters_csv, read_source_csv
from traceconf.analyses.ncu_predict import match_tables

NCU = FIXTURES / "ncu"
CUDA_FIXTURES = FIXTURES / "cuda"


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
    pairs = match_tables([("r.csv", m) for m in measured], list(analyses), None, "t.ptx")
    assert [(m.name.split("(")[0], k) for m, k in pairs] == [("transpose_unpadded", "transpose_unpadded"),
                                                             ("transpose_padded", "transpose_padded")]
    result = compare(pairs[0][0], "transpose_unpadded", kernel_table(analyses["transpose_unpadded"], "sm_90"))
    assert result.totals["measured"] == result.totals["predicted"] == {
        "wavefronts": 1_081_344, "ideal_wavefronts": 65_536, "excess_wavefronts": 1_015_808}
    assert [(row["line"], row["measured"]["excess_wavefronts"], row["predicted"]["excess_wavefronts"])
            for row in result.by_line] == [(12, 0, 0), (17, 1_015_808, 1_015_808)]
    assert "tile[threadIdx.x]" in result.by_line[1]["source"]


def test_unmatched_kernel_is_an_input_error():
    tables = [("r.csv", m) for m in read_source_csv(NCU / "transpose_cuda.csv")]
    with pytest.raises(InputError, match=r"no kernel of the report \(transpose_unpadded.*\) is a kernel of this "
                                         r"input \(other\)"):
        match_tables(tables, ["other"], None, "t.ptx")


def test_kernel_option_selects_the_reports_kernels_as_analyze_does():
    """--kernel picks among the input's kernels as every command does (per pattern its best tier): ``reduce``
    is the kernel of that name, not every kernel whose name holds it; a pattern naming none is refused so."""
    tables = [("r.csv", MeasuredKernel(name)) for name in ("reduce", "reduce_big")]
    assert [(m.name, k) for m, k in match_tables(tables, ["reduce", "reduce_big"], ["reduce"], "t.ptx")] == [
        ("reduce", "reduce")]
    with pytest.raises(InputError, match=r"no kernel matches 'reduse'; did you mean 'reduce'") as info:
        match_tables(tables, ["reduce", "reduce_big"], ["reduse"], "t.ptx")
    assert info.value.file == "t.ptx"


def test_counters_of_launches_alike_in_grid_and_block_are_picked_by_the_reports_launch_id():
    """Two launches of one kernel on the same grid and block (other parameters): the launch pages' ID says which
    row of the counters CSV is the compared launch; without an ID both are shown, as before."""
    from traceconf.analyses.ncu import KernelCounters
    (measured,) = [m for m in read_source_csv(NCU / "transpose_cuda.csv") if m.name.startswith("transpose_unpadded")]
    analysis = transpose_analysis()
    counters = [KernelCounters(launch_id, "transpose_unpadded", (1, 1, 1), (32, 32, 1),
                               {"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": wavefronts}, line)
                for launch_id, wavefronts, line in (("3", 100, 2), ("7", 200, 3))]
    facts = {"grid": [1, 1, 1], "block": [32, 32, 1]}
    table = kernel_table(analysis, "sm_90")
    picked = compare(measured, "transpose_unpadded", table, counters, facts, ("7",))
    assert [entry["id"] for entry in picked.counters] == ["7"] and picked.launch["id"] == "7"
    both = compare(measured, "transpose_unpadded", table, counters, facts)
    assert [entry["id"] for entry in both.counters] == ["3", "7"] and both.launch["id"] is None


@pytest.mark.parametrize("text, message, line", [
    ("a,b,c\n1,2,3\n", "no Source-page header", 1),
    ('"#","Address","Source","L1 Wavefronts Shared"\n"1","0x10","LDS R1, [R2]","x"\n', "is not a number", 2),
    # a field the csv module refuses (over its size limit) is this file's error at its line, never an internal one
    ('"#","Address","Source","L1 Wavefronts Shared"\n"1","0x10","' + "A" * 200_000 + '","1"\n',
     "not a CSV export: field larger than field limit", 2),
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


# -- kernel-level counters (--raw): both figures ncu gives ---------------------------------------------------

SCALE = REPO / "tests" / "data" / "hw" / "scale"
TRANSPOSE_4096 = ["-k", ".*Li1.*", "--grid", "128,128", "--block", "32,8", "-p", "2=4096"]


def _one_launch_raw(tmp_path, index: int):
    """ncu --page raw --csv of one launch: the header, the units row and launch `index` of a committed export."""
    lines = (SCALE / "raw" / "metrics_run0.csv").read_text().splitlines()
    path = tmp_path / "raw.csv"
    path.write_text("\n".join([lines[0], lines[1], lines[2 + index]]) + "\n")
    return path


def _scale_row(launch: str) -> dict:
    return next(r for r in csv.DictReader(open(SCALE / "kernel_vs_source.csv")) if r["launch"] == launch
                and r["run"] == "0")


def test_compare_ncu_shows_the_kernel_level_counter_beside_the_source_page_sum(tmp_path):
    """H100, transpose 32x33 at 16,384 CTAs: the l1tex counters exceed the Source page (CTAs share SMs); the
    prediction equals the Source page, and the table shows both ncu figures with their difference."""
    raw = _one_launch_raw(tmp_path, 3)                 # launches.toml order: transpose_32x33_w4096
    row = _scale_row("transpose_32x33_w4096")
    args = [SCALE / "pages" / "transpose_32x33_w4096.csv", CUDA_FIXTURES / "transpose.sm_90.ptx", *TRANSPOSE_4096,
            "--raw", raw]
    result = _compare_cli(*args, "-f", "json")
    assert result.exit_code == 0, result.output
    (comparison,) = json.loads(result.stdout)["comparisons"]
    (entry,) = comparison["counters"]
    ops = {op["op"]: op for op in entry["by_op"]}
    assert ops["ld"]["counter"] == {"wavefronts": int(row["hw_wf_ld"]), "bank_conflicts": int(row["hw_bc_ld"])}
    assert ops["ld"]["source"]["wavefronts"] == ops["ld"]["predicted"]["wavefronts"] == int(row["source_wf_ld"])
    assert ops["ld"]["counter"]["wavefronts"] > ops["ld"]["source"]["wavefronts"]
    assert ops["st"]["counter"]["wavefronts"] - ops["st"]["counter"]["bank_conflicts"] == int(row["source_ideal_st"])
    assert any("several CTAs share an SM" in note for note in comparison["notes"])
    table = _compare_cli(*args)
    assert table.exit_code == 0, table.output
    assert "both figures ncu gives" in table.stdout and "Source page wavefronts" in table.stdout
    extra = int(row["hw_wf_ld"]) - int(row["source_wf_ld"])
    assert f"+{extra:,}" in table.stdout
    csv_rows = list(csv.DictReader(io.StringIO(_compare_cli(*args, "-f", "csv").stdout)))
    counter_ld = next(r for r in csv_rows if r["level"] == "counter" and r["key"] == "ld")
    assert counter_ld["measured_wavefronts"] == row["hw_wf_ld"] and counter_ld["measured_excess_wavefronts"] == row["hw_bc_ld"]
    assert counter_ld["predicted_wavefronts"] == row["source_wf_ld"]


def test_compare_ncu_without_counters_says_where_they_come_from():
    result = _compare_cli(SCALE / "pages" / "transpose_32x33_w4096.csv", CUDA_FIXTURES / "transpose.sm_90.ptx",
                          *TRANSPOSE_4096)
    assert result.exit_code == 0, result.output
    assert "--raw" in result.stdout and "both figures" not in result.stdout


def test_counters_csv_picks_the_launches_of_the_predicted_grid():
    """The raw export of the whole collection holds transpose_tile<1> at grid 32x32 once and at 128x128 three
    times (default, carve-out, one CTA per SM): --grid decides which are shown."""
    counters = read_counters_csv(SCALE / "raw" / "metrics_run0.csv")
    for grid, expected in (("32,32", 1), ("128,128", 3)):
        result = _compare_cli(SCALE / "pages" / "transpose_32x33_w4096.csv", CUDA_FIXTURES / "transpose.sm_90.ptx",
                              "-k", ".*Li1.*", "--grid", grid, "--block", "32,8", "-p", "2=4096", "--raw",
                              SCALE / "raw" / "metrics_run0.csv", "-f", "json")
        (comparison,) = json.loads(result.stdout)["comparisons"]
        assert len(comparison["counters"]) == expected
        assert all(entry["grid"] == [int(g) for g in grid.split(",")] + [1] for entry in comparison["counters"])
    assert len(counters) == sum(1 for _ in csv.DictReader(open(SCALE / "kernel_vs_source.csv"))) // 3


def test_counters_csv_details_page_layout(tmp_path):
    """--page details --csv: one row per metric, Metric Name / Metric Value, thousands separators."""
    path = tmp_path / "details.csv"
    head = '"ID","Kernel Name","Block Size","Grid Size","Section Name","Metric Name","Metric Unit","Metric Value"\n'
    rows = [("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "1,048,576"),
            ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "0"),
            ("dram__bytes.sum", "12")]
    path.write_text("==PROF== Disconnected from process 1\n" + head + "".join(
        f'"0","k(float *)","(32, 8, 1)","(2, 2, 1)","Command line profiler metrics","{m}","","{v}"\n' for m, v in rows))
    (launch,) = read_counters_csv(path)
    assert (launch.id, launch.kernel, launch.grid, launch.block) == ("0", "k(float *)", (2, 2, 1), (32, 8, 1))
    assert launch.values == {"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": 1_048_576,
                             "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": 0}


@pytest.mark.parametrize("text, message, where", [
    ("a,b\n1,2\n", "no kernel-level counters table", ":1: "),
    ('"ID","Kernel Name","gpu__time_duration.sum"\n"0","k","5"\n', "none of the l1tex shared-memory counters", ":1: "),
    ('"ID","Kernel Name","l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"\n"0","k","lots"\n',
     "counter value 'lots' is not a number", ":2:3: "),
])
def test_bad_counters_csv_is_one_located_line_and_exit_2(tmp_path, text, message, where):
    path = tmp_path / "raw.csv"
    path.write_text(text)
    result = _compare_cli(SCALE / "pages" / "transpose_32x33_w4096.csv", CUDA_FIXTURES / "transpose.sm_90.ptx",
                          *TRANSPOSE_4096, "--raw", path)
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"{path}{where}") and message in line


def test_each_table_of_a_traced_kernel_is_predicted_at_the_traced_launch_it_ran():
    """A trace holding two launches of a kernel: each Source table goes with the launch that ran its warps (not
    the trace's first launch of the kernel); tables no launch can be told apart for are an error naming the trace."""
    from types import SimpleNamespace
    from traceconf.analyses.ncu_predict import _trace_predictions
    done = [SimpleNamespace(kernel="k", launch={"grid": (4, 1, 1), "block": (64, 1, 1)}),
            SimpleNamespace(kernel="other", launch={"grid": (1, 1, 1), "block": (32, 1, 1)}),
            SimpleNamespace(kernel="k", launch={"grid": (2, 1, 1), "block": (64, 1, 1)})]
    small, large = MeasuredKernel("k", warps=4), MeasuredKernel("k", warps=8)
    predicted = _trace_predictions("t.traceg", [("a.csv", small), ("b.csv", large)], done, 32)
    assert [(p.measured, p.analysis) for p in predicted] == [(small, done[2]), (large, done[0])]
    unknown = MeasuredKernel("k", warps=6)
    with pytest.raises(InputError, match=r"the trace \(its launches numbered in order\) holds no launch\(es\) of "
                                         r"6 warps of k \(ID 1: grid 4×1×1.*ID 3: grid 2×1×1"):
        _trace_predictions("t.traceg", [("a.csv", unknown)], done, 32)
