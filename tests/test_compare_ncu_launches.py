"""compare-ncu takes the kernels and launches from the report (issue 24, item 2): several Source pages, the
report's details or raw page (or its .ncu-rep) for grid, block and dynamic shared memory, one comparison per
profiled launch, only the kernels the report names analysed."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

from traceconf.analyses.ncu_launches import read_bytes, read_launch_csv, read_ncu_rep
from traceconf.cli import app
from traceconf.errors import InputError

REPO = Path(__file__).resolve().parents[1]
PAGES = REPO / "tests" / "data" / "hw" / "source_sm90"
RAW = REPO / "tests" / "data" / "hw" / "raw" / "fixtures_raw.csv"       # the H100 raw page of those launches
DETAILS = REPO / "tests" / "fixtures" / "ncu" / "details_strides.csv"
CUDA = REPO / "tests" / "fixtures" / "cuda"


def run(*args):
    return CliRunner().invoke(app, ["compare-ncu", *map(str, args)])


def comparisons(result) -> list[dict]:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["comparisons"]


def exact(comparison: dict) -> bool:
    return (comparison["totals"]["measured"] == comparison["totals"]["predicted"] and comparison["by_pc"]
            and all(row["measured"] == row["predicted"] for row in comparison["by_pc"]))


def test_launches_from_the_details_page_one_comparison_per_source_page():
    """Three kernels of strides.cu, their H100 Source pages and the details page of the same report: grid, block
    and the 512 bytes of dynamic shared memory come from the report; the file's 14 other kernels are not run."""
    result = run(PAGES / "stride_words_1.csv", PAGES / "stride_dynamic_2.csv", PAGES / "broadcast_reads.csv",
                 DETAILS, CUDA / "strides.sm_90.ptx", "-p", "2=2", "-f", "json")
    found = comparisons(result)
    assert [(c["kernel"], c["launch"]["id"]) for c in found] == [
        ("_Z12stride_wordsILi1EEvPKfPf", "0"), ("_Z14stride_dynamicPKfPfi", "9"), ("_Z15broadcast_readsPKfPf", "12")]
    assert found[1]["launch"] == {"id": "9", "grid": [2, 1, 1], "block": [64, 1, 1], "dynamic_smem": 512}
    assert all(exact(c) for c in found)
    table = run(PAGES / "stride_dynamic_2.csv", DETAILS, CUDA / "strides.sm_90.ptx", "-p", "2=2")
    assert "launch: grid 2×1×1, block 64×1×1, dynamic shared 512 bytes (the report's)" in table.stdout


def test_several_launches_of_one_kernel_are_told_apart_by_the_warps_they_ran():
    """The raw page holds two launches of transpose_tile<0> (IDs 25: 2×2 CTAs, 147: 8×8); each Source page's
    first instruction ran once per warp (32 and 512), which picks its launch, whatever the order given."""
    result = run(PAGES / "transpose_tile_32x32_grid64.csv", PAGES / "transpose_tile_32x32.csv",
                 PAGES / "transpose_tile_32x33.csv", RAW, CUDA / "transpose.sm_90.ptx", "-p", "width=64", "-f", "json")
    found = comparisons(result)
    assert [(c["launch"]["id"], c["launch"]["grid"]) for c in found] == [("147", [8, 8, 1]), ("25", [2, 2, 1]),
                                                                       ("26", [2, 2, 1])]
    assert [c["totals"]["measured"]["excess_wavefronts"] for c in found] == [63_488, 3_968, 0]
    assert all(exact(c) for c in found)


