"""pytest plugin: gate a test suite on shared-memory bank conflicts, on a CPU.

Registered as ``traceconf`` through the ``pytest11`` entry point (installing
traceconf enables it).  The fixture ``assert_bank_conflicts`` is
:func:`check_bank_conflicts` with the failure pictures going to the test's
``tmp_path`` (or ``--traceconf-report-dir DIR/<test>``)::

    def test_transpose_has_no_conflicts(assert_bank_conflicts):
        assert_bank_conflicts("transpose.ptx", {"kernel": "transpose_padded", "block": (32, 8), "grid": (32, 32)})

    def test_triton_transpose(assert_bank_conflicts):
        x = np.zeros((256, 256), np.float32)
        assert_bank_conflicts(transpose_kernel, traceconf.triton.launch((4, 4), x, x, 256, 256, BLOCK=64))

``kernel_or_file`` is a PTX file, a SASS listing, a CUDA binary or a
``@triton.jit`` function; ``launch`` is, for a file, the keyword arguments of
:func:`traceconf.analyze_ptx` (``kernel``, ``block``, ``grid``, ``params``,
``dynamic_smem``, ``data``, ``level`` ...), and for a Triton function a
:func:`traceconf.triton.launch`.  The check fails when the excess wavefronts
of the launch exceed ``max_excess``, when a kernel fails, or when accesses are
unresolved (unless ``allow_unresolved``); the message lists the hotspot rows
and the path of the explain picture (SVG) of the worst instruction.
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path

from typing import TYPE_CHECKING

import pytest
from traceconf.rules import DEFAULT_DEVICE

if TYPE_CHECKING:                 # every pytest run loads the plugin: pandas and the pipeline load on first use
    from traceconf.report.notebook import ConflictTable


class BankConflictError(AssertionError):
    """A bank-conflict gate that did not hold; the message says which rows and where the picture is."""


def _is_triton(kernel_or_file) -> bool:
    return not isinstance(kernel_or_file, (str, Path)) and type(kernel_or_file).__module__.startswith("triton")


def _analyse(kernel_or_file, launch, device: str) -> "ConflictTable":
    if _is_triton(kernel_or_file):
        import traceconf.triton
        if isinstance(launch, dict):
            launch = traceconf.triton.launch(launch["grid"], *launch.get("args", ()), **launch.get("options", {}))
        return traceconf.triton.analyze(kernel_or_file, launch.grid, *launch.args, device=device, **launch.options)
    from traceconf import api
    from traceconf.pictures import explain_svg
    from traceconf.pipeline import input_format
    from traceconf.report.notebook import ConflictTable, SvgPicture

    path, options = Path(kernel_or_file), dict(launch)
    level = options.pop("level", "auto")
    if input_format(path) == "ptx":
        frame = api.analyze_ptx(path, devices=[device], level=level, **options)
    else:
        frame = api.analyze_sass(path, devices=[device], **options)
    table = ConflictTable(frame)
    table.attrs.update(frame.attrs)

    def explain(instruction=None):
        row, svg = explain_svg(path, options.get("kernel") or frame["kernel"].iloc[0], device, level,
                               instruction, **{k: v for k, v in options.items() if k != "kernel"})
        return SvgPicture(svg, f"{row['kernel']}: {row['source'] or ''} {row['text']}")

    table.explainer = explain
    return table


def check_bank_conflicts(kernel_or_file, launch, device: str = DEFAULT_DEVICE, max_excess: int = 0,
                         allow_unresolved: bool = False, report_dir: str | Path | None = None) -> "ConflictTable":
    """Analyse one launch and raise :class:`BankConflictError` unless it holds; returns the results."""
    from traceconf.report.notebook import hotspot_lines

    table = _analyse(kernel_or_file, launch, device)
    problems = list(table.attrs.get("failures") or [])
    unresolved = table[~table["resolved"].astype(bool)] if len(table) else table
    if len(unresolved) and not allow_unresolved:
        problems.append(f"{len(unresolved)} instruction(s) unresolved (their counts are unknown): "
                        + "; ".join(sorted({str(r) for r in unresolved["unresolved_reason"].dropna()}))
                        + " — give data/params, or allow_unresolved=True")
    excess = int(table["excess_wavefronts"].sum()) if len(table) else 0
    if excess > max_excess:
        problems.insert(0, f"{excess:,} excess wavefronts on {device} (allowed: {max_excess:,}); hotspots:")
        problems += ["  " + line for line in hotspot_lines(table)]
        if report_dir is not None:
            picture = table.explain()
            target = Path(report_dir) / (re.sub(r"[^\w.-]+", "_", picture.title)[:80] + ".svg")
            target.parent.mkdir(parents=True, exist_ok=True)
            picture.save(target)
            problems.append(f"explain picture of the worst instruction: {target}")
    if problems:
        raise BankConflictError("\n".join(problems))
    return table


def pytest_addoption(parser) -> None:
    parser.getgroup("traceconf").addoption(
        "--traceconf-report-dir", default=None, metavar="DIR",
        help="write the explain pictures of failing bank-conflict checks to DIR/<test> (default: the test's "
             "tmp_path)")


@pytest.fixture
def assert_bank_conflicts(request, tmp_path):
    """:func:`check_bank_conflicts`, with failure pictures next to this test's output."""
    folder = request.config.getoption("--traceconf-report-dir")
    target = Path(folder) / re.sub(r"[^\w.-]+", "_", request.node.nodeid) if folder else tmp_path
    return partial(check_bank_conflicts, report_dir=target)
