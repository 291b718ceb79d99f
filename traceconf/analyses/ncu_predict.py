"""The predictions compare-ncu lines up with a report: one per Source-page table, for the kernel it names, at the
launch the report's launch pages give it (``traceconf.analyses.ncu_launches``).

Only the kernels the report names are analysed; the program is opened (parsed, assembled) once for all of them.
What a launch needs and neither the report nor the options give is one error naming the kernel, what is
missing and how to give it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from traceconf.analyses.ncu import MeasuredKernel, read_source_csv
from traceconf.analyses.ncu_launches import HOW_TO_EXPORT, ProfiledLaunch, is_source_page, pair_launches, read_launches
from traceconf.emulate.launch import LaunchRequest, block_and_origin, parameter_name
from traceconf.errors import InputError
from traceconf.launches import LaunchEntry
from traceconf.names import function_name, readable, same_kernel, select_kernels
from traceconf.pipeline import KernelAnalysis, KernelFailure, input_format, run_program, run_trace


def read_reports(reports: list) -> tuple[list[tuple[str, MeasuredKernel]], list[ProfiledLaunch]]:
    """The Source-page tables (with the file each is in) and the profiled launches of every REPORT."""
    tables, profiled = [], []
    for report in reports:
        if is_source_page(report):
            tables += [(str(report), table) for table in read_source_csv(report)]
        else:
            profiled += read_launches(report)
    if not tables:
        raise InputError("no Source page among the reports: export one with ncu -i REPORT.ncu-rep --page source "
                         "--csv --print-source sass > source.csv", file=str(reports[0]))
    return tables, profiled


@dataclass
class Predicted:
    """One Source-page table, the kernel of the input it names, and its prediction."""

    measured: MeasuredKernel
    kernel: str
    analysis: KernelAnalysis
    launch: ProfiledLaunch | None       # the report's launch (None: from the options alone)
    notes: list[str] = field(default_factory=list)     # about the launch (a grid nothing gave)


def _entry(kernel: str, profiled: ProfiledLaunch | None, request: LaunchRequest) -> LaunchEntry | None:
    """The launch-file entry of one profiled launch: the report's grid, block and dynamic shared memory over the
    user's launch file (which still gives parameters, ctas, max_steps); the command line wins over both."""
    given = next((e for e in request.entries if e.selects(kernel)), None)
    if profiled is None:
        return given
    base = given or LaunchEntry(kernel)
    return replace(base, kernel=kernel, block=profiled.block or base.block, grid=profiled.grid or base.grid,
                   dynamic_smem=profiled.dynamic_smem if profiled.dynamic_smem is not None else base.dynamic_smem)


def _check_launch(kernel: str, report: str, entry: LaunchEntry | None, request: LaunchRequest,
                  notes: list[str], declaration: dict) -> None:
    """An error when nothing gives the kernel's launch (the report, the options, nor its declaration's block:
    :func:`~traceconf.emulate.launch.block_and_origin` decides that); a note for a grid taken as 1."""
    has = lambda key: key in request.given or (entry is not None and getattr(entry, key) is not None)  # noqa: E731
    if not has("block") and not has("grid") and not _declares_block(declaration):
        raise InputError(f"{readable(kernel)}: the Source page does not give the launch (grid, block, dynamic "
                         f"shared memory); add the report's launch page as another REPORT ({HOW_TO_EXPORT}, or "
                         "--page raw --csv, or the .ncu-rep itself), or give --grid and --block "
                         "(or --launches FILE)", file=report)
    if not has("grid"):
        notes.append("grid taken as 1: neither the report nor the options give it (add the report's launch page, "
                     f"{HOW_TO_EXPORT}, or --grid)")


def _declares_block(declaration: dict) -> bool:
    try:
        block_and_origin(None, declaration)
    except InputError:
        return False
    return True


