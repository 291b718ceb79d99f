"""Default-level (SASS) prediction vs. the H100 Source pages of the families measured in session 18.

Families (tests/data/hw/F/manifest.csv, fixtures in tests/fixtures/F/): CUB block primitives (cub),
tensor-core wmma GEMMs (wmma), a last-block reduction (lastblock), the issue-20 samples kernels
(samples20), Triton's tutorial kernels (triton_tut) and Inductor-generated Triton kernels (inductor).
Every launch is analysed from the cubin that ran (the CUDA families' cubins were built with the same nvcc 13.0
``-arch=sm_90 -lineinfo`` as the measured executables; the Triton cubins come from the GPU machine's Triton
cache) with the manifest's grid, block, dynamic shared bytes, ``--param`` values and ``--data`` inputs, and
compared per SASS pc with Nsight Compute's Source page: "L1 Wavefronts Shared" and "L1 Wavefronts Shared
Ideal" of every LSU shared-memory instruction (LDS/STS/generic LD/ST/ATOMS/ATOM/RED/LDSM/STSM/LDGSTS; the
GMMA operand reads are not LSU accesses and are not modelled).  A launch is exact when nothing is
unresolved and every pc equals the page.  The cases that are wrong today are strict xfails naming the cause.
"""

from __future__ import annotations

import csv
import re
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

import pytest

from traceconf import tools
from traceconf.kinds import UNCOUNTED

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts" / "hw"))
from import_families import kind_of, opcode  # noqa: E402  (the manifest's opcode -> kind table)

FIXTURES = REPO / "tests" / "fixtures"
HW = REPO / "tests" / "data" / "hw"
FAMILIES = ("cub", "wmma", "lastblock", "samples20", "triton_tut", "inductor")
#: Cubin of each CUDA family (the Triton families name theirs per launch in the manifest).
CUBINS = {"cub_blocks.cu": "cub_blocks.sm_90.cubin", "wmma_gemm.cu": "wmma_gemm.sm_90.cubin",
          "last_block_reduce.cu": "last_block_reduce.sm_90.cubin", "samples20.cu": "samples20.sm_90.cubin"}
#: Operation kinds whose shared-memory wavefronts the Source page counts on the LSU path.
LSU_KINDS = {"ld", "st", "atom", "ldsm", "stsm", "ldgsts"}

pytestmark = pytest.mark.skipif(tools.locate("nvdisasm") is None,
                                reason="needs nvdisasm (CUDA toolkit, or pip install nvidia-cuda-nvdisasm)")

#: Launches that come back (partly) unresolved today although a model could resolve them: (family, launch) -> cause.
UNRESOLVED: dict[tuple[str, str], str] = {}
#: Launches analysed completely whose wavefronts differ from the Source page at some pc.
WRONG: dict[tuple[str, str], str] = {}
WAVEFRONT_GAPS = {**UNRESOLVED, **WRONG}
IDEAL_GAPS = dict(UNRESOLVED)


def manifest(family: str) -> list[dict]:
    return list(csv.DictReader(open(HW / family / "manifest.csv")))


def _pairs(text: str) -> dict[str, str]:
    return dict(pair.split("=", 1) for pair in text.split(";") if pair)


def _dims(text: str) -> tuple[int, int, int]:
    return tuple(int(v) for v in text.split("x"))


@lru_cache(maxsize=None)
def analyse(family: str, launch_id: str):
    """The KernelAnalysis of one manifest launch at the default (SASS) level, from its cubin."""
    from traceconf.emulate.launch import LaunchRequest
    from traceconf.pipeline import run_file
    from traceconf.rules import load_rule_set
    row = next(r for r in manifest(family) if r["launch"] == launch_id)
    folder = FIXTURES / family
    cubin = folder / CUBINS.get(row["fixture"], row["fixture"])
    data = {key: str(folder / name) for key, name in _pairs(row["data"]).items()}
    params = _pairs(row["params"])      # buffers without --data: sources at cudaMalloc's alignment (wmma's copies)
    request = LaunchRequest(block=_dims(row["block"]), grid=_dims(row["grid"]), params=params,
                            dynamic_smem=int(row["dynamic_smem"]), data=data, time_limit=float("inf"))
    done, failed = run_file(cubin, [f"^{re.escape(row['kernel'])}$"], request, [load_rule_set("sm_90")])
    if failed:
        raise AssertionError(failed[0].line())
    return done[0]


def source_page(family: str, launch_id: str) -> dict[int, dict]:
    """pc (offset from the kernel's first instruction) -> the Source page row."""
    rows = list(csv.reader(open(HW / family / "source" / f"{launch_id}.csv")))
    body = [dict(zip(rows[1], r)) for r in rows[2:]]
    base = int(body[0]["Address"], 16)
    return {int(r["Address"], 16) - base: r for r in body}


