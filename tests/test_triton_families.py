"""traceconf.triton against the H100 Source pages of Triton's tutorial kernels and Inductor's kernels.

The data (tests/data/hw/{triton_tut,inductor}, tests/fixtures/{triton_tut,inductor}: the cubins, PTX and
metadata of the GPU machine's Triton 3.6.0 cache and each launch's record, from
``scripts/hw/triton_families.py``) is compared two ways, pc by pc on the LSU shared-memory instructions as
tests/test_hw_families.py does for the cubins:

* **harvest**: the fixtures laid out as a Triton cache plus the launches as :func:`record_launches` writes
  them, through ``traceconf.triton.harvest`` — the ``torch.compile`` user's path;
* **analyze**: the tutorial kernels, compiled here from ``scripts/hw/triton_tutorial_kernels.py``'s source with the
  recorded arguments, through ``traceconf.triton.analyze`` — the Triton author's path.  The PTX must be the
  one the GPU machine compiled (line info aside).

Skipped where that data is not in the tree.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
HW = REPO / "tests" / "data" / "hw"
FIXTURES = REPO / "tests" / "fixtures"
FAMILIES = ("triton_tut", "inductor")
KERNEL_SOURCE = REPO / "scripts" / "hw" / "triton_tutorial_kernels.py"

triton = pytest.importorskip("triton", reason="Triton is not installed (pip install 'traceconf[triton]')")
pytestmark = pytest.mark.skipif(not all((HW / family / "manifest.csv").exists() for family in FAMILIES),
                                reason="the Triton tutorial / Inductor H100 data is not in this tree")


def families():
    from test_hw_families import manifest
    return manifest


def _launches(family: str) -> list[str]:
    if not (HW / family / "manifest.csv").exists():
        return []
    return [row["launch"] for row in families()(family)]


def record(launch_id: str, family: str) -> dict:
    return json.loads((FIXTURES / family / f"{launch_id}.launch.json").read_text())


def as_launch_record(recorded: dict) -> dict:
    """scripts/hw/triton_families.py's record → the JSON line record_launches writes (PTX parameters only)."""
    from types import SimpleNamespace

    from traceconf.triton.records import launch_record
    kernel = SimpleNamespace(src=SimpleNamespace(signature=recorded["signature"]),
                             metadata=SimpleNamespace(hash=recorded["hash"], name=recorded["name"],
                                                      num_warps=recorded["num_warps"]))
    args = [SimpleNamespace(dtype=a["tensor"], shape=a["shape"]) if "tensor" in a else a["value"]
            for a in recorded["args"]]
    return launch_record(kernel, recorded["grid"], tuple(args))


def harvested(tmp: str):
    """Both families' fixtures as one Triton cache with every recorded launch, harvested."""
    import traceconf.triton
    cache, lines = Path(tmp) / "cache", []
    for family in FAMILIES:
        for launch_id in _launches(family):
            recorded = record(launch_id, family)
            folder = cache / recorded["hash"]
            folder.mkdir(parents=True, exist_ok=True)
            for suffix in ("cubin", "ptx"):
                shutil.copy(FIXTURES / family / f"{launch_id}.{suffix}", folder / f"{recorded['name']}.{suffix}")
            shutil.copy(FIXTURES / family / f"{launch_id}.metadata.json", folder / f"{recorded['name']}.json")
            lines.append(json.dumps(as_launch_record(recorded)))
    (Path(tmp) / "launches.jsonl").write_text("\n".join(lines) + "\n")
    return traceconf.triton.harvest(cache, Path(tmp) / "launches.jsonl")


def unresolved(rows) -> set[str]:
    """Why accesses are unresolved, leaving out what the model does not count by design (HGMMA operands)."""
    from traceconf.kinds import UNCOUNTED
    return set(rows.loc[~rows.resolved.astype(bool), "unresolved_reason"].dropna()) - set(UNCOUNTED.values())


def per_pc(rows) -> tuple[Counter, Counter]:
    wavefronts, ideal = Counter(), Counter()
    for row in rows.itertuples():
        wavefronts[row.pc] += row.wavefronts
        ideal[row.pc] += row.ideal_wavefronts
    return wavefronts, ideal