def test_launches_the_report_cannot_tell_apart_say_how_to_choose():
    """stride_dynamic ran three times with the same grid and block (IDs 9, 10, 11: 512, 1,536, 16,384 bytes of
    dynamic shared memory): one Source page cannot say which; --dynamic-smem does."""
    ambiguous = run(PAGES / "stride_dynamic_6.csv", RAW, CUDA / "strides.sm_90.ptx", "-p", "2=6")
    assert ambiguous.exit_code == 2 and ambiguous.stdout == ""
    (line,) = ambiguous.stderr.strip().splitlines()
    assert line.startswith(f"{RAW}: the launch pages hold 3 launch(es) of 4 warps of _Z14stride_dynamicPKfPfi")
    assert "give the launch's --grid/--block/--dynamic-smem" in line and "--launch-skip N --launch-count 1" in line
    chosen = comparisons(run(PAGES / "stride_dynamic_6.csv", RAW, CUDA / "strides.sm_90.ptx", "-p", "2=6",
                             "--dynamic-smem", "1536", "-f", "json"))
    assert [(c["launch"]["id"], c["launch"]["dynamic_smem"]) for c in chosen] == [("9, 10, 11", 1536)]
    assert exact(chosen[0])


def test_a_source_page_alone_says_what_is_missing_and_how_to_give_it():
    result = run(PAGES / "stride_words_1.csv", CUDA / "strides.sm_90.ptx")
    assert result.exit_code == 2 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line == (f"{PAGES / 'stride_words_1.csv'}: stride_words<1> (_Z12stride_wordsILi1EEvPKfPf): the Source "
                    "page does not give the launch (grid, block, dynamic shared memory); add the report's launch page as another REPORT (ncu -i "
                    "REPORT.ncu-rep --page details --csv > launches.csv, or --page raw --csv, or the .ncu-rep "
                    "itself), or give --grid and --block (or --launches FILE)")
    # --block alone: the grid is taken as 1 and the comparison says so
    given = comparisons(run(PAGES / "stride_words_1.csv", CUDA / "strides.sm_90.ptx", "--block", "64", "-f", "json"))
    assert given[0]["launch"]["grid"] == [1, 1, 1]
    assert given[0]["notes"] == ["grid taken as 1: neither the report nor the options give it (add the report's "
                                 "launch page, ncu -i REPORT.ncu-rep --page details --csv > launches.csv, or --grid)"]


def test_a_kernel_declaring_its_block_needs_no_launch_page(tmp_path):
    """Whether the launch is known is the launch's rule (``.reqntid`` gives the block, as for analyze): a Source
    page alone compares it, the grid taken as 1 and said."""
    ptx = tmp_path / "strides.ptx"
    ptx.write_text((CUDA / "strides.sm_90.ptx").read_text().replace(
        "_Z12stride_wordsILi1EEvPKfPf_param_1\n)\n{", "_Z12stride_wordsILi1EEvPKfPf_param_1\n)\n.reqntid 64, 1, 1\n{", 1))
    (found,) = comparisons(run(PAGES / "stride_words_1.csv", ptx, "-f", "json"))
    assert found["launch"]["block"] == [64, 1, 1] and found["launch"]["grid"] == [1, 1, 1]
    assert [note for note in found["notes"] if note.startswith("grid taken as 1")]


def test_a_report_kernel_the_input_lacks_is_a_note_and_no_source_page_is_an_error():
    inputs = (PAGES / "stride_words_1.csv", PAGES / "broadcast_reads.csv", PAGES / "transpose_tile_32x32.csv", RAW,
              CUDA / "strides.sm_90.ptx")
    result = run(*inputs, "-f", "json")
    found = comparisons(result)
    assert [c["kernel"] for c in found] == ["_Z12stride_wordsILi1EEvPKfPf", "_Z15broadcast_readsPKfPf"]
    note = f"{PAGES / 'transpose_tile_32x32.csv'}: transpose_tile<0> (_Z14transpose_tileILi0EEvPfPKfi) is not " \
           f"compared: {CUDA / 'strides.sm_90.ptx'} has no such kernel (or --kernel leaves it out)"
    # said once, for the run, not in every comparison (text: once, after them)
    assert json.loads(result.stdout)["notes"] == [note] and not any(note in c["notes"] for c in found)
    text = CliRunner().invoke(app, ["compare-ncu", *map(str, inputs)], env={"COLUMNS": "1000"})
    assert text.exit_code == 0 and text.stdout.count("is not compared") == 1
    none = run(RAW, CUDA / "strides.sm_90.ptx")
    assert none.exit_code == 2 and "no Source page among the reports: export one with ncu -i" in none.stderr


