"""``traceconf analyze``: the hotspot report, JSON/CSV output, result files and CI gating.

The launch options defined here (``--block``, ``--grid``, ``--param`` ...) are
shared with ``explain`` and ``compare-ncu`` so that every command reads a
launch the same way.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated, Iterator, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
    TimeRemainingColumn

from traceconf.errors import InputError
from traceconf.pipeline import KernelFailure, LaunchRequest, run_file
from traceconf.rules import load_rule_sets

# ---------------------------------------------------------------------------
# Options shared by analyze / explain / compare-ncu
# ---------------------------------------------------------------------------

LAUNCH = "Launch (PTX input)"

Kernels = Annotated[Optional[list[str]], typer.Option(
    "--kernel", "-k", help="Kernel: exact (mangled or demangled) name, bare function name (every template "
    "instance), part of a name, or a regex; exact matches win. Repeat for several (default: every kernel).")]
Block = Annotated[Optional[str], typer.Option(
    "--block", help="Block size X[,Y[,Z]] (default: the kernel's .reqntid).", rich_help_panel=LAUNCH)]
Grid = Annotated[str, typer.Option("--grid", help="Grid size X[,Y[,Z]].", rich_help_panel=LAUNCH)]
Params = Annotated[Optional[list[str]], typer.Option(
    "--param", "-p", help="Kernel parameter NAME_OR_INDEX=VALUE (decimal or 0x hex); repeat.",
    rich_help_panel=LAUNCH)]
DynamicSmem = Annotated[str, typer.Option(
    "--dynamic-smem", help="Dynamic shared memory bytes (decimal or 0x hex).", rich_help_panel=LAUNCH)]
Ctas = Annotated[Optional[int], typer.Option(
    "--ctas", min=1, help="Emulate at most N CTAs (counts then cover the sampled CTAs).", rich_help_panel=LAUNCH)]
MaxSteps = Annotated[int, typer.Option(
    "--max-steps", min=1, help="Stop a runaway emulation after N warp steps.", rich_help_panel=LAUNCH)]
TimeLimit = Annotated[float, typer.Option(
    "--time-limit", min=0.1, help="Stop a kernel's emulation after SECONDS; what was counted is kept, labelled "
    "partial.", rich_help_panel=LAUNCH)]
MemoryLimit = Annotated[Optional[str], typer.Option(
    "--memory-limit", help="Stop cleanly before the process holds more than this much memory, e.g. 4G or 512M "
    "(default: half the machine's memory).", rich_help_panel=LAUNCH)]
Devices = Annotated[Optional[list[str]], typer.Option(
    "--device", "-d", help="Rule set (device) to analyse for; repeat for side-by-side columns (default: sm_90).")]
SkipBad = Annotated[bool, typer.Option("--skip-bad", help="Traces: skip malformed lines instead of stopping.")]

DEFAULT_DEVICE = "sm_90"
PIPE_WIDTH = 200


def parse_int(text: str, option: str) -> int:
    try:
        return int(text.strip().replace("_", ""), 0)
    except ValueError:
        raise InputError(f"{option}: {text!r} is not an integer (decimal or 0x hex)") from None


def parse_dims(text: str, option: str) -> tuple[int, int, int]:
    """``32`` → (32, 1, 1); ``32,8`` → (32, 8, 1); ``x`` also separates (``32x8``)."""
    parts = [p for p in text.replace("x", ",").replace("×", ",").split(",")]
    if not 1 <= len(parts) <= 3:
        raise InputError(f"{option}: expected X[,Y[,Z]], got {text!r}")
    try:
        dims = [parse_int(p, option) for p in parts]
    except InputError:
        raise InputError(f"{option}: expected X[,Y[,Z]] of whole numbers, got {text!r}") from None
    if any(d < 1 for d in dims):
        raise InputError(f"{option}: every dimension must be at least 1, got {text!r}")
    return tuple(dims + [1] * (3 - len(dims)))  # type: ignore[return-value]


def parse_params(items: list[str] | None) -> dict[str, int]:
    params = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InputError(f"--param: expected NAME_OR_INDEX=VALUE, got {item!r}")
        params[name.strip()] = parse_int(value, f"--param {name.strip()}")
    return params


def parse_bytes(text: str, option: str) -> int:
    """``4G``, ``512M``, ``100000K`` or plain bytes (binary units)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    cleaned = text.strip().upper().removesuffix("IB").removesuffix("B")
    factor = units.get(cleaned[-1:], 1)
    number = cleaned[:-1] if cleaned[-1:] in units else cleaned
    try:
        value = int(float(number) * factor)
    except ValueError:
        raise InputError(f"{option}: {text!r} is not a size (e.g. 4G, 512M, bytes)") from None
    if value <= 0:
        raise InputError(f"{option}: must be positive, got {text!r}")
    return value


def launch_request(block: str | None, grid: str, params: list[str] | None, dynamic_smem: str,
                   ctas: int | None, max_steps: int, time_limit: float | None = None,
                   memory_limit: str | None = None) -> LaunchRequest:
    smem = parse_int(dynamic_smem, "--dynamic-smem")
    if smem < 0:
        raise InputError("--dynamic-smem: must not be negative")
    return LaunchRequest(block=parse_dims(block, "--block") if block else None, grid=parse_dims(grid, "--grid"),
                         params=parse_params(params), dynamic_smem=smem, ctas=ctas, max_steps=max_steps,
                         time_limit=time_limit,
                         memory_limit=parse_bytes(memory_limit, "--memory-limit") if memory_limit else None)


def check_input(path: Path) -> None:
    if not path.is_file():
        raise InputError("no such file" if not path.exists() else "not a regular file", file=str(path))


