"""``traceconf compare-gpgpusim``: GPGPU-Sim's per-PTX-line bank-conflict cycles next to the prediction."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from traceconf.commands.analyze import (Block, Ctas, Data, Devices, DynamicSmem, Exhaustive, Format, Grid, Kernels,
                                        Launches, MaxSteps, MemoryLimit, Params, Seed, TimeLimit, WorkLimit,
                                        check_input, exit_for_failures, input_boundary, launch_request,
                                        report_failures, stdout_console)
from traceconf.errors import InputError
from traceconf.rules import load_rule_sets

GPGPUSIM = "GPGPU-Sim model (replayed on the emulation)"


def compare_gpgpusim(
    stats: Annotated[Path, typer.Argument(help="gpgpu_inst_stats.txt written by GPGPU-Sim.")],
    file: Annotated[Path, typer.Argument(help="The PTX file GPGPU-Sim loaded (its line numbers are matched).")],
    kernel: Kernels = None,
    block: Block = None,
    grid: Grid = None,
    param: Params = None,
    dynamic_smem: DynamicSmem = None,
    launches: Launches = None,
    data: Data = None,
    seed: Seed = 0,
    device: Devices = None,
    format: Annotated[Format, typer.Option("--format", "-f", help="Output on stdout.")] = Format.table,
    ptx_name: Annotated[Optional[str], typer.Option(
        "--ptx-name", help="PTX file name in the stats file (default: FILE's name; GPGPU-Sim's extracted "
                           "PTX is _N.ptx).")] = None,
    shmem_banks: Annotated[int, typer.Option(
        "--shmem-banks", help="GPGPU-Sim -gpgpu_shmem_num_banks of the run (shipped configs: 32; built-in: 16).",
        rich_help_panel=GPGPUSIM)] = 32,
    shmem_warp_parts: Annotated[int, typer.Option(
        "--shmem-warp-parts", help="GPGPU-Sim -gpgpu_shmem_warp_parts (shipped configs: 1; built-in: 2).",
        rich_help_panel=GPGPUSIM)] = 1,
    shmem_limited_broadcast: Annotated[bool, typer.Option(
        "--shmem-limited-broadcast/--no-shmem-limited-broadcast",
        help="GPGPU-Sim -gpgpu_shmem_limited_broadcast (shipped configs: off; built-in: on).",
        rich_help_panel=GPGPUSIM)] = False,
    ctas: Ctas = None,
    max_steps: MaxSteps = 10_000_000,
    time_limit: TimeLimit = None,
    work_limit: WorkLimit = None,
    memory_limit: MemoryLimit = None,
    exhaustive: Exhaustive = False,
) -> None:
    """Line up GPGPU-Sim's per-PTX-line smem_bk_conflicts with the predicted wavefronts for the same PTX."""
    from traceconf.analyses.gpgpusim import BankModel, compare, rows_for_ptx
    from traceconf.pipeline import input_format, run_file
    from traceconf.report.gpgpusim import csv_text, json_document, render
    from traceconf.traces import read_gpgpusim_stats

    model = BankModel(shmem_banks, shmem_warp_parts, shmem_limited_broadcast)
    with input_boundary(file):
        check_input(stats)
        check_input(file)
        model.check()
        fmt = input_format(file)
        if fmt != "ptx":
            raise InputError(f"not a PTX file (detected: {fmt}); GPGPU-Sim's statistics are per PTX line",
                             file=str(file))
        name = ptx_name or file.name
        rows = rows_for_ptx(read_gpgpusim_stats(stats), name, str(stats))
        launch = launch_request(block, grid, param, dynamic_smem, ctas, max_steps, launches, data, seed,
                                time_limit, memory_limit, exhaustive, work_limit=work_limit)
        launch.retain = -1        # GPGPU-Sim's bank model is replayed on every warp execution
        rule_sets = load_rule_sets(device)
        # GPGPU-Sim runs the PTX as written and counts per PTX line: always the PTX level
        analyses, failures = run_file(file, kernel, launch, rule_sets, level="ptx")
    comparison = compare(rows, analyses, [rules.name for rules in rule_sets], model, str(stats), str(file), name)
    if format is Format.json:
        typer.echo(json.dumps(json_document(comparison), indent=2))
    elif format is Format.csv:
        typer.echo(csv_text(comparison), nl=False)
    else:
        render(comparison, stdout_console())
    report_failures(failures)
    exit_for_failures(failures)


def register(app: typer.Typer) -> None:
    app.command("compare-gpgpusim")(compare_gpgpusim)
