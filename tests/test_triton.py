"""traceconf.triton: a @triton.jit launch from Python, a harvested Triton cache, the notebook table."""

from __future__ import annotations

import dataclasses
import json
import struct
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from traceconf.errors import InputError

triton = pytest.importorskip("triton", reason="Triton is not installed (pip install 'traceconf[triton]')")

import traceconf.triton as tt  # noqa: E402  (after the skip: needs Triton only when called)
from traceconf.triton.compile import POINTER_BASE, POINTER_SPACING, compile_launch  # noqa: E402
from traceconf.triton.records import launch_record, read_cache, record_launches  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "fixtures" / "triton"))
import kernels  # noqa: E402

KERNELS = REPO / "tests" / "fixtures" / "triton" / "kernels.py"


def _line(text: str) -> int:
    """Line number of ``text`` in kernels.py (the expected Python line of an access)."""
    return next(n for n, line in enumerate(KERNELS.read_text().splitlines(), 1) if text in line)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh Triton cache for the test."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(folder))
    return folder


def test_arguments_are_specialised_as_triton_launches_them():
    x = np.zeros(1000, np.float16)
    y = np.zeros(1000, np.float32)
    launch = compile_launch(kernels.scaled_copy, (8,), (x, y, 1000, 2.5, 1), {"BLOCK": 128}, "sm_90")
    # 1 is folded into a constant like Triton's launcher does; the rest are PTX parameters in order
    assert launch.signature == {"x_ptr": "*fp16", "y_ptr": "*fp32", "n": "i32", "alpha": "fp32",
                                "offset": "constexpr", "BLOCK": "constexpr"}
    assert set(launch.data) == {0, 1} and launch.data[0].dtype == np.float16
    assert launch.params[2] == 1000 and launch.params[3] == struct.unpack("<I", struct.pack("<f", 2.5))[0]
    assert launch.params[4] == launch.params[5] == 0          # scratch pointers: none requested
    assert launch.grid == (8, 1, 1) and launch.block == (128, 1, 1)
    big = compile_launch(kernels.scaled_copy, (8,), (x, y, 2**40, 2.5, 3), {"BLOCK": 128}, "sm_90")
    assert big.signature["n"] == "i64" and big.signature["offset"] == "i32"


def test_a_grid_function_gets_the_arguments_by_name():
    x = np.zeros(1000, np.float32)
    launch = compile_launch(kernels.scaled_copy, lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),),
                            (x, x, 1000, 1.0, 0.0), {"BLOCK": 256}, "sm_90")
    assert launch.grid == (4, 1, 1)


def test_a_transpose_gives_the_table_of_analyze_ptx_with_python_lines():
    x = np.random.default_rng(0).random((256, 256)).astype(np.float32)
    table = tt.analyze(kernels.transpose, (4, 4), x, np.empty_like(x), 256, 256, BLOCK=64, num_stages=2)
    import traceconf
    reference = traceconf.analyze_ptx(REPO / "tests" / "fixtures" / "emulate" / "transpose.ptx",
                                      kernel="transpose_unpadded", block=(32, 8), grid=(1, 1))
    assert list(table.columns) == list(reference.columns)
    assert set(table.source_file) == {str(KERNELS)}
    assert set(table.source_line) == {_line("tl.store(y_ptr + rn")}
    assert table.wavefronts.sum() == 4096 and table.excess_wavefronts.sum() == 0     # the H100's counts
    facts = table.attrs["launch"]
    assert facts["triton_version"] == triton.__version__
    assert (facts["block"], facts["shared_bytes"]) == ([128, 1, 1], 16384)


def test_library_calls_are_attributed_to_the_authors_line():
    x = np.ones((4, 1000), np.float32)
    table = tt.analyze(kernels.row_sum_if_flag, (4,), x, np.zeros(4, np.float32), np.ones(1, np.int32), 1000,
                       BLOCK=1024)
    assert len(table) and set(table.source_line) == {_line("tl.sum(x, axis=0)")}
    assert f"kernels.py:{_line('tl.sum(x, axis=0)')} " in table.explain().title


def test_array_contents_resolve_what_depends_on_them():
    x = np.ones((4, 1000), np.float32)
    args = (x, np.zeros(4, np.float32), np.ones(1, np.int32), 1000)
    compiled = compile_launch(kernels.row_sum_if_flag, (4,), args, {"BLOCK": 1024}, "sm_90a"[:5])
    with_data = tt.analyze_compiled(compiled, "sm_90")
    assert with_data.resolved.all() and with_data.executions.sum() > 0
    without = tt.analyze_compiled(dataclasses.replace(compiled, data={}), "sm_90")
    assert not without.resolved.any()
    unset = tt.analyze(kernels.row_sum_if_flag, (4,), *args[:2], np.zeros(1, np.int32), 1000, BLOCK=1024)
    assert unset.resolved.all() and unset.executions.sum() == 0        # the flag is off: no reduction runs