@contextmanager
def progress_bar(enabled: bool, label: str) -> Iterator:
    """A rich progress callback ``(done, total)`` on terminals; ``None`` (no output at all) otherwise."""
    if not (enabled and sys.stdout.isatty() and sys.stderr.isatty()):
        yield None
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("ETA"), TimeRemainingColumn(), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int, note: str | None = None) -> None:
            bar.update(task, completed=done, total=total or None,
                       description=f"{label} ({note})" if note else label)

        yield update


def stdout_console() -> Console:
    """Rich console on stdout; piped output is read by grep and diff, so it is not squeezed to 80 columns."""
    return Console(soft_wrap=False, width=None if sys.stdout.isatty() else PIPE_WIDTH)


def report_failures(failures: list[KernelFailure]) -> None:
    """One line per failed kernel: ``FILE:LINE:COL: kernel K: message`` (location when known)."""
    for failure in failures:
        typer.echo(failure.line(), err=True)


def report_input_error(error: InputError) -> None:
    """Print an InputError the way every command does: one line, then the source line."""
    typer.echo(f"error: {error}" if not error.location() else str(error), err=True)
    if error.source_line is not None:
        typer.echo(f"    {error.source_line.rstrip()}", err=True)
        if error.column:
            typer.echo("    " + " " * (error.column - 1) + "^", err=True)


def fail(error: InputError) -> typer.Exit:
    report_input_error(error)
    return typer.Exit(2)


# ---------------------------------------------------------------------------
# analyze
# ---------------------------------------------------------------------------

class Format(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


def analyze(
    file: Annotated[Path, typer.Argument(help="PTX file or shared-memory trace (format detected from content).")],
    kernel: Kernels = None,
    block: Block = None,
    grid: Grid = "1",
    param: Params = None,
    dynamic_smem: DynamicSmem = "0",
    device: Devices = None,
    format: Annotated[Format, typer.Option("--format", "-f", help="Output on stdout.")] = Format.table,
    output: Annotated[Optional[Path], typer.Option(
        "--output", "-o", help="Write the per-instruction results to .parquet, .csv or .json.")] = None,
    ctas: Ctas = None,
    max_steps: MaxSteps = 10_000_000,
    time_limit: TimeLimit = 30.0,
    memory_limit: MemoryLimit = None,
    exhaustive: Annotated[bool, typer.Option(
        "--exhaustive", help="Emulate every CTA even where CTA classes would prove the counts (to check them).",
        rich_help_panel=LAUNCH)] = False,
    top: Annotated[int, typer.Option("--top", "-n", min=1, help="Hotspot rows per kernel.")] = 20,
    suggest: Annotated[bool, typer.Option(
        "--suggest", help="Try row padding and XOR swizzles on the top hotspots (table output).")] = False,
    fail_on_excess: Annotated[Optional[int], typer.Option(
        "--fail-on-excess", min=0, help="Exit 1 when any kernel's excess wavefronts (any device) exceed N.")] = None,
    skip_bad: SkipBad = False,
) -> None:
    """Count shared-memory wavefronts per instruction and rank the bank-conflict hotspots."""
    from traceconf.analyses.results import excess_by_kernel, results_table
    from traceconf.report.writers import csv_text, json_text, write_results

    try:
        check_input(file)
        launch = launch_request(block, grid, param, dynamic_smem, ctas, max_steps, time_limit, memory_limit)
        launch.classes = not exhaustive
        launch.retain = None if suggest else 0      # only --suggest looks at single executions
        rule_sets = load_rule_sets(device, DEFAULT_DEVICE)
        with progress_bar(format is Format.table, f"analysing {file.name}") as progress:
            analyses, failures = run_file(file, kernel, launch, rule_sets, skip_bad, progress)
    except InputError as error:
        raise fail(error) from None
    devices = [rules.name for rules in rule_sets]
    table = results_table(analyses, devices)

    if format is Format.json:
        typer.echo(json_text(analyses, devices))
    elif format is Format.csv:
        typer.echo(csv_text(table), nl=False)
    else:
        _print_tables(analyses, devices, top, suggest, rule_sets)
    report_failures(failures)
    for analysis in analyses:
        if "partial" in analysis.launch:
            typer.echo(f"traceconf: kernel {analysis.kernel}: partial: {analysis.launch['partial']}; counts cover "
                       f"{analysis.launch['covered_ctas']:,} of {analysis.launch['total_ctas']:,} CTAs "
                       f"(--ctas N samples N CTAs instead)", err=True)
    if output is not None:
        try:
            write_results(table, output)
        except InputError as error:
            raise fail(error) from None

    if failures:
        raise typer.Exit(2)
    if fail_on_excess is not None:
        over = [(k, d, e) for k, d, e in excess_by_kernel(table) if e > fail_on_excess]
        for kernel_name, device_name, excess in over:
            typer.echo(f"traceconf: kernel {kernel_name} on {device_name} has {excess:,} excess wavefronts "
                       f"(limit --fail-on-excess {fail_on_excess})", err=True)
        if over:
            raise typer.Exit(1)


def _print_tables(analyses, devices: list[str], top: int, suggest: bool, rule_sets: list) -> None:
    from traceconf.report.hotspots import render

    console = stdout_console()
    render(analyses, devices, top, console)
    if suggest:
        from traceconf.analyses.suggest import suggestions
        from traceconf.report.suggest import render_suggestions
        with progress_bar(True, "suggesting") as progress:
            for done, analysis in enumerate(analyses):
                found = suggestions(analysis, rule_sets[0], top)
                if progress:
                    progress(done + 1, len(analyses))
                render_suggestions(analysis, rule_sets[0].name, found, console)


def register(app: typer.Typer) -> None:
    app.command("analyze")(analyze)
