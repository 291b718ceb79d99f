"""``traceconf harvest``: every kernel a Triton / ``torch.compile`` run compiled, at every recorded launch."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from traceconf.errors import InputError
from traceconf.rules import DEFAULT_DEVICE


def harvest(
    cache: Annotated[Optional[Path], typer.Argument(
        help="Triton cache directory (default: TRITON_CACHE_DIR, else ~/.triton/cache).")] = None,
    launches: Annotated[Optional[Path], typer.Option(
        "--launches", help="The run's launch records: the JSON lines of traceconf.triton.record_launches(FILE), or "
        "a tritonparse log (its file or folder) written with tritonparse.structured_logging.init(FOLDER, "
        "enable_trace_launch=True). Without: one CTA per kernel, no scalar arguments.")] = None,
    device: Annotated[str, typer.Option("--device", "-d", help="Rule set (an NVIDIA architecture).")] = DEFAULT_DEVICE,
    output: Annotated[Optional[Path], typer.Option(
        "--output", "-o", help="Write every row (.parquet, .csv or .json): the columns of analyze -o, plus "
        "launch, calls, cache_hash and triton_version.")] = None,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Processes analysing kernels in parallel.")] = 1,
    top: Annotated[int, typer.Option("--top", min=1, help="Hotspot rows shown per kernel and launch.")] = 5,
) -> None:
    """Analyse every kernel in a Triton cache at each launch the run recorded: one table per kernel and launch,
    per Python line.

    Switch on during the run, before its first kernel: export TRITON_CACHE_DIR=$PWD/triton-cache (a new
    folder), then in the program either traceconf.triton.record_launches("launches.jsonl") or
    tritonparse.structured_logging.init("tritonparse-logs", enable_trace_launch=True); for torch.compile also
    export TORCHINDUCTOR_USE_STATIC_CUDA_LAUNCHER=0 and a new TORCHINDUCTOR_CACHE_DIR (docs/triton.md)."""
    from traceconf.commands.analyze import fail
    from traceconf.errors import EXIT_INPUT, EXIT_INTERNAL
    from traceconf.report.notebook import hotspot_lines
    from traceconf.report.writers import check_output
    from traceconf.triton import harvest as harvest_run

    try:
        if output is not None:
            check_output(output, [p for p in (cache, launches) if p is not None])
        table = harvest_run(cache, launches, device, workers)
        if output is not None:
            write_rows(table, output)
    except InputError as error:
        raise fail(error) from None
    for (kernel, launch), rows in table.groupby(["kernel", "launch"], sort=False) if len(table) else []:
        calls = int(rows["calls"].iloc[0])
        typer.echo(f"{kernel}  {launch}  ({calls} call{'s' * (calls != 1)}): wavefronts "
                   f"{int(rows['wavefronts'].sum()):,}, excess {int(rows['excess_wavefronts'].sum()):,}")
        for line in hotspot_lines(rows, top):
            typer.echo("  " + line.split(": ", 1)[1])
    for message in table.attrs.get("failures") or []:
        typer.echo(message, err=True)
    failures = table.attrs.get("failures") or []
    if failures:
        raise typer.Exit(EXIT_INTERNAL if any(": internal error" in line for line in failures) else EXIT_INPUT)


def write_rows(table, output: Path) -> None:
    """Every row of a results frame (extra columns included), atomically, in the format of the extension."""
    from traceconf.outputs import atomic_output

    with atomic_output(output) as temporary:
        suffix = output.suffix.lower()
        if suffix == ".parquet":
            table.to_parquet(temporary, index=False)
        elif suffix == ".csv":
            table.to_csv(temporary, index=False)
        else:
            table.to_json(temporary, orient="records", lines=True)


def register(app: typer.Typer) -> None:
    app.command("harvest")(harvest)