def test_meta_tensors_give_types_without_contents():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    x = torch.empty((4, 1000), dtype=torch.float32, device="meta")
    launch = compile_launch(kernels.row_sum_if_flag, (4,), (x, x, x, 1000), {"BLOCK": 1024}, "sm_90")
    assert launch.data == {} and launch.params[0] == POINTER_BASE and launch.params[1] == POINTER_BASE + POINTER_SPACING


def test_bad_calls_are_input_errors():
    x = np.zeros(16, np.float32)
    with pytest.raises(InputError, match="not a @triton.jit function"):
        tt.analyze(print, (1,), x)
    with pytest.raises(InputError, match="NVIDIA"):
        tt.analyze(kernels.transpose, (1,), x, x, 16, 16, BLOCK=16, device="cdna3")
    with pytest.raises(InputError, match="grid"):
        tt.analyze(kernels.transpose, (0,), x, x, 16, 16, BLOCK=16)
    with pytest.raises(InputError, match="the kernel missing 1 required positional argument: 'BLOCK'"):
        tt.analyze(kernels.transpose, (1,), x, x, 16, 16, BLOK=16)
    with pytest.raises(InputError, match="BLOK"):
        tt.analyze(kernels.transpose, (1,), x, x, 16, 16, BLOCK=16, BLOK=16)


def test_without_triton_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)
    with pytest.raises(InputError, match=r"traceconf\[triton\]"):
        compile_launch(kernels.transpose, (1,), (), {}, "sm_90")


def test_the_notebook_shows_the_table_and_the_picture():
    x = np.zeros((256, 256), np.float32)
    table = tt.analyze(kernels.transpose, (4, 4), x, x, 256, 256, BLOCK=64, num_stages=2)
    page = table._repr_html_()
    assert "transpose" in page and f"kernels.py:{_line('tl.store(y_ptr + rn')}" in page and "3.6" in page
    picture = table.explain()
    assert picture._repr_svg_().lstrip().startswith("<svg") and "kernels.py" in picture.title
    assert isinstance(table[table.kind == "ld"], tt.ConflictTable)       # slices keep the notebook view


