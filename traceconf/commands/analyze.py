"""``traceconf analyze``: the hotspot report, JSON/CSV output, result files and CI gating.

The launch options defined here (``--block``, ``--grid``, ``--param`` ...) are
shared with ``explain`` and ``compare-ncu`` so that every command reads a
launch the same way.
"""

from __future__ import annotations

import re
import sys
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Iterator, Optional

import typer
from rich.console import Console

from traceconf.emulate.launch import DEFAULT_WORK_LIMIT
from traceconf.errors import EXIT_INPUT, EXIT_INTERNAL, InputError, reading
from traceconf.numbers import read_int
from traceconf.programs import DEFAULT_LEVEL
from traceconf.rules import DEFAULT_DEVICE, load_rule_sets

if TYPE_CHECKING:
    from traceconf.emulate.launch import LaunchRequest
    from traceconf.pipeline import KernelFailure

# ---------------------------------------------------------------------------
# Options shared by analyze / explain / compare-ncu
# ---------------------------------------------------------------------------

LAUNCH = "Launch (PTX input)"

Kernels = Annotated[Optional[list[str]], typer.Option(
    "--kernel", "-k", help="Kernel: exact (mangled or demangled) name, bare function name (every template "
    "instance), part of a name, or a regex; exact matches win. Repeat for several (default: every kernel).")]
Block = Annotated[Optional[str], typer.Option(
    "--block", help="Block size X[,Y[,Z]] (default: the kernel's .reqntid).", rich_help_panel=LAUNCH)]
Grid = Annotated[Optional[str], typer.Option("--grid", help="Grid size X[,Y[,Z]] (default 1).", rich_help_panel=LAUNCH)]
Launches = Annotated[Optional[Path], typer.Option(
    "--launches", help="Launch file (TOML, docs/launches.md): block, grid, params ... per kernel, written once; "
    "command-line options win over it.", rich_help_panel=LAUNCH)]
Params = Annotated[Optional[list[str]], typer.Option(
    "--param", "-p", help="Kernel parameter NAME_OR_INDEX=VALUE (decimal or 0x hex); repeat.",
    rich_help_panel=LAUNCH)]
Data = Annotated[Optional[list[str]], typer.Option(
    "--data", help="Contents of the buffer a pointer parameter points to: NAME_OR_INDEX=SOURCE with SOURCE "
    "FILE.npy, FILE:DTYPE (raw, e.g. keys.bin:uint16) or random:DTYPE:COUNT[:LOW:HIGH]; repeat. Loads from it "
    "then have values, so data-dependent addresses and branches resolve.", rich_help_panel=LAUNCH)]
Seed = Annotated[int, typer.Option("--seed", help="Seed of random: --data sample inputs (stated in the output).",
                                   rich_help_panel=LAUNCH)]
DynamicSmem = Annotated[Optional[str], typer.Option(
    "--dynamic-smem", help="Dynamic shared memory bytes (decimal or 0x hex; default: what the accesses reach).",
    rich_help_panel=LAUNCH)]
Ctas = Annotated[Optional[int], typer.Option(
    "--ctas", min=1, help="Emulate at most N CTAs (counts then cover the sampled CTAs).", rich_help_panel=LAUNCH)]
MaxSteps = Annotated[int, typer.Option(
    "--max-steps", min=1, help="Stop a runaway emulation after N warp steps.", rich_help_panel=LAUNCH)]
TimeLimit = Annotated[Optional[float], typer.Option(
    "--time-limit", min=0.1, help="Also stop a kernel's emulation after SECONDS of wall-clock time (off by "
    "default: the answer would then depend on the machine's load); what was counted is kept, labelled partial.",
    rich_help_panel=LAUNCH)]
WorkLimit = Annotated[Optional[int], typer.Option(
    "--work-limit", min=0, help="Stop a kernel's emulation after N warp steps of emulated work (default "
    f"{DEFAULT_WORK_LIMIT:,}; 0: no limit); the same on any machine, at any load. What was counted is kept, labelled "
    "partial.", rich_help_panel=LAUNCH)]
MemoryLimit = Annotated[Optional[str], typer.Option(
    "--memory-limit", help="Stop cleanly before the process holds more than this much memory, e.g. 4G or 512M "
    "(default: half the machine's memory).", rich_help_panel=LAUNCH)]
