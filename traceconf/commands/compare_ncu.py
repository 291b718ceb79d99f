"""``traceconf compare-ncu``: predicted wavefronts next to Nsight Compute's measured ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from traceconf.commands.analyze import (Block, Ctas, Data, DynamicSmem, Exhaustive, Format, Grid, HtmlPictures,
                                        Kernels, Launches, Level, MaxSteps, MemoryLimit, Params, PtxasOptions, Seed,
                                        TimeLimit, WorkLimit, check_input, exit_for_failures, fail, launch_request,
                                        parse_pictures, report_failures, run_file, stdout_console, wants_html)
from traceconf.errors import InputError, as_input_error, data_errors
from traceconf.programs import DEFAULT_LEVEL
from traceconf.rules import DEFAULT_DEVICE, load_rule_sets

def compare_ncu(
    report: Annotated[Path, typer.Argument(help="CSV of: ncu -i REP --page source --csv --print-source sass[,cuda]")],
    file: Annotated[Path, typer.Argument(help="The PTX (or trace) of the profiled kernels.")],
    kernel: Kernels = None,
    block: Block = None,
    grid: Grid = None,
    param: Params = None,
    dynamic_smem: DynamicSmem = None,
    launches: Launches = None,
    data: Data = None,
    seed: Seed = 0,
    device: Annotated[str, typer.Option("--device", "-d", help="Rule set of the profiled GPU.")] = DEFAULT_DEVICE,
    ctas: Ctas = None,
    max_steps: MaxSteps = 10_000_000,
    time_limit: TimeLimit = None,
    work_limit: WorkLimit = None,
    memory_limit: MemoryLimit = None,
    exhaustive: Exhaustive = False,
    format: Annotated[Format, typer.Option("--format", "-f", help="Output on stdout (table, json, csv or html).")
                      ] = Format.table,
    output: Annotated[Optional[Path], typer.Option(
        "--output", "-o", help="Write the comparison as a report page (.html): measured beside predicted per "
        "instruction, mismatches marked, with the kernel's source view and pictures.")] = None,
    html_pictures: HtmlPictures = "5",
    level: Level = DEFAULT_LEVEL,
    ptxas_option: PtxasOptions = None,
    raw: Annotated[Optional[Path], typer.Option(
        "--raw", help="CSV of: ncu -i REP --page raw --csv (or --page details --csv) of the same launch: the "
                      "kernel-level l1tex shared counters, shown beside the Source-page sum.")] = None,
) -> None:
    """Line up Nsight Compute's measured shared wavefronts with the prediction (per kernel, kind, CUDA line)."""
    from traceconf.analyses.results import kernel_table
    from traceconf.analyses.ncu import compare, pair_kernels, read_counters_csv, read_source_csv
    from traceconf.report.ncu import csv_text, render

    html = wants_html(format, output)
    try:
        check_input(report)
        check_input(file, folder=True)
        if output is not None:
            from traceconf.outputs import check_not_input, check_writable
            if output.suffix.lower() != ".html":
                raise InputError("compare-ncu writes the report page: use a .html name", file=str(output))
            check_not_input(output, [report, file, *([raw] if raw else [])])
            check_writable(output)
        pictures = parse_pictures(html_pictures)
        measured = read_source_csv(report)
        counters = None
        if raw is not None:
            check_input(raw)
            counters = read_counters_csv(raw)
        launch = launch_request(block, grid, param, dynamic_smem, ctas, max_steps, launches, data, seed,
                                time_limit, memory_limit, exhaustive, work_limit=work_limit)
        launch.retain = None if html and pictures != 0 else 0     # the pictures look at single executions
        (rules,) = load_rule_sets([device])
        analyses, failures = run_file(file, kernel, launch, [rules], level=level, ptxas_options=ptxas_option)
        by_name = {a.kernel: a for a in analyses}
        pairs = pair_kernels(measured, list(by_name), str(report)) if analyses else []
    except (InputError, *data_errors()) as error:   # the input boundary: bad data is the input's error
        raise fail(as_input_error(error, str(file))) from None
    comparisons = [compare(m, name, kernel_table(by_name[name], rules.name), counters, by_name[name].launch)
                   for m, name in pairs]
    page = None
    if html:
        from traceconf.report.html_ncu import ncu_page
        page = ncu_page(comparisons, analyses, rules, f"traceconf compare-ncu {report} {file} -d {rules.name}",
                        pictures, [f.line() for f in failures])
    if format is Format.json:
        typer.echo(json.dumps({"device": rules.name, "comparisons": [c.__dict__ for c in comparisons]}, indent=2))
    elif format is Format.html:
        typer.echo(page, nl=False)
    elif format is Format.csv:
        typer.echo(csv_text(comparisons, rules.name), nl=False)
    else:
        render(comparisons, rules.name, stdout_console(), counters_given=raw is not None)
    if output is not None:
        from traceconf.outputs import write_text
        try:
            write_text(output, page, inputs=[report, file, *([raw] if raw else [])])
        except InputError as error:
            raise fail(error) from None
    report_failures(failures)
    exit_for_failures(failures)


def register(app: typer.Typer) -> None:
    app.command("compare-ncu")(compare_ncu)