def comparison(family: str, launch_id: str) -> dict:
    """Per-pc predicted and measured wavefronts and ideal of the LSU shared-memory instructions, and the
    unresolved accesses (reasons the model names as not counted by design left out)."""
    analysis = analyse(family, launch_id)
    page = source_page(family, launch_id)
    pc_of = {row["instruction"]: row["pc"] for row in analysis.instructions.to_pylist()}
    text_of = {row["pc"]: row.get("text", "") for row in analysis.instructions.to_pylist()}
    predicted, ideal = Counter(), Counter()
    for row in analysis.results.to_pylist():
        predicted[pc_of[row["instruction"]]] += row["wavefronts"]
        ideal[pc_of[row["instruction"]]] += row["ideal_wavefronts"]
    lsu = {pc for pc, row in page.items() if kind_of(row["Source"]) in LSU_KINDS}
    measured = {pc: int(page[pc]["L1 Wavefronts Shared"] or 0) for pc in lsu}
    measured_ideal = {pc: int(page[pc]["L1 Wavefronts Shared Ideal"] or 0) for pc in lsu}
    by_design = set(UNCOUNTED.values())
    return {
        "predicted": {pc: predicted[pc] for pc in lsu if predicted[pc] or measured[pc]},
        "measured": {pc: measured[pc] for pc in lsu if predicted[pc] or measured[pc]},
        "predicted_ideal": {pc: ideal[pc] for pc in lsu if ideal[pc] or measured_ideal[pc]},
        "measured_ideal": {pc: measured_ideal[pc] for pc in lsu if ideal[pc] or measured_ideal[pc]},
        "unresolved": [u for u in analysis.unresolved if u["reason"] not in by_design],
        "outside_page": sorted(set(predicted) - set(page)),
        "other_code": sorted(pc for pc, text in text_of.items()
                             if pc not in page or opcode(text) != opcode(page[pc]["Source"])),
        "texts": text_of,
    }


def _cases(gaps: dict[tuple[str, str], str]):
    for family in FAMILIES:
        for row in manifest(family):
            key = (family, row["launch"])
            marks = [pytest.mark.xfail(strict=True, reason=gaps[key])] if key in gaps else []
            yield pytest.param(family, row["launch"], id=f"{family}/{row['launch']}", marks=marks)


@pytest.mark.parametrize("family, launch_id", list(_cases(WAVEFRONT_GAPS)))
def test_wavefronts_per_sass_pc_equal_the_source_page(family, launch_id):
    result = comparison(family, launch_id)
    assert not result["outside_page"] and not result["other_code"], "the analysed cubin is the code that ran"
    assert not result["unresolved"], result["unresolved"][:3]
    assert result["predicted"] == result["measured"]


@pytest.mark.parametrize("family, launch_id", list(_cases(IDEAL_GAPS)))
def test_ideal_wavefronts_per_sass_pc_equal_the_source_page(family, launch_id):
    result = comparison(family, launch_id)
    assert not result["unresolved"], result["unresolved"][:3]
    assert result["predicted_ideal"] == result["measured_ideal"]


def test_manifest_totals_are_the_source_page_sums():
    """manifest.csv's per-kind totals are the Source pages' sums (the import is checked, not trusted)."""
    for family in FAMILIES:
        for row in manifest(family):
            page = source_page(family, row["launch"])
            assert sum(int(r["L1 Wavefronts Shared"] or 0) for r in page.values()) == \
                sum(int(v) for k, v in row.items() if k.startswith("wf_"))
            assert sum(int(r["L1 Wavefronts Shared Ideal"] or 0) for r in page.values()) == \
                sum(int(v) for k, v in row.items() if k.startswith("ideal_"))


def _without_paths(ptx: str) -> str:
    """PTX up to its DWARF sections, without the .file paths (the GPU machine's and this one's differ)."""
    code = ptx.split(".section\t.debug_abbrev")[0]
    return re.sub(r'^\s*\.file\s+\d+\s+"[^"]*".*$', "", code, flags=re.M)


@pytest.mark.parametrize("launch_id", [row["launch"] for row in manifest("triton_tut")])
def test_triton_tutorial_kernels_compile_here_to_the_measured_ptx(launch_id):
    """The installed Triton, with no GPU, compiles each tutorial kernel to the PTX the GPU machine ran (its
    launch record gives the signature, specialisation attributes, constexprs, num_warps and num_stages)."""
    triton = pytest.importorskip("triton")
    import json
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    import triton_tutorial_kernels
    record = json.loads((FIXTURES / "triton_tut" / f"{launch_id}.launch.json").read_text())
    measured_with = json.loads((HW / "triton_tut" / "versions.json").read_text())["triton"]
    if triton.__version__ != measured_with:
        pytest.skip(f"needs Triton {measured_with} (the GPU machine's), found {triton.__version__}")
    signature = record["signature"]
    constexprs = {(i,): arg["value"] for i, (name, arg) in enumerate(zip(signature, record["args"]))
                  if signature[name] == "constexpr"}
    attrs = {tuple(path): [tuple(attr) for attr in values] for path, values in record["attrs"]}
    source = ASTSource(fn=getattr(triton_tutorial_kernels, record["name"]), signature=signature,
                       constexprs=constexprs, attrs=attrs)
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": record["num_warps"], "num_stages": record["num_stages"]})
    measured = (FIXTURES / "triton_tut" / f"{launch_id}.ptx").read_text()
    assert _without_paths(compiled.asm["ptx"]) == _without_paths(measured)
