"""Explain pictures for the Python API: the worst execution of an analysed instruction, as SVG.

``traceconf explain`` draws one instruction the user names; the notebook
results and the pytest plugin draw the instruction with the most excess
wavefronts (then the most wavefronts) unless told which, from the same
emulation with its executions kept.
"""

from __future__ import annotations

from pathlib import Path

from traceconf.api import _dims
from traceconf.errors import InputError
from traceconf.rules import DEFAULT_DEVICE
from traceconf.programs import DEFAULT_LEVEL


def explain_svg(path: str | Path, kernel: str, device: str = DEFAULT_DEVICE, level: str = DEFAULT_LEVEL,
                instruction: int | None = None, block=None, grid=None, params=None, dynamic_smem=None,
                data=None, seed: int = 0) -> tuple[dict, str]:
    """(the instruction's result row, SVG picture) for one kernel of a PTX/SASS/binary file; the launch
    arguments are :func:`traceconf.analyze_ptx`'s."""
    from traceconf.analyses.results import results_table
    from traceconf.emulate.launch import LaunchRequest
    from traceconf.pipeline import run_file
    from traceconf.report.explain import worst_execution
    from traceconf.report.svg import render_svg
    from traceconf.rules import load_rule_sets

    (rules,) = load_rule_sets([device])
    launch = LaunchRequest.given_as(block=_dims(block, "block") if block is not None else None,
                                    grid=_dims(grid, "grid") if grid is not None else None,
                                    params={str(k): int(v) for k, v in (params or {}).items()},
                                    dynamic_smem=dynamic_smem, data={str(k): str(v) for k, v in (data or {}).items()},
                                    seed=seed)
    done, failed = run_file(path, [kernel], launch, [rules], level=level)
    if failed:
        raise failed[0].error
    (analysis,) = done
    rows = [row for row in results_table([analysis], [rules.name]).to_pylist() if row["executions"]]
    if instruction is not None:
        rows = [row for row in rows if row["instruction"] == instruction]
    if not rows:
        raise InputError(f"kernel {kernel}: no counted shared-memory instruction"
                         + (f" {instruction}" if instruction is not None else ""), file=str(path))
    worst = max(rows, key=lambda row: (row["excess_wavefronts"], row["wavefronts"]))
    pic = worst_execution(analysis.accesses[rules.warp_size], worst["instruction"], worst["text"], rules)
    return worst, render_svg(pic)