def test_record_launches_writes_what_a_harvest_reads(tmp_path, cache):
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    records = tmp_path / "launches.jsonl"
    kernel = triton.compile(ASTSource(kernels.transpose, {"x_ptr": "*fp32", "y_ptr": "*fp32", "M": "i32",
                                                          "N": "i32", "BLOCK": "constexpr"}, {(4,): 64}),
                            target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    x = np.zeros((256, 256), np.float32)
    stop = record_launches(records)
    try:
        with pytest.raises(Exception):        # no GPU here: the launch itself fails after the record is written
            kernel.run(4, 4, 1, 0, None, None, None, None, None, x, x, 256, 256, 64)
    finally:
        stop()
    (record,) = [json.loads(line) for line in records.read_text().splitlines()]
    assert record == {"hash": kernel.metadata.hash, "kernel": "transpose", "grid": [4, 4, 1], "num_warps": 4,
                      "params": [{"type": "*fp32", "dtype": "float32", "shape": [256, 256]}] * 2
                      + [{"type": "i32", "value": 256}] * 2}
    assert launch_record(kernel, (4, 4, 1), (x, x, 256, 256)) == record        # Inductor passes no constants


def _harvestable(tmp_path: Path) -> Path:
    """Two kernels compiled into the test's cache, three launches recorded (one twice)."""
    x = np.zeros((256, 256), np.float32)
    transpose = compile_launch(kernels.transpose, (4, 4), (x, x, 256, 256), {"BLOCK": 64}, "sm_90")
    xs = np.ones((4, 1000), np.float32)
    flag = compile_launch(kernels.row_sum_if_flag, (4,), (xs, xs, xs, 1000), {"BLOCK": 1024}, "sm_90")
    signature = SimpleNamespace(signature=transpose.signature)
    fake = SimpleNamespace(src=signature, metadata=SimpleNamespace(hash=transpose.hash, name=transpose.name,
                                                                    num_warps=4))
    lines = [launch_record(fake, (4, 4), (x, x, 256, 256, 64)), launch_record(fake, (4, 4), (x, x, 256, 256, 64)),
             launch_record(fake, (8, 8), (x, x, 512, 512, 64))]
    records = tmp_path / "launches.jsonl"
    records.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return records


def test_a_harvest_analyses_every_kernel_at_every_launch(tmp_path, cache):
    records = _harvestable(tmp_path)
    table = tt.harvest(cache, records)
    assert table.attrs["kernels"] == 2 and table.attrs["launches"] == 3
    launches = table.groupby(["kernel", "launch"]).agg(calls=("calls", "first"), wavefronts=("wavefronts", "sum"))
    assert launches.loc[("transpose", "grid 4×4×1 (256, 256)")].tolist() == [2, 4096]
    assert launches.loc[("transpose", "grid 8×8×1 (512, 512)")].tolist() == [1, 4 * 4096]
    # the kernel nobody recorded: one CTA, and its flag load has no data, so the reduction is unresolved
    unrecorded = table[table.kernel == "row_sum_if_flag"]
    assert set(unrecorded.launch) == {"one CTA, no launch recorded"} and not unrecorded.resolved.any()
    assert set(unrecorded.source_line) == {_line("tl.sum(x, axis=0)")}
    x = np.zeros((256, 256), np.float32)
    direct = tt.analyze(kernels.transpose, (4, 4), x, x, 256, 256, BLOCK=64)
    harvested = table[table.launch == "grid 4×4×1 (256, 256)"]
    columns = ["pc", "text", "source", "wavefronts", "ideal_wavefronts", "excess_wavefronts"]
    pd.testing.assert_frame_equal(harvested[columns].reset_index(drop=True), direct[columns].reset_index(drop=True),
                                  check_dtype=False)
    assert tt.harvest(cache, records, workers=2).wavefronts.sum() == table.wavefronts.sum()
    other = tt.harvest(cache, records, device="sm_80")
    assert len(other) == 0 and len(other.attrs["failures"]) == 2
    assert all("was compiled for sm_90, not for sm_80" in line for line in other.attrs["failures"])


def test_the_harvest_command(tmp_path, cache):
    records = _harvestable(tmp_path)
    out = tmp_path / "rows.parquet"
    run = subprocess.run([sys.executable, "-m", "traceconf", "harvest", str(cache), "--launches", str(records),
                          "-o", str(out)], capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0, run.stderr
    assert "transpose  grid 4×4×1 (256, 256)  (2 calls): wavefronts 4,096, excess 0" in run.stdout
    assert len(pd.read_parquet(out)) == len(tt.harvest(cache, records))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(records.read_text() + "{\"hash\": 1}\n")
    run = subprocess.run([sys.executable, "-m", "traceconf", "harvest", str(cache), "--launches", str(bad)],
                         capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 2 and run.stderr.startswith(f"{bad}:4") and "Traceback" not in run.stderr
    run = subprocess.run([sys.executable, "-m", "traceconf", "harvest", str(tmp_path / "none")],
                         capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 2 and "not a Triton cache directory" in run.stderr


def test_read_cache_skips_group_files_and_reads_the_metadata(cache):
    x = np.zeros((256, 256), np.float32)
    compile_launch(kernels.transpose, (4, 4), (x, x, 256, 256), {"BLOCK": 64}, "sm_90")
    (kernel,) = read_cache(cache)
    assert (kernel.name, kernel.num_warps, kernel.shared_bytes, kernel.arch) == ("transpose", 4, 16384, "sm_90")


def test_the_triton_command(tmp_path, cache):
    def run(*options):
        return subprocess.run([sys.executable, "-m", "traceconf", "triton", str(KERNELS), *options],
                              capture_output=True, text=True, cwd=REPO)

    out = tmp_path / "rows.csv"
    done = run("-k", "transpose", "--grid", "4,4", "--arg", "f32[256,256]", "--arg", "f32[256,256]", "--arg", "256",
               "--arg", "256", "--arg", "BLOCK=64", "--arg", "num_stages=2", "--fail-on-excess", "0", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"transpose  grid 4×4×1, 4 warps, 16384 B shared, Triton {triton.__version__}")
    assert f"kernels.py:{_line('tl.store(y_ptr + rn')}" in done.stdout and "wavefronts 4,096, excess 0" in done.stdout
    assert pd.read_csv(out).wavefronts.sum() == 4096
    for options, message in [(["-k", "transpos", "--grid", "1"], "did you mean 'transpose'"),
                             (["-k", "transpose", "--grid", "1", "--arg", "q8[4]"], "--arg #1: unknown element type"),
                             (["-k", "transpose", "--grid", "0"], "--grid"),
                             (["-k", "transpose", "--grid", "1", "--arg", "BLOCK=16", "--arg", "3"], "positional")]:
        failed = run(*options)
        assert failed.returncode == 2 and message in failed.stderr and "Traceback" not in failed.stderr, failed.stderr
    broken = tmp_path / "broken.py"
    broken.write_text("import triton\nraise RuntimeError('no GPU here either')\n")
    failed = subprocess.run([sys.executable, "-m", "traceconf", "triton", str(broken), "-k", "k", "--grid", "1"],
                            capture_output=True, text=True, cwd=REPO)
    assert failed.returncode == 2 and failed.stderr.startswith(f"{broken}: importing the file failed: RuntimeError")