Exhaustive = Annotated[bool, typer.Option(
    "--exhaustive", help="Emulate every CTA even where CTA classes would prove the counts (to check them).",
    rich_help_panel=LAUNCH)]
Devices = Annotated[Optional[list[str]], typer.Option(
    "--device", "-d", help="Rule set (sm_90), architecture (sm90, compute_80) or product (h100, a100, rtx4090, "
    "mi300x: traceconf devices NAME) to analyse for, or a .toml rule file; repeat for side-by-side columns "
    "(default: sm_90).")]
SkipBad = Annotated[bool, typer.Option("--skip-bad", help="Traces: skip malformed lines instead of stopping.")]
Level = Annotated[str, typer.Option(
    "--level", envvar="TRACECONF_LEVEL", help="PTX input: auto (SASS when a ptxas targets the device, else PTX), "
    "ptx (the PTX as written) or sass (assemble with ptxas, analyse what the GPU runs).", rich_help_panel=LAUNCH)]
PtxasOptions = Annotated[Optional[list[str]], typer.Option(
    "--ptxas-option", help="Option passed to ptxas at SASS level (repeat), e.g. --ptxas-option=-O1.",
    rich_help_panel=LAUNCH)]

PIPE_WIDTH = 200


def parse_int(text: str, option: str) -> int:
    return read_int(text, option)


#: What separates the sizes of --block and --grid: a comma, or an ``x`` that is not the one of a ``0x`` prefix
#: (``32x8``, ``0x20x8`` and ``0x20,8`` are all 32 by 8).
_DIMS_SEPARATOR = re.compile(r",|(?<!\b0)[xX×]")


def parse_dims(text: str, option: str) -> tuple[int, int, int]:
    """``32`` → (32, 1, 1); ``32,8`` → (32, 8, 1); ``x`` also separates (``32x8``), each size decimal or hex."""
    parts = _DIMS_SEPARATOR.split(text)
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


def parse_data(items: list[str] | None) -> dict[str, str]:
    data = {}
    for item in items or []:
        name, sep, source = item.partition("=")
        if not sep or not name.strip() or not source.strip():
            raise InputError(f"--data: expected NAME_OR_INDEX=SOURCE, got {item!r}")
        data[name.strip()] = source.strip()
    return data