def test_details_page_units():
    assert read_bytes("1,536", "byte/block", "d.csv", 3, 15, "m") == 1536
    assert read_bytes("n/a", "byte/block", "d.csv", 3, 15, "m") is None
    with pytest.raises(InputError, match=r"d.csv:3:15: m: 1.54 Kbyte/block is rounded, not a byte count: "
                                         r"export with --print-units base"):
        read_bytes("1.54", "Kbyte/block", "d.csv", 3, 15, "m")
    with pytest.raises(InputError, match="expected a byte count, got 'lots'"):
        read_bytes("lots", "byte/block", "d.csv", 3, 15, "m")
    (launch,) = [entry for entry in read_launch_csv(DETAILS) if entry.id == "9"]
    assert (launch.grid, launch.block, launch.dynamic_smem, launch.line) == ((2, 1, 1), (64, 1, 1), 512, 15)


def test_ncu_rep_without_nsight_python_module_says_how(tmp_path, monkeypatch):
    report = tmp_path / "run.ncu-rep"
    report.write_bytes(b"\0")
    monkeypatch.setitem(sys.modules, "ncu_report", None)         # not importable
    result = run(PAGES / "stride_words_1.csv", report, CUDA / "strides.sm_90.ptx")
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "needs Nsight Compute's Python module ncu_report: add its folder to PYTHONPATH" in line
    assert f"ncu -i {report} --page details --csv > launches.csv" in line


def test_ncu_rep_through_the_ncu_report_interface(tmp_path, monkeypatch):
    """The calls made on ncu_report (load_report, ranges, actions, metric_by_name(...).as_uint64(), mangled
    name), answered by a stand-in holding launch 9 of the H100 run; the real module is not on this machine."""
    metrics = {"launch__grid_dim_x": 2, "launch__grid_dim_y": 1, "launch__grid_dim_z": 1, "launch__block_dim_x": 64,
               "launch__block_dim_y": 1, "launch__block_dim_z": 1, "launch__shared_mem_per_block_dynamic": 512}
    value = lambda v: types.SimpleNamespace(as_uint64=lambda: v)          # noqa: E731
    action = types.SimpleNamespace(name=lambda base: "_Z14stride_dynamicPKfPfi" if base == "mangled" else "?",
                                   metric_by_name=lambda n: value(metrics[n]) if n in metrics else None)
    launches = types.SimpleNamespace(num_actions=lambda: 1, action_by_idx=lambda i: action)
    report = types.SimpleNamespace(num_ranges=lambda: 1, range_by_idx=lambda i: launches)
    module = types.SimpleNamespace(load_report=lambda path: report,
                                   IAction=types.SimpleNamespace(NameBase_MANGLED="mangled"))
    monkeypatch.setitem(sys.modules, "ncu_report", module)
    path = tmp_path / "run.ncu-rep"
    path.write_bytes(b"\0")
    (launch,) = read_ncu_rep(path)
    assert (launch.kernel, launch.grid, launch.block, launch.dynamic_smem) == (
        "_Z14stride_dynamicPKfPfi", (2, 1, 1), (64, 1, 1), 512)
    found = comparisons(run(PAGES / "stride_dynamic_2.csv", path, CUDA / "strides.sm_90.ptx", "-p", "2=2",
                            "-f", "json"))
    assert found[0]["launch"]["dynamic_smem"] == 512 and exact(found[0])


def test_a_cuda_binary_of_many_kernels_only_the_reports_run():
    """cub_blocks.sm_90.cubin holds 21 CUB kernels; three H100 Source pages and the report's raw page name three
    of them and their launches: nothing is typed, only those run, each pc equals the Source page."""
    cub = REPO / "tests" / "data" / "hw" / "cub"
    pages = [cub / "source" / f"{name}.csv" for name in
             ("cub_exchange_i16_160x4", "cub_load_store_transpose_i32_96x7", "cub_shuffle_i32_96x4")]
    found = comparisons(run(*pages, cub / "raw.csv", REPO / "tests" / "fixtures" / "cub" / "cub_blocks.sm_90.cubin",
                            "-f", "json"))
    assert [(c["kernel"], c["launch"]["id"], c["launch"]["block"]) for c in found] == [
        ("_Z22cub_exchange_i16_160x4PKsPs", "4", [160, 1, 1]),
        ("_Z33cub_load_store_transpose_i32_96x7PKiPi", "0", [96, 1, 1]),
        ("_Z20cub_shuffle_i32_96x4PKiPi", "12", [96, 1, 1])]
    assert all(exact(c) for c in found)


