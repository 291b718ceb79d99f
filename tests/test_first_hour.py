"""A CUDA developer's first hour, as typed (issue 24): write kernels, compile them with nvcc, analyse, explain,
apply the suggestions, compare with an Nsight Compute report, gate CI, read the results in pandas, call the
Python API, analyse a Triton kernel.  Each step is the command as the README or ``--help`` shows it, and must
work the first time; the commands run in a scratch folder holding only what the user wrote.

The steps run in file order and share the folder (``hour``): each test is one step of the hour.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from traceconf.cli import app

REPO = Path(__file__).resolve().parents[1]
H100 = REPO / "tests" / "data" / "hw"

KERNELS = """#define TILE 32

// Transpose through a shared tile: the column read of tile is a 32-way bank conflict.
__global__ void transpose_naive(float *out, const float *in, int width) {
    __shared__ float tile[TILE][TILE];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += 8)
        tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * width + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += 8)
        out[(y + j) * width + x] = tile[threadIdx.x][threadIdx.y + j];
}

// Tree reduction with strided addressing (index = 2*s*t): conflicts grow with s.
__global__ void reduce_strided(const float *in, float *out) {
    __shared__ float sdata[256];
    unsigned t = threadIdx.x;
    sdata[t] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (unsigned s = 1; s < blockDim.x; s *= 2) {
        unsigned index = 2 * s * t;
        if (index < blockDim.x)
            sdata[index] += sdata[index + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = sdata[0];
}
"""

# the two fixes --suggest proposes: pad the tile's row, sequential addressing in the reduction
FIXED = (KERNELS.replace("tile[TILE][TILE]", "tile[TILE][TILE + 1]")
         .replace("for (unsigned s = 1; s < blockDim.x; s *= 2)", "for (unsigned s = blockDim.x / 2; s > 0; s /= 2)")
         .replace("unsigned index = 2 * s * t;", "unsigned index = t;")
         .replace("if (index < blockDim.x)", "if (index < s)"))

LAUNCHES = """[[launch]]
kernel = "transpose_naive"
block = [32, 8]
grid = [32, 32]
params = { width = 1024 }

[[launch]]
kernel = "reduce_strided"
block = [256]
grid = [64]
"""

TILE_TRANSPOSE = '''import triton
import triton.language as tl


@triton.jit
def tile_transpose(out_ptr, in_ptr, n, BLOCK: tl.constexpr):
    """Transpose one BLOCK x BLOCK tile per program; tl.trans moves the tile between layouts in shared memory."""
    row = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    col = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    tile = tl.load(in_ptr + row[:, None] * n + col[None, :])
    tl.store(out_ptr + col[:, None] * n + row[None, :], tl.trans(tile))
'''

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (the CUDA toolkit) is not on PATH")


@pytest.fixture(scope="module")
def hour(tmp_path_factory) -> Path:
    """The user's folder: their kernels, their launch file."""
    folder = tmp_path_factory.mktemp("first_hour")
    (folder / "kernels.cu").write_text(KERNELS)
    (folder / "fixed.cu").write_text(FIXED)
    (folder / "launches.toml").write_text(LAUNCHES)
    return folder


def typed(command: str, folder: Path):
    """Run ``traceconf ...`` as typed in a shell in ``folder``."""
    words = shlex.split(command)
    assert words[0] == "traceconf"
    here = os.getcwd()
    os.chdir(folder)
    try:
        return CliRunner().invoke(app, words[1:])
    finally:
        os.chdir(here)


def shell(command: str, folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run(shlex.split(command), cwd=folder, capture_output=True, text=True)


@needs_nvcc
def test_1_compile_as_the_error_for_cuda_source_says(hour):
    said = typed("traceconf analyze kernels.cu", hour)
    assert said.exit_code == 2
    command = "nvcc " + said.stderr.split("nvcc ", 1)[1].split(",")[0]
    assert command == "nvcc -ptx -arch=sm_90 -lineinfo kernels.cu -o kernels.ptx"
    for source in ("kernels", "fixed"):
        compiled = shell(command.replace("kernels", source), hour)
        assert compiled.returncode == 0, compiled.stderr


@needs_nvcc
def test_2_analyse_with_the_launch_file_and_suggestions(hour):
    result = typed("traceconf analyze kernels.ptx --launches launches.toml --suggest", hour)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "note: SASS level: ptxas -arch=sm_90; counts are for the code the GPU runs" in out
    assert "kernels.cu:14" in out and "out[(y + j) * width + x] = tile[threadIdx.x" in out   # the user's line
    assert "pad shared memory row 32→33 words: 32-way → 1-way" in out
    assert "declaration to edit: kernels.cu:5 __shared__ float tile[TILE][TILE];" in out
    assert "index rewrite: sdata is one-dimensional" in out and "8-way → 1-way" in out


@needs_nvcc
def test_3_explain_the_worst_line(hour):
    result = typed("traceconf explain kernels.ptx --kernel transpose_naive --instruction kernels.cu:14 "
                   "--launches launches.toml --svg lanes.svg", hour)
    assert result.exit_code == 0, result.output
    assert "32 wavefronts, ideal 1, excess 31, worst 32-way" in result.stdout
    assert (hour / "lanes.svg").read_text().startswith("<svg")


@needs_nvcc
def test_4_the_suggested_fixes_give_the_predicted_counts_and_pass_the_gate(hour):
    before = typed("traceconf analyze kernels.ptx --launches launches.toml --fail-on-excess 0", hour)
    assert before.exit_code == 1
    assert ("kernel transpose_naive (_Z15transpose_naivePfPKfi) on sm_90 has 1,015,808 excess wavefronts "
            "(limit --fail-on-excess 0)") in before.stderr
    after = typed("traceconf analyze fixed.ptx --launches launches.toml --fail-on-excess 0 --format json", hour)
    assert after.exit_code == 0, after.output
    totals = {r["kernel_name"]: r["totals"] for r in json.loads(after.stdout)["results"]}
    # what --suggest predicted for each change: 65,536 and 2,880 wavefronts, no excess
    assert sum(t["wavefronts"] for t in totals["transpose_naive"].values()) == 65_536
    assert sum(t["wavefronts"] for t in totals["reduce_strided"].values()) == 2_880


@needs_nvcc
def test_5_results_in_pandas(hour):
    import pandas as pd

    assert typed("traceconf analyze kernels.ptx --launches launches.toml -o results.parquet", hour).exit_code == 0
    frame = pd.read_parquet(hour / "results.parquet")
    excess = frame.groupby("kernel_name")["excess_wavefronts"].sum().to_dict()
    assert excess == {"reduce_strided": 6_720, "transpose_naive": 1_015_808}
    worst = frame.sort_values("excess_wavefronts").iloc[-1]
    assert worst["source_file"].endswith("kernels.cu") and worst["source_line"] == 14
    assert worst["text"].startswith("LDS")


@needs_nvcc
def test_6_the_python_api(hour):
    import traceconf

    frame = traceconf.analyze_ptx(hour / "kernels.ptx", kernel="transpose_naive", block=(32, 8), grid=(32, 32),
                                  params={"width": 1024})
    assert frame["excess_wavefronts"].sum() == 1_015_808
    assert set(frame["kernel_name"]) == {"transpose_naive"}


@needs_nvcc
def test_7_compare_with_the_h100_report_of_a_kernel_compiled_here(hour):
    """transpose.cu, measured on an H100 (Source page and raw page of the same ncu report): compiled here as the
    user would, compared with the report's kernels at the report's launches, pc by pc."""
    shutil.copy(REPO / "tests" / "fixtures" / "cuda" / "transpose.cu", hour)
    assert shell("nvcc -ptx -arch=sm_90 -lineinfo transpose.cu", hour).returncode == 0
    result = typed(f"traceconf compare-ncu {H100}/source_sm90/transpose_tile_32x32.csv "
                   f"{H100}/raw/fixtures_raw.csv transpose.ptx -p width=64 --format json", hour)
    assert result.exit_code == 0, result.output
    (comparison,) = json.loads(result.stdout)["comparisons"]
    assert comparison["launch"] == {"id": "25", "grid": [2, 2, 1], "block": [32, 8, 1], "dynamic_smem": 0}
    assert comparison["totals"]["measured"] == comparison["totals"]["predicted"]
    assert len(comparison["by_pc"]) == 8 and all(r["measured"] == r["predicted"] for r in comparison["by_pc"])


def test_8_the_readme_quick_start_prints_what_you_get(hour):
    """README's first command, from the repository, against its "What you get" block."""
    readme = (REPO / "README.md").read_text()
    command = readme.split("pip install -e . && ", 1)[1].split("\n", 1)[0]
    shown = readme.split("## What you get\n\n```\n", 1)[1].split("\n```", 1)[0]
    result = typed(command, REPO)
    assert result.exit_code == 0, result.output
    for line in shown.splitlines():
        if line != "...":
            assert line.rstrip() in result.stdout, line


def test_9_a_triton_kernel(hour):
    """The user's own @triton.jit kernel, with the command shaped as docs/triton.md shows it."""
    pytest.importorskip("triton")
    (hour / "tile_transpose.py").write_text(TILE_TRANSPOSE)
    result = typed("traceconf triton tile_transpose.py -k tile_transpose --grid 16,16 --arg 'f32[1024,1024]' "
                   "--arg 'f32[1024,1024]' --arg 1024 --arg BLOCK=64 --num-warps 4 --top 3", hour)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("tile_transpose  grid 16×16×1, 4 warps, 16384 B shared, Triton ")
    assert lines[0].endswith(": wavefronts 65,536, excess 0")
    assert len(lines) == 4 and all("tile_transpose.py:11  STS" in line for line in lines[1:])


def test_10_piping_the_table_into_head_is_not_a_gate_failure():
    """`traceconf analyze ... | head` (with `set -o pipefail` in CI): the reader closing the pipe ends the
    command by SIGPIPE, as for any Unix tool, never with 1, the --fail-on-excess gate's status."""
    import signal
    import sys

    command = [sys.executable, "-m", "traceconf", "analyze", "tests/fixtures/emulate/transpose.ptx", "--block",
               "32,8", "--grid", "32,32"]
    reader_gone = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env={**os.environ, "PYTHONPATH": str(REPO)})
    reader_gone.stdout.close()                 # as `head` does once it has its lines
    assert reader_gone.wait() == -signal.SIGPIPE
    assert reader_gone.stderr.read() == b""