def parse_bytes(text: str, option: str) -> int:
    """``4G``, ``512M``, ``100000K`` or plain bytes (binary units)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    cleaned = text.strip().upper().removesuffix("IB").removesuffix("B")
    factor = units.get(cleaned[-1:], 1)
    number = cleaned[:-1] if cleaned[-1:] in units else cleaned
    try:
        value = int(float(number) * factor)
    except (ValueError, OverflowError):
        raise InputError(f"{option}: {text!r} is not a size (e.g. 4G, 512M, bytes)") from None
    if value <= 0:
        raise InputError(f"{option}: must be positive, got {text!r}")
    return value


def launch_request(block: str | None, grid: str | None, params: list[str] | None, dynamic_smem: str | None,
                   ctas: int | None, max_steps: int, launches: Path | None = None, data: list[str] | None = None,
                   seed: int = 0, time_limit: float | None = None, memory_limit: str | None = None,
                   exhaustive: bool = False, work_limit: int | None = None) -> LaunchRequest:
    from traceconf.emulate.launch import LaunchRequest

    smem = parse_int(dynamic_smem, "--dynamic-smem") if dynamic_smem is not None else None
    if smem is not None and smem < 0:
        raise InputError("--dynamic-smem: must not be negative")
    return LaunchRequest.given_as(block=parse_dims(block, "--block") if block else None,
                                  grid=parse_dims(grid, "--grid") if grid else None, params=parse_params(params),
                                  dynamic_smem=smem, ctas=ctas, max_steps=max_steps, launches=launches,
                                  data=parse_data(data), seed=seed, time_limit=time_limit,
                                  memory_limit=parse_bytes(memory_limit, "--memory-limit") if memory_limit else None,
                                  classes=not exhaustive, work_limit=work_limit)


def check_input(path: Path, folder: bool = False) -> None:
    """An existing file, or with ``folder`` also a folder (a trace folder: the format detector decides)."""
    if not path.exists():
        raise InputError("no such file", file=str(path))
    if not (path.is_file() or (folder and path.is_dir())):
        raise InputError("a folder, not a file" if path.is_dir() else "not a regular file", file=str(path))


@contextmanager
def progress_bar(enabled: bool, label: str) -> Iterator:
    """A rich progress callback ``(done, total)`` on terminals; ``None`` (no output at all) otherwise."""
    if not (enabled and sys.stdout.isatty() and sys.stderr.isatty()):
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
        TimeRemainingColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("ETA"), TimeRemainingColumn(), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int, note: str | None = None) -> None:
            bar.update(task, completed=done, total=total or None,
                       description=f"{label} ({note})" if note else label)

        yield update


class _StdoutConsole(Console):
    def on_broken_pipe(self) -> None:          # rich's default exits 1, the gate's status
        from traceconf.outputs import end_by_closed_pipe
        end_by_closed_pipe()


def stdout_console() -> Console:
    """Rich console on stdout; piped output is read by grep and diff, so it is not squeezed to 80 columns.

    Output without colours (piped, ``NO_COLOR``, a dumb terminal) carries no styles, so it goes without rich's
    highlighter: its regexes over every string printed (table cells too) would only colour what is then thrown
    away (~0.02 CPU-s of the README transpose's ``--suggest``, compiling them included)."""
    width = None if sys.stdout.isatty() else PIPE_WIDTH
    console = _StdoutConsole(soft_wrap=False, width=width)
    return console if console.color_system is not None else _StdoutConsole(soft_wrap=False, width=width,
                                                                             highlight=False)


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


def exit_for_failures(failures: list[KernelFailure]) -> None:
    """Exit 70 when some kernel failed on a bug of ours, 2 when some failed on bad input; else return."""
    if any(failure.internal for failure in failures):
        raise typer.Exit(EXIT_INTERNAL)
    if failures:
        raise typer.Exit(EXIT_INPUT)


def fail(error: InputError) -> typer.Exit:
    report_input_error(error)
    return typer.Exit(2)


@contextmanager
def input_boundary(file: Path | str) -> Iterator[None]:
    """A command's input boundary: bad input (an InputError, or a data error a library raised while ``file``
    was read, located there by :func:`traceconf.errors.reading`) is refused as one line, exit 2."""
    try:
        with reading(str(file)):
            yield
    except InputError as error:
        raise fail(error) from None


def run_file(*args, **kwargs):
    """The pipeline, imported on first use: ``traceconf --help`` and ``--version`` do not load numpy/pyarrow."""
    from traceconf.pipeline import run_file as run
    return run(*args, **kwargs)


# ---------------------------------------------------------------------------
# analyze
# ---------------------------------------------------------------------------

class Format(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"
    html = "html"


HtmlPictures = Annotated[str, typer.Option(
    "--html-pictures", help="HTML report: draw the lane×bank picture of the top N hotspots per kernel and device "
    "(0: none), or of every executed instruction (all).")]


def parse_pictures(text: str) -> int | None:
    """``--html-pictures``: a count, or ``all`` (None)."""
    if text.strip().lower() == "all":
        return None
    count = parse_int(text, "--html-pictures")
    if count < 0:
        raise InputError(f"--html-pictures: expected a count or all, got {text!r}")
    return count


def wants_html(format: Format, output: Path | None) -> bool:
    return format is Format.html or (output is not None and output.suffix.lower() == ".html")


DISTRIBUTED = "Many inputs (suites of traces)"


def analyze(
    files: Annotated[list[Path], typer.Argument(
        help="PTX file or shared-memory trace (format detected from content); several inputs, folders of "
        "trace sets, globs and canonical Parquet datasets too.", metavar="FILE...")],
    kernel: Kernels = None,
    block: Block = None,
    grid: Grid = None,
    param: Params = None,
    data: Data = None,
    seed: Seed = 0,
    dynamic_smem: DynamicSmem = None,
    launches: Launches = None,
    device: Devices = None,
    format: Annotated[Format, typer.Option("--format", "-f", help="Output on stdout (html: the report page).")
                      ] = Format.table,
    output: Annotated[Optional[Path], typer.Option(
        "--output", "-o", help="Write the per-instruction results to .parquet, .csv or .json, or the report page "
        "to .html (one self-contained file); a folder (a name without extension) gets a partitioned dataset, one "
        "Parquet file per input and kernel.")] = None,
    html_pictures: HtmlPictures = "5",
    ctas: Ctas = None,
    max_steps: MaxSteps = 10_000_000,
    time_limit: TimeLimit = None,
    work_limit: WorkLimit = None,
    memory_limit: MemoryLimit = None,
    exhaustive: Exhaustive = False,
    top: Annotated[int, typer.Option("--top", "-n", min=1, help="Hotspot rows per kernel.")] = 20,
    suggest: Annotated[bool, typer.Option(
        "--suggest", help="Try row padding and XOR swizzles on the top hotspots (table and HTML output).")] = False,
    fail_on_excess: Annotated[Optional[int], typer.Option(
        "--fail-on-excess", min=0, help="Exit 1 when any kernel's excess wavefronts (any device) exceed N; "
        "exit 3 when some accesses are unresolved (unless --allow-unresolved).")] = None,
    allow_unresolved: Annotated[bool, typer.Option(
        "--allow-unresolved", help="With --fail-on-excess: gate on the resolved accesses only.")] = False,
    skip_bad: SkipBad = False,
    level: Level = DEFAULT_LEVEL,
    ptxas_option: PtxasOptions = None,
    workers: Annotated[Optional[int], typer.Option(
        "--workers", "-w", min=1, rich_help_panel=DISTRIBUTED,
        help="Analyse the kernels of the inputs on a local Dask cluster of N worker processes (a process "
        "pool without Dask).")] = None,
    scheduler: Annotated[Optional[str], typer.Option(
        "--scheduler", rich_help_panel=DISTRIBUTED,
        help="Analyse on an existing Dask cluster: its scheduler address (tcp://HOST:8786).")] = None,
    resume: Annotated[bool, typer.Option(
        "--resume", rich_help_panel=DISTRIBUTED,
        help="With -o FOLDER: skip the kernels whose results the folder already holds.")] = False,
) -> None:
    """Count shared-memory wavefronts per instruction and rank the bank-conflict hotspots."""
    from traceconf.analyses.results import results_table
    from traceconf.outputs import write_text
    from traceconf.report.writers import check_output, csv_text, json_text, write_results

    dataset = output is not None and is_dataset_folder(output)
    # one regular file: the single-process path; anything else goes through traceconf.distributed's units
    many = (len(files) > 1 or workers is not None or scheduler is not None or resume or dataset
            or files[0].is_dir() or (not files[0].exists() and any(c in str(files[0]) for c in "*?[")))
    with input_boundary(files[0]):
        if not many:
            check_input(files[0], folder=True)
        if output is not None and not dataset:
            check_output(output, inputs=files)
        launch = launch_request(block, grid, param, dynamic_smem, ctas, max_steps, launches, data, seed, time_limit,
                                memory_limit, exhaustive, work_limit=work_limit)
        html = wants_html(format, output)
        pictures = parse_pictures(html_pictures)
        # only --suggest and the HTML report's pictures look at single executions
        launch.retain = None if suggest or (html and pictures != 0) else 0
        rule_sets = load_rule_sets(device, DEFAULT_DEVICE)
        if many:
            analyses, failures = _run_many(files, kernel, launch, rule_sets, skip_bad, workers, scheduler,
                                           output if dataset else None, resume, format is Format.table, level,
                                           ptxas_option)
        else:
            [file] = files
            with progress_bar(format is Format.table, f"analysing {file.name}") as progress:
                analyses, failures = run_file(file, kernel, launch, rule_sets, skip_bad, progress, level=level,
                                              ptxas_options=ptxas_option)
    devices = [rules.name for rules in rule_sets]
    table = results_table(analyses, devices)

    found = _suggestions(analyses, rule_sets, top) if suggest and (html or format is Format.table) else None
    page = _html_page(analyses, rule_sets, files, pictures, found, failures) if html else None
    if format is Format.json:
        typer.echo(json_text(analyses, devices))
    elif format is Format.csv:
        typer.echo(csv_text(table), nl=False)
    elif format is Format.html:
        typer.echo(page, nl=False)
    else:
        _print_tables(analyses, devices, top, found)
    report_failures(failures)
    for analysis in analyses:
        if "partial" in analysis.launch:
            total = analysis.launch["total_ctas"]
            typer.echo(f"traceconf: kernel {analysis.kernel}: partial: {analysis.launch['partial']}; counts cover "
                       f"{analysis.launch['covered_ctas']:,} of {total:,} CTAs"
                       + (" (--ctas N samples N CTAs instead)" if total > 1 else ""), err=True)
    if output is not None and not dataset:
        try:
            if output.suffix.lower() == ".html":
                write_text(output, page, inputs=files)
            else:
                write_results(table, output, inputs=files)
        except InputError as error:
            raise fail(error) from None

    exit_for_failures(failures)
    if fail_on_excess is not None:
        from traceconf.analyses.gate import gate
        verdict = gate(analyses, table, fail_on_excess, allow_unresolved)
        for reason in verdict.reasons:
            typer.echo(f"traceconf: {reason}", err=True)
        if not verdict.passed:
            raise typer.Exit(1 if verdict.failure == "over" else 3)


def is_dataset_folder(output: Path) -> bool:
    """``-o results/`` (a folder, or a name without an extension) asks for the partitioned results dataset."""
    return output.is_dir() or not output.suffix


def _run_many(files: list[Path], kernels, launch: LaunchRequest, rule_sets: list, skip_bad: bool,
              workers: int | None, scheduler: str | None, output: Path | None, resume: bool, show: bool,
              level: str, ptxas_options: list[str] | None):
    """Several inputs (or a cluster, or a results folder): the units of :mod:`traceconf.distributed`."""
    from traceconf.distributed import run_many
    from traceconf.distributed.executors import choose_executor
    from traceconf.distributed.units import plan
    from traceconf.inputs import distinct_units

    if resume and output is None:
        raise InputError("--resume needs -o FOLDER: the results folder of the run to resume")
    executor = choose_executor(workers, scheduler)
    for note in executor.notes:
        typer.echo(f"note: {note}", err=True)
    with progress_bar(show, "analysing units") as bar:
        total = len(distinct_units(plan(files, kernels)[0])[0]) if bar is not None else 0
        done = [0]

        def progress(unit, seconds, kernel_count, failure_count) -> None:
            done[0] += 1
            if bar is not None:
                bar(done[0], total)

        analyses, failures, summary = run_many(files, kernels, launch, rule_sets, skip_bad, executor, output,
                                               resume, progress, level=level, ptxas_options=ptxas_options)
    for note in summary.notes[len(executor.notes):]:
        typer.echo(f"note: {note}", err=True)
    if output is not None:
        where = {"local": "in this process", "processes": f"on {summary.workers} local processes",
                 "dask": f"on Dask ({executor.scheduler or f'{summary.workers} local workers'})"}[executor.kind]
        typer.echo(f"traceconf: {summary.units - summary.skipped} of {summary.units} unit(s) analysed {where} "
                   f"in {summary.seconds:.1f} s; {len(analyses)} kernel(s) written to {output}"
                   + (f"; {summary.skipped} unit(s) already there (--resume)" if summary.skipped else "")
                   + (f"; {len(failures)} failure(s), listed in {output / '_manifest.json'}" if failures else ""),
                   err=True)
    return analyses, failures


def _suggestions(analyses, rule_sets: list, top: int) -> list[tuple[str, list]]:
    """``--suggest``: per analysis, the device suggested for (the first it counted) and (instruction,
    suggestion) for its top hotspots there."""
    from traceconf.analyses.suggest import suggestions

    devices = [r.name for r in rule_sets]
    found = []
    with progress_bar(True, "suggesting") as progress:
        for done, analysis in enumerate(analyses):
            rules = next(r for r in rule_sets if r.name in analysis.devices_among(devices))
            found.append((rules.name, suggestions(analysis, rules, top)))
            if progress:
                progress(done + 1, len(analyses))
    return found


def _html_page(analyses, rule_sets: list, files: list[Path], pictures: int | None, found: list | None,
               failures: list) -> str:
    from traceconf.report.html import analysis_page

    command = " ".join(["traceconf analyze", *map(str, files), *(f"-d {r.name}" for r in rule_sets)])
    return analysis_page(analyses, rule_sets, command, pictures, found, [f.line() for f in failures])


def _print_tables(analyses, devices: list[str], top: int, found: list | None) -> None:
    from traceconf.report.hotspots import render

    console = stdout_console()
    render(analyses, devices, top, console)
    if found is not None:
        from traceconf.report.suggest import render_suggestions
        for analysis, (device, suggested) in zip(analyses, found):
            render_suggestions(analysis, device, suggested, console)


def register(app: typer.Typer) -> None:
    app.command("analyze")(analyze)