def predict(path: str, tables: list[tuple[str, MeasuredKernel]], launches: list[ProfiledLaunch],
            request: LaunchRequest, kernels: list[str] | None, rules, level: str,
            ptxas_options: list[str] | None) -> tuple[list[Predicted], list[KernelFailure], list[str]]:
    """Every (report file, table) whose kernel the input has (and ``kernels`` selects), predicted at its launch;
    and a note per report kernel the input does not have."""
    from traceconf.programs import PROGRAM_FORMATS, open_program, open_programs

    fmt = input_format(path)
    if fmt not in PROGRAM_FORMATS:        # a trace holds its launches: read once, each table paired with one
        done, failures = run_trace(path, kernels, [rules], memory_limit=request.memory_limit)
        return _trace_predictions(path, tables, done, rules.warp_size), failures, \
            _unmatched(tables, match_tables(tables, [a.kernel for a in done], None, path), path)
    if fmt == "ptx":          # parsed once: its kernel names now, assembled below for the launches found
        from traceconf.programs.ptx import PtxProgram
        from traceconf.ptx import parse_file
        module = parse_file(path)
        declared = PtxProgram(module)
    else:
        ((program, sets),) = open_programs(path, fmt, level, [rules], request, kernels, ptxas_options)
        declared = program
    names = declared.kernel_names()
    matched = match_tables(tables, names, kernels, path)
    kernel_of = {id(t): k for t, k in matched}
    selected = select_kernels(names, kernels, path)
    plan = []                 # every launch checked before any is assembled or run
    paired = pair_launches([t for _, t in tables], launches, lambda name: meant_kernel(name, selected),
                           rules.warp_size, request.given)
    for (report, table), launch in zip(tables, paired):
        if id(table) in kernel_of:
            kernel = kernel_of[id(table)]
            entry = _entry(kernel, launch, request)
            notes: list[str] = []
            _check_launch(kernel, report, entry, request, notes, declared.declaration(kernel))
            plan.append((table, kernel, launch, entry, notes))
    if fmt == "ptx":
        entries = tuple(entry for *_, entry, _ in plan if entry is not None)
        program = open_program(path, fmt, level, [rules], replace(request, entries=entries),
                               [kernel for _, kernel, *_ in plan], ptxas_options, module)
        sets = [rules]
    request.check_params([program.declaration(k) for k in dict.fromkeys(k for _, k, *_ in plan)], path)
    out, failures = [], []
    for table, kernel, launch, entry, notes in plan:
        row = program.declaration(kernel)    # --param / --data keys are checked above, for all kernels at once
        own = lambda given: {k: v for k, v in given.items() if parameter_name(k, row)}    # noqa: E731
        single = replace(request, entries=(entry,) if entry else (), params=own(request.params),
                         data=own(request.data))
        done, failed = run_program(program, [kernel], single, sets)
        failures += failed
        out += [Predicted(table, kernel, analysis, launch, notes) for analysis in done]
    return out, failures, _unmatched(tables, matched, path)


def _unmatched(tables: list[tuple[str, MeasuredKernel]], matched: list, path: str) -> list[str]:
    paired = {id(t) for t, _ in matched}
    return [f"{report}: {readable(t.name or '(unnamed)')} is not compared: {path} has no such kernel (or --kernel "
            "leaves it out)" for report, t in tables if id(t) not in paired]


def _trace_predictions(path: str, tables: list[tuple[str, MeasuredKernel]], done: list, warp_size: int
                       ) -> list[Predicted]:
    """Each table whose kernel the trace has, with the traced launch :func:`pair_launches` gives it (one of the
    kernel's launches whose warps it ran; an unnamed table, or one no launch ran as many warps as: the kernel's
    first launch)."""
    matched = match_tables(tables, [a.kernel for a in done], None, path)     # run_trace selected them
    names = list(dict.fromkeys(a.kernel for a in done))
    traced = [ProfiledLaunch(id=str(number), kernel=analysis.kernel, grid=_dims(analysis.launch.get("grid")),
                             block=_dims(analysis.launch.get("block")), dynamic_smem=None, file=path)
              for number, analysis in enumerate(done, 1)]
    paired = pair_launches([t for _, t in tables], traced, lambda name: meant_kernel(name, names), warp_size,
                           held_by="the trace (its launches numbered in order) holds",
                           advice="export the Source pages of the traced launches only, or trace only the "
                                  "profiled launches")
    launch_of = {id(table): launch for (_, table), launch in zip(tables, paired)}
    out = []
    for table, kernel in matched:
        launch = launch_of.get(id(table))
        analysis = done[int(launch.id) - 1] if launch is not None else next(a for a in done if a.kernel == kernel)
        out.append(Predicted(table, kernel, analysis, None))
    return out


def _dims(value) -> tuple[int, int, int] | None:
    return tuple(int(v) for v in value) if value is not None else None


def match_tables(tables: list[tuple[str, MeasuredKernel]], found: list[str], kernels: list[str] | None,
             path: str) -> list[tuple[MeasuredKernel, str]]:
    """(table, the input's kernel it names: :func:`meant_kernel`) for each table whose kernel the input has and
    ``kernels`` selects (as every command selects them: :func:`traceconf.names.select_kernels`); an unnamed
    table goes with the input's only (selected) kernel."""
    selected = select_kernels(found, kernels, path)
    pairs = []
    for _, table in tables:
        if table.name is None:
            kernel = selected[0] if len(selected) == 1 else None
        else:
            kernel = meant_kernel(table.name, selected)
        if kernel is not None:
            pairs.append((table, kernel))
    if not pairs:
        names = ", ".join(t.name or "(unnamed)" for _, t in tables)
        raise InputError(f"no kernel of the report ({names}) is a kernel of this input"
                         + (" that --kernel selects" if kernels else "")
                         + f" ({', '.join(map(readable, selected)) or 'none'})", file=path)
    return pairs


def meant_kernel(name: str, kernels: list[str]) -> str | None:
    """The kernel of ``kernels`` a name in a report means: the same kernel however spelt (mangled, demangled), or
    one named by its bare function (``ncu --print-kernel-base function``) where it is the only kernel of that
    function; None otherwise."""
    same = next((k for k in kernels if same_kernel(name, k)), None)
    bare = [k for k in kernels if function_name(k) == name]
    return same or (bare[0] if len(bare) == 1 else None)
