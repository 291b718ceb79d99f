"""traceconf.triton.analyze of the Triton fixture kernels, compiled here without a GPU, against the H100.

The kernels are those of ``scripts/triton_ptx.py`` (imported without torch), compiled by the installed
Triton for sm_90 with the measured launches of ``tests/fixtures/triton/*.json``.  The PTX must be the
fixture's (the compile the GPU machine made, line numbers aside), and the wavefronts of every SASS
instruction of the cubin must equal the "L1 Wavefronts Shared" of Nsight Compute's Source page
(``tests/data/hw/source_sm90/triton_*.csv``) pc by pc.  HGMMA operand reads have no per-lane addresses and
are not counted; the LDGSTS.BYPASS copies, which Nsight counts from their global sources, are counted from them
taken at cudaMalloc's alignment (traceconf.emulate.allocation).
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

triton = pytest.importorskip("triton", reason="Triton is not installed (pip install 'traceconf[triton]')")

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "triton"
SPECS = sorted(path.stem for path in FIXTURES.glob("*.json"))
NUMPY_DTYPES = {"f16": np.float16, "f32": np.float32}


def fixture_kernels():
    """scripts/triton_ptx.py as a module (it imports torch only where it launches)."""
    if "triton_ptx" not in sys.modules:
        spec = importlib.util.spec_from_file_location("triton_ptx", REPO / "scripts" / "triton_ptx.py")
        sys.modules["triton_ptx"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules["triton_ptx"])
    return sys.modules["triton_ptx"]


def arguments(spec: dict) -> list:
    """The launch's arguments: buffers as numpy arrays of the measured dtype and size, scalars as ints."""
    out = []
    for index, param in enumerate(p for p in spec["params"] if not p.get("scratch")):
        if "value" in param:
            out.append(int(param["value"]))
        else:
            dtype = NUMPY_DTYPES[param["dtype"]]
            count = param["buffer_bytes"] // np.dtype(dtype).itemsize
            out.append(np.random.default_rng(param.get("seed", index)).random(count).astype(dtype))
    return out


@lru_cache(maxsize=None)
def analysed(spec_id: str):
    import traceconf.triton

    spec = json.loads((FIXTURES / f"{spec_id}.json").read_text())
    module = fixture_kernels()
    table = traceconf.triton.analyze(getattr(module, spec_id), tuple(spec["grid"]), *arguments(spec),
                                     num_warps=spec["num_warps"], num_stages=module.NUM_STAGES,
                                     **module.CONSTEXPRS[spec_id])
    return spec, table


def _without_lines(ptx: str) -> list[str]:
    """PTX without comments, .loc/.file directives and debug sections (they name the .py file and lines)."""
    body = ptx.split(".section", 1)[0]
    lines = [re.sub(r"//.*", "", line).strip() for line in body.splitlines()]
    return [line for line in lines if line and not line.startswith((".loc", ".file"))]


@pytest.mark.parametrize("spec_id", SPECS)
def test_the_cpu_compile_is_the_measured_one(spec_id):
    from traceconf.triton.compile import compile_launch

    spec = json.loads((FIXTURES / f"{spec_id}.json").read_text())
    module = fixture_kernels()
    compiled = compile_launch(getattr(module, spec_id), tuple(spec["grid"]), tuple(arguments(spec)),
                              dict(num_warps=spec["num_warps"], num_stages=module.NUM_STAGES,
                                   **module.CONSTEXPRS[spec_id]), "sm_90")
    assert compiled.triton_version == spec["triton_version"]
    assert (compiled.block, compiled.shared_bytes) == (tuple(spec["block"]), spec["shared_bytes"])
    assert _without_lines(compiled.ptx) == _without_lines((FIXTURES / spec["ptx"]).read_text())
    assert compiled.source_file.endswith("triton_ptx.py")


