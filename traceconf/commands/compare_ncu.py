"""``traceconf compare-ncu``: predicted wavefronts next to Nsight Compute's measured ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from traceconf.commands.analyze import (Block, Ctas, Data, DynamicSmem, Exhaustive, Format, Grid, HtmlPictures,
                                        Kernels, Launches, Level, MaxSteps, MemoryLimit, Params, PtxasOptions, Seed,
                                        TimeLimit, WorkLimit, check_input, exit_for_failures, fail, input_boundary,
                                        launch_request, parse_pictures, report_failures, stdout_console, wants_html)
from traceconf.errors import InputError
from traceconf.programs import DEFAULT_LEVEL
from traceconf.rules import DEFAULT_DEVICE, load_rule_sets

def compare_ncu(
    reports: Annotated[list[Path], typer.Argument(
        help="Nsight Compute exports of the profiled launches: Source pages (ncu -i REP --page source --csv "
        "--print-source sass[,cuda]), and for each launch's grid, block and dynamic shared memory the report's "
        "details page (ncu -i REP --page details --csv), raw page (--page raw --csv) or the .ncu-rep itself "
        "(read through Nsight Compute's ncu_report module). Several reports, several launches each.",
        metavar="REPORT...")],
    file: Annotated[Path, typer.Argument(help="The PTX, SASS, CUDA binary or trace of the profiled kernels.",
                                         metavar="FILE")],
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
    """Line up Nsight Compute's measured shared wavefronts with the prediction (per launch, kind, pc, CUDA line):
    the kernels and launches are the report's."""
    from traceconf.analyses.ncu import compare, read_counters_csv
    from traceconf.analyses.results import kernel_table, partial_note
    from traceconf.analyses.ncu_predict import predict, read_reports
    from traceconf.report.ncu import csv_text, render

    html = wants_html(format, output)
    inputs = [*reports, file, *([raw] if raw else [])]
    with input_boundary(file):
        for report in reports:
            check_input(report)
        check_input(file, folder=True)
        if output is not None:
            from traceconf.outputs import check_not_input, check_writable
            if output.suffix.lower() != ".html":
                raise InputError("compare-ncu writes the report page: use a .html name", file=str(output))
            check_not_input(output, inputs)
            check_writable(output)
        pictures = parse_pictures(html_pictures)
        tables, profiled = read_reports(reports)
        counters = None
        if raw is not None:
            check_input(raw)
            counters = read_counters_csv(raw)
        launch = launch_request(block, grid, param, dynamic_smem, ctas, max_steps, launches, data, seed,
                                time_limit, memory_limit, exhaustive, work_limit=work_limit)
        launch.retain = None if html and pictures != 0 else 0     # the pictures look at single executions
        (rules,) = load_rule_sets([device])
        predicted, failures, unmatched = predict(str(file), tables, profiled, launch, kernel, rules, level,
                                                 ptxas_option)
    comparisons = [compare(p.measured, p.kernel, kernel_table(p.analysis, rules.name), counters, p.analysis.launch,
                           p.launch.ids() if p.launch else ()) for p in predicted]
    for comparison, prediction in zip(comparisons, predicted):
        comparison.notes += prediction.notes
        partial = partial_note(prediction.analysis)     # the totals leave the unresolved executions out
        if partial:
            comparison.notes.append(partial)
    page = None
    if html:
        from traceconf.report.html_ncu import ncu_page
        page = ncu_page(list(zip(comparisons, [p.analysis for p in predicted])), rules,
                        f"traceconf compare-ncu {' '.join(map(str, reports))} {file} -d {rules.name}", pictures,
                        [f.line() for f in failures], unmatched)
    if format is Format.json:
        typer.echo(json.dumps({"device": rules.name, "comparisons": [c.__dict__ for c in comparisons],
                               "notes": unmatched}, indent=2))
    elif format is Format.html:
        typer.echo(page, nl=False)
    elif format is Format.csv:
        typer.echo(csv_text(comparisons, rules.name), nl=False)
    else:
        render(comparisons, rules.name, stdout_console(), counters_given=raw is not None, notes=unmatched)
    if output is not None:
        from traceconf.outputs import write_text
        try:
            write_text(output, page, inputs=inputs)
        except InputError as error:
            raise fail(error) from None
    report_failures(failures)
    exit_for_failures(failures)


def register(app: typer.Typer) -> None:
    app.command("compare-ncu")(compare_ncu)
