"""``traceconf compare-ncu``: predicted wavefronts next to Nsight Compute's measured ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from traceconf.commands.analyze import (Block, Ctas, Data, Seed, DynamicSmem, Format, Grid, Kernels, MaxSteps, Params, check_input, fail,
                                        launch_request, report_failures, stdout_console)
from traceconf.errors import InputError
from traceconf.rules import load_rule_sets
from traceconf.pipeline import run_file

COUNT_KEYS = ("wavefronts", "ideal_wavefronts", "excess_wavefronts")


def _ratio(measured: int, predicted: int) -> str:
    if measured == predicted:
        return "="
    return f"×{predicted / measured:.2f}" if measured else "–"


def _table(title: str, label: str, rows: list[tuple[str, dict, dict]]) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold", pad_edge=False)
    table.add_column(label, overflow="ellipsis", max_width=60, no_wrap=True)
    for key in COUNT_KEYS:
        name = key.replace("_wavefronts", "")
        table.add_column(f"{name} ncu", justify="right")
        table.add_column(f"{name} predicted", justify="right")
    table.add_column("wavefronts predicted/ncu", justify="right")
    for name, measured, predicted in rows:
        cells = [name]
        for key in COUNT_KEYS:
            same = measured[key] == predicted[key]
            cells += [f"{measured[key]:,}", Text(f"{predicted[key]:,}", style="green" if same else "red")]
        cells.append(_ratio(measured["wavefronts"], predicted["wavefronts"]))
        table.add_row(*cells)
    return table


def compare_ncu(
    report: Annotated[Path, typer.Argument(help="CSV of: ncu -i REP --page source --csv --print-source sass[,cuda]")],
    file: Annotated[Path, typer.Argument(help="The PTX (or trace) of the profiled kernels.")],
    kernel: Kernels = None,
    block: Block = None,
    grid: Grid = "1",
    param: Params = None,
    data: Data = None,
    seed: Seed = 0,
    dynamic_smem: DynamicSmem = "0",
    device: Annotated[str, typer.Option("--device", "-d", help="Rule set of the profiled GPU.")] = "sm_90",
    ctas: Ctas = None,
    max_steps: MaxSteps = 10_000_000,
    format: Annotated[Format, typer.Option("--format", "-f", help="Output on stdout (table or json).")] = Format.table,
) -> None:
    """Line up Nsight Compute's measured shared wavefronts with the prediction (per kernel, kind, CUDA line)."""
    from traceconf.analyses.results import kernel_table
    from traceconf.analyses.ncu import compare, pair_kernels, read_source_csv

    try:
        check_input(report)
        check_input(file)
        measured = read_source_csv(report)
        launch = launch_request(block, grid, param, dynamic_smem, ctas, max_steps, data, seed)
        (rules,) = load_rule_sets([device])
        analyses, failures = run_file(file, kernel, launch, [rules])
        by_name = {a.kernel: a for a in analyses}
        pairs = pair_kernels(measured, list(by_name), str(report)) if analyses else []
    except InputError as error:
        raise fail(error) from None
    comparisons = [compare(m, name, kernel_table(by_name[name], rules.name)) for m, name in pairs]
    if format is Format.json:
        typer.echo(json.dumps({"device": rules.name, "comparisons": [c.__dict__ for c in comparisons]}, indent=2))
    else:
        console = stdout_console()
        for c in comparisons:
            console.print(Text(f"{c.kernel}", style="bold") + Text(f"  (ncu: {c.measured_name or 'unnamed'}, "
                                                                  f"predicted for {rules.name})"))
            console.print(_table("per kernel", "kernel", [(c.kernel, c.totals["measured"], c.totals["predicted"])]))
            console.print(_table("per access kind (SASS opcode class)", "kind",
                                 [(k["kind"], k["measured"], k["predicted"]) for k in c.by_kind]))
            if c.by_line:
                console.print(_table("per CUDA source line", "line",
                                     [(f"{row['line']}  {row['source']}".strip(), row["measured"], row["predicted"])
                                      for row in c.by_line]))
            else:
                console.print("no CUDA source lines in the report (export with --print-source sass,cuda to "
                              "compare per line)", style="dim")
    report_failures(failures)
    if failures:
        raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    app.command("compare-ncu")(compare_ncu)
