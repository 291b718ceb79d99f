"""`traceconf analyze`: output formats, result files, failures and exit codes.

The first group runs the command on hand-built analyses (the pipeline is
replaced), so the CLI contract is tested independently of the emulator; the
end-to-end group at the bottom runs the real pipeline on the PTX fixtures.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd
import pytest
from typer.testing import CliRunner

from test_report_support import SCALE, transpose_analysis
from traceconf.cli import app
from traceconf.commands import analyze as analyze_command
from traceconf.errors import InputError
from traceconf.pipeline import KernelFailure

EXCESS = 4 * 8 * 31 * SCALE


@pytest.fixture
def fake_pipeline(monkeypatch, tmp_path):
    """analyze on a stand-in file whose 'analysis' is the hand-built transpose kernel."""
    calls = {}

    def run_file(path, kernels, launch, rule_sets, skip_bad, progress, **level_options):
        calls.update(path=path, kernels=kernels, launch=launch, progress=progress)
        devices = tuple(r.name for r in rule_sets)
        done = [transpose_analysis(devices=devices), transpose_analysis("transpose_padded", devices, row_words=33)]
        failed = [KernelFailure("broken", InputError("unsupported instruction vote.sync", "k.ptx", 40, 9))]
        return done, failed if calls.get("fail") else []

    monkeypatch.setattr(analyze_command, "run_file", run_file)
    monkeypatch.setattr(analyze_command, "load_rule_sets",
                        lambda names, default: [SimpleNamespace(name=n) for n in dict.fromkeys(names or [default])])
    source = tmp_path / "k.ptx"
    source.write_text(".version 8.0\n.target sm_90\n")
    return SimpleNamespace(path=source, calls=calls)


def invoke(*args):
    return CliRunner().invoke(app, ["analyze", *map(str, args)])


def test_json_output_one_result_per_kernel_and_device(fake_pipeline):
    result = invoke(fake_pipeline.path, "--block", "32,8", "--grid", "32x32", "-d", "sm_90", "-d", "sm_1x",
                    "--format", "json", "--param", "0=0x10", "--param", "n=42")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert [(r["kernel"], r["device"]) for r in document["results"]] == [
        ("transpose_unpadded", "sm_90"), ("transpose_unpadded", "sm_1x"),
        ("transpose_padded", "sm_90"), ("transpose_padded", "sm_1x")]
    launch = fake_pipeline.calls["launch"]
    assert launch.block == (32, 8, 1) and launch.grid == (32, 32, 1) and launch.params == {"0": 16, "n": 42}
    assert fake_pipeline.calls["progress"] is None  # never a progress bar without a terminal


def test_csv_output_and_parquet_file(fake_pipeline, tmp_path):
    out = tmp_path / "r.parquet"
    result = invoke(fake_pipeline.path, "--format", "csv", "-o", out)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith('"input","kernel","kernel_name","device","instruction"')
    assert len(lines) == 1 + 2 * 10
    frame = pd.read_parquet(out)
    assert frame.groupby("kernel").excess_wavefronts.sum().to_dict() == {"transpose_padded": 0,
                                                                        "transpose_unpadded": EXCESS}


def test_table_output_names_the_hotspot(fake_pipeline):
    result = invoke(fake_pipeline.path, "--top", "2")
    assert result.exit_code == 0, result.output
    assert "transpose_unpadded" in result.stdout and "transpose_padded" in result.stdout
    assert "32-way" in result.stdout and "8 more instruction(s)" in result.stdout


def test_failed_kernel_is_one_line_and_exit_2_but_results_survive(fake_pipeline, tmp_path):
    fake_pipeline.calls["fail"] = True
    out = tmp_path / "r.csv"
    result = invoke(fake_pipeline.path, "--format", "json", "-o", out)
    assert result.exit_code == 2
    assert result.stderr.strip() == "k.ptx:40:9: kernel broken: unsupported instruction vote.sync"
    assert len(json.loads(result.stdout)["results"]) == 2
    assert len(pd.read_csv(out)) == 20


def test_fail_on_excess_gates_ci(fake_pipeline):
    result = invoke(fake_pipeline.path, "--format", "json", "--fail-on-excess", EXCESS - 1)
    assert result.exit_code == 1
    assert result.stderr.strip() == (f"traceconf: kernel transpose_unpadded on sm_90 has {EXCESS:,} excess "
                                     f"wavefronts (limit --fail-on-excess {EXCESS - 1})")
    # the fake kernel has an unresolved instruction: the gate does not pass silently
    unresolved = invoke(fake_pipeline.path, "--format", "json", "--fail-on-excess", EXCESS)
    assert unresolved.exit_code == 3
    assert "unresolved" in unresolved.stderr and "--data" in unresolved.stderr and "--param" in unresolved.stderr
    assert invoke(fake_pipeline.path, "--format", "json", "--fail-on-excess", EXCESS,
                  "--allow-unresolved").exit_code == 0


@pytest.mark.parametrize("args, message", [
    (["--block", "32,0"], "error: --block: every dimension must be at least 1, got '32,0'"),
    (["--block", "1,2,3,4"], "error: --block: expected X[,Y[,Z]], got '1,2,3,4'"),
    (["--param", "n"], "error: --param: expected NAME_OR_INDEX=VALUE, got 'n'"),
    (["--param", "n=abc"], "--param n: value 'abc' is not a whole number (decimal or 0x hex)"),
    (["--dynamic-smem", "-4"], "error: --dynamic-smem: must not be negative"),
])
def test_bad_launch_options_are_one_line_errors(fake_pipeline, args, message):
    result = invoke(fake_pipeline.path, *args)
    assert result.exit_code == 2
    assert result.stderr.strip() == message


def test_missing_file(tmp_path):
    result = invoke(tmp_path / "nope.ptx")
    assert result.exit_code == 2
    assert result.stderr.strip() == f"{tmp_path / 'nope.ptx'}: no such file"


def test_unwritable_output_is_refused_before_work(fake_pipeline, tmp_path):
    result = invoke(fake_pipeline.path, "--format", "json", "-o", tmp_path / "missing" / "r.parquet")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "cannot write: no such folder" in result.stderr


# ---------------------------------------------------------------------------
# End to end: the real pipeline
# ---------------------------------------------------------------------------

def test_real_trace_json_and_parquet(tmp_path):
    import duckdb
    import polars as pl

    from conftest import shared_path
    trace = shared_path("traces", "microgpusim-matrixmul", "kernelslist.g")
    out = tmp_path / "r.parquet"
    result = invoke(trace, "-f", "json", "-d", "sm_90", "-d", "sm_1x", "-o", out)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert [r["device"] for r in document["results"]] == ["sm_90", "sm_1x"]
    sm90 = document["results"][0]
    assert sm90["totals"]["ld"]["wavefronts"] + sm90["totals"]["st"]["wavefronts"] == 1600
    assert all(i["ptx"] for i in sm90["instructions"])
    assert pl.read_parquet(out).height == 2 * len(sm90["instructions"])
    assert duckdb.connect().execute(f"select count(distinct device) from '{out}'").fetchall()[0][0] == 2


def test_transpose_ptx_end_to_end(tmp_path):
    from conftest import FIXTURES
    ptx = FIXTURES / "emulate" / "transpose.ptx"
    result = invoke(ptx, "--block", "32,8", "--grid", "32,32", "-f", "json", "--fail-on-excess", "0")
    assert result.exit_code == 1
    by_kernel = {r["kernel"]: r for r in json.loads(result.stdout)["results"]}
    assert by_kernel["transpose_unpadded"]["totals"]["ld"]["excess_wavefronts"] == EXCESS
    assert by_kernel["transpose_unpadded"]["totals"]["st"]["excess_wavefronts"] == 0
    assert by_kernel["transpose_padded"]["totals"]["ld"]["excess_wavefronts"] == 0
    assert all(i["source"] and i["source"].endswith((":12", ":17"))
               for i in by_kernel["transpose_unpadded"]["instructions"])
    assert "transpose_unpadded on sm_90" in result.stderr and "transpose_padded" not in result.stderr


def test_transpose_ptx_table_suggest_and_explain(tmp_path):
    from conftest import FIXTURES
    ptx = FIXTURES / "emulate" / "transpose.ptx"
    result = invoke(ptx, "-k", "transpose_unpadded", "--block", "32,8", "--grid", "32,32", "--suggest", "--top", "2",
                    "--level", "ptx")
    assert result.exit_code == 0, result.output
    assert "1 CTA analysed, ×1024 exact" in result.stdout
    assert "pad tile row 32→33 words: 32-way → 1-way" in result.stdout
    svg = tmp_path / "t.svg"
    explained = CliRunner().invoke(app, ["explain", str(ptx), "-k", "transpose_unpadded", "-i", "transpose.cu:17",
                                         "--block", "32,8", "--grid", "32,32", "--warp", "2", "--svg", str(svg)])
    assert explained.exit_code == 0, explained.output
    assert "32 wavefronts, ideal 1, excess 31, worst 32-way" in explained.stdout
    assert svg.read_text().startswith("<svg")
