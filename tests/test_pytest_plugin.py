"""The pytest plugin: a suite gates on bank conflicts, and a swizzle mutation makes it fail with a picture."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from traceconf import tools

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]
SWIZZLED = REPO / "tests" / "fixtures" / "pytest_plugin" / "swizzled_transpose.ptx"
#: The swizzle removed: element (row, col) at row * 32 + col, so the column-wise load is a 32-way conflict.
MUTATION = {"xor.b32 \t%r3, %r1, %r2": "mov.b32 \t%r3, %r1", "xor.b32 \t%r9, %r2, %r1": "mov.b32 \t%r9, %r2"}

def _installed() -> bool:
    from importlib.metadata import entry_points
    return any(entry.value == "traceconf.pytest_plugin" for entry in entry_points(group="pytest11"))


#: Loading the plugin: installed (the entry point loads it) or, from a source tree, by name; never both
#: (pytest refuses a plugin registered under two names).
PLUGIN = () if _installed() else ("-p", "traceconf.pytest_plugin")

GATE = """
def test_the_transpose_has_no_bank_conflicts(assert_bank_conflicts):
    assert_bank_conflicts({ptx!r}, {{"kernel": "swizzled_transpose", "params": {{0: 0x7F0000000000}}}})
"""


def mutated(text: str) -> str:
    for before, after in MUTATION.items():
        assert before in text
        text = text.replace(before, after)
    return text


def test_the_entry_point_registers_the_plugin():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"traceconf": "traceconf.pytest_plugin"}
    assert any(requirement.startswith("triton") for requirement in project["optional-dependencies"]["triton"])


@pytest.mark.parametrize("level", ["ptx", "auto"])
def test_the_swizzled_kernel_passes_and_its_mutation_fails(pytester, level):
    if level == "auto" and (tools.locate("ptxas") is None or tools.locate("nvdisasm") is None):
        pytest.skip("the SASS level needs ptxas and nvdisasm")
    good = pytester.path / "swizzled.ptx"
    good.write_text(SWIZZLED.read_text())
    bad = pytester.path / "mutated.ptx"
    bad.write_text(mutated(SWIZZLED.read_text()))
    gate = GATE.replace('"params"', f'"level": "{level}", "params"')
    pytester.makepyfile(test_good=gate.format(ptx=str(good)), test_bad=gate.format(ptx=str(bad)))
    pictures = pytester.path / "pictures"
    result = pytester.runpytest_subprocess(*PLUGIN, f"--traceconf-report-dir={pictures}")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*BankConflictError: 992 excess wavefronts on sm_90 (allowed: 0); hotspots:*",
                                 "*swizzled_transpose on sm_90:*wavefronts 1,024  ideal 32  excess 992  32-way*",
                                 "*explain picture of the worst instruction: *.svg*"])
    (svg,) = pictures.rglob("*.svg")
    assert "test_bad.py" in str(svg.parent) and svg.read_text().lstrip().startswith("<svg")
    assert "32 wavefronts, ideal 1, excess 31, worst 32-way" in svg.read_text()     # one warp's execution


def test_without_a_report_dir_the_picture_goes_to_the_tests_tmp_path(pytester):
    bad = pytester.path / "mutated.ptx"
    bad.write_text(mutated(SWIZZLED.read_text()))
    pytester.makepyfile(test_bad=GATE.replace('"params"', '"level": "ptx", "params"').format(ptx=str(bad)))
    result = pytester.runpytest_subprocess(*PLUGIN, f"--basetemp={pytester.path / 'tmp'}")
    result.assert_outcomes(failed=1)
    (svg,) = (pytester.path / "tmp").rglob("*.svg")
    assert "test_the_transpose_has_no_bank" in str(svg)


def test_max_excess_and_unresolved_accesses(pytester):
    bad = pytester.path / "mutated.ptx"
    bad.write_text(mutated(SWIZZLED.read_text()))
    pytester.makepyfile(test_gates=f"""
import pytest
from traceconf.pytest_plugin import BankConflictError

def test_allowed(assert_bank_conflicts):
    table = assert_bank_conflicts({str(bad)!r}, {{"kernel": "swizzled_transpose", "level": "ptx",
                                  "params": {{0: 0x7F0000000000}}}}, max_excess=992)
    assert table.excess_wavefronts.sum() == 992

def test_bad_input_is_a_failure(assert_bank_conflicts):
    with pytest.raises(Exception, match="no such file"):
        assert_bank_conflicts("missing.ptx", {{}})
""")
    result = pytester.runpytest_subprocess(*PLUGIN)
    result.assert_outcomes(passed=2)


def test_triton_functions_are_gated_too(pytester):
    pytest.importorskip("triton", reason="Triton is not installed (pip install 'traceconf[triton]')")
    pytester.makepyfile(test_triton_gate=f"""
import sys
import numpy as np
import traceconf.triton
from traceconf.pytest_plugin import BankConflictError
sys.path.insert(0, {str(REPO / "tests" / "fixtures" / "triton")!r})
import kernels

def test_transpose(assert_bank_conflicts, tmp_path):
    x = np.zeros((256, 256), np.float32)
    table = assert_bank_conflicts(kernels.transpose, traceconf.triton.launch((4, 4), x, x, 256, 256, BLOCK=64))
    assert table.wavefronts.sum() == 4096

def test_a_reduction_behind_a_flag_in_memory(assert_bank_conflicts):
    x = np.ones((4, 1000), np.float32)
    launch = traceconf.triton.launch((4,), x, x, np.ones(1, np.int32), 1000, BLOCK=1024)
    assert assert_bank_conflicts(kernels.row_sum_if_flag, launch).executions.sum() > 0

def test_unresolved_accesses_fail_the_gate(assert_bank_conflicts):
    import dataclasses, pytest
    from traceconf.pytest_plugin import check_bank_conflicts
    x = np.ones((4, 1000), np.float32)
    launch = traceconf.triton.launch((4,), x, x, np.ones(1, np.int32), 1000, BLOCK=1024)
    original = traceconf.triton.compile_launch
    traceconf.triton.compile_launch = lambda *a: dataclasses.replace(original(*a), data={{}})
    try:
        with pytest.raises(BankConflictError, match="unresolved"):
            assert_bank_conflicts(kernels.row_sum_if_flag, launch)
        assert check_bank_conflicts(kernels.row_sum_if_flag, launch, allow_unresolved=True).executions.sum() == 0
    finally:
        traceconf.triton.compile_launch = original
""")
    result = pytester.runpytest_subprocess(*PLUGIN)
    result.assert_outcomes(passed=3)
