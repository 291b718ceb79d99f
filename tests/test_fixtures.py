"""The CUDA/Triton fixtures, their launch manifest and the committed sm_90 measurements agree.

No GPU is needed: these tests check that every manifest launch names a kernel of
the committed PTX with matching parameters, that the PTX is nvcc's output for
the committed source (re-compiled when nvcc is on the machine), and that every
launch and pattern has its measured row, source-page CSV and SASS listing.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import re
import shutil
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO, shared_path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

CUDA = FIXTURES / "cuda"
TRITON = FIXTURES / "triton"
HW = REPO / "tests" / "data" / "hw"
PTX_SIZES = {"u8": 1, "s8": 1, "b8": 1, "u16": 2, "s16": 2, "b16": 2, "f16": 2, "u32": 4, "s32": 4, "b32": 4,
             "f32": 4, "u64": 8, "s64": 8, "b64": 8, "f64": 8}
DTYPE_SIZES = {"u8": 1, "s16": 2, "f16": 2, "s32": 4, "u32": 4, "f32": 4, "f64": 8}


def _load_script(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


compile_fixtures = _load_script("compile_fixtures", REPO / "scripts" / "compile_fixtures.py")
patterns = _load_script("patterns", REPO / "scripts" / "hw" / "patterns.py")
validate_hw = _load_script("validate_hw", REPO / "scripts" / "validate_hw.py")


def _launches() -> list[dict]:
    with open(CUDA / "kernels.toml", "rb") as f:
        return tomllib.load(f)["launch"]


LAUNCHES = _launches()


def entries(ptx: str) -> dict[str, list[str]]:
    """.entry name -> PTX parameter types, in order."""
    found = {}
    for match in re.finditer(r"^\.visible \.entry (\w+)\((.*?)\)", ptx, re.M | re.S):
        found[match.group(1)] = re.findall(r"\.param \.(\w+)", match.group(2))
    return found


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# -- manifest ------------------------------------------------------------------

def test_manifest_ids_are_unique_and_cover_at_least_30_kernels():
    ids = [launch["id"] for launch in LAUNCHES]
    assert len(ids) == len(set(ids))
    assert len({launch["kernel"] for launch in LAUNCHES}) >= 30


@pytest.mark.parametrize("launch", LAUNCHES, ids=lambda launch: launch["id"])
def test_launch_matches_its_ptx_entry(launch):
    ptx = (CUDA / f"{Path(launch['file']).stem}.sm_90.ptx").read_text()
    check_launch_against_ptx(launch, ptx)
    uses_dynamic = re.search(r"\.extern \.shared", ptx) is not None
    assert (launch["dynamic_shared_bytes"] > 0) <= uses_dynamic
    assert launch["expect"].strip()


def check_launch_against_ptx(launch: dict, ptx: str) -> None:
    """A manifest launch (kernels.toml schema) names an .entry of `ptx`, one parameter spec per PTX parameter."""
    params = entries(ptx).get(launch["kernel"])
    assert params is not None, f"{launch['kernel']} is not an .entry of {launch['file']}"
    assert len(launch["params"]) == len(params)
    for given, ptx_type in zip(launch["params"], params):
        if "buffer_bytes" in given:
            assert ptx_type == "u64", "pointers are 64-bit parameters"
            assert given["buffer_bytes"] % DTYPE_SIZES[given["dtype"]] == 0
            assert given["init"] in {"zeros", "iota", "random", "npy"}
            if given["init"] == "npy":
                assert validate_hw.buffer_contents(given).nbytes == given["buffer_bytes"]
            if given["init"] == "random":
                assert "seed" in given
                assert given["dtype"].startswith("f") or given["high"] > 0
        else:
            assert PTX_SIZES[given["type"]] == PTX_SIZES[ptx_type]
    assert math.prod(launch["block"]) <= 1024 and len(launch["block"]) == len(launch["grid"]) == 3


def test_every_fixture_kernel_is_launched():
    launched = {launch["kernel"] for launch in LAUNCHES}
    for ptx in CUDA.glob("*.sm_90.ptx"):
        assert set(entries(ptx.read_text())) <= launched, ptx.name


def test_data_dependent_launches_are_flagged():
    dynamic = {launch["id"] for launch in LAUNCHES if not launch["static_addresses"]}
    assert dynamic == {"histogram_shared", "gather_shared", "datadep_hist_skewed", "datadep_hist_uniform",
                       "datadep_gather_transpose", "datadep_gather_random", "datadep_key_scatter"}


# -- PTX -----------------------------------------------------------------------

@pytest.mark.parametrize("source", sorted(CUDA.glob("*.cu")), ids=lambda p: p.name)
def test_ptx_exists_per_target_with_line_info(source):
    for arch in compile_fixtures.targets(source):
        ptx = (CUDA / f"{source.stem}.{arch}.ptx").read_text()
        assert f".target {arch}" in ptx
        assert ".address_size 64" in ptx
        assert re.search(r"^\s*\.loc\s+\d+ \d+ \d+", ptx, re.M), "compiled without -lineinfo"
        files = re.findall(r'^\s*\.file\s+\d+\s+"([^"]+)"', ptx, re.M)
        assert source.name in files, "the fixture's .file must be its bare name (machine-independent)"
    stale = {p.name for p in CUDA.glob(f"{source.stem}.*.ptx")} - {
        f"{source.stem}.{arch}.ptx" for arch in compile_fixtures.targets(source)}
    assert not stale


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("source", sorted(CUDA.glob("*.cu")), ids=lambda p: p.name)
def test_ptx_is_current_nvcc_output(source, tmp_path):
    fresh = compile_fixtures.compile_ptx(source, "sm_90", tmp_path)
    assert compile_fixtures.instructions(fresh.read_text()) == compile_fixtures.instructions(
        (CUDA / fresh.name).read_text()), "stale PTX: run scripts/compile_fixtures.py"


@pytest.mark.parametrize("source", sorted(CUDA.glob("*.cu")), ids=lambda p: p.name)
def test_sass_lists_every_kernel(source):
    sass = (HW / "sass" / f"{source.stem}.sass").read_text()
    functions = set(re.findall(r"Function : (\w+)", sass))
    assert set(entries((CUDA / f"{source.stem}.sm_90.ptx").read_text())) <= functions
    assert "code for sm_90" in sass


def test_sass_shows_the_ptxas_merges_the_ptx_does_not():
    """The reason SASS is committed: ptxas fuses shared accesses that PTX keeps apart."""
    ptx = (CUDA / "types.sm_90.ptx").read_text()
    body = ptx.split(".entry _Z26two_per_thread_interleavedPKfPf(")[1].split(".entry")[0]
    assert "ld.shared.f32" in body and "ld.shared.v2" not in body
    sass = (HW / "sass" / "types.sass").read_text()
    listing = sass.split("Function : _Z26two_per_thread_interleavedPKfPf")[1].split("Function :")[0]
    assert "LDS.64" in listing


# -- measurements --------------------------------------------------------------

MEASURED = read_csv(HW / "kernels_sm90.csv")


def test_one_measured_row_per_launch_in_manifest_order():
    assert [row["launch"] for row in MEASURED] == [launch["id"] for launch in LAUNCHES]
    for row, launch in zip(MEASURED, LAUNCHES):
        assert row["kernel"] == launch["kernel"] and row["fixture"] == launch["file"]
        assert row["gpu"].startswith("NVIDIA H") and row["driver"] and row["ncu_version"]


@pytest.mark.parametrize("row", MEASURED, ids=lambda row: row["launch"])
def test_measured_counters_are_consistent(row):
    value = {name: int(row[name]) for name in validate_hw.COUNTERS if row[name] != ""}
    assert value["hw_bc_ld"] <= value["hw_wf_ld"] and value["hw_bc_st"] <= value["hw_wf_st"]
    # every executed load (LDS, LDSM, generic loads resolved to shared) has at least one ideal wavefront
    assert value["hw_wf_ld"] - value["hw_bc_ld"] >= value["inst_ld"] + value["inst_ldsm"]
    assert value["hw_wf_shared"] >= value["hw_wf_ld"] + value["hw_wf_st"]


@pytest.mark.parametrize("stride", [1, 2, 3, 4, 8, 16, 17, 32, 33])
def test_stride_launches_measure_gcd_way_conflicts(stride):
    row = next(r for r in MEASURED if r["launch"] == f"stride_words_{stride}")
    way = math.gcd(stride, 32)
    assert int(row["hw_wf_ld"]) == way * int(row["inst_ld"])
    assert int(row["hw_wf_st"]) == way * int(row["inst_st"])


@pytest.mark.parametrize("launch", LAUNCHES, ids=lambda launch: launch["id"])
def test_source_page_exported_per_launch(launch):
    path = HW / "source_sm90" / f"{launch['id']}.csv"
    lines = path.read_text().splitlines()
    assert lines[0] == f'"Kernel Name","{launch["kernel"]}",'
    header = next(csv.reader([lines[1]]))
    assert {"Source", "L1 Wavefronts Shared", "L1 Wavefronts Shared Ideal",
            "L1 Wavefronts Shared Excessive"} <= set(header)


def test_source_page_wavefronts_add_up_to_the_sass_counters():
    """Source-page LDS/STS wavefronts of a launch equal the SASS-instrumented totals."""
    for launch in ("stride_words_4", "transpose_tile_32x32", "scan_blelloch"):
        lines = (HW / "source_sm90" / f"{launch}.csv").read_text().splitlines()[1:]
        rows = [r for r in csv.DictReader(lines) if r["Source"] != "Source"]
        total = sum(int(r["L1 Wavefronts Shared"] or 0) for r in rows if re.search(r"\b(LDS|STS)\b", r["Source"]))
        row = next(r for r in MEASURED if r["launch"] == launch)
        assert total == int(row["sass_wf_ld"]) + int(row["sass_wf_st"])


# -- Triton --------------------------------------------------------------------

TRITON_LAUNCHES = [json.loads(p.read_text()) for p in sorted(TRITON.glob("*.json"))]


def test_at_least_three_triton_kernels():
    assert len(TRITON_LAUNCHES) >= 3


@pytest.mark.parametrize("launch", TRITON_LAUNCHES, ids=lambda launch: launch["id"])
def test_triton_launch_matches_its_ptx(launch):
    ptx = (TRITON / launch["ptx"]).read_text()
    params = entries(ptx)[launch["kernel"]]
    assert [p["ptx_name"] for p in launch["params"]] == [f"{launch['kernel']}_param_{i}" for i in range(len(params))]
    assert launch["block"] == [32 * launch["num_warps"], 1, 1]
    assert launch["shared_bytes"] >= 0 and len(launch["grid"]) == 3
    assert ".target sm_90" in ptx


def test_triton_measured_and_source_exported():
    measured = {row["launch"]: row for row in read_csv(HW / "triton_sm90.csv")}
    for launch in TRITON_LAUNCHES:
        assert measured[launch["id"]]["kernel"] == launch["kernel"]
        first = (HW / "source_sm90" / f"triton_{launch['id']}.csv").read_text().splitlines()[0]
        assert launch["kernel"] in first


# -- single-warp patterns ------------------------------------------------------

EXTRA = read_csv(HW / "sm90_patterns_extra.csv")


def test_patterns_csv_is_the_pattern_table_measured():
    assert list(EXTRA[0])[:17] == validate_hw.PATTERN_COLUMNS
    table = {case: (kind, offsets) for case, kind, offsets, _ in patterns.PATTERNS}
    assert [row["case"] for row in EXTRA] == list(table)
    for row in EXTRA:
        kind, offsets = table[row["case"]]
        assert int(row["kind"]) == kind and row["offsets"] == " ".join(map(str, offsets))
        counter = patterns.KINDS[kind].counter
        assert counter == "" or int(row[counter]) == 1, "ptxas merged or dropped the pattern's instruction"


def test_patterns_are_new():
    shared = read_csv(shared_path("hw", "sm90_patterns.csv"))
    assert list(shared[0]) == validate_hw.PATTERN_COLUMNS
    known = {(row["kind"], row["offsets"]) for row in shared}
    assert len(EXTRA) >= 12
    assert not [row["case"] for row in EXTRA if (row["kind"], row["offsets"]) in known]


def test_every_pattern_kernel_is_used():
    source = (REPO / "scripts" / "hw" / "patterns.cu").read_text()
    defined = set(re.findall(r'extern "C" __global__ void (p_\w+)', source)) | set(
        re.findall(r"^(?:LOAD|STORE|CP)_KERNEL\((p_\w+),", source, re.M))
    used = {patterns.KINDS[kind].kernel for _, kind, _, _ in patterns.PATTERNS}
    assert defined == used