def assert_page(family: str, launch_id: str, rows) -> None:
    """Every LSU shared-memory pc of the Source page: predicted wavefronts and ideal equal the page's."""
    from test_hw_families import LSU_KINDS, kind_of, source_page
    page = source_page(family, launch_id)
    lsu = {pc for pc, row in page.items() if kind_of(row["Source"]) in LSU_KINDS}
    wavefronts, ideal = per_pc(rows)
    assert set(wavefronts) <= set(page), "every analysed pc is on the page"
    assert {pc: wavefronts[pc] for pc in lsu if wavefronts[pc] or page[pc]["L1 Wavefronts Shared"] not in ("", "0")} \
        == {pc: int(page[pc]["L1 Wavefronts Shared"] or 0) for pc in lsu
            if wavefronts[pc] or page[pc]["L1 Wavefronts Shared"] not in ("", "0")}
    assert {pc: ideal[pc] for pc in lsu if ideal[pc]} == \
        {pc: int(page[pc]["L1 Wavefronts Shared Ideal"] or 0) for pc in lsu if ideal[pc]}


#: Launches whose pages differ from the prediction at some pc: (family, launch) -> the evidence.
GAPS: dict[tuple[str, str], str] = {}


def _cases(*families_: str):
    for family in families_:
        for launch_id in _launches(family):
            gap = GAPS.get((family, launch_id))
            yield pytest.param(family, launch_id, id=f"{family}/{launch_id}",
                               marks=[pytest.mark.xfail(strict=True, reason=gap)] if gap else [])


@pytest.fixture(scope="module")
def harvest_table(tmp_path_factory):
    return harvested(str(tmp_path_factory.mktemp("triton-families")))


@pytest.mark.parametrize("family, launch_id", list(_cases(*FAMILIES)))
def test_the_harvest_equals_the_source_pages(family, launch_id, harvest_table):
    table = harvest_table
    assert not table.attrs["failures"]
    recorded = record(launch_id, family)
    rows = table[(table.cache_hash == recorded["hash"])
                 & (table.launch.str.startswith(f"grid {'×'.join(map(str, recorded['grid']))}"))]
    assert len(rows) and not unresolved(rows), launch_id
    if family == "triton_tut":          # the author's lines, not Triton's library
        assert rows.source_file.str.endswith("triton_tutorial_kernels.py").all()
    assert_page(family, launch_id, rows)


def kernel_module(tmp: Path):
    """The @triton.jit functions of scripts/hw/triton_tutorial_kernels.py at their own line numbers, without torch
    (the script imports torch and patches Triton's launcher at import)."""
    lines = KERNEL_SOURCE.read_text().splitlines()
    keep = [""] * len(lines)
    keep[0], keep[1] = "import triton", "import triton.language as tl"
    start = None
    for number, line in enumerate(lines):
        if line.startswith("@triton.jit"):
            start = number
        elif start is not None and line and not line[0].isspace() and not line.startswith("def "):
            start = None
        if start is not None:
            keep[number] = line
    assert not any(lines[:2]) or lines[0].startswith(('"""', "#")), "the first two lines are free for imports"
    path = tmp / "triton_tutorial_kernels.py"
    path.write_text("\n".join(keep) + "\n")
    sys.path.insert(0, str(tmp))
    try:
        import importlib
        sys.modules.pop("triton_tutorial_kernels", None)
        return importlib.import_module("triton_tutorial_kernels")
    finally:
        sys.path.remove(str(tmp))


@pytest.mark.parametrize("family, launch_id", list(_cases("triton_tut")))
def test_analyze_of_the_tutorial_kernels_equals_the_source_pages(family, launch_id, tmp_path_factory):
    import traceconf.triton
    from traceconf.triton.compile import compile_launch
    module = kernel_module(tmp_path_factory.mktemp("kernels"))
    recorded = record(launch_id, "triton_tut")
    args = [np.zeros(a["shape"], np.dtype(a["tensor"])) if "tensor" in a else a["value"] for a in recorded["args"]]
    options = {"num_warps": recorded["num_warps"], "num_stages": recorded["num_stages"]}
    kernel = getattr(module, recorded["name"])
    compiled = compile_launch(kernel, recorded["grid"], tuple(args), options, "sm_90")
    line_free = lambda ptx: [re.sub(r"//.*", "", l).strip() for l in ptx.split(".section", 1)[0].splitlines()
                             if l.strip() and not l.strip().startswith((".loc", ".file", "//"))]
    assert line_free(compiled.ptx) == line_free((FIXTURES / "triton_tut" / f"{launch_id}.ptx").read_text())
    table = traceconf.triton.analyze(kernel, recorded["grid"], *args, **options)
    assert not unresolved(table) and not table.attrs["failures"]
    assert_page("triton_tut", launch_id, table)
