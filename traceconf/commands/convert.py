"""``traceconf convert INPUT -o accesses.parquet|csv``: any supported trace → the canonical access table.

Streams: each chunk of each kernel launch is written as soon as it is read
(Parquet through a ParquetWriter, CSV through a CSVWriter), so memory stays
flat.  On a bad line the rows already read are kept in the output file.
"""

from __future__ import annotations

import sys
from contextlib import ExitStack
from pathlib import Path

import typer

from traceconf.errors import InputError, as_input_error, data_errors

OUTPUT_FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}


def _writer(path: Path, kind: str):
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from traceconf.schemas import CONVERTED_ACCESSES

    if kind == "parquet":
        return pq.ParquetWriter(path, CONVERTED_ACCESSES)
    return pacsv.CSVWriter(path, CONVERTED_ACCESSES)


def _output_kind(path: Path) -> str:
    kind = OUTPUT_FORMATS.get(path.suffix.lower())
    if kind is None:
        raise InputError(f"output must end in {', '.join(OUTPUT_FORMATS)}", str(path))
    return kind


def _byte_progress(stack: ExitStack, name: str):
    """A rich bar over the bytes read (terminals only); returns the reader's progress callback."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

    bar = stack.enter_context(Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                                       TransferSpeedColumn(), TimeRemainingColumn(), transient=True))
    task = bar.add_task(f"reading {name}", total=None)
    return lambda done, total: bar.update(task, completed=done, total=total)


def convert(
    trace: Path = typer.Argument(..., help="Accel-Sim kernelslist.g / .traceg(.xz) / trace folder, NVBit mem_trace "
                                           "log, or canonical Parquet/CSV."),
    output: Path = typer.Option(..., "-o", "--output", help="accesses.parquet or accesses.csv (ACCESSES schema)."),
    skip_bad: bool = typer.Option(False, "--skip-bad", help="Skip malformed lines and report how many, instead "
                                                            "of stopping at the first."),
) -> None:
    """Convert a recorded trace to the canonical access table (one row per lane access)."""
    from traceconf.outputs import atomic_output, check_not_input, check_writable
    from traceconf.traces import open_trace
    from traceconf.traces.canonical import launches_metadata, with_instructions

    kind = _output_kind(output)
    check_not_input(output, [trace])
    check_writable(output)
    stopped = None
    # Written to a temporary file renamed over the output only when done: a run killed mid-way leaves the
    # previous output as it was.  A bad line ends the run with the rows before it written (a valid file).
    with ExitStack() as stack:
        progress = _byte_progress(stack, trace.name) if sys.stdout.isatty() else None
        temporary = stack.enter_context(atomic_output(output, inputs=[trace]))
        traces = open_trace(trace, skip_bad=skip_bad, progress=progress)
        writer = _writer(temporary, kind)
        summary = []
        launches = {}
        try:
            for kt in traces:
                executions = accesses = 0
                for chunk in kt.chunks():
                    table = with_instructions(chunk.to_table(), kt)
                    writer.write_table(table)
                    executions += len(chunk)
                    accesses += table.num_rows
                summary.append((kt.kernel, executions, accesses, kt.bad_lines))
                launches[kt.kernel] = kt.launch
        except (InputError, *data_errors()) as error:
            stopped = as_input_error(error, str(trace))
        finally:
            if kind == "parquet":     # each kernel's launch facts (grid, block, architecture) travel with it
                writer.add_key_value_metadata(launches_metadata(launches))
            writer.close()
    for kernel, executions, accesses, bad in summary:
        skipped = f", {bad} bad line(s) skipped" if bad else ""
        typer.echo(f"{kernel}: {executions} shared warp accesses, {accesses} lane accesses{skipped}")
    typer.echo(f"wrote {output}")
    if stopped is not None:
        raise stopped


def register(app: typer.Typer) -> None:
    app.command("convert")(convert)
