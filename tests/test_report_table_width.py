"""The terminal table on narrow terminals: numbers are never cut; text columns give way first (to a key table
below the numbers, with a line saying so), device column groups wrap into further tables."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from conftest import FIXTURES
from traceconf.analyses.results import kernel_table
from traceconf.emulate.launch import LaunchRequest
from traceconf.pipeline import run_file
from traceconf.report.hotspots import kernel_report
from traceconf.rules import load_rule_sets

DEVICE_LISTS = (["sm_90"], ["sm_90", "sm_2x"], ["sm_1x", "sm_2x", "sm_90", "cdna3"])


@pytest.fixture(scope="module")
def analyses():
    found = {}
    for devices in DEVICE_LISTS:
        rule_sets = load_rule_sets(devices, "sm_90")
        (analysis,), failures = run_file(FIXTURES / "emulate" / "transpose.ptx", ["transpose_unpadded"],
                                         LaunchRequest(block=(32, 8, 1), grid=(32, 32, 1)), rule_sets, level="ptx")
        assert not failures
        found[tuple(devices)] = analysis
    return found


def printed(analysis, devices, width: int) -> str:
    console = Console(width=width, file=io.StringIO(), force_terminal=False, soft_wrap=False)
    console.print(kernel_report(analysis, list(devices), top=None, width=width))
    return console.file.getvalue()


@pytest.mark.parametrize("width", [80, 100, 200])
@pytest.mark.parametrize("devices", DEVICE_LISTS, ids=["1", "2", "4"])
def test_numbers_are_whole_at_any_width(analyses, devices, width):
    analysis = analyses[tuple(devices)]
    text = printed(analysis, devices, width)
    assert max(len(line) for line in text.splitlines()) <= width
    assert not re.search(r"\d…|…\d", text)                             # no number cut short
    cells = {cell.strip() for line in text.splitlines() for cell in re.split(r"[│┃]", line)}
    for device in devices:
        for row in kernel_table(analysis, device).to_pylist():
            for key in ("wavefronts", "executions"):
                assert f"{row[key]:,}" in cells or any(c.startswith(f"{row[key]:,} ") for c in cells), \
                    (device, key, row[key])


def test_text_columns_move_below_when_the_numbers_need_the_room(analyses):
    devices = DEVICE_LISTS[2]
    narrow = printed(analyses[tuple(devices)], devices, 80)
    assert "source, instruction, kind of each # below, to fit 80 columns" in narrow
    assert "--format csv or -o report.html shows all" in re.sub(r"\s+", " ", narrow)
    # every device's group is there, in tables of their own
    headers = [line for line in narrow.splitlines() if "wavefronts" in line]
    assert all(any(device in line for line in narrow.splitlines()) for device in devices) and len(headers) >= 2
    wide = printed(analyses[("sm_90",)], ["sm_90"], 200)
    assert "below, to fit" not in wide                                # one table where everything fits
    assert re.search(r"│\s*1 │ transpose\.cu:17\s+│ L81 ld\.shared\.f32 %f5, \[%r23\]\s+│ ld\.32\s+│\s+8,192 │",
                     wide)
    # the key table shows the text whole (wrapped)
    assert "L81 ld.shared.f32 %f5, [%r23]" in narrow and "transpose.cu:17" in narrow


def test_compare_ncu_tables_keep_numbers_whole_on_80_columns(monkeypatch):
    from typer.testing import CliRunner

    from traceconf.cli import app
    from traceconf.commands import compare_ncu

    out = io.StringIO()
    monkeypatch.setattr(compare_ncu, "stdout_console", lambda: Console(width=80, file=out, soft_wrap=False))
    result = CliRunner().invoke(app, ["compare-ncu", str(FIXTURES / "ncu" / "transpose_cuda.csv"),
                                      str(FIXTURES / "emulate" / "transpose.ptx"), "-k", "transpose_unpadded",
                                      "--block", "32,8", "--grid", "32,32", "--level", "ptx"])
    assert result.exit_code == 0, result.output
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80 and not re.search(r"\d…|…\d", text)
    for number in ("1,081,344", "65,536", "1,015,808", "1,048,576"):
        assert re.search(rf"│\s*{number} │", text), number