def predicted_and_page(spec_id: str):
    from test_sass_hw import _normalise, _source_page

    spec, table = analysed(spec_id)
    assert not table.attrs["failures"]
    page = _source_page(f"triton_{spec_id}")
    predicted = Counter()
    for row in table.itertuples():
        predicted[row.pc] += row.wavefronts
        assert _normalise(page[row.pc][0]).split()[:1] == _normalise(row.text).split()[:1], (hex(row.pc), row.text)
    copies = {row.pc for row in table.itertuples() if row.kind == "cp_async"}
    return table, page, predicted, copies


@pytest.mark.parametrize("spec_id", SPECS)
def test_every_sass_instruction_equals_the_source_page(spec_id):
    table, page, predicted, copies = predicted_and_page(spec_id)
    # HGMMA reads shared memory through matrix descriptors (no per-lane addresses): named, not counted
    measured = {pc: n for pc, (text, n) in page.items() if n and "GMMA" not in text and pc not in copies}
    assert {pc: n for pc, n in predicted.items() if n and pc not in copies} == measured
    assert table.source_file.str.endswith("triton_ptx.py").all()
    assert table.attrs["launch"]["triton_version"] == triton.__version__


@pytest.mark.parametrize("spec_id", SPECS)
def test_the_async_copies_equal_the_source_page(spec_id):
    """The matmuls' buffers are numpy arrays, analysed first without their contents: their pointers have no value,
    and the LDGSTS.BYPASS copies are counted from their global sources taken at cudaMalloc's 256-byte alignment
    (the main loops' A copies: 8.0 and 7.5 per warp where the shared addresses give 4, docs/hardware.md)."""
    _, page, predicted, copies = predicted_and_page(spec_id)
    assert {pc: predicted[pc] for pc in copies} == {pc: page[pc][1] for pc in copies}


@pytest.mark.parametrize("spec_id", [s for s in SPECS if "matmul" in s])
def test_the_async_copies_ideal_is_the_page_and_the_page_exceeds_it_where_the_sources_count(spec_id):
    """The ideal of every copy is the page's; the copies the page counts above it (their global sources: two 64-byte
    rows per quarter-warp) are the known ones, counted from sources that are offsets from a pointer parameter
    without a value, and their notes say so; the prologues' ``LDGSTS ..., P0`` copies (every lane zero-filling as
    Nsight reads P0) are counted from no source, by the fill pass alone, and their notes assume nothing."""
    from test_sass_hw import UNPREDICTABLE_COPIES, _source_page

    table, page, _, copies = predicted_and_page(spec_id)
    ideal = _source_page(f"triton_{spec_id}", "L1 Wavefronts Shared Ideal")
    predicted_ideal = Counter()
    for row in table.itertuples():
        predicted_ideal[row.pc] += row.ideal_wavefronts
    assert copies and {pc: predicted_ideal[pc] for pc in copies} == {pc: ideal[pc][1] for pc in copies}
    above = {pc for pc in copies if page[pc][1] > ideal[pc][1]}
    assert len(above) == UNPREDICTABLE_COPIES[spec_id]
    # a copy every execution of which was counted from its sources says that the sources were taken at cudaMalloc's
    # alignment, but where no lane reads
    notes = {row.pc: row.model_note for row in table.itertuples() if row.pc in copies}
    from_sources = {pc for pc, note in notes.items() if note.startswith("counted from the global source")}
    aligned = {pc for pc, note in notes.items() if "256-byte aligned as cudaMalloc returns them" in note}
    on_p0 = {row.pc for row in table.itertuples() if row.pc in copies and row.text.rstrip(" ;").endswith(", P0")}
    assert from_sources == copies and above <= aligned and from_sources - aligned == on_p0


def test_the_softmax_reductions_are_on_the_authors_lines():
    """tl.max and tl.sum run in Triton's standard.py; their shared-memory exchanges belong to the kernel's lines."""
    _, table = analysed("tt_softmax")
    lines = (REPO / "scripts" / "triton_ptx.py").read_text().splitlines()
    expected = {n for n, line in enumerate(lines, 1) if "tl.max(x, axis=0)" in line or "tl.sum(e, axis=0)" in line}
    assert len(expected) == 2 and set(table.source_line) == expected