def test_a_report_naming_kernels_by_their_function_alone(tmp_path):
    """ncu --print-kernel-base function names a kernel `stride_dynamic`: the input's only kernel of that function
    is it; a function with several template instances in the input is not guessed."""
    page = tmp_path / "source.csv"
    page.write_text((PAGES / "stride_dynamic_2.csv").read_text().replace("_Z14stride_dynamicPKfPfi", "stride_dynamic"))
    launches = tmp_path / "details.csv"
    launches.write_text(DETAILS.read_text().replace("_Z14stride_dynamicPKfPfi", "stride_dynamic"))
    found = comparisons(run(page, launches, CUDA / "strides.sm_90.ptx", "-p", "2=2", "-f", "json"))
    assert [(c["kernel"], c["launch"]["dynamic_smem"]) for c in found] == [("_Z14stride_dynamicPKfPfi", 512)]
    assert exact(found[0])
    words = tmp_path / "words.csv"
    words.write_text((PAGES / "stride_words_1.csv").read_text().replace("_Z12stride_wordsILi1EEvPKfPf", "stride_words"))
    ambiguous = run(words, CUDA / "strides.sm_90.ptx", "--block", "64")
    assert ambiguous.exit_code == 2 and "no kernel of the report (stride_words) is a kernel of this input" in \
        ambiguous.stderr


def test_a_source_page_naming_the_function_finds_its_launch_under_the_mangled_name(tmp_path):
    """The Source page exported with --print-kernel-base function names `stride_words`, --kernel picks one
    instance, the launch page (or a .ncu-rep) names the mangled template instance: both mean the input's
    kernel, one rule decides it for the table and for the launches, so that launch is the table's."""
    page = tmp_path / "source.csv"
    page.write_text((PAGES / "stride_words_1.csv").read_text().replace("_Z12stride_wordsILi1EEvPKfPf", "stride_words"))
    found = comparisons(run(page, DETAILS, CUDA / "strides.sm_90.ptx", "--kernel", "stride_words<1>", "-f", "json"))
    assert [(c["kernel"], c["launch"]["block"]) for c in found] == [("_Z12stride_wordsILi1EEvPKfPf", [64, 1, 1])]
    assert exact(found[0])


def test_a_whole_report_export_of_three_launches_from_the_gpu():
    """A real export (tests/data/hw/ncu_reports, H200, Nsight Compute 2025.3.1): one ncu run of three transpose
    launches, two of one kernel on different grids; the Source page prints each launch's table twice (line info
    names two files), the details page gives the launches. One exact comparison per launch, each on its grid."""
    reports = REPO / "tests" / "data" / "hw" / "ncu_reports"
    result = run(reports / "transpose_source_all.csv", reports / "transpose_details.csv",
                 REPO / "tests" / "fixtures" / "emulate" / "transpose.ptx", "-f", "json")
    found = comparisons(result)
    assert [(c["kernel"], c["launch"]["id"], c["launch"]["grid"]) for c in found] == [
        ("transpose_unpadded", "0", [32, 32, 1]), ("transpose_padded", "1", [32, 32, 1]),
        ("transpose_unpadded", "2", [16, 16, 1])]
    assert [c["totals"]["measured"]["excess_wavefronts"] for c in found] == [1_015_808, 0, 253_952]
    assert all(exact(c) for c in found)
    raw = run(reports / "transpose_source_all.csv", reports / "transpose_raw.csv",
              REPO / "tests" / "fixtures" / "emulate" / "transpose.ptx", "-f", "json")
    assert [c["launch"] for c in comparisons(raw)] == [c["launch"] for c in found]
